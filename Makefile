# kerntune top-level Makefile.
#
# Sources are discovered, not listed: every module folder's *.c goes into
# libkerntune.a except *_main.c (program entry points).  Dependencies between
# headers and objects come from the compiler (-MMD -MP).
#
#   make              build the library and the three programs
#   make test         unit tests (normal + ASan/UBSan) and integration tests
#   make test-long    the full randomized schedule sweep (slow)
#   make bench        benchmarks in bench/ (print ratios measured in one run)
#   make fuzz         bounded fuzzing runs with clang's libFuzzer
#   make install      PREFIX=/usr/local DESTDIR=
#   make deps         install Debian packages (scripts/install-deps.sh)

CC       ?= gcc
BUILD    ?= build
PREFIX   ?= /usr/local
DESTDIR  ?=
SAN      ?=
OPT      ?= -O2

MODULES  := common ir scheduler costmodel measure measure/worker storage config daemon

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
            -Wmissing-prototypes -Wvla -Wformat=2
CSTD     := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
PKGS     := libuv sqlite3 libcjson
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
XGB_LIBS := -lxgboost
SD_LIBS  := $(shell pkg-config --libs libsystemd 2>/dev/null)
ifneq ($(SD_LIBS),)
SD_DEFS  := -DKT_HAVE_SYSTEMD=1
endif

ifeq ($(SAN),1)
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer \
            -fno-sanitize-recover=undefined
OPT      := -O1
endif

CFLAGS   ?=
CFLAGS   += $(CSTD) $(OPT) -g $(WARN) $(SANFLAGS) $(SD_DEFS) -I. $(PKG_CFLAGS) \
            -DKT_PREFIX='"$(PREFIX)"' -MMD -MP
LDFLAGS  += $(SANFLAGS)
LDLIBS   := $(PKG_LIBS) $(XGB_LIBS) $(SD_LIBS) -ldl -lm -lpthread

LIB_SRCS := $(filter-out %_main.c,$(foreach m,$(MODULES),$(wildcard $(m)/*.c)))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libkerntune.a

# kerntune-rpc is plain POSIX C: only common/ and measure/worker/.
RPC_SRCS := $(wildcard common/*.c) $(filter-out %_main.c,$(wildcard measure/worker/*.c))
RPC_OBJS := $(RPC_SRCS:%.c=$(BUILD)/rpc/%.o)

PROGS    := $(BUILD)/kerntune $(BUILD)/kerntuned $(BUILD)/kerntune-rpc

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
SUPPORT_SRCS := $(wildcard tests/support/*.c)
SUPPORT_OBJS := $(SUPPORT_SRCS:%.c=$(BUILD)/%.o)
BENCH_SRCS := $(wildcard bench/bench_*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)

.PHONY: all test unit unit-asan integ integ-asan test-long bench fuzz install deps clean \
        valgrind format-check
all: $(LIB) $(PROGS)

deps:
	sh scripts/install-deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/rpc/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(OPT) -g $(WARN) $(SANFLAGS) -I. -DKT_RPC_ONLY=1 -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/kerntune: $(BUILD)/daemon/kerntune_main.o $(LIB)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/kerntuned: $(BUILD)/daemon/kerntuned_main.o $(LIB)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/kerntune-rpc: $(BUILD)/rpc/measure/worker/rpc_main.o $(RPC_OBJS)
	$(CC) $(LDFLAGS) $^ -ldl -lm -o $@

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(SUPPORT_OBJS) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -lcmocka $(LDLIBS) -o $@

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(SUPPORT_OBJS) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -lopenblas $(LDLIBS) -o $@

# oneDNN's sgemm is a baseline of the packing benchmark (OpenMP runtime).
$(BUILD)/bench/bench_pack: LDLIBS += -ldnnl -fopenmp

# Unit tests: each binary is a cmocka group; KT_TEST_LEVEL picks the sweep size.
unit: all $(UNIT_BINS)
	@BUILD=$(BUILD) sh tests/run-unit.sh $(UNIT_BINS)

# The generated-kernel sweep compiles kernels with gcc either way; under the
# sanitizers a small sweep checks the driver code.
unit-asan:
	KT_SWEEP=2 $(MAKE) SAN=1 BUILD=build/asan unit

integ: all
	@BUILD=$(BUILD) sh tests/integ/run.sh

# The integration scripts again against the ASan+UBSan programs (built by
# unit-asan): the daemon, the CLI and the worker under the sanitizers.
integ-asan:
	$(MAKE) SAN=1 BUILD=build/asan all
	@BUILD=build/asan ASAN_OPTIONS=detect_leaks=1 sh tests/integ/run.sh

test: unit unit-asan integ integ-asan

test-long: all $(UNIT_BINS)
	@KT_TEST_LEVEL=long BUILD=$(BUILD) sh tests/run-unit.sh $(UNIT_BINS)

# valgrind 3.19 cannot run AVX-512: kernels the tests compile are built for
# AVX2 here (the generator's 64-byte vectors are split by gcc).
valgrind: all $(UNIT_BINS)
	@KT_VALGRIND=1 KT_SWEEP=2 KT_TEST_CFLAGS="-O2 -mavx2 -mfma -fopenmp" \
	    BUILD=$(BUILD) sh tests/run-unit.sh $(UNIT_BINS)

bench: OPT := -O3 -march=native
bench: all $(BENCH_BINS)
	@for b in $(BENCH_BINS); do echo "== $$b"; $$b || exit 1; done

FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_SECONDS ?= 60
fuzz:
	@BUILD=build/fuzz FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/fuzz/run.sh $(FUZZ_SRCS)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/kerntune/models \
	    $(DESTDIR)$(PREFIX)/share/doc/kerntune $(DESTDIR)$(PREFIX)/lib/systemd/system
	install -m 755 $(PROGS) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(wildcard models/*.json) $(DESTDIR)$(PREFIX)/share/kerntune/models/
	install -m 644 dist/kerntuned.json $(DESTDIR)$(PREFIX)/share/kerntune/kerntuned.json.example
	install -m 644 $(wildcard docs/*.md) README.md $(DESTDIR)$(PREFIX)/share/doc/kerntune/
	$(if $(wildcard dist/systemd/*),install -m 644 $(wildcard dist/systemd/*) $(DESTDIR)$(PREFIX)/lib/systemd/system/)

format-check:
	clang-format --dry-run --Werror $(LIB_SRCS) $(wildcard */*.h measure/worker/*.h)

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

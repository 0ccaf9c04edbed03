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
#   make bench-load   the daemon under load: 64 fake worker connections, 20,000 trials
#   make fuzz         bounded fuzzing runs with clang's libFuzzer
#   make install      PREFIX=/usr/local DESTDIR=
#   make deps         install Debian packages (scripts/install-deps.sh)

CC       ?= gcc
BUILD    ?= build
PREFIX   ?= /usr/local
DESTDIR  ?=
SAN      ?=
OPT      ?= -O2

MODULES  := common ir onnx scheduler costmodel measure measure/worker storage config daemon \
            compile

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
            -Wmissing-prototypes -Wvla -Wformat=2
CSTD     := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
PKGS     := libuv sqlite3 libcjson libprotobuf-c
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
GEN_DIR  := $(BUILD)/gen
# ONNX models are decoded with protobuf-c from the onnx.proto Debian ships
# (libonnx-dev); the C code is generated at build time, never committed.
ONNX_PROTO ?= /usr/include/onnx/onnx.proto

CFLAGS   += $(CSTD) $(OPT) -g $(WARN) $(SANFLAGS) $(SD_DEFS) -I. -I$(GEN_DIR) $(PKG_CFLAGS) \
            -DKT_PREFIX='"$(PREFIX)"' -MMD -MP
LDFLAGS  += $(SANFLAGS)
LDLIBS   := $(PKG_LIBS) $(XGB_LIBS) $(SD_LIBS) -ldl -lm -lpthread

LIB_SRCS := $(filter-out %_main.c,$(foreach m,$(MODULES),$(wildcard $(m)/*.c)))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o) $(GEN_DIR)/onnx.pb-c.o
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
BENCH_HELPERS := $(BUILD)/bench/baseline.o

.PHONY: all test unit unit-asan integ integ-asan test-long bench fuzz install deps clean \
        valgrind valgrind-run format-check
all: $(LIB) $(PROGS)

deps:
	sh scripts/install-deps.sh

# Objects depend on the optimization flags they were built with: make
# bench and bench-suite build with -O3 -march=native, and a later plain
# make must not reuse those objects (nor they the -O2 ones).  The stamp
# changes only when OPT does.
OPT_STAMP := $(BUILD)/.opt
$(OPT_STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(OPT)' | cmp -s - $@ || echo '$(OPT)' > $@
.PHONY: FORCE
FORCE:

$(BUILD)/%.o: %.c $(OPT_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

$(GEN_DIR)/onnx.pb-c.c: $(ONNX_PROTO)
	@mkdir -p $(@D)
	protoc-c --c_out=$(GEN_DIR) -I$(dir $(ONNX_PROTO)) $(ONNX_PROTO)
$(GEN_DIR)/onnx.pb-c.h: $(GEN_DIR)/onnx.pb-c.c

# Generated code: our warning set is not its contract.
$(GEN_DIR)/onnx.pb-c.o: $(GEN_DIR)/onnx.pb-c.c $(OPT_STAMP)
	$(CC) $(CSTD) $(OPT) -g $(SANFLAGS) -I$(GEN_DIR) $(PKG_CFLAGS) -c $< -o $@

$(filter-out $(GEN_DIR)/%,$(LIB_OBJS)) $(SUPPORT_OBJS) \
    $(UNIT_SRCS:%.c=$(BUILD)/%.o): | $(GEN_DIR)/onnx.pb-c.h

# The source revision `kerntune compile` writes into manifest.json next to
# KT_VERSION (common/common.h).
# Rebuilt when the revision changes (as OPT_STAMP for the flags): a build
# after a commit wrote the revision of its first build before.
KT_GIT_DESCRIBE ?= $(shell git describe --always --dirty 2>/dev/null || echo unknown)
GIT_STAMP := $(BUILD)/.git-describe
$(GIT_STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(KT_GIT_DESCRIBE)' | cmp -s - $@ || echo '$(KT_GIT_DESCRIBE)' > $@
$(BUILD)/compile/emit_build.o: CFLAGS += -DKT_GIT_DESCRIBE='"$(KT_GIT_DESCRIBE)"'
$(BUILD)/compile/emit_build.o: $(GIT_STAMP)

$(BUILD)/rpc/%.o: %.c $(OPT_STAMP)
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

# The worker for a board, with a cross toolchain (docs/boards.md):
#   make rpc-cross CROSS=aarch64-linux-gnu-   ->  build/aarch64-linux-gnu/kerntune-rpc
# RPC_CROSS_LDFLAGS=-static for a board whose C library differs.
CROSS ?=
RPC_CROSS_LDFLAGS ?=
.PHONY: rpc-cross
rpc-cross:
	@test -n "$(CROSS)" || { echo "make rpc-cross: set CROSS, e.g. CROSS=aarch64-linux-gnu-" >&2; exit 2; }
	@mkdir -p $(BUILD)/$(CROSS:%-=%)
	$(CROSS)gcc $(CSTD) -O2 $(WARN) -I. -DKT_RPC_ONLY=1 $(RPC_SRCS) measure/worker/rpc_main.c \
	    $(RPC_CROSS_LDFLAGS) -ldl -lm -o $(BUILD)/$(CROSS:%-=%)/kerntune-rpc
	@echo "built $(BUILD)/$(CROSS:%-=%)/kerntune-rpc ($$($(CROSS)gcc -dumpmachine))"

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(SUPPORT_OBJS) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -lcmocka $(LDLIBS) -o $@

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(BENCH_HELPERS) $(SUPPORT_OBJS) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -lopenblas $(LDLIBS) -o $@

$(BUILD)/bench/suite_time: $(BUILD)/bench/suite_time.o $(BUILD)/bench/suite_dnnl.o \
                           $(BENCH_HELPERS) $(SUPPORT_OBJS) $(LIB)
	$(CC) $(LDFLAGS) $^ -lopenblas -ldnnl -fopenmp $(LDLIBS) -o $@
# The memory pass of suite_time runs on the OpenMP threads and with the vector
# loads the kernels use.
$(BUILD)/bench/suite_time.o: CFLAGS += -fopenmp -march=native
# The FMA peak loop must use the vector ISA the tuned kernels use (-march=native).
$(BUILD)/bench/baseline.o: CFLAGS += -march=native
# oneDNN's sgemm is a baseline of the packing benchmark (OpenMP runtime).
$(BUILD)/bench/bench_pack $(BUILD)/bench/bench_gemm: LDLIBS += -ldnnl -fopenmp

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

# One after the other: unit-asan and integ-asan both build build/asan in
# a sub-make, which two at once (make -j2 test) would race on.
test:
	$(MAKE) unit
	$(MAKE) unit-asan
	$(MAKE) integ
	$(MAKE) integ-asan

test-long: all $(UNIT_BINS)
	@KT_TEST_LEVEL=long BUILD=$(BUILD) sh tests/run-unit.sh $(UNIT_BINS)

# valgrind 3.19 cannot run AVX-512: kernels the tests compile are built for
# AVX2 here, and the generator sees valgrind's CPU (AVX2: 8-lane vectors;
# tests that read 16-lane code generate it for 64-byte vectors).  Its own
# build dir: build/ may hold objects make bench built with -march=native.
valgrind:
	$(MAKE) BUILD=build/valgrind valgrind-run

valgrind-run: all $(UNIT_BINS)
	@KT_VALGRIND=1 KT_SWEEP=2 KT_TEST_CFLAGS="-O2 -mavx2 -mfma -fopenmp" \
	    BUILD=$(BUILD) sh tests/run-unit.sh $(UNIT_BINS)

# Every benchmark program built, none run: CI checks they still compile.
.PHONY: bench-build
bench-build: all $(BENCH_BINS) $(BUILD)/bench/suite_time $(BUILD)/bench/fake_worker \
             $(BUILD)/bench/placement_time

bench: OPT := -O3 -march=native
bench: all $(BENCH_BINS)
	@echo "CPU: $$(sh bench/cpu.sh)"
	@for b in $(BENCH_BINS); do echo "== $$b"; $$b || exit 1; done

# The service under load (bench/load.sh): kerntuned with LOAD_JOBS jobs over
# LOAD_TRIALS trials against LOAD_CONNS connections of a fake worker that
# answers at once; checks every trial is stored once and reports dispatch
# latency, the daemon's CPU share and its memory over time.
LOAD_TRIALS ?= 20000
LOAD_JOBS ?= 8
LOAD_CONNS ?= 64
.PHONY: bench-load
bench-load: all $(BUILD)/bench/fake_worker
	sh bench/load.sh --bin $(BUILD) --trials $(LOAD_TRIALS) --jobs $(LOAD_JOBS) \
	    --conns $(LOAD_CONNS)

$(BUILD)/bench/fake_worker: $(BUILD)/rpc/bench/fake_worker.o $(RPC_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -ldl -lm -o $@

# Every task of bench/suite/ tuned on a fresh database, then timed against
# OpenBLAS, oneDNN and the FMA peak (docs/performance.md).  SUITE_FLAGS:
# e.g. --long (1000 trials), --trials N, --only a,b, --no-tune.
.PHONY: bench-suite
bench-suite: OPT := -O3 -march=native
bench-suite: all $(BUILD)/bench/suite_time
	sh bench/suite.sh --out $(BUILD)/bench-suite $(SUITE_FLAGS)

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
	install -m 644 dist/worker.env $(DESTDIR)$(PREFIX)/share/kerntune/worker.env.example
	install -m 644 dist/board-model.json $(DESTDIR)$(PREFIX)/share/kerntune/board-model.json.example
	install -m 644 $(wildcard docs/*.md) README.md $(DESTDIR)$(PREFIX)/share/doc/kerntune/
	$(if $(wildcard dist/systemd/*),install -m 644 $(wildcard dist/systemd/*) $(DESTDIR)$(PREFIX)/lib/systemd/system/)
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 \
	    $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 644 $(wildcard man/*.1) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 $(wildcard man/*.5) $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 644 $(wildcard man/*.8) $(DESTDIR)$(PREFIX)/share/man/man8/

# Every C file of the tree against .clang-format (programs, tests and
# benchmarks too).
FORMAT_SRCS := $(wildcard $(addsuffix /*.c,$(MODULES)) $(addsuffix /*.h,$(MODULES)) \
               tests/unit/*.[ch] tests/support/*.[ch] tests/fuzz/*.c bench/*.c)
format-check:
	clang-format --dry-run --Werror $(FORMAT_SRCS)

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

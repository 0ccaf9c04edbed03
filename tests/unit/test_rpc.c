/* test_rpc.c - the worker protocol's pieces on their own: frame and
 * message encoding, every rejection path of the decoder, SHA-256 and
 * HMAC-SHA-256 against the FIPS 180-4 / RFC 4231 vectors, the token
 * challenge, cost summaries, and the runner child on real .so files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "measure/worker/worker.h"

static void
hex(const unsigned char *p, size_t n, char *out)
{
    size_t i;
    for (i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", p[i]);
}

static void
test_rpc_sha256_vectors(void **state)
{
    unsigned char d[32];
    char h[65];
    unsigned char key[20];
    char *million = kt_xmalloc(1000000);

    (void)state;
    kt_sha256("abc", 3, d);
    hex(d, 32, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9c"
                           "b410ff61f20015ad");
    kt_sha256("", 0, d);
    hex(d, 32, h);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934c"
                           "a495991b7852b855");
    memset(million, 'a', 1000000);
    kt_sha256(million, 1000000, d);
    hex(d, 32, h);
    assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e"
                           "046d39ccc7112cd0");
    free(million);
    /* RFC 4231 test cases 1 and 2. */
    memset(key, 0x0b, sizeof(key));
    kt_hmac_sha256(key, 20, "Hi There", 8, d);
    hex(d, 32, h);
    assert_string_equal(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da7"
                           "26e9376c2e32cff7");
    kt_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
    hex(d, 32, h);
    assert_string_equal(h, "5bdcc146bf60754e6a042426089575c75a003f089d273983"
                           "9dec58b964ec3843");
    /* RFC 4231 test cases 6 and 7: a 131-byte key (longer than the block,
     * so it is hashed first), with short and long data. */
    {
        unsigned char big[131];
        memset(big, 0xaa, sizeof(big));
        kt_hmac_sha256(big, sizeof(big),
                       "Test Using Larger Than Block-Size Key - Hash Key "
                       "First",
                       54, d);
        hex(d, 32, h);
        assert_string_equal(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728"
                               "c5140546040f0ee37f54");
        {
            static const char t7[] =
                "This is a test using a larger than block-size key and a "
                "larger than block-size data. The key needs to be hashed "
                "before being used by the HMAC algorithm.";
            kt_hmac_sha256(big, sizeof(big), t7, strlen(t7), d);
        }
        hex(d, 32, h);
        assert_string_equal(h, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f07"
                               "13938a7f51535c3a35e2");
    }
}

static void
test_rpc_auth_proofs(void **state)
{
    char n1[65], n2[65], a[65], b[65];

    (void)state;
    assert_int_equal(kt_auth_nonce(n1), 0);
    assert_int_equal(kt_auth_nonce(n2), 0);
    assert_int_equal(strlen(n1), 64);
    assert_true(kt_auth_nonce_ok(n1));
    assert_false(kt_auth_nonce_ok("abc"));
    assert_string_not_equal(n1, n2);
    kt_auth_proof("tok", "peer", "worker", n1, n2, a);
    kt_auth_proof("tok", "peer", "worker", n1, n2, b);
    assert_true(kt_auth_equal(a, b));
    kt_auth_proof("tok2", "peer", "worker", n1, n2, b);
    assert_false(kt_auth_equal(a, b));
    /* Each nonce, each direction and each kind changes the proof, so a
     * proof can be neither replayed nor reflected. */
    kt_auth_proof("tok", "peer", "worker", n2, n2, b);
    assert_false(kt_auth_equal(a, b));
    kt_auth_proof("tok", "peer", "worker", n1, n1, b);
    assert_false(kt_auth_equal(a, b));
    kt_auth_proof("tok", "tracker", "worker", n1, n2, b);
    assert_false(kt_auth_equal(a, b));
    kt_auth_proof("tok", "peer", "client", n1, n2, b);
    assert_false(kt_auth_equal(a, b));
    assert_false(kt_auth_equal("abc", "abcd"));
    /* The token never appears in the response. */
    assert_null(strstr(a, "tok"));
}

/* Sealed frames: a session opens what the other side sealed, in order;
 * an altered byte, a replay, a reordering or a frame under the other
 * direction's key is refused. */
static void
test_rpc_session_seal(void **state)
{
    struct kt_session trk, peer;
    struct kt_msg m, d;
    struct kt_buf f1, f2;
    char err[256], tn[65], pn[65];
    size_t used;

    (void)state;
    assert_int_equal(kt_auth_nonce(tn), 0);
    assert_int_equal(kt_auth_nonce(pn), 0);
    kt_session_start(&trk, "tok", 1, tn, pn);
    kt_session_start(&peer, "tok", 0, tn, pn);
    kt_msg_init(&m, "build");
    kt_msg_set(&m, "id", "j1");
    kt_msg_set_payload(&m, "int x;", 6);
    kt_buf_init(&f1);
    kt_buf_init(&f2);
    kt_msg_encode_sealed(&m, &trk.tx, &f1);
    kt_msg_set(&m, "id", "j2");
    kt_msg_encode_sealed(&m, &trk.tx, &f2);
    /* Out of order: f2 first. */
    assert_true(kt_wire_take_sealed((unsigned char *)f2.p, f2.len, &used, &d,
                                    &peer.rx, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "session mac"));
    assert_int_equal(kt_wire_take_sealed((unsigned char *)f1.p, f1.len, &used,
                                         &d, &peer.rx, err, sizeof(err)),
                     1);
    assert_string_equal(kt_msg_get(&d, "id"), "j1");
    assert_null(kt_msg_get(&d, "mac"));
    assert_int_equal(d.payload_len, 6);
    kt_msg_free(&d);
    /* Replay of f1. */
    assert_true(kt_wire_take_sealed((unsigned char *)f1.p, f1.len, &used, &d,
                                    &peer.rx, err, sizeof(err)) < 0);
    /* One payload byte altered. */
    f2.p[f2.len - 1] ^= 1;
    assert_true(kt_wire_take_sealed((unsigned char *)f2.p, f2.len, &used, &d,
                                    &peer.rx, err, sizeof(err)) < 0);
    f2.p[f2.len - 1] ^= 1;
    assert_int_equal(kt_wire_take_sealed((unsigned char *)f2.p, f2.len, &used,
                                         &d, &peer.rx, err, sizeof(err)),
                     1);
    kt_msg_free(&d);
    /* A plain frame is refused once the session is on. */
    kt_buf_reset(&f1);
    kt_msg_encode(&m, &f1);
    assert_true(kt_wire_take_sealed((unsigned char *)f1.p, f1.len, &used, &d,
                                    &peer.rx, err, sizeof(err)) < 0);
    /* The tracker cannot open what it sealed itself (distinct keys). */
    kt_buf_reset(&f1);
    kt_msg_encode_sealed(&m, &peer.tx, &f1);
    assert_true(kt_wire_take_sealed((unsigned char *)f1.p, f1.len, &used, &d,
                                    &peer.rx, err, sizeof(err)) < 0);
    assert_int_equal(kt_wire_take_sealed((unsigned char *)f1.p, f1.len, &used,
                                         &d, &trk.rx, err, sizeof(err)),
                     1);
    kt_msg_free(&d);
    kt_buf_free(&f1);
    kt_buf_free(&f2);
    kt_msg_free(&m);
}

static void
test_rpc_msg_roundtrip(void **state)
{
    struct kt_msg m, d;
    struct kt_buf b;
    char err[256];
    size_t used;
    unsigned char bin[300];
    int i;

    (void)state;
    for (i = 0; i < (int)sizeof(bin); i++)
        bin[i] = (unsigned char)i;
    kt_msg_init(&m, "build");
    kt_msg_set(&m, "cc", "gcc -O3 -march=native");
    kt_msg_set(&m, "err_text", "line1\nline2=%x\r\t\x01\xc3\xa9");
    kt_msg_set(&m, "empty", "");
    kt_msg_setf(&m, "n", "%d", 42);
    kt_msg_set(&m, "n", "43"); /* replaces */
    kt_msg_set_payload(&m, bin, sizeof(bin));
    kt_buf_init(&b);
    kt_msg_encode(&m, &b);
    /* Byte by byte: incomplete until the last byte. */
    for (i = 0; i < (int)b.len - 1; i += 7)
        assert_int_equal(kt_wire_take((unsigned char *)b.p, (size_t)i, &used,
                                      &d, err, sizeof(err)),
                         0);
    assert_int_equal(kt_wire_take((unsigned char *)b.p, b.len, &used, &d, err,
                                  sizeof(err)),
                     1);
    assert_int_equal(used, b.len);
    assert_string_equal(kt_msg_type(&d), "build");
    assert_string_equal(kt_msg_get(&d, "cc"), "gcc -O3 -march=native");
    assert_string_equal(kt_msg_get(&d, "err_text"),
                        "line1\nline2=%x\r\t\x01\xc3\xa9");
    assert_string_equal(kt_msg_get(&d, "empty"), "");
    assert_string_equal(kt_msg_get(&d, "n"), "43");
    assert_int_equal(d.payload_len, sizeof(bin));
    assert_memory_equal(d.payload, bin, sizeof(bin));
    kt_msg_free(&d);
    kt_msg_free(&m);
    kt_buf_free(&b);
}

/* Builds a frame from raw header text and decodes it. */
static int
decode_raw(const char *hdr, char *err, size_t errlen)
{
    unsigned char buf[4096];
    size_t n = strlen(hdr), used;
    struct kt_msg m;
    int rc;

    memcpy(buf, KT_WIRE_MAGIC, 4);
    buf[4] = (unsigned char)(n >> 24);
    buf[5] = (unsigned char)(n >> 16);
    buf[6] = (unsigned char)(n >> 8);
    buf[7] = (unsigned char)n;
    memset(buf + 8, 0, 4);
    memcpy(buf + 12, hdr, n);
    rc = kt_wire_take(buf, 12 + n, &used, &m, err, errlen);
    if (rc == 1)
        kt_msg_free(&m);
    return rc;
}

static void
test_rpc_decode_rejects(void **state)
{
    static const struct {
        const char *hdr;
        const char *msg;
    } bad[] = {
        {"type=x", "does not end with a newline"},
        {"type=x\nnoequals\n", "not key=value"},
        {"type=x\nBad=1\n", "not key=value"},
        {"type=x\n=1\n", "not key=value"},
        {"type=x\nk=%zz\n", "bad %-escape"},
        {"type=x\nk=%4\n", "bad %-escape"},
        {"type=x\nk=%00\n", "bad %-escape"},
        {"type=x\nk=a\tb\n", "unescaped byte"},
        {"type=x\nk=1\nk=2\n", "repeated"},
        {"k=1\n", "no 'type'"},
        {"type=\n", "no 'type'"},
    };
    unsigned char pre[12] = {'K', 'T', 'R', '1', 0, 0, 0, 1, 0, 0, 0, 0};
    char err[256];
    uint32_t h, p;
    size_t i;

    (void)state;
    for (i = 0; i < KT_ARRAY_LEN(bad); i++) {
        err[0] = '\0';
        assert_true(decode_raw(bad[i].hdr, err, sizeof(err)) < 0);
        if (strstr(err, bad[i].msg) == NULL)
            fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].msg);
    }
    assert_int_equal(decode_raw("type=ok\nk=%41%3d\n", err, sizeof(err)), 1);
    /* Prefix checks: version, magic, limits. */
    assert_int_equal(kt_wire_prefix(pre, &h, &p, err, sizeof(err)), KT_EPROTO);
    /* Version 1 (before mutual authentication) is refused. */
    assert_non_null(strstr(err, "unsupported protocol version '1'"));
    memcpy(pre, "XXXX", 4);
    assert_int_equal(kt_wire_prefix(pre, &h, &p, err, sizeof(err)), KT_EPROTO);
    memcpy(pre, KT_WIRE_MAGIC, 4);
    pre[5] = 0x01; /* 64 KiB + 1 */
    pre[7] = 0x01;
    assert_int_equal(kt_wire_prefix(pre, &h, &p, err, sizeof(err)), KT_ETOOBIG);
    pre[5] = 0;
    pre[8] = 0x05; /* 80 MiB payload */
    assert_int_equal(kt_wire_prefix(pre, &h, &p, err, sizeof(err)), KT_ETOOBIG);
    pre[8] = 0;
    pre[7] = 0; /* empty header */
    assert_int_equal(kt_wire_prefix(pre, &h, &p, err, sizeof(err)), KT_ETOOBIG);
    /* A wrong first byte is rejected before a whole prefix arrives. */
    {
        struct kt_msg m;
        size_t used;
        assert_true(kt_wire_take((const unsigned char *)"G", 1, &used, &m, err,
                                 sizeof(err)) < 0);
    }
}

static void
test_rpc_msg_numbers(void **state)
{
    struct kt_msg m;
    char err[256];
    long long v;
    double d;

    (void)state;
    kt_msg_init(&m, "run");
    kt_msg_set(&m, "repeat", "3");
    kt_msg_set(&m, "bad", "3x");
    kt_msg_set(&m, "big", "99999999999999999999999");
    kt_msg_set(&m, "tol", "1e-4");
    assert_int_equal(kt_msg_get_ll(&m, "repeat", 1, 0, 1, 64, &v, err,
                                   sizeof(err)),
                     0);
    assert_int_equal(v, 3);
    assert_true(kt_msg_get_ll(&m, "repeat", 1, 0, 5, 64, &v, err, sizeof(err)) <
                0);
    assert_non_null(strstr(err, "'repeat'"));
    assert_true(kt_msg_get_ll(&m, "bad", 1, 0, 0, 64, &v, err, sizeof(err)) < 0);
    assert_true(
        kt_msg_get_ll(&m, "big", 1, 0, 0, 1LL << 62, &v, err, sizeof(err)) < 0);
    assert_true(
        kt_msg_get_ll(&m, "missing", 1, 0, 0, 64, &v, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "missing key 'missing'"));
    assert_int_equal(kt_msg_get_ll(&m, "missing", 0, 7, 0, 64, &v, err,
                                   sizeof(err)),
                     0);
    assert_int_equal(v, 7);
    assert_int_equal(kt_msg_get_double(&m, "tol", 1, 0, 0, 1, &d, err,
                                       sizeof(err)),
                     0);
    assert_true(d == 1e-4);
    kt_msg_free(&m);
}

static void
test_rpc_summarize(void **state)
{
    double c5[5] = {5, 1, 2, 3, 100}, cost, cv;
    double c2[2] = {1, 3};

    (void)state;
    kt_run_summarize(c5, 5, &cost, &cv);
    assert_true(cost == (5 + 2 + 3) / 3.0); /* min and max dropped */
    assert_true(cv > 1.0);
    kt_run_summarize(c2, 2, &cost, &cv);
    assert_true(cost == 2.0);
    kt_run_summarize(c5, 1, &cost, &cv);
    assert_true(cost == 5.0 && cv == 0.0);
}

static void
test_rpc_roles_and_hostport(void **state)
{
    char err[256], host[64];
    int r, port;

    (void)state;
    assert_int_equal(kt_roles_parse("build,run", &r, err, sizeof(err)), 0);
    assert_int_equal(r, KT_ROLE_BUILD | KT_ROLE_RUN);
    assert_int_equal(kt_roles_parse("run", &r, err, sizeof(err)), 0);
    assert_int_equal(r, KT_ROLE_RUN);
    assert_true(kt_roles_parse("build,fly", &r, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "'fly'"));
    assert_int_equal(kt_hostport_parse("10.0.0.1:9190", host, sizeof(host),
                                       &port, err, sizeof(err)),
                     0);
    assert_string_equal(host, "10.0.0.1");
    assert_int_equal(port, 9190);
    assert_true(kt_hostport_parse("nohost", host, sizeof(host), &port, err,
                                  sizeof(err)) < 0);
    assert_true(kt_hostport_parse("h:99999", host, sizeof(host), &port, err,
                                  sizeof(err)) < 0);
}

/* Runs kt_run_child in a forked child, as the worker does, and decodes
 * its result into m. */
static void
run_in_child_any(const struct kt_run_req *r, struct kt_msg *m)
{
    int pfd[2], status;
    pid_t p;
    char buf[4096], err[256];
    ssize_t n;
    size_t used;

    assert_int_equal(pipe(pfd), 0);
    p = fork();
    if (p == 0) {
        struct kt_msg res;
        struct kt_buf b;
        close(pfd[0]);
        kt_run_child(r, &res);
        kt_buf_init(&b);
        kt_msg_encode(&res, &b);
        (void)!write(pfd[1], b.p, b.len);
        _exit(0);
    }
    close(pfd[1]);
    n = read(pfd[0], buf, sizeof(buf));
    close(pfd[0]);
    assert_int_equal(waitpid(p, &status, 0), p);
    assert_true(n > 0);
    assert_int_equal(kt_wire_take((unsigned char *)buf, (size_t)n, &used, m,
                                  err, sizeof(err)),
                     1);
}

/* As run_in_child_any; fails the test unless err_no is 0. */
static void
run_in_child(const struct kt_run_req *r, struct kt_msg *m)
{
    run_in_child_any(r, m);
    if (strcmp(kt_msg_get(m, "err_no"), "0") != 0)
        fail_msg("runner: %s", kt_msg_get(m, "err_text"));
}

/* A run request for the kernel in so: number 1, `repeat` repeats of at
 * least min_repeat_ms, seed 7, tolerance 1e-6, no limits. */
static void
run_req(struct kt_run_req *r, const char *so, const char *dir, int repeat,
        int min_repeat_ms)
{
    memset(r, 0, sizeof(*r));
    r->so_path = so;
    r->cache_dir = dir;
    r->number = 1;
    r->repeat = repeat;
    r->min_repeat_ms = min_repeat_ms;
    r->seed = 7;
    r->tol = 1e-6;
}

static void
remove_dir(const char *dir)
{
    char cmd[160];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* The runner child, forked here as the worker does, on a .so built with
 * the real compiler: the reference is computed once, then cached. */
static void
test_rpc_runner_child_caches_reference(void **state)
{
    char dir[] = "/tmp/kt-test-rpc.XXXXXX", src[128], so[128], cmd[512];
    struct kt_run_req r;
    int i;
    FILE *f;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(src, sizeof(src), "%s/k.c", dir);
    snprintf(so, sizeof(so), "%s/k.so", dir);
    f = fopen(src, "w");
    assert_non_null(f);
    fputs("const char kt_workload_hash[17] = \"fedcba9876543210\";\n"
          "const int kt_nbufs = 2;\n"
          "const long long kt_buf_elems[] = {1000, 1000};\n"
          "const unsigned char kt_buf_is_output[] = {0, 1};\n"
          "const double kt_flops = 1000;\n"
          "void kt_set_threads(int n) { (void)n; }\n"
          "void kt_reference(float *const *b) {\n"
          "  for (int i = 0; i < 1000; i++) b[1][i] = 2 * b[0][i]; }\n"
          "void kt_kernel(float *const *b) {\n"
          "  for (int i = 0; i < 1000; i++) b[1][i] = b[0][i] + b[0][i]; }\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "cc -O2 -shared -fPIC -o %s %s", so, src);
    assert_int_equal(system(cmd), 0);
    run_req(&r, so, dir, 4, 1);
    r.mem_mb = 512;
    for (i = 0; i < 2; i++) {
        struct kt_msg m;

        run_in_child(&r, &m);
        assert_string_equal(kt_msg_get(&m, "ref_cached"), i ? "1" : "0");
        assert_string_equal(kt_msg_get(&m, "workload"), "fedcba9876543210");
        assert_non_null(kt_msg_get(&m, "costs"));
        assert_non_null(kt_msg_get(&m, "cv"));
        kt_msg_free(&m);
    }
    remove_dir(dir);
}

/* Builds src as dir/NAME.so with the real compiler. */
static void
build_so(const char *dir, const char *name, const char *text, char *so,
         size_t solen)
{
    char src[160], cmd[512];
    FILE *f;

    snprintf(src, sizeof(src), "%s/%s.c", dir, name);
    snprintf(so, solen, "%s/%s.so", dir, name);
    f = fopen(src, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "cc -O2 -shared -fPIC -o %s %s", so, src);
    assert_int_equal(system(cmd), 0);
}

/* A kernel of sqrt over inputs in [-1, 1]: NaN where the reference is
 * NaN passes (the error is over the other elements); a kernel whose NaN
 * falls elsewhere, or that leaves an element unwritten, fails naming it. */
#define SQRT_MODULE(KERNEL)                                                    \
    "#include <math.h>\n"                                                      \
    "const char kt_workload_hash[17] = \"0123456789abcdef\";\n"                \
    "const int kt_nbufs = 2;\n"                                                \
    "const long long kt_buf_elems[] = {64, 64};\n"                             \
    "const unsigned char kt_buf_is_output[] = {0, 1};\n"                       \
    "const double kt_flops = 64;\n"                                            \
    "void kt_set_threads(int n) { (void)n; }\n"                                \
    "void kt_reference(float *const *b) {\n"                                   \
    "  for (int i = 0; i < 64; i++) b[1][i] = sqrtf(b[0][i]); }\n"             \
    "void kt_kernel(float *const *b) {\n" KERNEL "}\n"

static void
test_rpc_runner_nan_where_the_reference_has_nan(void **state)
{
    static const char *const kernels[] = {
        "  for (int i = 0; i < 64; i++) b[1][i] = sqrtf(b[0][i]);\n",
        "  for (int i = 0; i < 64; i++) b[1][i] = sqrtf(fabsf(b[0][i]));\n",
        "  for (int i = 0; i < 63; i++) b[1][i] = sqrtf(b[0][i]);\n",
    };
    char dir[] = "/tmp/kt-test-rpc.XXXXXX", so[160], text[1024];
    int i;

    (void)state;
    assert_non_null(mkdtemp(dir));
    for (i = 0; i < 3; i++) {
        struct kt_run_req r;
        struct kt_msg m;
        char name[8];
        snprintf(text, sizeof(text), SQRT_MODULE("%s"), kernels[i]);
        snprintf(name, sizeof(name), "k%d", i);
        build_so(dir, name, text, so, sizeof(so));
        run_req(&r, so, dir, 1, 1);
        run_in_child_any(&r, &m);
        if (i == 0) {
            assert_string_equal(kt_msg_get(&m, "err_no"), "0");
            assert_string_equal(kt_msg_get(&m, "rel_err"), "0");
        } else {
            assert_int_equal(atoi(kt_msg_get(&m, "err_no")),
                             KT_MERR_WRONG_ANSWER);
            assert_non_null(strstr(kt_msg_get(&m, "err_text"), "element "));
        }
        kt_msg_free(&m);
    }
    remove_dir(dir);
}

/* Calls of kt_kernel, counted by the kernel itself in dir/calls (one byte
 * per call; the runner child _exits, so a counter in memory is lost). */
static long
count_calls(const char *dir)
{
    char path[160];
    struct stat st;

    snprintf(path, sizeof(path), "%s/calls", dir);
    if (stat(path, &st) < 0)
        return 0;
    (void)unlink(path);
    return (long)st.st_size;
}

/* A kernel (doubling its input) that appends a byte to DIR/calls on every
 * call (count_calls) and then runs `sleep_code`; `globals` goes before it. */
static void
build_counting_so(const char *dir, const char *name, const char *globals,
                  const char *sleep_code, char *so, size_t solen)
{
    char text[2048];

    snprintf(text, sizeof(text),
             "#include <fcntl.h>\n#include <time.h>\n"
             "#include <unistd.h>\n"
             "const char kt_workload_hash[17] = \"0123456789abcdef\";\n"
             "const int kt_nbufs = 2;\n"
             "const long long kt_buf_elems[] = {64, 64};\n"
             "const unsigned char kt_buf_is_output[] = {0, 1};\n"
             "const double kt_flops = 64;\n"
             "%s"
             "void kt_reference(float *const *b) {\n"
             "  for (int i = 0; i < 64; i++) b[1][i] = 2 * b[0][i]; }\n"
             "void kt_kernel(float *const *b) {\n"
             "  int fd = open(\"%s/calls\", O_WRONLY | O_CREAT | "
             "O_APPEND, 0600);\n"
             "  if (fd >= 0) { (void)!write(fd, \"x\", 1); close(fd); }\n"
             "%s"
             "  for (int i = 0; i < 64; i++) b[1][i] = b[0][i] + b[0][i]; "
             "}\n",
             globals, dir, sleep_code);
    build_so(dir, name, text, so, solen);
}

/* A checked call that already lasts min_repeat_ms is kept as repeat 0: a
 * kernel that sleeps 30 ms, timed with repeat 3 and min_repeat_ms 20, is
 * called 3 times (TVM: the warm-up plus 3), once with stop_above below its
 * cost (early stop).  A fast kernel gets its `number` from the checked
 * call and is not kept as a repeat. */
static void
test_rpc_runner_check_call_is_first_repeat(void **state)
{
    char dir[] = "/tmp/kt-test-rpc.XXXXXX", so[160];
    struct kt_run_req r;
    struct kt_msg m;
    int slow;

    (void)state;
    assert_non_null(mkdtemp(dir));
    for (slow = 1; slow >= 0; slow--) {
        build_counting_so(dir, slow ? "slow" : "fast", "",
                          slow ? "  struct timespec ts = {0, 30000000};\n"
                                 "  nanosleep(&ts, 0);\n"
                               : "",
                          so, sizeof(so));
        run_req(&r, so, dir, 3, 20);
        if (slow) {
            /* early stop: 30 ms per call is above 5 ms, one repeat only */
            r.stop_above = 0.005;
            run_in_child(&r, &m);
            assert_int_equal(count_calls(dir), 1);
            assert_string_equal(kt_msg_get(&m, "early_stop"), "1");
            assert_null(strchr(kt_msg_get(&m, "costs"), ','));
            kt_msg_free(&m);
            /* ... and not below it */
            r.stop_above = 10;
            run_in_child(&r, &m);
            assert_null(kt_msg_get(&m, "early_stop"));
            kt_msg_free(&m);
            (void)count_calls(dir);
            r.stop_above = 0;
        }
        run_in_child(&r, &m);
        if (slow) {
            assert_int_equal(count_calls(dir), 3);
            assert_string_equal(kt_msg_get(&m, "check_is_repeat0"), "1");
            assert_string_equal(kt_msg_get(&m, "number"), "1");
        } else {
            assert_true(count_calls(dir) > 4);
            assert_null(kt_msg_get(&m, "check_is_repeat0"));
            assert_true(atoll(kt_msg_get(&m, "number")) > 1);
        }
        assert_int_equal((int)(strchr(kt_msg_get(&m, "costs"), ',') != NULL),
                         1);
        assert_non_null(kt_msg_get(&m, "check_s"));
        assert_non_null(kt_msg_get(&m, "time_s"));
        kt_msg_free(&m);
    }
    remove_dir(dir);
}

/* A repeat that is still short of min_repeat_ms goes on with more calls
 * instead of being thrown away and timed again (docs/measure.md): a kernel
 * whose checked call sleeps 10 ms and whose later calls sleep 2 ms gets a
 * first `number` of 6 from the checked call, far short of 50 ms; every call
 * it makes is then one of the kept repeats', and each repeat lasts
 * min_repeat_ms. */
static void
test_rpc_runner_short_repeat_is_extended(void **state)
{
    char dir[] = "/tmp/kt-test-rpc.XXXXXX", so[160];
    struct kt_run_req r;
    struct kt_msg m;
    const char *p;
    long long sum = 0;
    int i;

    (void)state;
    assert_non_null(mkdtemp(dir));
    build_counting_so(dir, "coldfirst", "static int first = 1;\n",
                      "  struct timespec ts = {0, first ? 10000000 : "
                      "2000000};\n"
                      "  first = 0;\n"
                      "  nanosleep(&ts, 0);\n",
                      so, sizeof(so));
    run_req(&r, so, dir, 3, 50);
    run_in_child(&r, &m);
    assert_string_equal(kt_msg_get(&m, "err_no"), "0");
    assert_string_equal(kt_msg_get(&m, "retimed"), "0");
    assert_null(kt_msg_get(&m, "check_is_repeat0"));
    assert_non_null(kt_msg_get(&m, "calls"));
    /* the checked call plus the timed calls, and no timed call outside the
     * kept repeats */
    assert_int_equal(count_calls(dir), 1 + atoll(kt_msg_get(&m, "calls")));
    {
        double costs[3];
        assert_int_equal(sscanf(kt_msg_get(&m, "costs"), "%lf,%lf,%lf",
                                &costs[0], &costs[1], &costs[2]),
                         3);
        for (i = 0, p = kt_msg_get(&m, "numbers"); i < 3; i++) {
            long long n = strtoll(p, (char **)&p, 10);
            assert_true(n >= 1);
            assert_true(n * costs[i] >= 0.050 * (1 - 1e-9));
            sum += n;
            p += *p == ',';
        }
        assert_int_equal(*p, '\0');
    }
    assert_int_equal(sum, atoll(kt_msg_get(&m, "calls")));
    kt_msg_free(&m);
    remove_dir(dir);
}

/* Settling (docs/measure.md): with repeat 3 and settle 0.5, a kernel whose
 * calls each spin 30 ms (the checked call is repeat 0, min_repeat_ms 20)
 * is timed twice: the two agree, the median of three would lie between
 * them, so the third call is not made (2 calls, 2 costs, settled=1).  One
 * whose second call spins 90 ms gets its third repeat, and so does the
 * steady one with settle 0.  (Wall-clock spins: load only lengthens a call
 * by the time it is descheduled at its end, far below 50%.) */
static void
test_rpc_runner_settles_on_two_close_repeats(void **state)
{
    char dir[] = "/tmp/kt-test-rpc.XXXXXX", so[160];
    struct kt_run_req r;
    struct kt_msg m;
    int second_ms;

    (void)state;
    assert_non_null(mkdtemp(dir));
    for (second_ms = 30; second_ms <= 90; second_ms += 60) {
        char spin[512], name[32];
        snprintf(spin, sizeof(spin),
                 "  struct timespec t0, t;\n"
                 "  double ms = ++ncall == 2 ? %d : 30;\n"
                 "  clock_gettime(CLOCK_MONOTONIC, &t0);\n"
                 "  do clock_gettime(CLOCK_MONOTONIC, &t);\n"
                 "  while ((t.tv_sec - t0.tv_sec) * 1e3 +\n"
                 "         (t.tv_nsec - t0.tv_nsec) / 1e6 < ms);\n",
                 second_ms);
        snprintf(name, sizeof(name), "spin%d", second_ms);
        build_counting_so(dir, name, "static int ncall;\n", spin, so,
                          sizeof(so));
        run_req(&r, so, dir, 3, 20);
        r.retime = 0;
        r.settle = 0.5;
        run_in_child(&r, &m);
        assert_string_equal(kt_msg_get(&m, "err_no"), "0");
        if (second_ms == 30) {
            assert_int_equal(count_calls(dir), 2);
            assert_string_equal(kt_msg_get(&m, "settled"), "1");
            assert_null(strchr(strchr(kt_msg_get(&m, "costs"), ',') + 1, ','));
            kt_msg_free(&m);
            r.settle = 0;
            run_in_child(&r, &m);
        }
        assert_int_equal(count_calls(dir), 3);
        assert_null(kt_msg_get(&m, "settled"));
        assert_non_null(strchr(strchr(kt_msg_get(&m, "costs"), ',') + 1, ','));
        kt_msg_free(&m);
    }
    remove_dir(dir);
}

static void
write_file(const char *path, const char *text, int mode)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, (mode_t)mode), 0);
}

/* The one token reader: first line, trailing blanks removed; a file group
 * or others can read is refused, like an ssh private key. */
static void
test_rpc_token_file(void **state)
{
    char dir[] = "/tmp/kt-test-token.XXXXXX", path[64], tok[64], err[256];
    char lng[200];

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/token", dir);
    write_file(path, "s3cret \t\r\nsecond line\n", 0600);
    assert_int_equal(kt_token_read(path, tok, sizeof(tok), err, sizeof(err)),
                     0);
    assert_string_equal(tok, "s3cret");
    write_file(path, "s3cret\n", 0640);
    assert_int_equal(kt_token_read(path, tok, sizeof(tok), err, sizeof(err)),
                     KT_ECONFIG);
    assert_non_null(strstr(err, "permissions 0640 are too open"));
    assert_non_null(strstr(err, path));
    write_file(path, "s3cret\n", 0604);
    assert_int_equal(kt_token_read(path, tok, sizeof(tok), err, sizeof(err)),
                     KT_ECONFIG);
    write_file(path, "  \n", 0600);
    assert_int_equal(kt_token_read(path, tok, sizeof(tok), err, sizeof(err)),
                     KT_ECONFIG);
    assert_non_null(strstr(err, "line 1 is empty"));
    memset(lng, 'x', sizeof(lng) - 1);
    lng[sizeof(lng) - 1] = '\0';
    write_file(path, lng, 0600);
    assert_int_equal(kt_token_read(path, tok, sizeof(tok), err, sizeof(err)),
                     KT_ECONFIG);
    assert_non_null(strstr(err, "longer than"));
    assert_int_equal(kt_token_read(dir, tok, sizeof(tok), err, sizeof(err)),
                     KT_ECONFIG);
    assert_int_equal(unlink(path), 0);
    assert_true(kt_token_read(path, tok, sizeof(tok), err, sizeof(err)) < 0);
    assert_int_equal(rmdir(dir), 0);
}

/* The reference cache is trimmed to its cap by removing the least
 * recently used files (mtime, which the runner touches on a read); other
 * files are not its business. */
static void
test_rpc_ref_cache_lru(void **state)
{
    static const char *const names[] = {"ref-old", "ref-mid", "ref-new",
                                        "job7"};
    char dir[] = "/tmp/kt-test-refs.XXXXXX", path[80], blob[1000];
    struct timespec ts[2];
    size_t i;

    (void)state;
    assert_non_null(mkdtemp(dir));
    memset(blob, 'r', sizeof(blob));
    for (i = 0; i < KT_ARRAY_LEN(names); i++) {
        FILE *f;
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        f = fopen(path, "w");
        assert_non_null(f);
        fwrite(blob, 1, sizeof(blob), f);
        fclose(f);
        ts[0].tv_sec = ts[1].tv_sec = 1000000 + (time_t)i * 100;
        ts[0].tv_nsec = ts[1].tv_nsec = 0;
        assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
    }
    assert_int_equal(kt_ref_cache_trim(dir, 3000), 0);
    assert_int_equal(kt_ref_cache_trim(dir, 2500), 1);
    snprintf(path, sizeof(path), "%s/ref-old", dir);
    assert_int_not_equal(access(path, F_OK), 0);
    snprintf(path, sizeof(path), "%s/ref-mid", dir);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(kt_ref_cache_trim(dir, 0), 2);
    snprintf(path, sizeof(path), "%s/job7", dir);
    assert_int_equal(access(path, F_OK), 0);
    kt_rm_tree(dir);
    assert_int_not_equal(access(dir, F_OK), 0);
}

/* Target triples: aliases fold, vendor and OS parts are ignored, the
 * environment counts when both name one; the host compiler's triple is
 * this program's. */
static void
test_rpc_abi_match(void **state)
{
    char abi[64];

    (void)state;
    assert_true(kt_abi_match("x86_64-linux-gnu", "x86_64-pc-linux-gnu"));
    assert_true(kt_abi_match("aarch64-linux-gnu", "arm64"));
    assert_true(kt_abi_match("aarch64-unknown-linux-gnu", "aarch64"));
    assert_true(kt_abi_match("i686-linux-gnu", "i386-linux-gnu"));
    assert_true(kt_abi_match("arm-linux-gnueabihf", "armv7l"));
    assert_false(kt_abi_match("aarch64-linux-gnu", "x86_64-linux-gnu"));
    assert_false(kt_abi_match("x86_64", "amd"));
    assert_false(kt_abi_match("arm-linux-gnueabihf", "arm-linux-gnueabi"));
    assert_false(kt_abi_match("aarch64-linux-gnu", "aarch64-linux-musl"));
    assert_false(kt_abi_match("unknown-linux-gnu", "unknown-linux-gnu"));
    assert_int_equal(kt_abi_of_compiler("cc", abi, sizeof(abi)), 0);
    assert_true(kt_abi_match(abi, kt_abi_self()));
    /* Not installed here: the triple its name starts with. */
    assert_int_equal(kt_abi_of_compiler("/nonexistent/riscv64-linux-gnu-gcc",
                                        abi, sizeof(abi)),
                     0);
    assert_string_equal(abi, "riscv64-linux-gnu");
    assert_int_equal(kt_abi_of_compiler("/nonexistent/gcc", abi, sizeof(abi)),
                     -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rpc_abi_match),
        cmocka_unit_test(test_rpc_sha256_vectors),
        cmocka_unit_test(test_rpc_auth_proofs),
        cmocka_unit_test(test_rpc_session_seal),
        cmocka_unit_test(test_rpc_token_file),
        cmocka_unit_test(test_rpc_ref_cache_lru),
        cmocka_unit_test(test_rpc_msg_roundtrip),
        cmocka_unit_test(test_rpc_decode_rejects),
        cmocka_unit_test(test_rpc_msg_numbers),
        cmocka_unit_test(test_rpc_summarize),
        cmocka_unit_test(test_rpc_roles_and_hostport),
        cmocka_unit_test(test_rpc_runner_child_caches_reference),
        cmocka_unit_test(test_rpc_runner_nan_where_the_reference_has_nan),
        cmocka_unit_test(test_rpc_runner_check_call_is_first_repeat),
        cmocka_unit_test(test_rpc_runner_short_repeat_is_extended),
        cmocka_unit_test(test_rpc_runner_settles_on_two_close_repeats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_common.c - common/: growable strings, the FNV hash and its hex
 * form, the one hex->u64 conversion, strict integers, HOST:PORT, the
 * u64 set and the seeded random numbers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/common.h"

static void
test_buf_grows_and_limits(void **state)
{
    struct kt_buf b;
    char *t;
    int i;

    (void)state;
    kt_buf_init(&b);
    assert_string_equal(b.p, "");
    for (i = 0; i < 1000; i++)
        kt_buf_printf(&b, "%d,", i % 10);
    assert_int_equal(b.len, 2000);
    assert_int_equal(strlen(b.p), 2000);
    t = kt_buf_take(&b);
    assert_int_equal(b.len, 0);
    assert_int_equal(strncmp(t, "0,1,2,", 6), 0);
    free(t);
    b.cap_limit = 8;
    kt_buf_puts(&b, "0123456789abcdef");
    assert_true(b.overflow);
    assert_true(b.len < 8);
    kt_buf_free(&b);
}

static void
test_hash_hex_round_trip(void **state)
{
    char hex[17];
    uint64_t h = kt_hash64("kerntune", 8), back = 0;

    (void)state;
    /* FNV-1a of the empty string is its offset basis */
    assert_true(kt_hash64("", 0) == 0xcbf29ce484222325ULL);
    kt_hash_hex(h, hex);
    assert_int_equal(strlen(hex), 16);
    assert_int_equal(kt_hash_parse(hex, &back), KT_OK);
    assert_true(back == h);
    kt_hash_hex(0x00000000000000abULL, hex);
    assert_string_equal(hex, "00000000000000ab");
    assert_int_equal(kt_hash_parse("00000000000000AB", &back), KT_OK);
    assert_true(back == 0xab);
    back = 7;
    assert_int_equal(kt_hash_parse("abc", &back), KT_EINVAL);
    assert_int_equal(kt_hash_parse("00000000000000abc", &back), KT_EINVAL);
    assert_int_equal(kt_hash_parse("00000000000000ag", &back), KT_EINVAL);
    assert_int_equal(kt_hash_parse(NULL, &back), KT_EINVAL);
    assert_true(back == 7);
}

static void
test_parse_int64_strict(void **state)
{
    int64_t v = 42;

    (void)state;
    assert_int_equal(kt_parse_int64("123", 0, 1000, &v), KT_OK);
    assert_true(v == 123);
    assert_int_equal(kt_parse_int64("-5", -10, 10, &v), KT_OK);
    assert_true(v == -5);
    assert_int_equal(kt_parse_int64("9223372036854775807", 0, INT64_MAX, &v),
                     KT_OK);
    assert_true(v == INT64_MAX);
    assert_int_equal(kt_parse_int64("-9223372036854775808", INT64_MIN, 0, &v),
                     KT_OK);
    assert_true(v == INT64_MIN);
    v = 42;
    assert_int_equal(kt_parse_int64("abc", 0, 10, &v), KT_EINVAL);
    assert_int_equal(kt_parse_int64("12abc", 0, 100, &v), KT_EINVAL);
    assert_int_equal(kt_parse_int64("", 0, 10, &v), KT_EINVAL);
    assert_int_equal(kt_parse_int64("-", 0, 10, &v), KT_EINVAL);
    assert_int_equal(kt_parse_int64(" 5", 0, 10, &v), KT_EINVAL);
    assert_int_equal(kt_parse_int64("+5", 0, 10, &v), KT_EINVAL);
    assert_int_equal(kt_parse_int64("11", 0, 10, &v), KT_EINVAL);
    assert_int_equal(kt_parse_int64("9223372036854775808", 0, INT64_MAX, &v),
                     KT_EINVAL);
    assert_true(v == 42);
}

static void
test_hostport(void **state)
{
    char host[64], err[256];
    int port = -1;

    (void)state;
    assert_int_equal(kt_hostport_parse("10.0.0.1:9190", host, sizeof(host),
                                       &port, err, sizeof(err)),
                     KT_OK);
    assert_string_equal(host, "10.0.0.1");
    assert_int_equal(port, 9190);
    assert_int_equal(kt_hostport_parse("[::1]:0", host, sizeof(host), &port,
                                       err, sizeof(err)),
                     KT_OK);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 0);
    assert_int_equal(kt_hostport_parse("[fe80::1%eth0]:65535", host,
                                       sizeof(host), &port, err, sizeof(err)),
                     KT_OK);
    assert_string_equal(host, "fe80::1%eth0");
    assert_int_equal(port, 65535);
    assert_int_equal(kt_hostport_parse("h.example:1", host, sizeof(host), &port,
                                       err, sizeof(err)),
                     KT_OK);
    assert_string_equal(host, "h.example");
    /* the errors quote the input */
    assert_int_equal(kt_hostport_parse("nohost", host, sizeof(host), &port, err,
                                       sizeof(err)),
                     KT_EINVAL);
    assert_non_null(strstr(err, "\"nohost\""));
    assert_int_equal(kt_hostport_parse("h:65536", host, sizeof(host), &port,
                                       err, sizeof(err)),
                     KT_EINVAL);
    assert_non_null(strstr(err, "0 to 65535"));
    assert_int_equal(kt_hostport_parse("h:-1", host, sizeof(host), &port, err,
                                       sizeof(err)),
                     KT_EINVAL);
    assert_int_equal(kt_hostport_parse("h:", host, sizeof(host), &port, err,
                                       sizeof(err)),
                     KT_EINVAL);
    assert_int_equal(kt_hostport_parse("h: 80", host, sizeof(host), &port, err,
                                       sizeof(err)),
                     KT_EINVAL);
    assert_int_equal(kt_hostport_parse("h:0000080", host, sizeof(host), &port,
                                       err, sizeof(err)),
                     KT_EINVAL);
    assert_int_equal(kt_hostport_parse(":80", host, sizeof(host), &port, err,
                                       sizeof(err)),
                     KT_EINVAL);
    assert_non_null(strstr(err, "empty"));
    assert_int_equal(kt_hostport_parse("::1:80", host, sizeof(host), &port, err,
                                       sizeof(err)),
                     KT_EINVAL);
    assert_non_null(strstr(err, "[ADDRESS]:PORT"));
    assert_int_equal(kt_hostport_parse("[::1]80", host, sizeof(host), &port,
                                       err, sizeof(err)),
                     KT_EINVAL);
    assert_int_equal(kt_hostport_parse("[::1:80", host, sizeof(host), &port,
                                       err, sizeof(err)),
                     KT_EINVAL);
    assert_int_equal(kt_hostport_parse("[]:80", host, sizeof(host), &port, err,
                                       sizeof(err)),
                     KT_EINVAL);
    assert_int_equal(kt_hostport_parse("", host, sizeof(host), &port, err,
                                       sizeof(err)),
                     KT_EINVAL);
    assert_int_equal(kt_hostport_parse("abcdefgh:1", host, 8, &port, err,
                                       sizeof(err)),
                     KT_ETOOBIG);
}

static void
test_u64set(void **state)
{
    struct kt_u64set s;
    uint64_t i;

    (void)state;
    kt_u64set_init(&s);
    assert_false(kt_u64set_has(&s, 0));
    assert_false(kt_u64set_has(&s, 5));
    assert_int_equal(kt_u64set_add(&s, 0), 1);
    assert_int_equal(kt_u64set_add(&s, 0), 0);
    assert_true(kt_u64set_has(&s, 0));
    /* through several growths; multiples of a power of two collide a lot */
    for (i = 1; i <= 5000; i++)
        assert_int_equal(kt_u64set_add(&s, i << 20), 1);
    for (i = 1; i <= 5000; i++)
        assert_int_equal(kt_u64set_add(&s, i << 20), 0);
    assert_int_equal(kt_u64set_count(&s), 5001);
    for (i = 1; i <= 5000; i++) {
        assert_true(kt_u64set_has(&s, i << 20));
        assert_false(kt_u64set_has(&s, (i << 20) + 1));
    }
    assert_true(kt_u64set_has(&s, UINT64_MAX) == 0);
    kt_u64set_add(&s, UINT64_MAX);
    assert_true(kt_u64set_has(&s, UINT64_MAX));
    kt_u64set_free(&s);
    assert_int_equal(kt_u64set_count(&s), 0);
}

static void
test_rng_seeded_and_bounded(void **state)
{
    struct kt_rng a, b;
    int i, seen[7] = {0};

    (void)state;
    kt_rng_seed(&a, 12345);
    kt_rng_seed(&b, 12345);
    for (i = 0; i < 100; i++)
        assert_true(kt_rng_next(&a) == kt_rng_next(&b));
    kt_rng_seed(&b, 12346);
    assert_true(kt_rng_next(&a) != kt_rng_next(&b));
    for (i = 0; i < 7000; i++) {
        uint64_t v = kt_rng_below(&a, 7);
        double u = kt_rng_unit(&a);
        assert_true(v < 7);
        assert_true(u >= 0 && u < 1);
        seen[v]++;
    }
    for (i = 0; i < 7; i++)
        assert_true(seen[i] > 0);
}

static void
test_seterr_and_strerror(void **state)
{
    char err[16];

    (void)state;
    assert_int_equal(kt_seterr(err, sizeof(err), KT_EPARSE, "line %d: %s", 12,
                               "a long message that is cut"),
                     KT_EPARSE);
    assert_int_equal(strlen(err), sizeof(err) - 1);
    assert_int_equal(kt_seterr(NULL, 0, KT_EIO, "x"), KT_EIO);
    assert_non_null(kt_strerror(KT_EDB));
    assert_non_null(kt_strerror(-ENOENT));
    assert_non_null(kt_strerror(-99999));
}

/* A result's notes: the first of a key wins; absent keys and key-less
 * notes give NULL. */
static void
test_result_kv(void **state)
{
    static const struct kt_kv notes[] = {{NULL, "orphan"},
                                         {"signal", "11"},
                                         {"worker", "w0"},
                                         {"signal", "9"}};
    struct kt_result r;

    (void)state;
    memset(&r, 0, sizeof(r));
    assert_null(kt_result_kv(&r, "signal"));
    r.kvs = notes;
    r.nkvs = 4;
    assert_string_equal(kt_result_kv(&r, "signal"), "11");
    assert_string_equal(kt_result_kv(&r, "worker"), "w0");
    assert_null(kt_result_kv(&r, "cpu_cost"));
    r.nkvs = 1;
    assert_null(kt_result_kv(&r, "signal"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_grows_and_limits),
        cmocka_unit_test(test_hash_hex_round_trip),
        cmocka_unit_test(test_parse_int64_strict),
        cmocka_unit_test(test_hostport),
        cmocka_unit_test(test_u64set),
        cmocka_unit_test(test_rng_seeded_and_bounded),
        cmocka_unit_test(test_seterr_and_strerror),
        cmocka_unit_test(test_result_kv),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_prelude_math.c - the math of the generated code's prelude (ir/module.c)
 * against the C library, compiled by the real compiler: kt_exp (one lane)
 * and kt_vexp16 give the same numbers, within 4e-7 relative of exp over the
 * whole clamped range; kt_sigmoid and kt_vsigmoid16 likewise against
 * 1 / (1 + expf(-x)); inputs past the clamps saturate instead of
 * overflowing to inf or garbage.  kt_vtanh16 is within 2e-6 relative and
 * 4e-7 absolute of tanh (infinities included), keeps a NaN and -0, is odd,
 * and calls no tanhf (the program that checks it links none); kt_vlog16
 * likewise within 2e-7 relative of log from subnormals to 1e38, with
 * log(0) = -inf, log(inf) = inf and NaN for negatives, and no logf;
 * kt_vsqrt4/8/16 equal sqrtf (NaN for negatives).  All of it again on
 * aarch64 under qemu, if installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tests/support/ktt.h"
#include "tests/unit/test_storage_util.h"

/* Prints the largest relative differences and exits 1 past the bounds. */
static const char checker[] =
    "#include <stdio.h>\n"
    "static double rel(float got, double want)\n"
    "{ double d = got - want; d = d < 0 ? -d : d;\n"
    "  return d / (want < 0 ? -want : want > 1e-30 ? want : 1e-30); }\n"
    "int main(void)\n{\n"
    "    double worst_exp = 0, worst_sig = 0, tanh_rel = 0, tanh_abs = 0;\n"
    "    int same = 1;\n"
    "    for (long i = 0; i < 2000000; i++) {\n"
    "        float x = -86.5f + 175.0f * (float)i / 2000000.0f;\n"
    "        kt_v16 v = kt_vexp16(kt_bc16(x)), s = kt_vsigmoid16(kt_bc16(x));\n"
    "        float e = kt_exp(x), g = kt_sigmoid(x);\n"
    "        double r = rel(e, exp((double)x));\n"
    "        double q = rel(g, 1 / (1 + exp(-(double)x)));\n"
    "        worst_exp = r > worst_exp ? r : worst_exp;\n"
    "        worst_sig = q > worst_sig ? q : worst_sig;\n"
    "        same &= v[3] == e && s[5] == g;\n"
    "        float y = -12.0f + 24.0f * (float)i / 2000000.0f;\n"
    "        kt_v16 t = kt_vtanh16(kt_bc16(y));\n"
    "        double want = tanh((double)y), d = t[7] - want;\n"
    "        d = d < 0 ? -d : d;\n"
    "        tanh_abs = d > tanh_abs ? d : tanh_abs;\n"
    "        if ((y < -1e-30f || y > 1e-30f) && rel(t[7], want) > tanh_rel)\n"
    "            tanh_rel = rel(t[7], want);\n"
    "    }\n"
    "    int sqrt_same = 1;\n"
    "    for (long i = 0; i < 100000; i++) {\n"
    "        float y = -1.0f + 1e-5f * (float)i * (float)i;\n"
    "        kt_v16 q16 = kt_vsqrt16(kt_bc16(y));\n"
    "        kt_v8 q8 = kt_vsqrt8(kt_bc8(y));\n"
    "        kt_v4 q4 = kt_vsqrt4(kt_bc4(y));\n"
    "        float want = sqrtf(y);\n"
    "        sqrt_same &= y < 0 ? q16[2] != q16[2] && q8[1] != q8[1] && "
    "q4[3] != q4[3]\n"
    "                           : q16[2] == want && q8[1] == want && q4[3] == "
    "want;\n"
    "    }\n"
    "    printf(\"sqrt same %d\\n\", sqrt_same);\n"
    "    double log_rel = 0;\n"
    "    for (long i = 0; i < 2000000; i++) {\n"
    "        float y = (float)(1e-44 * pow(1e82, (double)i / 2000000));\n"
    "        kt_v16 l = kt_vlog16(kt_bc16(y));\n"
    "        double want = log((double)y);\n"
    "        if (rel(l[9], want) > log_rel)\n"
    "            log_rel = rel(l[9], want);\n"
    "    }\n"
    "    kt_v16 lg = kt_vlog16((kt_v16){0.0f, -0.0f, -1.0f, INFINITY, NAN, "
    "1.0f});\n"
    "    int log_edges = lg[0] == -INFINITY && lg[1] == -INFINITY &&\n"
    "                    lg[2] != lg[2] && lg[3] == INFINITY && lg[4] != lg[4] "
    "&&\n"
    "                    lg[5] == 0;\n"
    "    printf(\"log %.3g relative, edges %d\\n\", log_rel, log_edges);\n"
    "    kt_v16 odd = kt_vtanh16((kt_v16){NAN, INFINITY, -INFINITY, -0.0f, "
    "1e-30f});\n"
    "    int edges = odd[0] != odd[0] && 1 - odd[1] < 4e-7f && odd[1] <= 1 &&\n"
    "                odd[2] == -odd[1] &&\n"
    "                odd[3] == 0 && signbit(odd[3]) &&\n"
    "                rel(odd[4], 1e-30) < 2e-6;\n"
    "    printf(\"tanh %.3g relative %.3g absolute, edges %d\\n\", "
    "tanh_rel,\n"
    "           tanh_abs, edges);\n"
    "    printf(\"exp %.3g sigmoid %.3g same %d big %g small %g\\n\",\n"
    "           worst_exp, worst_sig, same, kt_exp(1000.0f), "
    "kt_exp(-1000.0f));\n"
    "    return !(worst_exp < 4e-7 && worst_sig < 4e-7 && same &&\n"
    "             tanh_rel < 2e-6 && tanh_abs < 4e-7 && edges &&\n"
    "             log_rel < 2e-7 && log_edges && sqrt_same &&\n"
    "             kt_exp(1000.0f) > 3e38f && kt_exp(-1000.0f) >= 0 &&\n"
    "             kt_exp(-1000.0f) < 1e-37f && kt_sigmoid(-1000.0f) >= 0 "
    "&&\n"
    "             kt_sigmoid(1000.0f) == 1.0f);\n"
    "}\n";

/* Builds the prelude and the checker with cc, runs it (through run, a
 * command prefix, e.g. an emulator) and then must_hold, a shell test of
 * the program m. */
static void
check_with(const char *cc, const char *run, const char *must_hold)
{
    struct kt_buf src;
    char dir[4096], cmd[9000], *out;
    FILE *f;
    int rc;

    ts_tmpdir(dir, sizeof(dir));
    kt_buf_init(&src);
    kt_codegen_prelude(&src);
    kt_buf_puts(&src, checker);
    snprintf(cmd, sizeof(cmd), "%s/m.c", dir);
    f = fopen(cmd, "w");
    assert_non_null(f);
    fputs(src.p, f);
    fclose(f);
    kt_buf_free(&src);
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && %s -O2 -Wall -Wextra -Werror -Wno-psabi m.c -o m -lm "
             ">out.txt 2>&1 && %s./m >>out.txt 2>&1 && "
             "! (nm m | grep -w 'tanhf\\|logf' >>out.txt) && %s",
             dir, cc, run, must_hold);
    rc = system(cmd);
    out = ktt_slurp(dir, "out.txt", NULL);
    print_message("%s: %s", cc, out ? out : "(no output)\n");
    if (rc != 0)
        fail_msg("%s\n%s", cmd, out ? out : "");
    free(out);
    ts_rmrf(dir);
}

static void
test_exp_sigmoid_tanh_match_libm(void **state)
{
    (void)state;
    check_with("cc", "", "true");
    check_with("cc -march=native", "", "true");
}

/* The same numbers on aarch64 (cross-built, run by qemu), where sqrt is
 * NEON's vector fsqrt, 4 lanes at a time, not sqrtf per lane. */
static void
test_prelude_math_on_aarch64(void **state)
{
    (void)state;
    if (system("command -v aarch64-linux-gnu-gcc >/dev/null && "
               "command -v aarch64-linux-gnu-objdump >/dev/null && "
               "command -v qemu-aarch64 >/dev/null") != 0) {
        print_message("aarch64-linux-gnu-gcc or qemu-aarch64 not installed "
                      "(scripts/install-deps.sh installs them)\n");
        skip();
    }
    check_with("aarch64-linux-gnu-gcc -static", "qemu-aarch64 ",
               "aarch64-linux-gnu-objdump -d m | "
               "grep -q 'fsqrt[[:space:]]*v[0-9]*\\.4s'");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_sigmoid_tanh_match_libm),
        cmocka_unit_test(test_prelude_math_on_aarch64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

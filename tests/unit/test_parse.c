/* test_parse.c - the compute-language parser: error messages with line and
 * column, affine index normalization, print/parse round trips and
 * workload keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

/* Shapes every case may use; a case picks none or all of them. */
static const struct kt_shape std_shapes[] = {
    {"A", 2, {4, 3}},
    {"B", 2, {3, 5}},
    {"W", 2, {5, 3}},
    {"V", 1, {5}},
};

/* The shapes of std_shapes named in use, or (use == NULL) those text reads
 * as "X[". */
static int
pick_shapes(const char *text, const char *use, struct kt_shape *out)
{
    char pat[KT_MAX_NAME + 2];
    size_t i;
    int n = 0;

    for (i = 0; i < KT_ARRAY_LEN(std_shapes); i++) {
        snprintf(pat, sizeof(pat), "%.*s[", KT_MAX_NAME - 1,
                 std_shapes[i].name);
        if (use != NULL ? strchr(use, std_shapes[i].name[0]) != NULL
                        : strstr(text, pat) != NULL)
            out[n++] = std_shapes[i];
    }
    return n;
}

static struct kt_dag *
must_parse(const char *text, const struct kt_shape *sh, int n)
{
    struct kt_shape picked[KT_ARRAY_LEN(std_shapes)];

    struct kt_dag *d = NULL;
    char err[256] = "";
    int rc;

    if (sh == std_shapes) {
        n = pick_shapes(text, NULL, picked);
        sh = picked;
    }
    rc = kt_dag_parse(text, sh, n, &d, err, sizeof(err));
    if (rc != KT_OK)
        fail_msg("parse of \"%s\" failed: %s", text, err);
    assert_non_null(d);
    return d;
}

struct err_case {
    const char *text;
    const char *use; /* letters of std_shapes to pass, or NULL for
                                * those the text reads */
    int rc;
    const char *msg;
};

static const struct err_case err_cases[] = {
    /* Syntax. */
    {"C[i,j] += A[i", NULL, KT_EPARSE,
     "line 1, column 14: expected ',' or ']', found end of input"},
    {"C[i,j] += A[i,k] * B[k,j]\nD[i] += C[i,j) ", NULL, KT_EPARSE,
     "line 2, column 14: expected ',' or ']', found ')'"},
    {"C[i,j] == A[i,j]", NULL, KT_EPARSE,
     "line 1, column 9: expected a number, a tensor read, a call or '(', "
     "found '='"},
    {"C[i,j] -= A[i,j]", NULL, KT_EPARSE,
     "line 1, column 8: expected '=', '+=', 'max=' or 'min=', found '-'"},
    {"C[i,j] max A[i,j]", NULL, KT_EPARSE,
     "line 1, column 12: expected '=' (as in max= or min=), found "
     "identifier 'A'"},
    {"C[i,j] = A[i,j] B[i,j]", NULL, KT_EPARSE,
     "line 1, column 17: expected an operator, 'where', 'pad' or end of "
     "statement, "
     "found identifier 'B'"},
    {"  # comment\n\n  C[i,j] = A[i,j] @ 2", NULL, KT_EPARSE,
     "line 3, column 19: unexpected character '@'"},
    {"C[i+1] = A[i,0]", NULL, KT_EPARSE,
     "line 1, column 4: expected ',' or ']' (the left side takes bare axis "
     "names), found '+'"},
    {"C[2] = A[0,0]", NULL, KT_EPARSE,
     "line 1, column 3: expected an axis name"},
    {"C[i,i] = A[i,i]", NULL, KT_EPARSE,
     "line 1, column 5: axis i appears twice"},
    {"[i] = A[i,0]", NULL, KT_EPARSE,
     "line 1, column 1: expected a tensor name"},
    {"", "", KT_EPARSE, "expected a statement, found end of input"},
    {"# only a comment\n", "", KT_EPARSE, "expected a statement"},
    {"C[i,j] = foo(A[i,j])", NULL, KT_EPARSE,
     "line 1, column 10: unknown function 'foo'"},
    {"C[i,j] = max(A[i,j])", NULL, KT_EPARSE,
     "line 1, column 20: expected ',' (max takes 2 arguments), found ')'"},
    {"C[i,j] = exp(A[i,j], 1)", NULL, KT_EPARSE,
     "expected ')' (exp takes 1 argument), found ','"},
    {"C[i,j] = A[i,j] + i", NULL, KT_EPARSE,
     "line 1, column 19: 'i' is used as a value"},
    {"C[i,j] = 1e99 * A[i,j]", NULL, KT_EPARSE,
     "line 1, column 10: number 1e99 is out of the float range"},
    {"C[i,j] = 2e \n", NULL, KT_EPARSE, "malformed number '2e'"},
    {"C[i,j] = log(0) + A[i,j]", NULL, KT_EPARSE,
     "line 1, column 10: constant expression is not a finite float"},
    {"C[i,j] = ((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
     "((((((((1)))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))"
     "))))))))",
     NULL, KT_EPARSE, "nested too deeply"},
    /* Affine indexes. */
    {"C[i,j] += A[i,k*j]", NULL, KT_EPARSE,
     "line 1, column 16: index is not affine: product of two axis terms"},
    {"C[i,j] += A[i/2,j]", NULL, KT_EPARSE,
     "line 1, column 14: '/' is not allowed in an index"},
    {"C[i,j] += A[i,0.5]", NULL, KT_EPARSE,
     "line 1, column 15: index must be affine with integer coefficients, "
     "found number '0.5'"},
    {"C[i,j] += A[i,V[j]]", NULL, KT_EPARSE,
     "line 1, column 16: tensor reads and calls are not allowed in an index"},
    {"C[i,j] += A[i,j*99999999999999999999]", NULL, KT_EPARSE,
     "line 1, column 17: integer 99999999999999999999 is too large"},
    {"C[i,j] += A[i,j*1000000000*1000000]", NULL, KT_EPARSE,
     "line 1, column 27: index constant too large"},
    /* Axis roles. */
    {"C[i,j] = A[i,k] * B[k,j]", NULL, KT_EPARSE,
     "line 1, column 14: axis k is not on the left; use += / max= / min="},
    {"C[i,j] += A[i,j] where q:3", NULL, KT_EPARSE,
     "line 1, column 24: where: q is not an axis of this statement"},
    {"C[i,j] += A[i,k] where k:3, k:3", NULL, KT_EPARSE,
     "line 1, column 29: where: axis k is given twice"},
    {"C[i,j] += A[i,j+s-s] where s:3", NULL, KT_EPARSE,
     "line 1, column 17: axis s drops out of every index it appears in"},
    {"C[i,j] += A[i,k] where k:0", NULL, KT_EPARSE,
     "where: extent of k must be positive"},
    {"C[i,j] += A[i,k] where k:x", NULL, KT_EPARSE,
     "line 1, column 26: expected an integer, found identifier 'x'"},
    /* Tensor order and index counts. */
    {"C[i,j] = A[i,j]\nC[i,j] = A[i,j]", NULL, KT_EPARSE,
     "line 2, column 1: tensor C is already written at line 1"},
    {"D[i,j] = C[i,j] + A[i,j]\nC[i,j] = A[i,j]", NULL, KT_EPARSE,
     "line 2, column 1: tensor C is written here but read before (line 1, "
     "column 10)"},
    {"C[i,j] += C[i,j] * A[i,j]", NULL, KT_EPARSE,
     "line 1, column 11: statement reads its own output C"},
    {"C[i,j] = A[i,j] + A[i,j,0]", NULL, KT_EPARSE,
     "line 1, column 19: tensor A has 3 indexes here but 2 at line 1, "
     "column 10"},
    {"C[i,j] = A[i,j]\nD[i] = C[i,0,0]", NULL, KT_EPARSE,
     "line 2, column 8: tensor C has 3 indexes here but 2"},
    {"O[a,b,c,d,e,f,g,h,i] = 1", "", KT_EPARSE,
     "tensor O has too many indexes (at most 8)"},
    {"O[aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa] = 1", "", KT_EPARSE,
     "line 1, column 3: name 'aaaaaaaaaaaaaaaa...' is too long"},
    /* Shapes and extents. */
    {"C[i,j] += A[i,k] * W[j,k]", "A", KT_ESHAPE,
     "input tensor W (line 1, column 20) has no shape"},
    {"C[i,j] += A[i,k] * W[k,j]", NULL, KT_ESHAPE,
     "line 1: axis k: extent 3 from A dim 1 but 5 from W dim 0"},
    {"C[i,j] += A[i,k] where k:4", NULL, KT_ESHAPE,
     "line 1: axis k: extent 4 from where but 3 from A dim 1"},
    {"C[i,j] += A[i,k] where k:4", NULL, KT_ESHAPE,
     "(to read past its end, give the extent with 'pad k:4')"},
    {"C[i,j] += A[i,k] * W[j,k] where i:2 pad i:4", NULL, KT_ESHAPE,
     "line 1: axis i: only a plain assignment (=) may iterate past its "
     "output's extent 2"},
    {"C[i,j] = A[i,j] where j:5 pad j:4", NULL, KT_ESHAPE,
     "line 1: axis j: pad 4 is shorter than its extent 5 from where"},
    {"C[i,j] = A[i,j] pad q:3", NULL, KT_EPARSE,
     "line 1, column 21: pad: q is not an axis of this statement"},
    {"C[i,j] = A[i,j] pad j:4, j:4", NULL, KT_EPARSE,
     "pad: axis j is given twice"},
    {"C[i,j] += A[i,k+j]", NULL, KT_ESHAPE,
     "line 1: axis j: extent unknown (it is never alone in an index of a "
     "tensor with a known shape); give it with 'where j:N'"},
    {"C[i] = V[i,0]", NULL, KT_ESHAPE,
     "tensor V: the definition uses 2 indexes but its shape has 1 dims"},
};

static void
test_parse_errors(void **state)
{
    struct kt_shape sh[KT_ARRAY_LEN(std_shapes)];
    char err[512];
    struct kt_dag *d;
    size_t i;
    int rc, n;

    (void)state;
    for (i = 0; i < KT_ARRAY_LEN(err_cases); i++) {
        const struct err_case *c = &err_cases[i];

        err[0] = '\0';
        d = (struct kt_dag *)&rc;
        n = pick_shapes(c->text, c->use, sh);
        rc = kt_dag_parse(c->text, sh, n, &d, err, sizeof(err));
        if (rc != c->rc || strstr(err, c->msg) == NULL)
            fail_msg("case %zu \"%s\": got rc %d \"%s\", want rc %d \"%s\"", i,
                     c->text, rc, err, c->rc, c->msg);
        assert_null(d);
    }
}

static void
test_parse_shape_list_errors(void **state)
{
    struct kt_shape sh[3] = {{"A", 2, {4, 3}}, {"Z", 1, {2}}, {"A", 2, {4, 3}}};
    struct kt_dag *d;
    char err[256];

    (void)state;
    assert_int_equal(kt_dag_parse("C[i,j] = A[i,j]", sh, 2, &d, err,
                                  sizeof(err)),
                     KT_ESHAPE);
    assert_non_null(strstr(err, "a shape is given for tensor 'Z', which the "
                                "definition does not use"));
    sh[1] = sh[2];
    assert_int_equal(kt_dag_parse("C[i,j] = A[i,j]", sh, 2, &d, err,
                                  sizeof(err)),
                     KT_ESHAPE);
    assert_non_null(strstr(err, "tensor A: two shapes are given"));
    sh[1].dims[1] = 0;
    assert_int_equal(kt_dag_parse("C[i,j] = A[i,j]", sh + 1, 1, &d, err,
                                  sizeof(err)),
                     KT_ESHAPE);
    assert_non_null(strstr(err, "tensor A: dim 1 is 0"));
    /* A given output shape that disagrees with the reads. */
    sh[0] = (struct kt_shape){"A", 2, {4, 3}};
    sh[1] = (struct kt_shape){"C", 2, {4, 4}};
    assert_int_equal(kt_dag_parse("C[i,j] = A[i,j]", sh, 2, &d, err,
                                  sizeof(err)),
                     KT_ESHAPE);
    assert_non_null(strstr(err, "axis j: extent 4 from C dim 1 but 3 from "
                                "A dim 1"));
    assert_int_equal(kt_dag_parse("C[i,j] = A[i,j]", NULL, 1, &d, err,
                                  sizeof(err)),
                     KT_EINVAL);
}

struct aff_case {
    const char *index; /* first index of A */
    int64_t c, ki, kj; /* expected c + ki*i + kj*j */
};

static const struct aff_case aff_cases[] = {
    {"i", 0, 1, 0},
    {"(i+1)*4", 4, 4, 0},
    {"2*j", 0, 0, 2},
    {"j*2+i-1+1", 0, 1, 2},
    {"i - i + j", 0, 0, 1},
    {"-(i-3)*-1", -3, 1, 0},
    {"3*(2*(i+j)) - 6*j + 7", 7, 6, 0},
    {"(((i)))", 0, 1, 0},
    {"- -i", 0, 1, 0},
};

static void
test_parse_affine_normalization(void **state)
{
    struct kt_shape sh = {"A", 2, {1000, 4}};
    const struct kt_expr *e;
    struct kt_dag *d;
    char text[256];
    size_t i;

    (void)state;
    for (i = 0; i < KT_ARRAY_LEN(aff_cases); i++) {
        snprintf(text, sizeof(text), "O[i,j] = A[%s + 10, 0] where i:3, j:4",
                 aff_cases[i].index);
        d = must_parse(text, &sh, 1);
        /* i, j in [0,3]x[0,4): every index stays inside A, so no pad. */
        assert_int_equal(d->nstages, 1);
        e = d->stages[0].body;
        assert_int_equal(e->op, KT_X_LOAD);
        if (e->idx[0].c != aff_cases[i].c + 10 ||
            kt_aff_coef(&e->idx[0], 0) != aff_cases[i].ki ||
            kt_aff_coef(&e->idx[0], 1) != aff_cases[i].kj)
            fail_msg("%s: got %lld + %lld*i + %lld*j", aff_cases[i].index,
                     (long long)e->idx[0].c,
                     (long long)kt_aff_coef(&e->idx[0], 0),
                     (long long)kt_aff_coef(&e->idx[0], 1));
        kt_dag_free(d);
    }
}

static void
test_parse_expression_tree(void **state)
{
    const struct kt_expr *e;
    struct kt_dag *d;

    (void)state;
    /* a - b * c / d: SUB(a, DIV(MUL(b, c), d)); constants fold. */
    d = must_parse("C[i,j] = A[i,j] - A[i,j] * (1/(3*3)) / sigmoid(A[i,j]) "
                   "# trailing comment",
                   std_shapes, 4);
    e = d->stages[0].body;
    assert_int_equal(e->op, KT_X_SUB);
    assert_int_equal(e->a->op, KT_X_LOAD);
    assert_int_equal(e->b->op, KT_X_DIV);
    assert_int_equal(e->b->a->op, KT_X_MUL);
    assert_int_equal(e->b->a->b->op, KT_X_CONST);
    assert_true(e->b->a->b->value == (float)(1.0 / 9.0));
    assert_int_equal(e->b->b->op, KT_X_SIGMOID);
    assert_int_equal(kt_expr_flops(e), 4);
    kt_dag_free(d);
    /* Unary minus binds tighter than '*'; statements split by ';'. */
    d = must_parse("C[i,j] = -A[i,j] * 2; D[i,j] = -(C[i,j] * 2)", std_shapes,
                   4);
    assert_int_equal(d->nstages, 2);
    assert_int_equal(d->stages[0].body->op, KT_X_MUL);
    assert_int_equal(d->stages[0].body->a->op, KT_X_NEG);
    assert_int_equal(d->stages[1].body->op, KT_X_NEG);
    kt_dag_free(d);
}

static const char *const roundtrip_texts[] = {
    "C[i,j] += A[i,k] * B[k,j]",
    "C[i,j] += A[i,k] * B[k,j]\nD[i,j] = max(C[i,j] * -1 - -2, 0) / (1 + 2)",
    "O[p,q] = A[p,q] - (A[p,q] - A[p,q]) - -A[p,q] * (B[0, 2*q-q+1])",
    "O[i,j] = exp(-(A[i,j] + 1e-3)) / sqrt(abs(A[i,j]) + 0.5) - tanh(A[i,j])",
    "O[i,j] = A[i,j] / (A[i,j] / A[i,j]) * (A[i,j] * A[i,j]) + relu(A[i,j])",
    "M[i] max= A[i,j]\nN[i] min= A[i,j] - M[i]\nS[i] += exp(N[i])",
    "O[i] += A[2*i+r-1, 0] where r:3, i:2",
    "O[x] = 0.333333343 * V[x] + 1e+20",
    /* q is seen first in the text but first used (nonzero) after k. */
    "C[i] += A[i, 0*q + k] * B[q, 1]",
    "C[i] += A[i, q*0+k+r-r] * B[q+r, 0] where r:1, q:2",
    /* padded extents; a read of part of a longer tensor */
    "P[i,j] += A[i,k] * W[j,k] pad i:8, j:8\n"
    "O[i,j] = P[i,j] where i:4, j:5 pad i:8, j:8",
    "C[i] += W[i,k] * A[j,k] where j:2 pad k:4",
    "C[i] = V[i] where i:3",
};

static void
test_parse_print_roundtrip(void **state)
{
    struct kt_shape sh[KT_MAX_TENSORS];
    struct kt_dag *d, *d2;
    struct kt_buf b;
    size_t i;
    int t, n;

    (void)state;
    for (i = 0; i < KT_ARRAY_LEN(roundtrip_texts); i++) {
        d = must_parse(roundtrip_texts[i], std_shapes, 4);
        kt_buf_init(&b);
        kt_dag_print(d, &b);
        n = 0;
        for (t = 0; t < d->ntensors; t++) {
            if (d->tensors[t].kind != KT_TENSOR_INPUT)
                continue;
            snprintf(sh[n].name, sizeof(sh[n].name), "%s", d->tensors[t].name);
            sh[n].ndim = d->tensors[t].ndim;
            memcpy(sh[n].dims, d->tensors[t].shape, sizeof(sh[n].dims));
            n++;
        }
        d2 = must_parse(b.p, sh, n);
        if (strcmp(d->key, d2->key) != 0)
            fail_msg("round trip of \"%s\":\n printed %s\n key1 %s\n key2 %s",
                     roundtrip_texts[i], b.p, d->key, d2->key);
        assert_string_equal(d->hash, d2->hash);
        assert_true(d->flops == d2->flops);
        kt_buf_free(&b);
        kt_dag_free(d);
        kt_dag_free(d2);
    }
}

/* A product padded to 8 x 8 and copied into its 4 x 5 output: the copy
 * iterates the padding and drops it; FLOPs count the 4 x 5 x 3 product. */
static void
test_parse_padded(void **state)
{
    static const char text[] = "P[i,j] += A[i,k] * W[j,k] pad i:8, j:8\n"
                               "O[i,j] = P[i,j] where i:4, j:5 pad i:8, j:8";
    struct kt_dag *d = must_parse(text, std_shapes, 4);
    float a[12], w[15], pad_a[8 * 3], pad_w[8 * 3], p[64], o[20 + 8];
    float *bufs[KT_MAX_TENSORS] = {0};
    int i, j, k, t;

    (void)state;
    assert_string_equal(d->key, "P[a0,a1]+=A[a0,a2]*W[a1,a2] pad a0:8,a1:8;"
                                "O[a0,a1]=P[a0,a1] where a0:4,a1:5 pad "
                                "a0:8,a1:8;A:4x3;W:5x3");
    assert_true(d->flops == 2.0 * 4 * 5 * 3);
    for (t = 0; t < d->ntensors; t++) {
        const struct kt_tensor *x = &d->tensors[t];
        if (strcmp(x->name, "O") == 0) {
            assert_int_equal(x->shape[0], 4);
            assert_int_equal(x->shape[1], 5);
            assert_int_equal(d->stages[x->producer].axes[1].extent, 8);
            bufs[t] = o;
        } else if (strcmp(x->name, "P") == 0) {
            assert_int_equal(x->shape[0], 8);
            bufs[t] = p;
        } else if (strcmp(x->name, "A") == 0) {
            bufs[t] = a;
        } else if (strcmp(x->name, "W") == 0) {
            bufs[t] = w;
        } else { /* the zero-padded copies A_pad and W_pad */
            bufs[t] = strcmp(x->name, "A_pad") == 0 ? pad_a : pad_w;
        }
    }
    for (i = 0; i < 12; i++)
        a[i] = (float)(i % 5) - 1.5f;
    for (i = 0; i < 15; i++)
        w[i] = (float)(i % 4) * 0.5f;
    for (i = 0; i < 28; i++)
        o[i] = -7.0f; /* the 8 floats past the 4 x 5 output stay */
    kt_dag_interpret(d, bufs);
    for (i = 0; i < 4; i++)
        for (j = 0; j < 5; j++) {
            float want = 0;
            for (k = 0; k < 3; k++)
                want += a[i * 3 + k] * w[j * 3 + k];
            assert_float_equal(o[i * 5 + j], want, 1e-5);
        }
    for (i = 20; i < 28; i++)
        assert_float_equal(o[i], -7.0f, 0);
    kt_dag_free(d);
}

static void
test_parse_key(void **state)
{
    struct kt_shape sq[2] = {{"A", 2, {1024, 1024}}, {"B", 2, {1024, 1024}}};
    struct kt_shape other[2] = {{"A", 2, {1024, 512}}, {"B", 2, {512, 1024}}};
    struct kt_shape renamed[2] = {{"X", 2, {1024, 1024}},
                                  {"B", 2, {1024, 1024}}};
    struct kt_dag *d1, *d2, *d3, *d4, *d5;

    (void)state;
    d1 = must_parse("C[i,j] += A[i,k] * B[k,j]", sq, 2);
    assert_string_equal(d1->key,
                        "C[a0,a1]+=A[a0,a2]*B[a2,a1];A:1024x1024;B:1024x1024");
    assert_int_equal(strlen(d1->hash), 16);
    /* Renaming axes and reformatting keep the key. */
    d2 = must_parse("  # gemm\n C[ m , n ]+=A[m,kk]*B[ kk,n ]  \n", sq, 2);
    assert_string_equal(d1->key, d2->key);
    assert_string_equal(d1->hash, d2->hash);
    /* A shape change or a tensor rename changes it. */
    d3 = must_parse("C[i,j] += A[i,k] * B[k,j]", other, 2);
    assert_string_not_equal(d1->key, d3->key);
    assert_string_not_equal(d1->hash, d3->hash);
    d4 = must_parse("C[i,j] += X[i,k] * B[k,j]", renamed, 2);
    assert_string_not_equal(d1->key, d4->key);
    /* Operand order matters (the text is the workload). */
    d5 = must_parse("C[i,j] += B[k,j] * A[i,k]", sq, 2);
    assert_string_not_equal(d1->key, d5->key);
    kt_dag_free(d1);
    kt_dag_free(d2);
    kt_dag_free(d3);
    kt_dag_free(d4);
    kt_dag_free(d5);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_shape_list_errors),
        cmocka_unit_test(test_parse_affine_normalization),
        cmocka_unit_test(test_parse_expression_tree),
        cmocka_unit_test(test_parse_print_roundtrip),
        cmocka_unit_test(test_parse_key),
        cmocka_unit_test(test_parse_padded),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

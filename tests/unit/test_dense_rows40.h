/* test_dense_rows40.h - a dense layer schedule (with bias, weights
 * [out, in], 8 rows, 80 outputs a multiple of 40, 64 inputs a multiple of
 * 32) as a 128 x 1000 x 2048 classifier was tuned: T is a 4 x 40 register
 * tile over W rewritten into 40-wide rows ([j0][k0][k1][k2][40], padded to
 * 48 on AVX-512), O = T + bias read 40 columns at a time; shared by
 * test_pack.c and test_compile_rows.c. */
#ifndef KT_TEST_DENSE_ROWS40_H
#define KT_TEST_DENSE_ROWS40_H

#define DENSE_ROWS40_SCHEDULE                                                  \
    "{\"v\":1,\"steps\":[[\"CHR\",0,1],[\"CHR\",1,0],"                         \
    "[\"SP\",3,1,[1,40]],[\"SP\",3,0,[2,4]],[\"RE\",3,[0,3,1,4,2,5]],"         \
    "[\"FU\",3,0,3],[\"SP\",2,2,[32]],[\"SP\",2,1,[1,40]],"                    \
    "[\"SP\",2,0,[2,4]],[\"RE\",2,[0,3,6,1,4,7,2,5]],[\"SP\",2,5,[4]],"        \
    "[\"AN\",2,6,\"unroll\"],[\"CA\",2,3,1],[\"CI\",1],[\"CA\",0,2,5],"        \
    "[\"LR\",0],[\"AN\",0,1,\"vectorize\"],[\"AN\",2,8,\"vectorize\"],"        \
    "[\"AN\",2,7,\"unroll\"],[\"PR\",2,0,512],[\"AN\",3,0,\"parallel\"],"      \
    "[\"AN\",3,3,\"vectorize\"]]}"

#endif

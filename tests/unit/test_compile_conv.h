/* test_compile_conv.h - a conv2d schedule the search found (C 4, H 8,
 * W 8, K 8, R 3, S 3, pad 1, bias and relu): it packs the weight in the
 * pack routine (CHR + LR); shared by test_compile.c and
 * test_compile_pack.c. */
#ifndef KT_TEST_COMPILE_CONV_H
#define KT_TEST_COMPILE_CONV_H

#define CONV_SCHEDULE                                                          \
    "{\"v\":1,\"steps\":[[\"CHR\",1,1],[\"FU\",3,0,3],[\"SP\",2,6,[3]],"       \
    "[\"SP\",2,5,[3]],[\"SP\",2,4,[4]],[\"SP\",2,3,[8,1]],[\"SP\",2,2,[8,1]]," \
    "[\"SP\",2,1,[4,1]],[\"RE\",2,[0,1,4,7,10,12,14,2,5,8,11,13,15,3,6,9]],"   \
    "[\"FU\",2,0,4],[\"CA\",1,2,4],[\"LR\",1],[\"CA\",0,2,0],"                 \
    "[\"AN\",0,3,\"vectorize\"],[\"AN\",1,3,\"vectorize\"],"                   \
    "[\"AN\",2,0,\"parallel\"],[\"PR\",2,0,16],[\"AN\",3,0,\"parallel\"],"     \
    "[\"AN\",3,1,\"vectorize\"]]}"

#endif

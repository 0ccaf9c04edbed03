/* search_int.h - internals shared by scheduler/search_*.c (not a public
 * header: other modules use the "Search policy" section of scheduler.h).
 *
 * A candidate is a genome: a sketch number plus the values the init rules
 * fill in (tile sizes, compute locations, parallel depth, vectorize and
 * unroll choices).  sk_build() turns a genome into a state by applying
 * steps, so every candidate's steps are produced by one deterministic
 * function and mutations edit genomes, never step lists. */
#ifndef KT_SEARCH_INT_H
#define KT_SEARCH_INT_H

#include <pthread.h>

#include "costmodel/costmodel.h"
#include "scheduler/scheduler.h"

#define SK_MAX_MLT 4 /* multi-level tiled stages per DAG */
#define SK_MAXP 4    /* parts per axis (SSRSRS: 4 spatial) */
#define SK_MAX_SKETCHES 48

enum sk_role {
    SK_PLAIN, /* untiled; may move (compute location) */
    SK_INLINED,
    SK_MLT,   /* multi-level tiled */
    SK_FOLLOW /* consumer tiled to hold a fused MLT stage */
};

/* What a sketch does with one stage of its base state (state numbering,
 * i.e. after the sketch's cache_write and inline steps). */
struct sk_plan {
    int role;
    int partner;   /* MLT: consumer it is fused into (-1 none);
                               * FOLLOW: the fused MLT producer */
    int level;     /* fusion level (1 or 2), 0 = not fused */
    int slot;      /* MLT: tile slot in the genome */
    int structure; /* MLT: index into sk_structures */
    int may_move;  /* PLAIN: has a sole consumer, can attach */
    int consumer;  /* PLAIN + may_move: that consumer */
    int has_reduce;
    /* MLT: 1 + the spatial axis placed innermost in the register tile
     * (vectorized); 0: the last one */
    int vec_axis1;
    /* cache_read: the vector axis reads this operand with a stride only
     * the pack makes contiguous */
    int pack_needed;
};

struct sk_sketch {
    struct kt_state *base; /* after cache_write / inline steps */
    struct sk_plan plan[KT_MAX_STAGES];
    int nslots;
    int slot_stage[SK_MAX_MLT];
    char desc[160];
};

extern const char *const sk_structures[]; /* "SSRSRS", "SRSRS", "SSRSR" */
#define SK_NSTRUCT_MLT 2 /* the structures of multi-level tiling */
/* The rfactor structure: S0 S1 R0 S2 R1 with the innermost reduction part
 * vectorized (lane accumulators, reduced across lanes once). */
#define SK_STRUCT_RF 2
extern const int sk_unroll_values[4]; /* 0, 16, 64, 512 */
/* Unroll factors of the reduction loop around a register tile (1: none) */
#define SK_RED_UNROLLS 2
extern const int sk_red_unroll_values[SK_RED_UNROLLS]; /* 1, 4 */
/* Whether reduction axis a of ss is read beside a spatial axis in one
 * index (a sliding window's taps, x * 2 + s). */
int sk_window_axis(const struct kt_sstage *ss, int a);

struct sk_genome {
    int32_t sketch; /* int32: the struct has no padding */
    int32_t tiles[SK_MAX_MLT][KT_MAX_AXES][SK_MAXP]; /* level lengths */
    uint8_t loc[KT_MAX_STAGES]; /* 0 = root, k = k-th candidate (mod) */
    uint8_t par[KT_MAX_STAGES]; /* leading iterators fused + parallel */
    uint8_t vec[KT_MAX_STAGES];
    uint8_t unroll_inner[KT_MAX_STAGES];
    uint8_t unroll[KT_MAX_STAGES];     /* index into sk_unroll_values */
    uint8_t red_unroll[KT_MAX_STAGES]; /* index into sk_red_unroll_values */
    /* cache_read stages: 0 no pack, 1 in the kernel, 2 layout rewrite */
    uint8_t pack[KT_MAX_STAGES];
    /* 1: the root stages of a pipeline split along one axis (sk_align) */
    uint8_t align;
    uint8_t unused_[3]; /* zero: genomes compare with memcmp */
};

/* Factorizations of one extent into n ordered parts (outer first) whose
 * innermost part is <= the bound. */
struct sk_factors {
    int64_t extent;
    int n;
    int64_t maxin; /* bound on the innermost part */
    int count;
    int32_t *v; /* count x n */
};

/* A scored population member. */
struct sk_member {
    struct sk_genome g;
    uint64_t hash; /* schedule hash (kt_steps_hash as number) */
    float score;
    int valid;       /* built and lowered */
    int rolled;      /* g was over the code-size bound and is now rolled */
    uint64_t origin; /* hash of the measured seed it descends from, 0 */
};

/* A set of schedule hashes in bounded memory: the newest SK_SEEN_EXACT
 * exactly, the older ones in a Bloom filter of SK_SEEN_BLOOM_BITS bits
 * probed SK_SEEN_PROBES times (1 MiB, allocated when the first hashes move
 * there).  A hash added is always found again, so a search never proposes
 * a schedule twice; a false positive only skips a schedule never seen:
 * under 0.1% of them at 500,000 older hashes in one search, 1.8% at
 * 1,000,000, 19% at 2,000,000.  At most ~1.5 MiB per set, where an
 * exact set took 16-32 bytes per trial without bound.  A search keeps two:
 * the schedules and the programs (kt_looptree_hash) it proposed. */
#define SK_SEEN_EXACT 32768
#define SK_SEEN_BLOOM_BITS (1u << 23)
#define SK_SEEN_PROBES 6
struct sk_seen {
    struct kt_u64set recent;
    uint64_t *bloom;
    size_t nold; /* hashes moved into the filter */
};
void sk_seen_init(struct sk_seen *s);
void sk_seen_free(struct sk_seen *s);
void sk_seen_add(struct sk_seen *s, uint64_t h);
int sk_seen_has(const struct sk_seen *s, uint64_t h);
/* Heap bytes s holds. */
size_t sk_seen_bytes(const struct sk_seen *s);

struct kt_search {
    pthread_mutex_t lock;
    const struct kt_dag *dag;
    struct kt_search_opts o;
    struct kt_rng rng;
    int nsketches;
    struct sk_sketch sk[SK_MAX_SKETCHES];
    /* factor tables per sketch slot axis */
    struct sk_factors *fac[SK_MAX_SKETCHES][SK_MAX_MLT][KT_MAX_AXES];
    int nfac, capfac;
    struct sk_factors **facs; /* owned list (memo by extent, n) */
    struct kt_random_model *rmodel;
    /* hashes returned by next_batch, passed in as measured or recorded:
     * never proposed again (bounded memory, see struct sk_seen) */
    struct sk_seen proposed;
    /* kt_looptree_hash of every program proposed or recorded: another
     * schedule that lowers to one of them is not measured again */
    struct sk_seen programs;
    /* genomes of returned candidates whose results are not in yet, oldest
     * first (for kt_search_record; at most SK_MAX_PENDING) */
    int nprop, capprop;
    struct sk_member *prop;
    /* measured good states (seeds for the GA): the fastest ones, at most
     * 2 x use_measured_ratio x population + 64 */
    int nmeas, capmeas;
    struct sk_member *meas;
    double *meas_tput;
    /* other workloads' schedules carried over (sk_transfer), waiting to
     * be measured as they are (search_policy.c, take_transfers) */
    int nxfer;
    struct sk_transfer *xfer;
    /* picks descending from no seed (origin 0): search_policy.c,
     * take_fresh */
    int64_t fresh_picked;
};

/* ---- search_sketch.c ---- */
int sk_generate(struct kt_search *s, char *err, size_t errlen);
void sk_free_sketches(struct kt_search *s);
/* The sole live reader of stage p's output, -1 if none, -2 if several. */
int sk_sole_reader(const struct kt_state *st, int p);
/* The spatial axis the register tile of MLT stage ss vectorizes under
 * plan p (the last one of extent > 1 unless p moves another innermost),
 * -1 if none. */
int sk_vector_axis(const struct kt_sstage *ss, const struct sk_plan *p);

/* ---- search_build.c ---- */
/* Builds the state of genome g; NULL with err on a schedule error. */
struct kt_state *sk_build(const struct kt_search *s, const struct sk_genome *g,
                          char *err, size_t errlen);
/* ---- search_align.c ---- */
/* How a genome builds: its tiles (g's, or with g->align the pipeline's
 * shared axis given one outer length in every stage that has it) and per
 * stage the spatial axis whose outer part goes first (-1: the stage's
 * order) and that part's length (a plain stage's split). */
struct sk_aligned {
    int first[KT_MAX_STAGES];
    int64_t outer[KT_MAX_STAGES];
    int32_t tiles[SK_MAX_MLT][KT_MAX_AXES][SK_MAXP];
};
/* Fills al for g; 1 when g->align changed anything. */
int sk_align(const struct kt_search *s, const struct sk_genome *g,
             struct sk_aligned *al);
/* Greatest common divisor of a and b (a when b is 0). */
int64_t sk_gcd(int64_t a, int64_t b);

/* ---- search_factors.c ---- */
int sk_prepare_factors(struct kt_search *s);
void sk_free_factors(struct kt_search *s);
/* Parts of a spatial (reduce 0) or reduction axis in MLT plan p's
 * structure. */
int sk_nparts(const struct sk_plan *p, int reduce);

/* ---- search_grade.c ---- */
/* Lanes of the target's widest vector (4 when it has none wider). */
int64_t sk_widest_lanes(const struct kt_search *s);
/* Floats in slot's register tile (the innermost spatial tile). */
int64_t sk_reg_tile(const struct kt_search *s, const struct sk_genome *g,
                    int slot);
/* Whether slot's tile fills whole vectors with its rfactor's innermost
 * reduction part (1 when it is no rfactor). */
int sk_rf_vectorizes(const struct kt_search *s, const struct sk_genome *g,
                     int slot);
/* The largest register tile a sample or mutant may have. */
int64_t sk_register_tile_limit(const struct kt_search *s);
/* Whether reduction axis a of stage i may run whole inside the register
 * tile: the only reduction of a matrix product, within the bound of f. */
int sk_whole_run_axis(const struct sk_sketch *sk, int i, int a,
                      const struct sk_factors *f);
/* Whether axis a of stage i is its vectorized axis, no whole vector
 * divides it, and its whole extent as a register tile's rows fits the
 * register file (samples then take it whole in 1 of 4). */
int sk_whole_vector_axis(const struct kt_search *s, const struct sk_sketch *sk,
                         int i, int a, const struct sk_factors *f);
/* How well slot's tile suits a register micro-kernel, in increasing
 * order: one whose accumulators and the operand vectors they share
 * outnumber the vector registers (the compiler spills them), none, a
 * blocked tile (its accumulators and operands fit the register file, it
 * runs a long reduction), one whose operand loads each serve 2 or more
 * accumulators besides but that splits into passes a matrix product's
 * reduction it could run whole, and one that runs it whole too. */
enum sk_tile_grade {
    SK_TILE_SPILLING,
    SK_TILE_LOOSE,
    SK_TILE_BLOCKED,
    SK_TILE_SPLIT_RUN,
    SK_TILE_REUSING
};
/* Lanes of the vectors the code generator emits for an innermost loop
 * over a tile of this extent: the widest of 16, 8, 4 dividing it (at
 * most the target's vector width), 1 when none does. */
int64_t sk_vector_lanes(const struct kt_search *s, int64_t extent);
enum sk_tile_grade sk_grade_tile(const struct kt_search *s,
                                 const struct sk_genome *g, int slot);
/* A register-blocked sample's rank: its tile's grade, doubled, plus one
 * unless the tile runs a matrix product's reduction whole in a cache
 * tiling that reads an operand again (sk_tile_rereads). */
int sk_blocked_rank(const struct kt_search *s, const struct sk_genome *g,
                    int slot);

/* ---- search_init.c ---- */
/* A random genome of a random sketch (the init rules). */
void sk_sample(struct kt_search *s, struct kt_rng *r, struct sk_genome *g);
/* The same for sketch k. */
void sk_sample_sketch(struct kt_search *s, struct kt_rng *r, int k,
                      struct sk_genome *g);
/* Whether stage plan p has a reduction loop around its register tile
 * that may be unrolled (the red_unroll gene). */
int sk_red_unrollable(const struct sk_plan *p);
/* A random red_unroll value for slot's tile other than avoid (-1: any)
 * whose unrolled micro-kernel fits; -1 when none does. */
int sk_pick_red_unroll(const struct kt_search *s, struct kt_rng *r,
                       const struct sk_genome *g, int slot, int avoid);
/* Lowers slot's red_unroll gene until the unrolled micro-kernel fits. */
void sk_shrink_red_unroll(const struct kt_search *s, struct sk_genome *g,
                          int slot);
/* Sets every red_unroll gene of g to none; -1 (g unchanged) when none
 * was set. */
int sk_roll_reductions(const struct kt_search *s, struct sk_genome *g);
/* Slot's window taps (its last reduction axis, 2 to 4 steps) moved next
 * to its register tile and unrolled whole; -1 when no change fits. */
int sk_unroll_window(const struct kt_search *s, struct sk_genome *g, int slot);

/* ---- search_mutate.c ---- */
/* Applies one mutation (weights as Ansor's CPU rules); 0 on success,
 * -1 when the picked rule could not change anything. */
int sk_mutate(struct kt_search *s, struct kt_rng *r, struct sk_genome *g);
/* Variants of m in one gene that mutations seldom reach and the model
 * cannot tell apart well: the other reduction unroll that fits, the other
 * auto-unroll values, the inner-tile unroll turned on, another pack mode,
 * a matrix product's whole reduction inside the register tile, the
 * register tiles of the same size one divisor exchange away, those one
 * divisor larger or smaller along one axis, and those that fill the
 * register file along one axis (after the vectorized axis grew or shrank
 * by a divisor, or as they are), and each outer tile part, or
 * its smallest divisor, moved into the next; none with a spilling
 * register tile; at most cap (SK_MAX_NEIGHBOURS fits any genome) into
 * out, unscored, their origin m; returns how many. */
#define SK_MAX_NEIGHBOURS                                                      \
    (5 * KT_MAX_STAGES + 1 +                                                   \
     SK_MAX_MLT * KT_MAX_AXES * (KT_MAX_AXES + 6 + 2 * SK_MAXP))
int sk_gene_neighbours(const struct kt_search *s, struct kt_rng *r,
                       const struct sk_member *m, struct sk_member *out,
                       int cap);

/* ---- search_seed.c ---- */
/* Decodes steps (hash: their kt_steps_hash) into a genome of one of s's
 * sketches that builds exactly these steps; 1 and *out (valid) if found. */
int sk_decode(const struct kt_search *s, const struct kt_step *steps,
              int nsteps, uint64_t hash, struct sk_member *out);
/* Another workload's schedule (steps over DAG from) carried over stage by
 * stage: for each of s's sketches with a tiled stage that computes what a
 * stage of from computes, a genome with the genes of every such stage
 * (tile levels fitted to the sketch's) and a fresh sample's elsewhere,
 * into out (room for s->nsketches), valid and unscored; their count. */
int sk_transfer(struct kt_search *s, const struct kt_dag *from,
                const struct kt_step *steps, int nsteps, struct sk_member *out);
/* At most 1 in SK_TRANSFER_SHARE candidates of a batch (and at least one)
 * is a transfer not yet measured, one per program carried over. */
#define SK_TRANSFER_SHARE 4
/* Transfers waiting to be measured, at most (oldest dropped). */
#define SK_MAX_TRANSFERS (2 * SK_MAX_SKETCHES)
struct sk_transfer {
    struct sk_member m;        /* origin: the program carried over */
    const struct kt_dag *from; /* its workload */
};

/* ---- search_traffic.c ---- */
/* Whether e is a load reading some reduction axis of ss: an operand of
 * the product. */
int sk_is_operand(const struct kt_sstage *ss, const struct kt_expr *e);
/* Whether slot's tiling (a matrix product's) reads its operands from
 * beyond a core's cache more than a panel tiling would: one operand kept
 * in half the cache as the reduction's run times W columns, the other
 * read once per W columns.  Counted over one core's share of the
 * parallel loops. */
int sk_tile_rereads(const struct kt_search *s, const struct sk_genome *g,
                    int slot);

/* ---- search_pack.c ---- */
/* 1 if tensor t is an input's zero-padded copy that only extends past the
 * input's end (a 'pad' extent, docs/compute.md), not a window's border
 * around it: the pack rule takes it like the input itself. */
int sk_padded_past_end(const struct kt_state *st, int t);
/* The next input stage s should read through a pack, or -1. */
int sk_pack_operand(const struct kt_state *st, int s);
/* Consumer iterators the pack of tensor t may be attached at (into cand);
 * their count.  rewrite: for a layout rewrite (built once). */
int sk_pack_attach_points(const struct kt_sstage *cs, int t, int rewrite,
                          int *cand);
/* 1 if every place the in-kernel pack of t may take in cs rebuilds the
 * same tile more than 4 times (the tiling repeats it: a 16-column tile
 * outermost repacks the whole A panel for every column tile). */
int sk_pack_rebuilt_often(const struct kt_sstage *cs, int t);
/* Pack genes of a fresh genome (after its loc genes are drawn). */
void sk_pack_sample(const struct sk_sketch *sk, struct kt_rng *r,
                    struct sk_genome *g);
/* Changes one pack stage's mode; -1 when there is none or nothing changed. */
int sk_pack_mutate(const struct sk_sketch *sk, struct kt_rng *r,
                   struct sk_genome *g);

/* ---- search_sibling.c ---- */
/* Moves g to a sibling sketch: one that differs from its own only in
 * which elementwise stages are inlined and in whether (and at which level)
 * a tiled stage is fused into its consumer (same tiled stages, structures
 * and factor tables); -1 when there is none (r untouched). */
int sk_sibling_mutate(const struct kt_search *s, struct kt_rng *r,
                      struct sk_genome *g);
/* Copies of m moved to each of its closest sibling sketches (those that
 * differ from its own in the inlining only or in the fusion only) into out
 * (room for SK_MAX_SKETCHES), unscored, their origin m; returns how many. */
int sk_siblings(const struct kt_search *s, const struct sk_member *m,
                struct sk_member *out);

/* ---- search_parallel.c ---- */
/* 0 when s runs on several cores and the store of lt that runs most often
 * has spatial points to split but no parallel loop of at least as many
 * iterations as cores around it (the whole kernel on one thread: the
 * tile sizes left every parallel loop of extent 1, or no loop was made
 * parallel); 1 otherwise. */
int sk_parallel_ok(const struct kt_search *s, const struct kt_looptree *lt);

/* ---- search_evo.c ---- */
struct sk_cache_ent {
    uint64_t key; /* genome hash, never 0 */
    uint64_t hash;
    float score;
    int valid;
    int rolled; /* scored as its genome with every reduction unroll 0 */
};

struct sk_score_ctx {
    struct kt_search *s;
    struct sk_cache_ent *cache; /* genome -> result, for one round */
    size_t ccap, cn;
    struct kt_xgb_model *model; /* NULL = random model */
    double t_build, t_score;    /* seconds */
    int nscored;
};
/* Builds, lowers and scores n members in place (valid, hash, score); a
 * member over the code-size bound whose reductions are unrolled is scored
 * rolled, its genome rolled too (sk_roll_reductions). */
int sk_score(struct sk_score_ctx *c, struct sk_member *m, int n, char *err,
             size_t errlen);
void sk_score_ctx_free(struct sk_score_ctx *c);

/* ---- search_ga.c ---- */
/* One round of kt_search_next_batch. */
struct sk_round {
    struct kt_search *s;
    struct sk_score_ctx sc;
    struct kt_u64set taken;          /* picked in this batch */
    struct kt_u64set taken_programs; /* their kt_looptree_hash */
    uint64_t *programs; /* kt_looptree_hash of the batch's i-th pick */
    struct kt_search_stats *st;
    char *err;
    size_t errlen;
};

/* 1 in SK_NEAR_SHARE candidates of a batch (and at least one) descends
 * from a measured program when there are such mutants. */
#define SK_NEAR_SHARE 3

/* Until a search has proposed SK_FRESH_MIN programs descending from no
 * seed, 1 in SK_FRESH_SHARE candidates of a batch (and at least one) is
 * one (search_policy.c, take_fresh). */
#define SK_FRESH_MIN 16
#define SK_FRESH_SHARE 3

/* Never measured (passed in now or before, or recorded), never proposed. */
int sk_is_new(const struct sk_round *R, uint64_t h);
/* qsort order: best score first, then by hash. */
int sk_cmp_score_desc(const void *a, const void *b);
/* Samples until at least min(population, 50) valid distinct members
 * (random mutations on top when mutate); *out gets them, scored. */
int sk_sample_init(struct sk_round *R, int mutate, struct sk_member **out,
                   int *nout);
/* The evolutionary search from init; *best gets up to out_size members
 * never measured, best first, and *near up to near_size of them that
 * descend from a measured program. */
int sk_evolve(struct sk_round *R, struct sk_member *init, int ninit, int iters,
              int out_size, struct sk_member **best, int *nbest, int near_size,
              struct sk_member **near, int *nnear);

/* ---- search_feedback.c ---- */
/* Remembers the genome of a candidate whose result is pending. */
void sk_remember(struct kt_search *s, const struct sk_member *m);
/* The seeds a round takes (Ansor: at most ratio x population). */
int sk_measured_seed_count(const struct kt_search *s);
/* Copies up to max measured programs into dst, fastest first, each the
 * origin of its mutants; their count. */
int sk_measured_seeds(struct kt_search *s, struct sk_member *dst, int max);
#endif /* KT_SEARCH_INT_H */

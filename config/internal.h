/* internal.h - shared between the files of config/ only (other modules
 * include config/config.h).  The JSON context maps cJSON items back to
 * line:column in the text, and the key tables drive reading objects. */
#ifndef KT_CONFIG_INTERNAL_H
#define KT_CONFIG_INTERNAL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

struct kt__jpos {
    const cJSON *item;
    int line, col;   /* of the value */
    int kline, kcol; /* of its key in an object (else = value) */
};

/* One parsed document: the tree plus the position of every value. */
struct kt__jdoc {
    const char *file;
    cJSON *root;
    int npos;
    struct kt__jpos *pos; /* sorted by item pointer */
    char *err;
    size_t errlen;
};

/* Parses text (NUL terminated, at most KT_CONFIG_MAX_BYTES) into doc.
 * Syntax errors give KT_EPARSE with "file:line:col: JSON syntax error ...".
 * Duplicate keys are KT_ECONFIG.  Free with kt__jdoc_free. */
int kt__jdoc_parse(struct kt__jdoc *doc, const char *file, const char *text,
                   char *err, size_t errlen);
void kt__jdoc_free(struct kt__jdoc *doc);
/* Reads a whole file into a malloc'd NUL-terminated string. */
int kt__read_file(const char *path, char **out, char *err, size_t errlen);

/* Writes "file:line:col: path: message" (the position of item, or of the
 * document when item is NULL or unknown) and returns KT_ECONFIG. */
int kt__jerr(struct kt__jdoc *doc, const cJSON *item, const char *path,
             const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* As kt__jerr, at the position of item's key (for unknown keys). */
int kt__jerr_key(struct kt__jdoc *doc, const cJSON *item, const char *path,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Line of item (0 when unknown). */
int kt__jline(const struct kt__jdoc *doc, const cJSON *item);
/* The candidate closest to word (edit distance <= 2, or equal ignoring
 * case), or NULL. */
const char *kt__suggest(const char *word, const char *const *cands, int n);

/* ---- Key tables -------------------------------------------------------- */
enum kt__ktype {
    KT_K_INT,      /* int64_t */
    KT_K_NUM,      /* double */
    KT_K_BOOL,     /* int */
    KT_K_STR,      /* char *, malloc'd; NULL default allowed */
    KT_K_ENUM,     /* int: index into enums */
    KT_K_STRLIST,  /* struct kt_strlist */
    KT_K_PAIR,     /* int64_t[2]: a number for both, or [h, w] */
    KT_K_EPILOGUE, /* int bits: ["bias", "relu"] in that order */
    KT_K_SHAPE,    /* int nshape + int64_t shape[4] (off = nshape) */
    KT_K_OBJECT,   /* a nested object, read by its own code */
    KT_K_ARRAY,    /* an array read by its own code */
    KT_K_IGNORED   /* accepted and ignored (comments) */
};

struct kt__key {
    const char *name;
    enum kt__ktype type;
    size_t off;
    double min, max;          /* for INT/NUM/PAIR/SHAPE entries */
    const char *def;          /* default as JSON-ish text; NULL = required */
    const char *const *enums; /* NULL-terminated, for KT_K_ENUM */
    const char *doc;
};

/* A named group of keys for one object kind ("target", "layers[] conv2d"). */
struct kt__keytab {
    const char *section;
    const struct kt__key *keys;
    int nkeys;
};

/* Sets every key of tab that has a default into base. */
void kt__keys_defaults(const struct kt__keytab *tab, void *base);
/* A range bound or value as the messages and docs print it: integral
 * values without a fraction, others with %g. */
void kt__fmt_num(double x, char *out, size_t n);
/* Reads obj (which must be an object) into base using the ntabs tables
 * together (a key may be in any of them).  Unknown keys, missing required
 * keys, wrong types and out-of-range values are errors naming path.  Keys
 * of type OBJECT/ARRAY are only checked for type; the caller reads them. */
int kt__keys_read(struct kt__jdoc *doc, const cJSON *obj, const char *path,
                  const struct kt__keytab *const *tabs, int ntabs, void *base);
/* Frees the strings and lists that tab's keys own in base. */
void kt__keys_free(const struct kt__keytab *tab, void *base);

/* Tables (keys.c). */
extern const struct kt__keytab kt__tab_model;
extern const struct kt__keytab kt__tab_target;
extern const struct kt__keytab kt__tab_tuning;
extern const struct kt__keytab kt__tab_measure;
extern const struct kt__keytab kt__tab_task;
extern const struct kt__keytab kt__tab_daemon;
extern const struct kt__keytab kt__tab_layer_common;
extern const struct kt__keytab kt__tab_layer[KT_LAYER_NOPS];
extern const char *const kt__layer_ops[KT_LAYER_NOPS + 1];

/* Names of enum kt_policy, NULL-terminated (keys.c). */
extern const char *const kt__policy_names[];

#endif /* KT_CONFIG_INTERNAL_H */

/* tracker_abi.c - a key's run jobs go only to workers whose architecture
 * and ABI match the jobs' target (measure.h kt_tracker_set_key_abi): a
 * mismatched worker is refused when it registers, or dropped when the
 * key's target becomes known after it joined.  Build-only workers are not
 * checked: a host worker cross-compiles for a board. */
#include <stdio.h>
#include <string.h>

#include "measure/tracker_int.h"

static const char *
key_abi(const struct kt_tracker *t, const char *key)
{
    int i;

    for (i = 0; i < t->nkeyabi; i++)
        if (strcmp(t->keyabi[i].key, key) == 0)
            return t->keyabi[i].abi;
    return NULL;
}

/* The worker's triple ("abi" in its hello), else its `uname -m`. */
static const char *
worker_abi(const struct kt__conn *c)
{
    return strcmp(c->abi, "?") != 0 ? c->abi : c->arch;
}

static int
mismatched(const struct kt__conn *c, const char *abi)
{
    return abi != NULL && (c->roles & KT_ROLE_RUN) &&
           !kt_abi_match(worker_abi(c), abi);
}

int
kt__abi_check(struct kt__conn *c, char *reason, size_t len)
{
    const char *abi = key_abi(c->t, c->key);

    if (!mismatched(c, abi))
        return 0;
    snprintf(reason, len,
             "worker %s is %s but the jobs of key %s target %s: it cannot "
             "run their kernels",
             c->name, worker_abi(c), c->key, abi);
    log_warnx("tracker: peer %s: %s; refused (give the board its own key, "
              "or --roles build)",
              c->peer, reason);
    return -1;
}

int
kt_tracker_set_key_abi(struct kt_tracker *t, const char *key, const char *abi)
{
    const char *had = key_abi(t, key);
    struct kt__conn *c, *next;
    struct kt__key_abi *k;

    if (had != NULL) {
        if (kt_abi_match(had, abi))
            return 0;
        log_warnx("tracker: jobs of key %s target both %s and %s: their "
                  "run jobs go to %s workers only",
                  key, had, abi, had);
        return KT_EINVAL;
    }
    if (t->nkeyabi == KT__MAX_KEY_ABIS || strlen(key) >= sizeof(k->key) ||
        strlen(abi) >= sizeof(k->abi))
        return KT_EINVAL;
    k = &t->keyabi[t->nkeyabi++];
    snprintf(k->key, sizeof(k->key), "%s", key);
    snprintf(k->abi, sizeof(k->abi), "%s", abi);
    for (c = t->conns; c != NULL; c = next) {
        char why[256];
        next = c->next;
        if (c->state == KT__CONN_WORKER && strcmp(c->key, key) == 0 &&
            mismatched(c, abi)) {
            snprintf(why, sizeof(why),
                     "it is %s but the jobs of key %s target %s", worker_abi(c),
                     key, abi);
            t->refused++;
            kt__conn_drop(c, why);
        }
    }
    return 0;
}

/* fuzz_records.c - libFuzzer target for `kerntune import`: the input is a
 * records file (JSON lines), imported into an empty in-memory database.
 * An import either takes every line or stops at a bad one with a message
 * that names the file and the line; it never crashes.  Whatever it took
 * must export and import again into a second database unchanged (the
 * same number of trials, the same text), so a file that was accepted can
 * never leave a database that cannot be exported. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/storage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_NAME "fuzz.jsonl"

static struct kt_storage *
open_memory(void)
{
    struct kt_storage *st = NULL;
    char err[512];

    if (kt_storage_open(&st, ":memory:", NULL, err, sizeof(err)) < 0)
        abort();
    return st;
}

/* Exports st into a malloc'ed text; *count gets the number of lines. */
static char *
export_text(struct kt_storage *st, size_t *count, size_t *len)
{
    char *text = NULL, err[512];
    FILE *f = open_memstream(&text, len);

    if (f == NULL ||
        kt_storage_export(st, f, NULL, count, err, sizeof(err)) < 0)
        abort();
    fclose(f);
    return text;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kt_storage *a, *b;
    size_t added = 0, skipped = 0, n1 = 0, n2 = 0, len1, len2;
    char err[512], *t1, *t2;
    FILE *in;
    int rc;

    if (size == 0)
        return 0;
    in = fmemopen((void *)data, size, "r");
    if (in == NULL)
        return 0;
    a = open_memory();
    err[0] = '\0';
    rc = kt_storage_import(a, in, FUZZ_NAME, &added, &skipped, err,
                           sizeof(err));
    fclose(in);
    if (rc < 0 && strncmp(err, FUZZ_NAME ":", strlen(FUZZ_NAME) + 1) != 0)
        abort();
    t1 = export_text(a, &n1, &len1);
    if (n1 != added)
        abort();
    if (n1 > 0) {
        /* Imported trials keep their uids: the second export is the same
         * text. */
        b = open_memory();
        in = fmemopen(t1, len1, "r");
        if (in == NULL)
            abort();
        if (kt_storage_import(b, in, "export", &added, &skipped, err,
                              sizeof(err)) < 0 ||
            added != n1)
            abort();
        fclose(in);
        t2 = export_text(b, &n2, &len2);
        if (n2 != n1 || len1 != len2 || memcmp(t1, t2, len1) != 0)
            abort();
        free(t2);
        kt_storage_close(b);
    }
    free(t1);
    kt_storage_close(a);
    return 0;
}

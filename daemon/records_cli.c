/* records_cli.c - `kerntune export` and `kerntune import`: trial records
 * as JSON lines (docs/sql.md), read from and written to the database file
 * directly (no daemon). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "daemon/show.h"
#include "storage/storage.h"

static void
records_usage(void)
{
    fputs("usage: kerntune export --db FILE [--target T]\n"
          "       kerntune import --db FILE RECORDS.jsonl\n",
          stderr);
}

int
kt_records_main(const char *cmd, int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, NULL, 'd'},
        {"target", required_argument, NULL, 't'},
        {NULL, 0, NULL, 0},
    };
    const char *db_path = NULL, *target = NULL, *file = NULL;
    int is_export = strcmp(cmd, "export") == 0;
    struct kt_storage *db = NULL;
    char err[1024];
    int c, rc;

    optind = 1;
    while ((c = getopt_long(argc, argv, is_export ? "d:t:" : "d:", opts,
                            NULL)) != -1) {
        switch (c) {
        case 'd': db_path = optarg; break;
        case 't': target = optarg; break;
        default: records_usage(); return 2;
        }
    }
    if (!is_export && optind == argc - 1)
        file = argv[optind++];
    if (optind != argc) {
        records_usage();
        return 2;
    }
    if (db_path == NULL || (!is_export && file == NULL)) {
        records_usage();
        return 2;
    }
    if (kt_storage_open(&db, db_path, NULL, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "kerntune: %s\n", err);
        return 1;
    }
    if (is_export) {
        size_t n = 0;
        rc = kt_storage_export(db, stdout, target, &n, err, sizeof(err));
        if (rc == KT_OK)
            fprintf(stderr, "kerntune: exported %zu trials\n", n);
    } else {
        FILE *in = fopen(file, "r");
        size_t added = 0, skipped = 0;
        if (in == NULL) {
            fprintf(stderr, "kerntune: %s: cannot open\n", file);
            kt_storage_close(db);
            return 1;
        }
        rc = kt_storage_import(db, in, file, &added, &skipped, err,
                               sizeof(err));
        fclose(in);
        if (rc == KT_OK)
            printf("imported %zu trials, skipped %zu already present\n", added,
                   skipped);
    }
    if (rc != KT_OK)
        fprintf(stderr, "kerntune: %s\n", err);
    kt_storage_close(db);
    return rc == KT_OK ? 0 : 1;
}

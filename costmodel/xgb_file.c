/* xgb_file.c - the cost model's booster in a file: written to path.tmp,
 * synced and renamed; read back through kt_xgb_load_buf (which checks the
 * feature version). */
#include "costmodel/costmodel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
kt_xgb_save(struct kt_xgb_model *m, const char *path, char *err, size_t errlen)
{
    char tmp[4096];
    void *buf = NULL;
    size_t len = 0;
    FILE *f = NULL;
    int rc;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return kt_seterr(err, errlen, KT_EINVAL, "costmodel: path too long");
    rc = kt_xgb_save_buf(m, &buf, &len, err, errlen);
    if (rc < 0)
        return rc;
    f = fopen(tmp, "wb");
    if (f == NULL) {
        rc = kt_seterr(err, errlen, -errno, "costmodel: %s: %s", tmp,
                       strerror(errno));
        goto out;
    }
    if (fwrite(buf, 1, len, f) != len || fflush(f) != 0 ||
        fsync(fileno(f)) != 0) {
        rc = kt_seterr(err, errlen, KT_EIO, "costmodel: write %s: %s", tmp,
                       strerror(errno));
        goto out;
    }
    if (fclose(f) != 0) {
        f = NULL;
        rc = kt_seterr(err, errlen, KT_EIO, "costmodel: close %s: %s", tmp,
                       strerror(errno));
        goto out;
    }
    f = NULL;
    if (rename(tmp, path) != 0)
        rc = kt_seterr(err, errlen, -errno, "costmodel: rename %s: %s", path,
                       strerror(errno));
out:
    if (f != NULL)
        fclose(f);
    if (rc < 0)
        unlink(tmp);
    free(buf);
    return rc;
}

int
kt_xgb_load(struct kt_xgb_model *m, const char *path, char *err, size_t errlen)
{
    FILE *f;
    char *buf = NULL;
    size_t len = 0, cap = 0, got;
    int rc;

    f = fopen(path, "rb");
    if (f == NULL)
        return kt_seterr(err, errlen, -errno, "costmodel: %s: %s", path,
                         strerror(errno));
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            buf = kt_xrealloc(buf, cap);
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        rc = kt_seterr(err, errlen, KT_EIO, "costmodel: read %s", path);
    } else {
        rc = kt_xgb_load_buf(m, buf, len, err, errlen);
        if (rc < 0 && err != NULL && errlen > 0) {
            char msg[512];
            snprintf(msg, sizeof(msg), "%s", err);
            kt_seterr(err, errlen, rc, "%s: %s", path, msg);
        }
    }
    fclose(f);
    free(buf);
    return rc;
}

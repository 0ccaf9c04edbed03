/* token.c - the one reader of shared-secret token files, used by kerntuned,
 * kerntune and kerntune-rpc so all three agree on what a token file holds
 * and refuse a file others can read (as ssh does for private keys). */
#include "common/common.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int
kt_token_read(const char *path, char *buf, size_t len, char *err, size_t errlen)
{
    struct stat st;
    size_t n = 0;
    ssize_t r;
    int fd;

    if (len < 2)
        return kt_seterr(err, errlen, KT_EINVAL, "token file %s: no room",
                         path);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return kt_seterr(err, errlen, -errno, "token file %s: %s", path,
                         strerror(errno));
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return kt_seterr(err, errlen, KT_ECONFIG,
                         "token file %s: not a regular file", path);
    }
    /* Root (an admin's rpc-status) may read the service user's file. */
    if (st.st_uid != geteuid() && st.st_uid != 0 && geteuid() != 0) {
        close(fd);
        return kt_seterr(err, errlen, KT_ECONFIG,
                         "token file %s: owned by uid %ld, not by us (uid "
                         "%ld) or root",
                         path, (long)st.st_uid, (long)geteuid());
    }
    if (st.st_mode & 077) {
        close(fd);
        return kt_seterr(err, errlen, KT_ECONFIG,
                         "token file %s: permissions %04o are too open "
                         "(group or others may access it); chmod 600 %s",
                         path, (unsigned)(st.st_mode & 07777), path);
    }
    while (n < len - 1 && (r = read(fd, buf + n, len - 1 - n)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            close(fd);
            return kt_seterr(err, errlen, -errno, "token file %s: %s", path,
                             strerror(errno));
        }
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    if (n == len - 1 && strchr(buf, '\n') == NULL)
        return kt_seterr(err, errlen, KT_ECONFIG,
                         "token file %s: line 1 is longer than %zu bytes", path,
                         len - 2);
    buf[strcspn(buf, "\n")] = '\0';
    n = strlen(buf);
    while (n > 0 &&
           (buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        buf[--n] = '\0';
    if (n == 0)
        return kt_seterr(err, errlen, KT_ECONFIG,
                         "token file %s: line 1 is empty", path);
    return 0;
}

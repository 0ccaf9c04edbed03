/* ctl_int.h - private to the control socket's server (ctl.c) and client
 * (ctl_client.c). */
#ifndef KT_DAEMON_CTL_INT_H
#define KT_DAEMON_CTL_INT_H

#include <stddef.h>
#include <sys/un.h>

/* Fills *sa with path and returns a new AF_UNIX stream socket (close on
 * exec), or a negative error with the reason in err (path too long, or
 * socket(2) failed). */
int kt__ctl_socket(const char *path, struct sockaddr_un *sa, char *err,
                   size_t errlen);

#endif /* KT_DAEMON_CTL_INT_H */

// SPDX-License-Identifier: Apache-2.0
// What the Glibc module leaves out for a server on epoll: the epoll API and its event bits (the Varlink server's
// sources; the benchmark waits on a thousand subscribed connections with it), and accept4(2), which glibc
// declares only under _GNU_SOURCE.
#include <sys/epoll.h>
#include <sys/socket.h>

extern int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

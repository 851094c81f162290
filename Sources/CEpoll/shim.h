// SPDX-License-Identifier: Apache-2.0
// What the Glibc module leaves out for a server on epoll: the epoll API and its event bits (the Varlink server's
// sources; the benchmark waits on a thousand subscribed connections with it), and accept4(2), which glibc
// declares only under _GNU_SOURCE.
#include <sys/epoll.h>
#include <sys/socket.h>

extern int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

// sched_setaffinity(2), also _GNU_SOURCE only: the benchmark pins client and servers to one CPU for a ratio that an
// idle vCPU's wake-up does not hide.
#include <sched.h>
extern int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t *set);
extern int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *set);

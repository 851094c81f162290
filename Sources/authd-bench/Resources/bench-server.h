// SPDX-License-Identifier: Apache-2.0
// What authd-bench's C servers (c-epoll-server.c, c-durable-server.c) share: a listening Unix socket and the epoll
// set that waits on it. authd-bench writes it beside them at run time.
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>

/* Listens on `path` (non-blocking) and returns an epoll set watching it, or -1 with a message. */
static int listen_in_epoll(const char *name, const char *path, int *listener) {
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof address.sun_path) return -1;
    strcpy(address.sun_path, path);
    unlink(path);
    *listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (*listener < 0 || bind(*listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(*listener, 128) != 0) {
        fprintf(stderr, "%s: cannot listen on %s\n", name, path);
        return -1;
    }
    int loop = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = *listener};
    epoll_ctl(loop, EPOLL_CTL_ADD, *listener, &event);
    return loop;
}

/* Takes on a waiting connection, watched for input in `loop`. */
static void accept_into_epoll(int loop, int listener) {
    int connection = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (connection < 0) return;
    struct epoll_event added = {.events = EPOLLIN, .data.fd = connection};
    epoll_ctl(loop, EPOLL_CTL_ADD, connection, &added);
}

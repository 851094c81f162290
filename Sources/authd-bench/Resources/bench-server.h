// SPDX-License-Identifier: Apache-2.0
// What authd-bench's C servers (c-epoll-server.c, c-durable-server.c) share: the canned reply, and one epoll loop
// that listens, takes on connections and reads their messages, so that the two differ by what they do with a
// message alone. authd-bench writes it beside them at run time.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>

/* `size` bytes of reply and its NUL; NULL when out of memory. */
static char *canned_reply(size_t size) {
    char *reply = malloc(size + 1);
    if (!reply) return NULL;
    memset(reply, 'x', size);
    reply[size] = 0;
    return reply;
}

/* Listens on `path` and serves until it fails: takes on each connection (calling `opened`, when given), and calls
 * `message` with each message a connection sent, without its ending NUL (the benchmark's calls come one at a time,
 * each whole in one read), stopping at the first that returns nonzero; calls `other` when `extra` (a descriptor of
 * the server's, or -1) is readable. Returns 1 when it cannot listen. */
static int serve(const char *name, const char *path, int extra, void (*opened)(int fd),
                 int (*message)(int fd, const char *text, size_t length), void (*other)(int fd)) {
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof address.sun_path) return 1;
    strcpy(address.sun_path, path);
    unlink(path);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 128) != 0) {
        fprintf(stderr, "%s: cannot listen on %s\n", name, path);
        return 1;
    }
    int loop = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener};
    epoll_ctl(loop, EPOLL_CTL_ADD, listener, &event);
    if (extra >= 0) {
        struct epoll_event watched = {.events = EPOLLIN, .data.fd = extra};
        epoll_ctl(loop, EPOLL_CTL_ADD, extra, &watched);
    }
    static char buffer[64 * 1024];
    for (;;) {
        struct epoll_event ready[64];
        int count = epoll_wait(loop, ready, 64, -1);
        for (int i = 0; i < count; i++) {
            int fd = ready[i].data.fd;
            if (fd == listener) {
                int connection = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (connection < 0) continue;
                struct epoll_event added = {.events = EPOLLIN, .data.fd = connection};
                epoll_ctl(loop, EPOLL_CTL_ADD, connection, &added);
                if (opened) opened(connection);
                continue;
            }
            if (fd == extra) {
                other(fd);
                continue;
            }
            ssize_t got = read(fd, buffer, sizeof buffer);
            if (got <= 0) {
                close(fd);
                continue;
            }
            ssize_t start = 0;
            for (ssize_t at = 0; at < got; at++) {
                if (buffer[at] != 0) continue;
                if (message(fd, buffer + start, (size_t)(at - start)) != 0) break;
                start = at + 1;
            }
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
// The event-loop floor, an anchor of authd-bench's latency rows: what a server that waits the way the daemon
// does costs (one thread, one epoll_wait, then a read and a write a call), doing nothing else. It answers each
// NUL-terminated message with a canned reply of REPLY_SIZE bytes and a NUL. authd-bench compiles it with
// `cc -O2` at run time, beside the blocking floor server (a thread per connection, no epoll).
//
// Usage: c-epoll-server SOCKET REPLY_SIZE
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "bench-server.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: c-epoll-server SOCKET REPLY_SIZE\n");
        return 2;
    }
    size_t size = (size_t)atol(argv[2]);
    char *reply = malloc(size + 1);
    if (!reply) return 1;
    memset(reply, 'x', size);
    reply[size] = 0;

    int listener;
    int loop = listen_in_epoll("c-epoll-server", argv[1], &listener);
    if (loop < 0) return 1;

    static char buffer[64 * 1024];
    for (;;) {
        struct epoll_event ready[64];
        int count = epoll_wait(loop, ready, 64, -1);
        for (int i = 0; i < count; i++) {
            int fd = ready[i].data.fd;
            if (fd == listener) {
                accept_into_epoll(loop, listener);
                continue;
            }
            ssize_t got = read(fd, buffer, sizeof buffer);
            if (got <= 0) {
                close(fd);
                continue;
            }
            // One reply for each message that ends in what was read (the benchmark's calls come one at a time).
            for (ssize_t at = 0; at < got; at++) {
                if (buffer[at] == 0 && write(fd, reply, size + 1) != (ssize_t)(size + 1)) {
                    close(fd);
                    break;
                }
            }
        }
    }
}

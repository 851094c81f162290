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
#include <unistd.h>

#include "bench-server.h"

static char *reply;
static size_t size;

/* Answers one message; nonzero once the connection is closed. */
static int answer(int fd, const char *text, size_t length) {
    (void)text;
    (void)length;
    if (write(fd, reply, size + 1) == (ssize_t)(size + 1)) return 0;
    close(fd);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: c-epoll-server SOCKET REPLY_SIZE\n");
        return 2;
    }
    size = (size_t)atol(argv[2]);
    reply = canned_reply(size);
    if (!reply) return 1;
    return serve("c-epoll-server", argv[1], -1, NULL, answer, NULL);
}

// SPDX-License-Identifier: Apache-2.0
// A small blocking Varlink client in C, the anchor of authd-bench's client rows: what a client that does nothing
// but write the call and read the reply costs. authd-bench compiles it with `cc -O2` at run time.
//
// Usage: c-client SOCKET METHOD GROUP COUNT
//   Connects, makes one call of com.exponea.Auth.METHOD {"group": GROUP}, then COUNT more one after another, and
//   prints "p50_ns cpu_ns_per_call switches_per_call" over those (bench-client.h). COUNT 1 is the one-shot client:
//   connect, one call, exit (nothing printed); COUNT 0 makes one call and prints the process's peak RSS in KiB.
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "bench-client.h"

static char reply[1 << 20];

struct call {
    int fd;
    char message[512];
    size_t length;
};

/* One call: write it, read until the reply's NUL. */
static int call(void *context) {
    struct call *c = context;
    if (write(c->fd, c->message, c->length) != (ssize_t)c->length) return -1;
    size_t have = 0;
    for (;;) {
        ssize_t n = read(c->fd, reply + have, sizeof reply - have);
        if (n <= 0) return -1;
        if (memchr(reply + have, 0, (size_t)n)) return 0;
        have += (size_t)n;
        if (have == sizeof reply) return -1;
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: c-client SOCKET METHOD GROUP COUNT\n");
        return 2;
    }
    long count = atol(argv[4]);
    struct call c;
    int length = snprintf(c.message, sizeof c.message,
                          "{\"method\":\"com.exponea.Auth.%s\",\"parameters\":{\"group\":\"%s\"}}", argv[2], argv[3]);
    if (length <= 0 || (size_t)length >= sizeof c.message || count < 0) return 2;
    c.length = (size_t)length + 1; /* the NUL */

    c.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof address.sun_path - 1);
    if (c.fd < 0 || connect(c.fd, (struct sockaddr *)&address, sizeof address) != 0) {
        perror("connect");
        return 1;
    }
    return run_client(count, call(&c) == 0, call, &c);
}

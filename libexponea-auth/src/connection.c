/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * USEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t deadline_after(uint64_t usec) {
        uint64_t now = now_usec();
        return usec >= NEVER - now ? NEVER : now + usec;
}

int poll_timeout(uint64_t deadline) {
        if (deadline == NEVER) return -1;
        uint64_t now = now_usec();
        if (deadline <= now) return 0;
        uint64_t ms = (deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
        return ms > 1000000 ? 1000000 : (int)ms;
}

/* The system user's uid, looked up only when a server is neither root nor this user. */
static bool is_system_user(uid_t uid) {
        struct passwd entry, *result = NULL;
        char buffer[4096];
        return getpwnam_r("exponea-authd", &entry, buffer, sizeof buffer, &result) == 0 && result &&
               result->pw_uid == uid;
}

static bool trusts(trusted_server trust, uid_t uid) {
        if (uid == 0) return true;
        if (trust != TRUST_SYSTEM && uid == geteuid()) return true;
        return trust != TRUST_USER && is_system_user(uid);
}

static bool away(int error) { return error == ENOENT || error == ECONNREFUSED || error == EAGAIN; }

int connection_open(connection **ret, const char *path, trusted_server trust, uint64_t deadline,
                    uint64_t unavailable_deadline) {
        struct sockaddr_un address = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof address.sun_path) return -ENAMETOOLONG;
        strcpy(address.sun_path, path);

        int fd = -1;
        unsigned pause_ms = 5;
        for (;;) {
                fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0) return -errno;
                if (connect(fd, (struct sockaddr *)&address, sizeof address) == 0) break;
                int error = errno;
                close(fd);
                uint64_t now = now_usec();
                if (!away(error) || now >= unavailable_deadline) return -error;
                if (now >= deadline) return -ETIMEDOUT;
                /* The daemon is away (starting, restarting): try again shortly, within both bounds. */
                uint64_t until = unavailable_deadline < deadline ? unavailable_deadline : deadline;
                uint64_t pause = (uint64_t)pause_ms * USEC_PER_MSEC;
                if (pause > until - now) pause = until - now;
                struct timespec ts = {.tv_sec = (time_t)(pause / USEC_PER_SEC),
                                      .tv_nsec = (long)(pause % USEC_PER_SEC * 1000)};
                nanosleep(&ts, NULL);
                if (pause_ms < 100) pause_ms *= 2;
        }

        struct ucred peer;
        socklen_t length = sizeof peer;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
                int error = errno;
                close(fd);
                return -error;
        }
        if (!trusts(trust, peer.uid)) {
                close(fd);
                return -EPERM;
        }

        connection *c = calloc(1, sizeof *c);
        char *buffer = malloc(MESSAGE_MAX + 1);
        if (!c || !buffer) {
                free(c);
                free(buffer);
                close(fd);
                return -ENOMEM;
        }
        c->fd = fd;
        c->buffer = buffer;
        *ret = c;
        return 0;
}

void connection_close(connection *c) {
        if (!c) return;
        close(c->fd);
        explicit_bzero(c->buffer, c->have);
        free(c->buffer);
        free(c);
}

static int wait_for(int fd, short events, uint64_t deadline) {
        struct pollfd p = {.fd = fd, .events = events};
        for (;;) {
                int timeout = poll_timeout(deadline);
                if (timeout == 0) return -ETIMEDOUT;
                int n = poll(&p, 1, timeout);
                if (n > 0) return 0;
                if (n < 0 && errno != EINTR) return -errno;
        }
}

int connection_send(connection *c, const char *message, size_t length, uint64_t deadline) {
        size_t sent = 0;
        while (sent < length) {
                ssize_t n = send(c->fd, message + sent, length - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0) {
                        sent += (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR) continue;
                if (n < 0 && errno == EAGAIN) {
                        int r = wait_for(c->fd, POLLOUT, deadline);
                        if (r < 0) return r;
                        continue;
                }
                return errno == EPIPE ? -ECONNRESET : -errno;
        }
        return 0;
}

/* Moves what was not taken to the front, wiping the rest. */
static void compact(connection *c) {
        if (c->taken == 0) return;
        size_t left = c->have - c->taken;
        memmove(c->buffer, c->buffer + c->taken, left);
        explicit_bzero(c->buffer + left, c->have - left);
        c->have = left;
        c->taken = 0;
}

void connection_wipe_taken(connection *c) { compact(c); }

int connection_next(connection *c, char **ret, size_t *ret_length) {
        char *start = c->buffer + c->taken;
        char *end = memchr(start, 0, c->have - c->taken);
        if (!end) return 0;
        *ret = start;
        *ret_length = (size_t)(end - start);
        c->taken += (size_t)(end - start) + 1;
        return 1;
}

int connection_fill(connection *c) {
        compact(c);
        if (c->have > MESSAGE_MAX) return -EMSGSIZE;
        for (;;) {
                ssize_t n = recv(c->fd, c->buffer + c->have, MESSAGE_MAX + 1 - c->have, MSG_DONTWAIT);
                if (n > 0) {
                        c->have += (size_t)n;
                        return (int)n;
                }
                if (n == 0) return 0;
                if (errno == EINTR) continue;
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        }
}

/* A blocking read bounded by the kernel (SO_RCVTIMEO): the cost of a plain read(2) for a reply that comes at once,
 * which is every reply but WaitForToken's and a clear's. The bound is whole milliseconds, never past the deadline,
 * and set again only when it would end past the deadline or long before it, so that calls of one timeout set it
 * once. */
static int bound_receive(connection *c, uint64_t deadline) {
        uint64_t now = now_usec();
        if (now >= deadline) return -ETIMEDOUT;
        uint64_t ms = (deadline - now) / USEC_PER_MSEC;
        if (ms == 0) ms = 1; /* the last part of a millisecond: SO_RCVTIMEO has no finer use here */
        if (ms > 24ULL * 3600 * 1000) ms = 24ULL * 3600 * 1000;
        /* Kept while it ends neither past the deadline nor long before it (a wake-up for nothing). */
        if (c->receive_timeout_ms != 0 && c->receive_timeout_ms <= ms && c->receive_timeout_ms * 2 >= ms) return 0;
        struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000 * 1000)};
        if (setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) return -errno;
        c->receive_timeout_ms = ms;
        return 0;
}

int connection_receive(connection *c, uint64_t deadline, char **ret, size_t *ret_length) {
        for (;;) {
                if (connection_next(c, ret, ret_length)) return 0;
                compact(c);
                if (c->have > MESSAGE_MAX) return -EMSGSIZE;
                int r = bound_receive(c, deadline);
                if (r < 0) return r;
                ssize_t n = recv(c->fd, c->buffer + c->have, MESSAGE_MAX + 1 - c->have, 0);
                if (n > 0) {
                        c->have += (size_t)n;
                        continue;
                }
                if (n == 0) return -ECONNRESET;
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                        if (now_usec() >= deadline) return -ETIMEDOUT;
                        continue;
                }
                return -errno;
        }
}

/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "internal.h"

int client_connect(exponea_auth *a, connection **ret) {
        return connection_open(ret, a->socket_path, a->trust, deadline_after(a->call_timeout),
                               deadline_after(a->unavailable_timeout));
}

/* An idle connection, or a new one. `reused` says which: a reused one may have been closed by a daemon that
 * restarted since. */
static int take_connection(exponea_auth *a, connection **ret, bool *reused) {
        pthread_mutex_lock(&a->idle_lock);
        connection *c = a->idle_count ? a->idle[--a->idle_count] : NULL;
        pthread_mutex_unlock(&a->idle_lock);
        *reused = c != NULL;
        if (c) {
                *ret = c;
                return 0;
        }
        return client_connect(a, ret);
}

/* Closes every idle connection: one of them was found closed by the daemon, so the daemon restarted, and each was
 * opened before that restart (a connection is kept only once its call succeeded). */
static void drop_idle(exponea_auth *a) {
        connection *stale[IDLE_MAX];
        pthread_mutex_lock(&a->idle_lock);
        unsigned count = a->idle_count;
        memcpy(stale, a->idle, count * sizeof *stale);
        a->idle_count = 0;
        pthread_mutex_unlock(&a->idle_lock);
        for (unsigned i = 0; i < count; i++) connection_close(stale[i]);
}

static void give_back(exponea_auth *a, connection *c) {
        connection_wipe_taken(c);
        pthread_mutex_lock(&a->idle_lock);
        bool kept = c->have == 0 && a->idle_count < IDLE_MAX;
        if (kept) a->idle[a->idle_count++] = c;
        pthread_mutex_unlock(&a->idle_lock);
        if (!kept) connection_close(c);
}

void reply_done(exponea_auth *a, reply *r, bool failed) {
        if (!r->connection) return;
        if (failed)
                connection_close(r->connection);
        else
                give_back(a, r->connection);
        r->connection = NULL;
}

/* Waits for the reply in poll(2), handling the client's own events meanwhile through the events layer's `loop`
 * hooks: a call made on the loop thread that waits by design (a token the handler sets, a flush this app must
 * confirm). */
static int receive_serving_events(exponea_auth *a, const loop_hooks *loop, connection *c, uint64_t deadline,
                                  char **ret, size_t *length) {
        for (;;) {
                if (connection_next(c, ret, length)) return 0;
                uint64_t wake_at = NEVER;
                int events = loop->watch(a, &wake_at);
                struct pollfd fds[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = events, .events = POLLIN}};
                int timeout = poll_timeout(deadline);
                if (timeout == 0) return -ETIMEDOUT;
                /* A subscription in back-off is tried again within the wait. */
                if (events < 0 && wake_at != NEVER) {
                        int until = poll_timeout(wake_at);
                        if (until < timeout) timeout = until;
                }
                int n = poll(fds, events >= 0 ? 2 : 1, timeout);
                if (n < 0 && errno != EINTR) return -errno;
                if (fds[0].revents) {
                        int r = connection_fill(c);
                        if (r == 0) return -ECONNRESET;
                        if (r < 0 && r != -EAGAIN) return r;
                }
                loop->service(a);
        }
}

int call(exponea_auth *a, const jbuf *message, uint64_t extra_wait, bool serve_events, reply *r) {
        r->connection = NULL;
        r->parameters = -1;
        uint64_t deadline = deadline_after(a->call_timeout + extra_wait);
        /* Served only on the loop thread, and not from inside a handler (no handler runs inside another). */
        const loop_hooks *loop = serve_events && !a->dispatching ? loop_here(a) : NULL;
        for (int attempt = 0;; attempt++) {
                connection *c;
                bool reused;
                int result = take_connection(a, &c, &reused);
                if (result < 0) return result;
                char *text = NULL;
                size_t length = 0;
                result = connection_send(c, message->data, message->length, deadline);
                if (result == 0)
                        result = loop ? receive_serving_events(a, loop, c, deadline, &text, &length)
                                      : connection_receive(c, deadline, &text, &length);
                /* An idle connection the daemon closed when it restarted, found before any reply came. Every other
                 * idle connection is as old, so they go too, and the call is made again on a new connection, which
                 * waits for a restarting daemon within the unavailable bound. The request may have reached the old
                 * daemon just before it stopped; every call is safe to make twice (exponea_auth_strerror(3)).
                 * Bounded: each turn empties the idle list, so another reused one is one another thread gave back. */
                if (result == -ECONNRESET && reused && c->have == 0 && attempt <= IDLE_MAX) {
                        connection_close(c);
                        drop_idle(a);
                        continue;
                }
                r->connection = c;
                if (result < 0) {
                        reply_done(a, r, true);
                        return result;
                }
                r->doc.tokens = r->tokens;
                r->doc.capacity = sizeof r->tokens / sizeof *r->tokens;
                result = json_parse(&r->doc, text, length);
                if (result < 0) {
                        reply_done(a, r, true);
                        return result;
                }
                int error = json_get(&r->doc, 0, "error");
                if (error >= 0) {
                        const jtok *t = &r->doc.tokens[error];
                        result = error_from_varlink(r->doc.text + t->start, t->length);
                        reply_done(a, r, false);
                        return result;
                }
                r->parameters = json_get(&r->doc, 0, "parameters");
                return 0;
        }
}

void message_begin(jbuf *b, const exponea_auth *a, const char *method) {
        jbuf_raw(b, "{\"method\":\"com.exponea.Auth.");
        jbuf_raw(b, method);
        jbuf_raw(b, "\",\"parameters\":{\"group\":");
        jbuf_string(b, a->group);
}

void message_end(jbuf *b) { jbuf_raw(b, "}}"); }

int simple_call(exponea_auth *a, jbuf *message, uint64_t extra_wait, bool serve_events, reply *r) {
        message_end(message);
        int result = jbuf_finish(message);
        if (result == 0) result = call(a, message, extra_wait, serve_events, r);
        jbuf_free(message);
        return result;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The group's events in the app's loop: the subscription behind one stable descriptor, the refresh claim, and the
 * handlers. Everything here runs on the loop thread. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "internal.h"

#define BACKOFF_FIRST (100 * USEC_PER_MSEC)
#define BACKOFF_AWAY (2 * USEC_PER_SEC)
/* A subscription refused (this user may not use the group, too many subscribers): asked again, but rarely. */
#define BACKOFF_REFUSED (30 * USEC_PER_SEC)

static void refresh_free(exponea_auth_refresh *r) {
        if (!r) return;
        for (size_t i = 0; i < r->id_count; i++) {
                free(r->keys[i]);
                free(r->values[i]);
        }
        free(r->keys);
        free(r->values);
        free(r->reason);
        free(r);
}

/* ---- The refresh claim, on a connection of its own: it ends when the connection closes. ---- */

/* One call on `c`, bounded by the call timeout. */
static int call_on(exponea_auth *a, connection *c, jbuf *message, reply *r) {
        message_end(message);
        int result = jbuf_finish(message);
        uint64_t deadline = deadline_after(a->call_timeout);
        char *text = NULL;
        size_t length = 0;
        if (result == 0) result = connection_send(c, message->data, message->length, deadline);
        if (result == 0) result = connection_receive(c, deadline, &text, &length);
        jbuf_free(message);
        if (result < 0) return result;
        r->connection = NULL;
        r->doc.tokens = r->tokens;
        r->doc.capacity = sizeof r->tokens / sizeof *r->tokens;
        if ((result = json_parse(&r->doc, text, length)) < 0) return result;
        int error = json_get(&r->doc, 0, "error");
        if (error >= 0)
                return error_from_varlink(r->doc.text + r->doc.tokens[error].start, r->doc.tokens[error].length);
        r->parameters = json_get(&r->doc, 0, "parameters");
        return 0;
}

/* Asks for (or renews) the claim: 1 when granted, with the lease it lasts in `*ret_lease_usec` when not NULL;
 * 0 when refused; a negative error when the call failed. */
static int claim_call(exponea_auth *a, connection *c, uint64_t generation, bool renew, uint64_t *ret_lease_usec) {
        jbuf message = {0};
        message_begin(&message, a, "ClaimRefresh");
        jbuf_raw(&message, ",\"generation\":");
        jbuf_u64(&message, generation);
        if (renew) jbuf_raw(&message, ",\"renew\":true");
        reply r;
        int result = call_on(a, c, &message, &r);
        if (result == 0) result = json_is(&r.doc, json_get(&r.doc, r.parameters, "granted"), JSON_TRUE);
        uint64_t lease_ms = 0;
        int lease = result == 1 ? json_get(&r.doc, r.parameters, "leaseMs") : -1;
        if (ret_lease_usec && lease >= 0 && json_u64(&r.doc, lease, &lease_ms) == 0)
                *ret_lease_usec = lease_ms * USEC_PER_MSEC;
        connection_wipe_taken(c);
        return result;
}

static void end_claim(exponea_auth *a) {
        connection_close(a->claim);
        a->claim = NULL;
}

/* Closes a claim on a generation older than `generation`: a newer token (or none) ended it. */
static void end_claim_before(exponea_auth *a, uint64_t generation) {
        if (a->claim && a->claim_generation < generation) end_claim(a);
        if (a->refreshing != NEVER && a->refreshing < generation) a->refreshing = NEVER;
        if (a->pending_refresh && a->pending_refresh->generation < generation) {
                refresh_free(a->pending_refresh);
                a->pending_refresh = NULL;
        }
}

static int release_claim(exponea_auth *a) {
        a->refreshing = NEVER;
        if (!a->claim) return 0;
        jbuf message = {0};
        message_begin(&message, a, "ReleaseRefresh");
        jbuf_raw(&message, ",\"generation\":");
        jbuf_u64(&message, a->claim_generation);
        reply r;
        /* Closing the connection ends the claim too: a failed call loses nothing. */
        call_on(a, a->claim, &message, &r);
        end_claim(a);
        return 1;
}

/* Runs the handler for a request to refresh, in this app when it claims the refresh (R28). An app whose handler
 * still works on the same generation does not run it again. */
static void run_refresh(exponea_auth *a, exponea_auth_refresh *refresh) {
        uint64_t generation = refresh->generation;
        if (!a->refresh_handler || a->refreshing == generation) return;
        connection *claim = NULL;
        refresh->lease_usec = 0;
        /* Without a connection for the claim (the daemon is away), the handler runs unclaimed, for the same
         * reason. */
        if (a->coalesce && client_connect(a, &claim) == 0) {
                int granted = claim_call(a, claim, generation, false, &refresh->lease_usec);
                if (granted == 0) {
                        connection_close(claim);
                        return;
                }
                /* The claim could not be asked for (the call failed): better a second refresh than none. */
                if (granted < 0) {
                        refresh->lease_usec = 0;
                        connection_close(claim);
                        claim = NULL;
                }
        }
        if (a->claim) end_claim(a);
        a->claim = claim;
        a->claim_generation = generation;
        a->refreshing = generation;

        char token[EXPONEA_AUTH_TOKEN_MAX + 1];
        token[0] = 0;
        bool outer = a->dispatching;
        a->dispatching = true;
        int outcome = a->refresh_handler(a, refresh, token, sizeof token, a->refresh_userdata);
        a->dispatching = outer;
        token[EXPONEA_AUTH_TOKEN_MAX] = 0;
        if (outcome == EXPONEA_AUTH_REFRESH_SUPPLIED) {
                /* Kept for exponea_auth_get_refresh_error(): the handler has returned, so only a later read can
                 * tell the app that its token was not stored. */
                a->supplied_error = exponea_auth_set_token(a, token, NULL);
                a->supplied_generation = generation;
                if (a->supplied_error < 0) release_claim(a);
                a->refreshing = NEVER;
        } else if (outcome != EXPONEA_AUTH_REFRESH_PENDING) {
                release_claim(a);
        }
        explicit_bzero(token, sizeof token);
}

static exponea_auth_refresh *refresh_from_event(const jdoc *doc, int event, uint64_t generation) {
        exponea_auth_refresh *r = calloc(1, sizeof *r);
        if (!r) return NULL;
        r->generation = generation;
        r->reason = json_strdup(doc, json_get(doc, event, "reason"));
        int ids = json_get(doc, event, "customerIds");
        uint32_t count = json_size(doc, ids);
        r->keys = calloc(count + 1, sizeof *r->keys);
        r->values = calloc(count + 1, sizeof *r->values);
        if (!r->reason || !r->keys || !r->values) {
                refresh_free(r);
                return NULL;
        }
        for (uint32_t i = 0, key = (uint32_t)ids + 1; i < count; i++, key = doc->tokens[key + 1].next) {
                r->keys[i] = json_strdup(doc, (int)key);
                r->values[i] = json_strdup(doc, (int)key + 1);
                r->id_count = i + 1;
                if (!r->keys[i] || !r->values[i]) {
                        refresh_free(r);
                        return NULL;
                }
        }
        return r;
}

/* ---- Flushes ---- */

static int acknowledge_flush(exponea_auth *a, const char *flush_id) {
        jbuf message = {0};
        message_begin(&message, a, "AcknowledgeFlush");
        jbuf_raw(&message, ",\"flushId\":");
        jbuf_string(&message, flush_id);
        reply r;
        int result = simple_call(a, &message, 0, false, &r);
        if (result == 0) reply_done(a, &r, false);
        return result;
}

static void flush_requested(exponea_auth *a, char *flush_id) {
        int outcome = EXPONEA_AUTH_FLUSH_DONE;
        if (a->flush_handler) {
                bool outer = a->dispatching;
                a->dispatching = true;
                outcome = a->flush_handler(a, a->flush_userdata);
                a->dispatching = outer;
        }
        if (outcome == EXPONEA_AUTH_FLUSH_PENDING && a->pending_flush_count < 8) {
                a->pending_flushes[a->pending_flush_count++] = flush_id;
                return;
        }
        acknowledge_flush(a, flush_id);
        free(flush_id);
}

/* ---- The subscription ---- */

static void schedule_subscribe(exponea_auth *a, uint64_t backoff) {
        a->subscription = SUBSCRIPTION_WAITING;
        a->reconnect_at = deadline_after(backoff);
}

static void drop_subscription(exponea_auth *a, uint64_t backoff) {
        if (a->events) {
                epoll_ctl(a->epoll_fd, EPOLL_CTL_DEL, a->events->fd, NULL);
                connection_close(a->events);
                a->events = NULL;
        }
        /* The claim goes with the subscription, for another app to take. */
        if (a->claim) end_claim(a);
        a->refreshing = NEVER;
        if (!backoff) {
                backoff = a->backoff;
                a->backoff = a->backoff * 2 > BACKOFF_AWAY ? BACKOFF_AWAY : a->backoff * 2;
        }
        schedule_subscribe(a, backoff);
}

static void subscribe_now(exponea_auth *a) {
        connection *c;
        uint64_t now = now_usec();
        /* One attempt: a daemon that is away is tried again after the back-off, not waited for here. */
        int result = connection_open(&c, a->socket_path, a->trust, deadline_after(a->call_timeout), now);
        if (result == 0) {
                jbuf message = {0};
                jbuf_raw(&message, "{\"method\":\"com.exponea.Auth.Subscribe\",\"parameters\":{\"group\":");
                jbuf_string(&message, a->group);
                jbuf_raw(&message, "},\"more\":true}");
                result = jbuf_finish(&message);
                if (result == 0) result = connection_send(c, message.data, message.length, deadline_after(a->call_timeout));
                jbuf_free(&message);
                struct epoll_event watch = {.events = EPOLLIN, .data.fd = c->fd};
                if (result == 0 && epoll_ctl(a->epoll_fd, EPOLL_CTL_ADD, c->fd, &watch) != 0) result = -errno;
                if (result < 0) connection_close(c);
        }
        if (result < 0) {
                a->events = NULL;
                drop_subscription(a, 0);
                return;
        }
        a->events = c;
        a->subscription = SUBSCRIPTION_ON;
}

/* Whether a subscription's first event (the group's state) tells of a token this app has not heard of: the
 * subscription was made again (the daemon restarted, or the connection was lost) and a token was set meanwhile.
 * Every app hears every new token (R6), so it is told as a refresh. */
static bool missed_token(exponea_auth *a, const jdoc *doc, int event, uint64_t generation) {
        char state[32] = "";
        json_string(doc, json_get(doc, event, "tokenState"), state, sizeof state);
        return a->heard != NEVER && generation > a->heard && state[0] && strcmp(state, "notProvided") != 0;
}

static void handle_event(exponea_auth *a, const jdoc *doc, int event) {
        uint64_t generation = 0;
        json_u64(doc, json_get(doc, event, "generation"), &generation);
        int kind = json_get(doc, event, "kind");
        bool state = json_equals(doc, kind, "state");
        bool missed = state && missed_token(a, doc, event, generation);
        if (state || json_equals(doc, kind, "tokenRefreshed") || json_equals(doc, kind, "cleared"))
                a->heard = generation;
        if (missed || json_equals(doc, kind, "tokenRefreshed") || json_equals(doc, kind, "cleared")) {
                end_claim_before(a, generation);
                bool refreshed = !json_equals(doc, kind, "cleared");
                bool outer = a->dispatching;
                a->dispatching = true;
                if (refreshed && a->refreshed_handler) a->refreshed_handler(a, generation, a->refreshed_userdata);
                if (!refreshed && a->cleared_handler) {
                        char cause[64] = "";
                        json_string(doc, json_get(doc, event, "cause"), cause, sizeof cause);
                        a->cleared_handler(a, cause, a->cleared_userdata);
                }
                a->dispatching = outer;
        } else if (json_equals(doc, kind, "jwtError")) {
                exponea_auth_refresh *refresh = refresh_from_event(doc, event, generation);
                if (!refresh) return;
                refresh_free(a->pending_refresh);
                a->pending_refresh = refresh;
                a->pending_handled = a->refresh_handler != NULL;
                run_refresh(a, refresh);
        } else if (json_equals(doc, kind, "flushRequested")) {
                char *flush_id = json_strdup(doc, json_get(doc, event, "flushId"));
                if (flush_id) flush_requested(a, flush_id);
        }
}

/* One message of the subscription. Returns false when it ended the subscription. */
static bool handle_message(exponea_auth *a, char *text, size_t length) {
        reply r;
        r.doc.tokens = r.tokens;
        r.doc.capacity = sizeof r.tokens / sizeof *r.tokens;
        if (json_parse(&r.doc, text, length) < 0) {
                drop_subscription(a, 0);
                return false;
        }
        int error = json_get(&r.doc, 0, "error");
        if (error >= 0) {
                int code = error_from_varlink(r.doc.text + r.doc.tokens[error].start, r.doc.tokens[error].length);
                drop_subscription(a, code == -ECONNRESET ? 0 : BACKOFF_REFUSED);
                return false;
        }
        a->backoff = BACKOFF_FIRST;
        handle_event(a, &r.doc, json_get(&r.doc, json_get(&r.doc, 0, "parameters"), "event"));
        return true;
}

static int events_service(exponea_auth *a) {
        int handled = 0;
        if (a->subscription == SUBSCRIPTION_WAITING && now_usec() >= a->reconnect_at) {
                subscribe_now(a);
                handled = 1;
        }
        /* A bounded number of reads a turn, so that a flood of events cannot hold the app's loop. */
        for (int turn = 0; turn < 16 && a->subscription == SUBSCRIPTION_ON; turn++) {
                int result = connection_fill(a->events);
                if (result == -EAGAIN) break;
                if (result <= 0) {
                        drop_subscription(a, 0);
                        return 1;
                }
                handled = 1;
                char *text;
                size_t length;
                while (a->subscription == SUBSCRIPTION_ON && connection_next(a->events, &text, &length))
                        if (!handle_message(a, text, length)) break;
        }
        return handled;
}

/* The loop hooks (loop.c): how a blocking call on the loop thread serves events while it waits. The subscription's
 * descriptor while subscribed, else -1, and when one in back-off is made again. */
static int events_watch(const exponea_auth *a, uint64_t *ret_wake_at) {
        *ret_wake_at = a->subscription == SUBSCRIPTION_WAITING ? a->reconnect_at : NEVER;
        return a->subscription == SUBSCRIPTION_ON ? a->events->fd : -1;
}

/* This app stored a token (exponea_auth_set_token() on the loop thread): its claim on an older one has ended; the
 * daemon ended it already. */
static void token_stored(exponea_auth *a, uint64_t generation) {
        if (a->claim && a->claim_generation < generation) {
                connection_close(a->claim);
                a->claim = NULL;
        }
        if (a->refreshing < generation) a->refreshing = NEVER;
}

static const loop_hooks hooks = {.watch = events_watch, .service = events_service, .token_stored = token_stored};

/* Makes this thread the loop thread (once) and starts the subscription. */
static int events_start(exponea_auth *a) {
        become_loop_thread(a, &hooks);
        if (!on_loop_thread(a)) return -EBUSY;
        if (a->epoll_fd < 0) {
                a->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
                if (a->epoll_fd < 0) return -errno;
        }
        if (a->subscription == SUBSCRIPTION_OFF) subscribe_now(a);
        return 0;
}

void events_free(exponea_auth *a) {
        connection_close(a->events);
        connection_close(a->claim);
        if (a->epoll_fd >= 0) close(a->epoll_fd);
        refresh_free(a->pending_refresh);
        for (unsigned i = 0; i < a->pending_flush_count; i++) free(a->pending_flushes[i]);
}

_Pragma("GCC visibility push(default)")

int exponea_auth_get_fd(exponea_auth *a) {
        if (!a) return -EINVAL;
        int result = events_start(a);
        return result < 0 ? result : a->epoll_fd;
}

int exponea_auth_get_events(exponea_auth *a) { return a ? POLLIN : -EINVAL; }

int exponea_auth_get_timeout(exponea_auth *a, uint64_t *ret_usec) {
        if (!a || !ret_usec) return -EINVAL;
        *ret_usec = a->subscription == SUBSCRIPTION_WAITING ? a->reconnect_at : NEVER;
        return 0;
}

int exponea_auth_process(exponea_auth *a) {
        if (!a) return -EINVAL;
        int result = events_start(a);
        return result < 0 ? result : events_service(a);
}

int exponea_auth_wait(exponea_auth *a, uint64_t usec) {
        if (!a) return -EINVAL;
        int result = events_start(a);
        if (result < 0) return result;
        uint64_t deadline = deadline_after(usec);
        if (a->subscription == SUBSCRIPTION_WAITING && a->reconnect_at < deadline) deadline = a->reconnect_at;
        struct pollfd p = {.fd = a->epoll_fd, .events = POLLIN};
        if (poll(&p, 1, poll_timeout(deadline)) < 0 && errno != EINTR) return -errno;
        return events_service(a);
}

static int set_handler(exponea_auth *a) {
        if (!a) return -EINVAL;
        return events_start(a);
}

int exponea_auth_set_refresh_handler(exponea_auth *a, exponea_auth_refresh_handler_t handler, void *userdata) {
        int result = set_handler(a);
        if (result < 0) return result;
        a->refresh_handler = handler;
        a->refresh_userdata = userdata;
        if (handler && a->pending_refresh && !a->pending_handled) {
                a->pending_handled = true;
                run_refresh(a, a->pending_refresh);
        }
        return 0;
}

int exponea_auth_set_flush_handler(exponea_auth *a, exponea_auth_flush_handler_t handler, void *userdata) {
        int result = set_handler(a);
        if (result < 0) return result;
        a->flush_handler = handler;
        a->flush_userdata = userdata;
        return 0;
}

int exponea_auth_set_cleared_handler(exponea_auth *a, exponea_auth_cleared_handler_t handler, void *userdata) {
        int result = set_handler(a);
        if (result < 0) return result;
        a->cleared_handler = handler;
        a->cleared_userdata = userdata;
        return 0;
}

int exponea_auth_set_token_refreshed_handler(exponea_auth *a, exponea_auth_token_refreshed_handler_t handler,
                                             void *userdata) {
        int result = set_handler(a);
        if (result < 0) return result;
        a->refreshed_handler = handler;
        a->refreshed_userdata = userdata;
        return 0;
}

int exponea_auth_set_coalescing(exponea_auth *a, int coalesce) {
        if (!a) return -EINVAL;
        a->coalesce = coalesce != 0;
        return 0;
}

int exponea_auth_flush_done(exponea_auth *a) {
        if (!a) return -EINVAL;
        if (a->pending_flush_count == 0) return -ENOENT;
        int result = 0;
        for (unsigned i = 0; i < a->pending_flush_count; i++) {
                int r = acknowledge_flush(a, a->pending_flushes[i]);
                if (r < 0 && result == 0) result = r;
                free(a->pending_flushes[i]);
        }
        a->pending_flush_count = 0;
        return result;
}

int exponea_auth_release_refresh(exponea_auth *a) { return a ? release_claim(a) : -EINVAL; }

int exponea_auth_renew_refresh(exponea_auth *a) {
        if (!a) return -EINVAL;
        if (!a->claim) return 0;
        int granted = claim_call(a, a->claim, a->claim_generation, true, NULL);
        if (granted == 0) end_claim(a);
        return granted;
}

int exponea_auth_get_refresh_error(exponea_auth *a, uint64_t *ret_generation) {
        if (!a) return -EINVAL;
        if (ret_generation) *ret_generation = a->supplied_generation;
        return a->supplied_error;
}

const char *exponea_auth_refresh_get_reason(const exponea_auth_refresh *r) { return r ? r->reason : NULL; }

uint64_t exponea_auth_refresh_get_generation(const exponea_auth_refresh *r) { return r ? r->generation : 0; }

uint64_t exponea_auth_refresh_get_lease(const exponea_auth_refresh *r) { return r ? r->lease_usec : 0; }

size_t exponea_auth_refresh_get_customer_ids(const exponea_auth_refresh *r, const char *const **keys,
                                             const char *const **values) {
        if (!r) return 0;
        if (keys) *keys = (const char *const *)r->keys;
        if (values) *values = (const char *const *)r->values;
        return r->id_count;
}

_Pragma("GCC visibility pop")

/* SPDX-License-Identifier: Apache-2.0 */
/* The client's parts, shared by the library's files; nothing here is exported (the version script).
 *
 * The files call one way, each only those above it here: json.c and errors.c (leaves); connection.c (a socket
 * to the daemon); loop.c (the loop thread, and the events layer's hooks); call.c (one call); token.c and
 * clear.c (the calls of the API); events.c (the subscription, the claim, the handlers); client.c (open and
 * close). `make -C libexponea-auth check-layers` fails when a file calls one below it in a circle. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "exponea-auth.h"
#include "json.h"

/* The daemon's bound on one message (Varlink frame, without its NUL). */
#define MESSAGE_MAX (64 * 1024)
/* Idle connections kept for the next calls. */
#define IDLE_MAX 4
#define USEC_PER_SEC 1000000ULL
#define USEC_PER_MSEC 1000ULL
#define NEVER UINT64_MAX

/* ---- connection.c: time ---- */

/* CLOCK_MONOTONIC, in microseconds. */
uint64_t now_usec(void);
/* now + usec, saturating at NEVER. */
uint64_t deadline_after(uint64_t usec);
/* Milliseconds left until `deadline`, rounded up, for poll(2); -1 for NEVER. */
int poll_timeout(uint64_t deadline);

/* ---- connection.c: one Unix socket to the daemon, its server checked, its replies framed. ---- */

typedef enum trusted_server {
        TRUST_SYSTEM, /* the system daemon's socket: root, exponea-authd */
        TRUST_USER,   /* the user daemon's socket: this user, root */
        TRUST_EITHER, /* a socket given: this user, root, exponea-authd */
} trusted_server;

typedef struct connection {
        int fd;
        char *buffer; /* MESSAGE_MAX + 1 bytes: what was read and not yet taken */
        size_t have;  /* bytes in buffer */
        size_t taken; /* bytes of buffer already returned as messages */
        uint64_t receive_timeout_ms; /* SO_RCVTIMEO as last set; 0 before */
} connection;

/* Connects to `path` and checks its server; keeps trying a daemon that is away until `unavailable_deadline`, and
 * fails with -ETIMEDOUT past `deadline`. */
int connection_open(connection **ret, const char *path, trusted_server trust, uint64_t deadline,
                    uint64_t unavailable_deadline);
void connection_close(connection *c);
/* Writes all of `message` (its NUL included) by `deadline`. */
int connection_send(connection *c, const char *message, size_t length, uint64_t deadline);
/* The next message (NUL-terminated in place), blocking in read(2) until `deadline`. */
int connection_receive(connection *c, uint64_t deadline, char **ret, size_t *ret_length);
/* The next message already read, without reading: 1 and the message, or 0. */
int connection_next(connection *c, char **ret, size_t *ret_length);
/* Reads what the socket has without blocking. Returns the bytes read, 0 at end of stream, -EAGAIN, or an error. */
int connection_fill(connection *c);
/* Wipes and forgets the messages already returned (they may hold a token). */
void connection_wipe_taken(connection *c);

/* ---- The client ---- */

/* A request to refresh: the jwtError event. */
struct exponea_auth_refresh {
        uint64_t generation;
        uint64_t lease_usec; /* the claim's lease, granted before the handler runs; 0 when it runs unclaimed */
        char *reason;
        size_t id_count;
        char **keys;
        char **values;
};

typedef enum subscription_state {
        SUBSCRIPTION_OFF,     /* nothing asked for events yet */
        SUBSCRIPTION_WAITING, /* away: subscribe at reconnect_at */
        SUBSCRIPTION_ON,
} subscription_state;

struct exponea_auth {
        char *group;
        char *socket_path;
        trusted_server trust;
        uint64_t call_timeout;
        uint64_t unavailable_timeout;
        uint64_t retry_wait;

        /* Calls: idle connections, taken and given back under the lock. */
        pthread_mutex_t idle_lock;
        connection *idle[IDLE_MAX];
        unsigned idle_count;

        /* The loop thread (loop.c), and the hooks its events layer registered. */
        atomic_bool loop_started;
        pthread_t loop_thread;
        const struct loop_hooks *loop;
        /* A handler runs on the loop thread: a blocking call made from it does not serve events. */
        bool dispatching;

        /* Events: the loop thread's alone. */
        int epoll_fd;
        subscription_state subscription;
        connection *events;
        uint64_t reconnect_at;
        uint64_t backoff;

        exponea_auth_refresh_handler_t refresh_handler;
        void *refresh_userdata;
        exponea_auth_flush_handler_t flush_handler;
        void *flush_userdata;
        exponea_auth_cleared_handler_t cleared_handler;
        void *cleared_userdata;
        exponea_auth_token_refreshed_handler_t refreshed_handler;
        void *refreshed_userdata;
        bool coalesce;

        /* The last jwtError while no newer token came, and whether a handler was given it. */
        exponea_auth_refresh *pending_refresh;
        bool pending_handled;
        /* The claim this app holds, on a connection of its own, and its generation. */
        connection *claim;
        uint64_t claim_generation;
        /* The generation this app's handler still works on (EXPONEA_AUTH_REFRESH_PENDING), or NEVER. */
        uint64_t refreshing;
        /* The outcome of the library's set of the last token a refresh handler supplied, and the generation it
         * refreshed (NEVER before the first): exponea_auth_get_refresh_error(). */
        int supplied_error;
        uint64_t supplied_generation;
        /* The last generation the subscription told of (its state, a new token, a clear), or NEVER before the
         * first subscription: a subscription made again compares the group's generation with it. */
        uint64_t heard;
        /* Flushes this app was asked for and has not confirmed. */
        char *pending_flushes[8];
        unsigned pending_flush_count;
};

/* ---- loop.c: the loop thread ---- */

/* What the events layer registers when the loop thread starts: how the calls beneath it serve the client's events
 * while they wait on the loop thread, and tell it of a token stored, without calling it by name. */
typedef struct loop_hooks {
        /* The descriptor to poll for the client's events, or -1; `*ret_wake_at` gets when `service` must run
         * without one (a subscription to make again), or NEVER. */
        int (*watch)(const exponea_auth *a, uint64_t *ret_wake_at);
        /* Handles what is ready, without blocking; returns 1 when something was handled. */
        int (*service)(exponea_auth *a);
        /* This app stored a token of `generation`: its claims on older ones have ended. */
        void (*token_stored)(exponea_auth *a, uint64_t generation);
} loop_hooks;

bool on_loop_thread(const exponea_auth *a);
/* Makes this thread the loop thread, with `hooks`, unless a thread already is. */
void become_loop_thread(exponea_auth *a, const loop_hooks *hooks);
/* The hooks, when called on the loop thread; NULL elsewhere or before it started. */
const loop_hooks *loop_here(const exponea_auth *a);

/* ---- call.c: one call, on an idle connection or a new one. ---- */

/* A reply: its text (in the connection's buffer) and parsed tokens. */
typedef struct reply {
        connection *connection;
        jdoc doc;
        jtok tokens[1024];
        int parameters; /* the token index of "parameters", or -1 */
} reply;

/* Sends `message` (a finished jbuf) and reads its reply, within the call timeout plus `extra_wait`. A Varlink
 * error becomes its negative code. On the loop thread, with `serve_events`, the client's own events are handled
 * while it waits. Release the reply with reply_done(). */
int call(exponea_auth *a, const jbuf *message, uint64_t extra_wait, bool serve_events, reply *r);
/* Gives the reply's connection back (or closes it on `failed`) and wipes the reply's text. */
void reply_done(exponea_auth *a, reply *r, bool failed);
/* Starts a call's message: {"method":"com.exponea.Auth.<method>","parameters":{"group":"<group>" */
void message_begin(jbuf *b, const exponea_auth *a, const char *method);
/* Ends it: }} */
void message_end(jbuf *b);
/* Sends a call, and returns on the reply's parameters or an error: for the simple calls. */
int simple_call(exponea_auth *a, jbuf *message, uint64_t extra_wait, bool serve_events, reply *r);

/* Opens a connection to the client's socket, as calls do. */
int client_connect(exponea_auth *a, connection **ret);

/* ---- events.c ---- */

/* Frees the client's events: its subscription, claim, pending refresh and flushes (exponea_auth_close()). */
void events_free(exponea_auth *a);

/* ---- errors.c ---- */

/* The negative code of a Varlink error name. */
int error_from_varlink(const char *name, size_t length);

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libexponea-auth: an app's view of its app group's Bloomreach stream JWT, held by exponea-authd and shared
 * with every app of the group. The Exponea SDK's token API for apps in any language, through C.
 *
 * Errors are negative errno-style codes; exponea_auth_strerror() gives the message. No call waits longer than
 * its timeout. The library never logs a token and writes one nowhere but the caller's buffer.
 *
 * Thread safety, per function below:
 *   "thread-safe"   any thread, at the same time as other calls on the same client;
 *   "loop thread"   only the thread that runs the client's events: the first to call exponea_auth_get_fd(),
 *                   exponea_auth_process(), exponea_auth_wait() or to set a handler (which subscribes), or any
 *                   one thread before that.
 * Handlers run on the loop thread, inside exponea_auth_process(), exponea_auth_wait() or a blocking call made
 * on the loop thread.
 */
#ifndef EXPONEA_AUTH_H
#define EXPONEA_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A client of one app group. Opaque. */
typedef struct exponea_auth exponea_auth;

/* The group's request for a new token, as a refresh handler sees it. Opaque; valid during the handler. */
typedef struct exponea_auth_refresh exponea_auth_refresh;

/* The largest stream JWT the daemon stores, in bytes, without the NUL. */
#define EXPONEA_AUTH_TOKEN_MAX 16384

/* Where a group's token stands (exponea_auth_preflight()). */
enum {
        EXPONEA_AUTH_STATE_NOT_PROVIDED = 0,
        EXPONEA_AUTH_STATE_EXPIRED = 1,
        EXPONEA_AUTH_STATE_EXPIRED_SOON = 2,
        EXPONEA_AUTH_STATE_VALID = 3,
};

/* Passed as a generation when a request carried no token. */
#define EXPONEA_AUTH_NO_GENERATION UINT64_MAX

/* Why an app did not confirm its flush before a clear (exponea_auth_anonymize()). */
enum {
        EXPONEA_AUTH_UNCONFIRMED_TIMED_OUT = 1,
        EXPONEA_AUTH_UNCONFIRMED_DROPPED = 2,
};

/* What a refresh handler returns. */
enum {
        /* No token: the fetch failed. The claim is released at once, so that the next request is claimed. */
        EXPONEA_AUTH_REFRESH_NONE = 0,
        /* The token is in the handler's buffer: the library sets it for the group. */
        EXPONEA_AUTH_REFRESH_SUPPLIED = 1,
        /* The fetch goes on: call exponea_auth_set_token() or exponea_auth_release_refresh() when it ends. */
        EXPONEA_AUTH_REFRESH_PENDING = 2,
};

/* What a flush handler returns. */
enum {
        /* The app has flushed: the daemon is told at once. */
        EXPONEA_AUTH_FLUSH_DONE = 0,
        /* The flush goes on: call exponea_auth_flush_done() when it ends. */
        EXPONEA_AUTH_FLUSH_PENDING = 1,
};

/* ---- Open a client: exponea_auth_open(3) ---- */

/* Makes a client of `group`; connects at its first call. `socket_path` NULL finds the socket as authctl does:
 * $EXPONEA_AUTHD_SOCKET; else the user daemon's ($XDG_RUNTIME_DIR/exponea-authd/io.socket) when it exists; else
 * the system daemon's, /run/exponea-authd/io.socket. Before it sends anything, every connection checks that the
 * server runs as root, the system user exponea-authd, or (for the user daemon's socket) this user.
 * Returns 0, -EINVAL for a group name that is not 1-128 of A-Z a-z 0-9 . _ - (no leading dot), -ENOMEM.
 * A socket path too long for a Unix socket fails the first call with -ENAMETOOLONG.
 * Thread-safe. */
int exponea_auth_open(exponea_auth **ret, const char *group, const char *socket_path);

/* Closes the client's connections (a refresh claim it holds ends with them) and frees it. NULL is allowed.
 * Returns NULL. Loop thread, with no other call on the client running. */
exponea_auth *exponea_auth_close(exponea_auth *auth);

/* The three setters return 0, or -EINVAL. */

/* How long connecting and each call may take before it fails with -ETIMEDOUT: default 5 s. A call that waits
 * by design (exponea_auth_wait_for_token(), a clear waiting for flushes) adds its own wait. Loop thread. */
int exponea_auth_set_call_timeout(exponea_auth *auth, uint64_t usec);

/* How long a call waits for a daemon that is away (not started yet, restarting) before it fails with
 * -ECONNREFUSED or -ENOENT: default 2 s. Loop thread. */
int exponea_auth_set_unavailable_timeout(exponea_auth *auth, uint64_t usec);

/* How long a failed request waits for a new token before its one retry (R19, R22): default 1 s, at most 5 s.
 * Loop thread. */
int exponea_auth_set_retry_wait(exponea_auth *auth, uint64_t usec);

/* The group, and the socket the client connects to. Thread-safe; valid until exponea_auth_close(). */
const char *exponea_auth_get_group(const exponea_auth *auth);
const char *exponea_auth_get_socket_path(const exponea_auth *auth);

/* ---- The token and the auth header: exponea_auth_get_token(3) ---- */

/* Each writes a NUL-terminated token into `buffer` and returns its length; -ENOBUFS when `size` is too small
 * (EXPONEA_AUTH_TOKEN_MAX + 1 always suffices). `ret_generation`, when not NULL, gets the group's generation: its
 * token's, or, without a token, that of the change that left it without one. */

/* The group's token, without side effects. Returns its length, or -ENOKEY when the group has none.
 * Thread-safe. */
int exponea_auth_get_token(exponea_auth *auth, char *buffer, size_t size, uint64_t *ret_generation);

/* The check before a stream request (R15-R18): the token to send, even an expired one, and its state
 * (EXPONEA_AUTH_STATE_*). When the state calls for a refresh, the group's refresh handler runs (in one app).
 * Returns the token's length, or 0 when there is none (send the request without Authorization). Thread-safe. */
int exponea_auth_preflight(exponea_auth *auth, char *buffer, size_t size, int *ret_state, uint64_t *ret_generation);

/* As exponea_auth_preflight(), written as the header's value: "Bearer <token>" (R23; EXPONEA_AUTH_TOKEN_MAX + 8
 * bytes always suffice). Returns its length, or 0 when there is no token (send no Authorization header).
 * Thread-safe. */
int exponea_auth_get_auth_header(exponea_auth *auth, char *buffer, size_t size, uint64_t *ret_generation);

/* Waits, at most `usec` (at most 5 s: -EINVAL past it), for a token of a generation newer than `after`: for a
 * request that cannot go without one (App Inbox, R24). Returns its length, or -ENOKEY when none came in time.
 * Thread-safe; on the loop thread, the client's own handlers run meanwhile. */
int exponea_auth_wait_for_token(exponea_auth *auth, uint64_t after, uint64_t usec, char *buffer, size_t size,
                                uint64_t *ret_generation);

/* ---- A request's outcome: exponea_auth_report_response(3) ---- */

/* Reports the HTTP status of a stream request sent with the token of `sent_generation`
 * (EXPONEA_AUTH_NO_GENERATION when it carried none), with the response's body (its "token_expired" is read on a
 * 401; NULL allowed), and decides the retry (R19-R22). On a 401, or a 403 without a token, the group's refresh
 * handler runs and the call waits, at most the retry wait, for the token it sets; a token set meanwhile is
 * taken at once. Returns the length of the token to retry with, in `buffer`; 0 when the request is not retried
 * (any other status, a 403 with a valid token, or no token came in time). Thread-safe; on the loop thread, the
 * client's own handlers run meanwhile. */
int exponea_auth_report_response(exponea_auth *auth, int http_status, const void *body, size_t body_size,
                                 uint64_t sent_generation, char *buffer, size_t size, uint64_t *ret_generation);

/* ---- Set and identify: exponea_auth_set_token(3) ---- */

/* Stores `token` for the whole group; every app hears it (R4, R6), even when it has expired. Ends this app's
 * refresh claim. Returns 0; -EBADMSG when it is not a stream JWT (nothing stored); -EIO when the store could not
 * be written (the previous token is kept). Thread-safe. */
int exponea_auth_set_token(exponea_auth *auth, const char *token, uint64_t *ret_generation);

/* Stores the customer's `count` ids (`keys[i]` = `values[i]`) and, when not NULL, the token; without a token the
 * stored one is cleared (R7). Thread-safe. */
int exponea_auth_identify_customer(exponea_auth *auth, const char *const *keys, const char *const *values,
                                   size_t count, const char *token, uint64_t *ret_generation);

/* ---- Anonymize, stop, clear: exponea_auth_anonymize(3) ---- */

/* Asks every app of the group to flush (each one's flush handler), then clears token and identity; returns when
 * both are done (R8). `ret_asked` gets how many apps were asked. The apps that did not confirm within the
 * daemon's bound are returned: the count, and the first `max` of them in `pids` and `reasons`
 * (EXPONEA_AUTH_UNCONFIRMED_*); either may be NULL with `max` 0. The group is cleared either way. Thread-safe;
 * on the loop thread, this app's own flush handler runs meanwhile. */
int exponea_auth_anonymize(exponea_auth *auth, unsigned *ret_asked, pid_t *pids, int *reasons, size_t max);

/* As exponea_auth_anonymize(), when the integration stops (R8). */
int exponea_auth_stop_integration(exponea_auth *auth, unsigned *ret_asked, pid_t *pids, int *reasons, size_t max);

/* The wipe: clears the whole group's token and identity at once, without a flush; every app hears it (its
 * cleared handler) and drops its own customer data, unsent events included (R9). Thread-safe. */
int exponea_auth_clear_local_customer_data(exponea_auth *auth);

/* Runs when the group is about to be cleared: flush pending events with the current token. Returns
 * EXPONEA_AUTH_FLUSH_DONE or EXPONEA_AUTH_FLUSH_PENDING. Without a handler the app agrees at once.
 * Setting a handler (this one, and the cleared, refresh and token-refreshed ones) subscribes to the group's events
 * and makes the calling thread the loop thread. Each setter returns 0, or a negative error. Loop thread. */
typedef int (*exponea_auth_flush_handler_t)(exponea_auth *auth, void *userdata);
int exponea_auth_set_flush_handler(exponea_auth *auth, exponea_auth_flush_handler_t handler, void *userdata);

/* A pending flush has ended. Returns 0, or -ENOENT when none was pending. Loop thread. */
int exponea_auth_flush_done(exponea_auth *auth);

/* Runs when the group was cleared; `cause` is "anonymize", "stopIntegration" or "clearLocalCustomerData". */
typedef void (*exponea_auth_cleared_handler_t)(exponea_auth *auth, const char *cause, void *userdata);
int exponea_auth_set_cleared_handler(exponea_auth *auth, exponea_auth_cleared_handler_t handler, void *userdata);

/* ---- The refresh handler: exponea_auth_set_refresh_handler(3) ---- */

/* Runs when the group's token must be refreshed, in one app of the group only (R28): the app that claims the
 * refresh. The claim dies with the process. To supply the token at once, write it NUL-terminated into `token`
 * (`size` bytes, EXPONEA_AUTH_TOKEN_MAX + 1) and return EXPONEA_AUTH_REFRESH_SUPPLIED: the library sets it once the
 * handler has returned, and when that fails, releases the claim and keeps the error for
 * exponea_auth_get_refresh_error(). Return EXPONEA_AUTH_REFRESH_NONE when the fetch failed (the claim is
 * released), or EXPONEA_AUTH_REFRESH_PENDING when it goes on. A request for a refresh that came before the handler
 * was set is handed to it at once. Loop thread (all four). */
typedef int (*exponea_auth_refresh_handler_t)(exponea_auth *auth, const exponea_auth_refresh *refresh, char *token,
                                              size_t size, void *userdata);
int exponea_auth_set_refresh_handler(exponea_auth *auth, exponea_auth_refresh_handler_t handler, void *userdata);

/* Whether only the app that claims the refresh runs its handler (1, the default; any non-zero value), or every app
 * (0). Returns 0, or -EINVAL when `auth` is NULL. Loop thread. */
int exponea_auth_set_coalescing(exponea_auth *auth, int coalesce);

/* Gives up this app's refresh claim (its pending fetch failed): the next request is claimed at once by any app.
 * Returns 1 when a claim was released, 0 when the app held none. */
int exponea_auth_release_refresh(exponea_auth *auth);

/* Extends this app's claim by another lease, for a slow fetch. Returns 1 when extended, 0 when the claim had
 * ended (a token was set, or its lease ran out and another app holds it). */
int exponea_auth_renew_refresh(exponea_auth *auth);

/* The outcome of the library's set of the token the refresh handler last supplied (EXPONEA_AUTH_REFRESH_SUPPLIED):
 * 0 when it was stored, or when no handler has supplied one yet; else the negative code exponea_auth_set_token()
 * gave for it (-EBADMSG when it is not a stream JWT, -EIO when the store could not be written, or an error of
 * reaching the daemon), and the claim was released, so that the next request is claimed. `ret_generation`, when
 * not NULL, gets the generation that handler refreshed (EXPONEA_AUTH_NO_GENERATION when none supplied a token
 * yet). Read it once exponea_auth_process() or exponea_auth_wait() has returned, or in the handler's next run;
 * the next token supplied replaces it. Since libexponea-auth 1.1. Loop thread. */
int exponea_auth_get_refresh_error(exponea_auth *auth, uint64_t *ret_generation);

/* The refresh's fields, read inside the handler (the loop thread). Why the token must be refreshed: "notProvided",
 * "invalid", "expired", "expiredSoon", "insufficient" or a reason a later daemon adds. */
const char *exponea_auth_refresh_get_reason(const exponea_auth_refresh *refresh);
/* The generation being refreshed. */
uint64_t exponea_auth_refresh_get_generation(const exponea_auth_refresh *refresh);
/* How long this app's claim lasts, in microseconds (exponea-authd's --refresh-lease, or the group's
 * RefreshLeaseSec=): a fetch that goes on (EXPONEA_AUTH_REFRESH_PENDING) calls exponea_auth_renew_refresh()
 * before it ends, or loses the claim to another app. 0 when the handler runs without a claim (coalescing off,
 * or the daemon could not be asked). Since libexponea-auth 1.1. */
uint64_t exponea_auth_refresh_get_lease(const exponea_auth_refresh *refresh);
/* The customer to fetch a token for: the number of ids; `keys` and `values`, when not NULL, get arrays of them. */
size_t exponea_auth_refresh_get_customer_ids(const exponea_auth_refresh *refresh, const char *const **keys,
                                             const char *const **values);

/* ---- Token refreshed: exponea_auth_set_token_refreshed_handler(3) ---- */

/* Runs for every token set for the group, by any app, even an expired one (R6); a token set while the subscription
 * was down is heard once it is made again. */
typedef void (*exponea_auth_token_refreshed_handler_t)(exponea_auth *auth, uint64_t generation, void *userdata);
int exponea_auth_set_token_refreshed_handler(exponea_auth *auth, exponea_auth_token_refreshed_handler_t handler,
                                             void *userdata);

/* ---- Events in the app's loop: exponea_auth_get_fd(3) ---- */

/* The descriptor to watch for the group's events; the first call subscribes. It stays the same across daemon
 * restarts (the client subscribes again by itself). Returns it, or a negative error. Loop thread. */
int exponea_auth_get_fd(exponea_auth *auth);

/* The poll(2) events to watch the descriptor for (POLLIN). Loop thread. */
int exponea_auth_get_events(exponea_auth *auth);

/* When exponea_auth_process() must run even without an event, in CLOCK_MONOTONIC microseconds; UINT64_MAX when
 * never (a subscription that holds wakes nothing). Returns 0. Loop thread. */
int exponea_auth_get_timeout(exponea_auth *auth, uint64_t *ret_usec);

/* Handles what is ready without waiting: events, handlers, subscribing again. One call is enough whenever the
 * descriptor is readable or the timeout has come; it need not be called until it returns 0. Returns 1 when it
 * handled something, 0 when nothing was ready, or a negative error: -EINVAL or -EBUSY (not the loop thread) are
 * the caller's mistakes; -EMFILE, -ENFILE or -ENOMEM (the first call could not make the descriptor) may pass.
 * Losing the daemon is no error. Loop thread. */
int exponea_auth_process(exponea_auth *auth);

/* The blocking form: waits at most `usec` (UINT64_MAX: no bound) for events and handles them. Returns as
 * exponea_auth_process(). Loop thread. */
int exponea_auth_wait(exponea_auth *auth, uint64_t usec);

/* ---- Errors: exponea_auth_strerror(3) ---- */

/* The message for a negative code of this library. Thread-safe; the string is static. */
const char *exponea_auth_strerror(int error);

#ifdef __cplusplus
}
#endif

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The calls about the token: get, pre-flight, wait, the retry decision, set and identify. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Copies the string at `index` of the reply into `buffer`; returns its length. */
static int copy_token(const reply *r, int index, char *buffer, size_t size) {
        if (json_is(&r->doc, index, JSON_NULL) || index < 0) return -ENOKEY;
        if (!buffer) return -EINVAL;
        return json_string(&r->doc, index, buffer, size);
}

static void read_generation(const reply *r, uint64_t *ret) {
        uint64_t generation = 0;
        if (ret && json_u64(&r->doc, json_get(&r->doc, r->parameters, "generation"), &generation) == 0)
                *ret = generation;
}

/* Makes a call and reads its token and generation: GetToken, WaitForToken. */
static int token_call(exponea_auth *a, jbuf *message, uint64_t extra_wait, bool serve_events, char *buffer,
                      size_t size, uint64_t *ret_generation) {
        reply r;
        int result = simple_call(a, message, extra_wait, serve_events, &r);
        if (result < 0) return result;
        read_generation(&r, ret_generation);
        result = copy_token(&r, json_get(&r.doc, r.parameters, "token"), buffer, size);
        reply_done(a, &r, false);
        return result;
}

_Pragma("GCC visibility push(default)")

int exponea_auth_get_token(exponea_auth *a, char *buffer, size_t size, uint64_t *ret_generation) {
        if (!a || !buffer) return -EINVAL;
        jbuf message = {0};
        message_begin(&message, a, "GetToken");
        return token_call(a, &message, 0, false, buffer, size, ret_generation);
}

int exponea_auth_preflight(exponea_auth *a, char *buffer, size_t size, int *ret_state, uint64_t *ret_generation) {
        if (!a || !buffer) return -EINVAL;
        jbuf message = {0};
        message_begin(&message, a, "Preflight");
        reply r;
        int result = simple_call(a, &message, 0, false, &r);
        if (result < 0) return result;
        read_generation(&r, ret_generation);
        if (ret_state) {
                int state = json_get(&r.doc, r.parameters, "state");
                *ret_state = json_equals(&r.doc, state, "valid")         ? EXPONEA_AUTH_STATE_VALID
                             : json_equals(&r.doc, state, "expiredSoon") ? EXPONEA_AUTH_STATE_EXPIRED_SOON
                             : json_equals(&r.doc, state, "expired")     ? EXPONEA_AUTH_STATE_EXPIRED
                                                                         : EXPONEA_AUTH_STATE_NOT_PROVIDED;
        }
        result = copy_token(&r, json_get(&r.doc, r.parameters, "token"), buffer, size);
        reply_done(a, &r, false);
        if (result == -ENOKEY) {
                buffer[0] = 0;
                return 0;
        }
        return result;
}

int exponea_auth_get_auth_header(exponea_auth *a, char *buffer, size_t size, uint64_t *ret_generation) {
        static const char prefix[] = "Bearer ";
        if (!a || !buffer || size < sizeof prefix) return buffer && size ? -ENOBUFS : -EINVAL;
        size_t skip = sizeof prefix - 1;
        int length = exponea_auth_preflight(a, buffer + skip, size - skip, NULL, ret_generation);
        if (length <= 0) {
                buffer[0] = 0;
                return length;
        }
        memcpy(buffer, prefix, skip);
        return length + (int)skip;
}

int exponea_auth_wait_for_token(exponea_auth *a, uint64_t after, uint64_t usec, char *buffer, size_t size,
                                uint64_t *ret_generation) {
        /* Refused past 5 s, as exponea_auth_set_retry_wait() refuses it: not shortened without a word. */
        if (!a || !buffer || usec > 5 * USEC_PER_SEC) return -EINVAL;
        uint64_t ms = usec / USEC_PER_MSEC;
        jbuf message = {0};
        message_begin(&message, a, "WaitForToken");
        jbuf_raw(&message, ",\"after\":");
        jbuf_u64(&message, after);
        jbuf_raw(&message, ",\"timeoutMs\":");
        jbuf_u64(&message, ms);
        return token_call(a, &message, ms * USEC_PER_MSEC, true, buffer, size, ret_generation);
}

/* Whether a 401's body is a JSON object with "token_expired": true (R19). */
static bool says_expired(const void *body, size_t size) {
        if (!body || size == 0 || size > MESSAGE_MAX) return false;
        jtok tokens[256];
        jdoc doc = {.tokens = tokens, .capacity = sizeof tokens / sizeof *tokens};
        return json_parse(&doc, body, size) == 0 && json_is(&doc, json_get(&doc, 0, "token_expired"), JSON_TRUE);
}

int exponea_auth_report_response(exponea_auth *a, int http_status, const void *body, size_t body_size,
                                 uint64_t sent_generation, char *buffer, size_t size, uint64_t *ret_generation) {
        if (!a || !buffer || size == 0) return -EINVAL;
        buffer[0] = 0;
        if (http_status != 401 && http_status != 403) return 0;
        jbuf message = {0};
        message_begin(&message, a, "ReportAuthFailure");
        jbuf_raw(&message, ",\"status\":");
        jbuf_i64(&message, http_status);
        jbuf_raw(&message, ",\"generation\":");
        if (sent_generation == EXPONEA_AUTH_NO_GENERATION)
                jbuf_raw(&message, "null");
        else
                jbuf_u64(&message, sent_generation);
        if (http_status == 401)
                jbuf_raw(&message, says_expired(body, body_size) ? ",\"tokenExpired\":true" : ",\"tokenExpired\":false");
        reply r;
        int result = simple_call(a, &message, 0, false, &r);
        if (result < 0) return result;
        bool retry = json_is(&r.doc, json_get(&r.doc, r.parameters, "retry"), JSON_TRUE);
        int reason = json_get(&r.doc, r.parameters, "reason");
        bool handler_runs = reason >= 0 && !json_is(&r.doc, reason, JSON_NULL);
        reply_done(a, &r, false);
        if (!retry) return 0; /* R21, or not an authorization failure */

        uint64_t after = sent_generation;
        if (!handler_runs || after == EXPONEA_AUTH_NO_GENERATION) {
                /* R19: replaced since the request went out: retry at once with the new token. Or the request carried
                 * none: the current one, if set meanwhile, else the generation to wait past. */
                uint64_t current = 0;
                result = exponea_auth_get_token(a, buffer, size, &current);
                if (result >= 0 && ret_generation) *ret_generation = current;
                if (result != -ENOKEY) return result;
                if (!handler_runs) return 0;
                after = current;
        }
        /* R19, R20, R22: wait for the token the handler sets, ending as soon as it is set. */
        result = exponea_auth_wait_for_token(a, after, a->retry_wait, buffer, size, ret_generation);
        return result == -ENOKEY ? 0 : result;
}

int exponea_auth_set_token(exponea_auth *a, const char *token, uint64_t *ret_generation) {
        if (!a || !token) return -EINVAL;
        if (strlen(token) > EXPONEA_AUTH_TOKEN_MAX) return -EBADMSG;
        jbuf message = {.secret = true};
        message_begin(&message, a, "SetToken");
        jbuf_raw(&message, ",\"token\":");
        jbuf_string(&message, token);
        reply r;
        uint64_t generation = 0;
        int result = simple_call(a, &message, 0, false, &r);
        if (result < 0) return result;
        read_generation(&r, &generation);
        reply_done(a, &r, false);
        if (ret_generation) *ret_generation = generation;
        /* This app's claim on an older token has ended; the daemon ended it already. */
        const loop_hooks *loop = loop_here(a);
        if (loop) loop->token_stored(a, generation);
        return 0;
}

int exponea_auth_identify_customer(exponea_auth *a, const char *const *keys, const char *const *values, size_t count,
                                   const char *token, uint64_t *ret_generation) {
        if (!a || (count && (!keys || !values))) return -EINVAL;
        if (token && strlen(token) > EXPONEA_AUTH_TOKEN_MAX) return -EBADMSG;
        jbuf message = {.secret = token != NULL};
        message_begin(&message, a, "IdentifyCustomer");
        jbuf_raw(&message, ",\"customerIds\":{");
        for (size_t i = 0; i < count; i++) {
                if (!keys[i] || !values[i]) {
                        jbuf_free(&message);
                        return -EINVAL;
                }
                if (i) jbuf_raw(&message, ",");
                jbuf_string(&message, keys[i]);
                jbuf_raw(&message, ":");
                jbuf_string(&message, values[i]);
        }
        jbuf_raw(&message, "},\"token\":");
        if (token)
                jbuf_string(&message, token);
        else
                jbuf_raw(&message, "null");
        reply r;
        int result = simple_call(a, &message, 0, false, &r);
        if (result < 0) return result;
        read_generation(&r, ret_generation);
        reply_done(a, &r, false);
        return 0;
}

_Pragma("GCC visibility pop")

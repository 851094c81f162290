/* SPDX-License-Identifier: Apache-2.0 */
/* Anonymize, stop and clear: the calls that end a customer's data in the group. */
#include <errno.h>
#include <string.h>

#include "internal.h"

/* How much longer than the call timeout a clear may wait for the apps' flushes (the daemon's own bound, its
 * --flush-timeout, is 2 s by default). */
#define FLUSH_WAIT (30 * USEC_PER_SEC)

static int clear_with_flush(exponea_auth *a, const char *method, unsigned *ret_asked, pid_t *pids, int *reasons,
                            size_t max) {
        if (!a || (max && (!pids || !reasons))) return -EINVAL;
        jbuf message = {0};
        message_begin(&message, a, method);
        reply r;
        int result = simple_call(a, &message, FLUSH_WAIT, true, &r);
        if (result < 0) return result;
        uint64_t asked = 0;
        json_u64(&r.doc, json_get(&r.doc, r.parameters, "asked"), &asked);
        if (ret_asked) *ret_asked = (unsigned)asked;
        int list = json_get(&r.doc, r.parameters, "unconfirmed");
        uint32_t count = json_size(&r.doc, list);
        for (uint32_t i = 0; i < count && i < max; i++) {
                int entry = json_at(&r.doc, list, i);
                uint64_t pid = 0;
                json_u64(&r.doc, json_get(&r.doc, entry, "pid"), &pid);
                pids[i] = (pid_t)pid;
                reasons[i] = json_equals(&r.doc, json_get(&r.doc, entry, "reason"), "dropped")
                                     ? EXPONEA_AUTH_UNCONFIRMED_DROPPED
                                     : EXPONEA_AUTH_UNCONFIRMED_TIMED_OUT;
        }
        reply_done(a, &r, false);
        return (int)count;
}

_Pragma("GCC visibility push(default)")

int exponea_auth_anonymize(exponea_auth *a, unsigned *ret_asked, pid_t *pids, int *reasons, size_t max) {
        return clear_with_flush(a, "Anonymize", ret_asked, pids, reasons, max);
}

int exponea_auth_stop_integration(exponea_auth *a, unsigned *ret_asked, pid_t *pids, int *reasons, size_t max) {
        return clear_with_flush(a, "StopIntegration", ret_asked, pids, reasons, max);
}

int exponea_auth_clear_local_customer_data(exponea_auth *a) {
        if (!a) return -EINVAL;
        jbuf message = {0};
        message_begin(&message, a, "ClearLocalCustomerData");
        reply r;
        int result = simple_call(a, &message, 0, false, &r);
        if (result < 0) return result;
        reply_done(a, &r, false);
        return 0;
}

_Pragma("GCC visibility pop")

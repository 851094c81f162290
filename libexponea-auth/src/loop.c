/* SPDX-License-Identifier: Apache-2.0 */
/* The loop thread: which thread it is, and the hooks by which the events layer (events.c), once it runs there, lets
 * the calls beneath it serve the client's events while they wait and hear of a token this app stored. The calls
 * never name the events layer: the files call one way, connection, loop, call, token and clear, events, client. */
#include "internal.h"

bool on_loop_thread(const exponea_auth *a) {
        return atomic_load_explicit(&a->loop_started, memory_order_acquire) &&
               pthread_equal(a->loop_thread, pthread_self());
}

void become_loop_thread(exponea_auth *a, const loop_hooks *hooks) {
        if (atomic_load_explicit(&a->loop_started, memory_order_acquire)) return;
        a->loop_thread = pthread_self();
        a->loop = hooks;
        atomic_store_explicit(&a->loop_started, true, memory_order_release);
}

const loop_hooks *loop_here(const exponea_auth *a) { return on_loop_thread(a) ? a->loop : NULL; }

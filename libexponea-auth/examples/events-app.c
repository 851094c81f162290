/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A simple program with the blocking form: no loop of its own, it waits in exponea_auth_wait() and prints the
 * group's events as its handlers see them: a token set, a flush asked for before a clear, the clear.
 *
 * Usage: events-app GROUP [--flush-later | --never-flush | --anonymize]
 *   Prints "subscribed" once it waits for events, then one line per event: "refreshed GENERATION",
 *   "flush requested" (and "flushed" when it confirms), "cleared CAUSE". By default it confirms a flush at once;
 *   with --flush-later it confirms on its next turn of the loop (EXPONEA_AUTH_FLUSH_PENDING, then
 *   exponea_auth_flush_done()); with --never-flush it never confirms, and the clear goes on without it. With
 *   --anonymize it anonymizes the group itself once subscribed: its own flush handler runs inside the call, which
 *   then prints "anonymized asked=N unconfirmed=M". Runs until it is killed.
 *
 * Build: cc events-app.c $(pkg-config --cflags --libs exponea-auth)
 */
#include <exponea-auth.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static enum { FLUSH_AT_ONCE, FLUSH_LATER, NEVER_FLUSH } flush_mode;
static bool anonymize;
static bool flush_pending;

static void on_refreshed(exponea_auth *auth, uint64_t generation, void *userdata) {
        (void)auth, (void)userdata;
        printf("refreshed %llu\n", (unsigned long long)generation);
        fflush(stdout);
}

/* Runs before anonymize or stop clear the group: the app sends its pending events with the current token. */
static int on_flush(exponea_auth *auth, void *userdata) {
        (void)auth, (void)userdata;
        printf("flush requested\n");
        if (flush_mode == FLUSH_AT_ONCE) printf("flushed\n");
        fflush(stdout);
        if (flush_mode == FLUSH_AT_ONCE) return EXPONEA_AUTH_FLUSH_DONE;
        flush_pending = flush_mode == FLUSH_LATER;
        return EXPONEA_AUTH_FLUSH_PENDING;
}

static void on_cleared(exponea_auth *auth, const char *cause, void *userdata) {
        (void)auth, (void)userdata;
        printf("cleared %s\n", cause);
        fflush(stdout);
}

int main(int argc, char **argv) {
        if (argc < 2 || argc > 3) {
                fprintf(stderr, "usage: events-app GROUP [--flush-later | --never-flush | --anonymize]\n");
                return 64;
        }
        if (argc == 3 && strcmp(argv[2], "--anonymize") == 0)
                anonymize = true;
        else if (argc == 3)
                flush_mode = strcmp(argv[2], "--flush-later") == 0 ? FLUSH_LATER : NEVER_FLUSH;

        exponea_auth *auth;
        int r = exponea_auth_open(&auth, argv[1], NULL);
        if (r >= 0) r = exponea_auth_set_token_refreshed_handler(auth, on_refreshed, NULL);
        if (r >= 0) r = exponea_auth_set_flush_handler(auth, on_flush, NULL);
        if (r >= 0) r = exponea_auth_set_cleared_handler(auth, on_cleared, NULL);
        if (r < 0) {
                fprintf(stderr, "events-app: %s\n", exponea_auth_strerror(r));
                return 1;
        }
        /* The first event is the group's state, which the library takes in itself: once it has come, the program is
         * subscribed. */
        while ((r = exponea_auth_wait(auth, UINT64_MAX)) == 0) {}
        if (r < 0) {
                fprintf(stderr, "events-app: %s\n", exponea_auth_strerror(r));
                return 1;
        }
        printf("subscribed\n");
        fflush(stdout);
        if (anonymize) {
                /* A blocking call on the loop thread: this app's own flush handler runs while it waits. */
                unsigned asked = 0;
                r = exponea_auth_anonymize(auth, &asked, NULL, NULL, 0);
                if (r < 0)
                        printf("anonymize: %s\n", exponea_auth_strerror(r));
                else
                        printf("anonymized asked=%u unconfirmed=%d\n", asked, r);
                fflush(stdout);
        }
        for (;;) {
                r = exponea_auth_wait(auth, UINT64_MAX);
                if (r < 0) fprintf(stderr, "events-app: %s\n", exponea_auth_strerror(r));
                if (flush_pending) {
                        flush_pending = false;
                        r = exponea_auth_flush_done(auth);
                        if (r < 0)
                                printf("flush not confirmed: %s\n", exponea_auth_strerror(r));
                        else
                                printf("flushed\n");
                        fflush(stdout);
                }
        }
}

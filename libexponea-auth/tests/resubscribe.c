/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A token set while an app's subscription is down must still reach its token-refreshed handler (R6): the app
 * serves its events only when told, so the test can restart the daemon and set a token in between. Built from the
 * library's sources by Tests/CLibraryTests.
 *
 * Usage: resubscribe SOCKET GROUP, then one line per turn on standard input: each turn serves the client's
 * events until its token-refreshed handler runs, at most 10 s, and prints "refreshed GENERATION" or "nothing".
 */
#include <exponea-auth.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t refreshed; /* the generation the handler last heard; 0 when it has not run this turn */

static void on_refreshed(exponea_auth *a, uint64_t generation, void *userdata) {
        (void)a, (void)userdata;
        refreshed = generation;
}

int main(int argc, char **argv) {
        exponea_auth *auth;
        if (argc != 3) {
                fprintf(stderr, "usage: resubscribe SOCKET GROUP\n");
                return 2;
        }
        int r = exponea_auth_open(&auth, argv[2], argv[1]);
        if (r == 0) r = exponea_auth_set_token_refreshed_handler(auth, on_refreshed, NULL);
        if (r >= 0) r = exponea_auth_get_fd(auth);
        if (r < 0) {
                fprintf(stderr, "open: %s\n", exponea_auth_strerror(r));
                return 1;
        }
        char line[64];
        while (fgets(line, sizeof line, stdin)) {
                refreshed = 0;
                /* Bounded: ten one-second waits, each ended by an event. */
                for (int i = 0; i < 10 && refreshed == 0; i++) {
                        /* Errors while the daemon is away are transient: the client subscribes again by itself. */
                        r = exponea_auth_wait(auth, 1000000);
                        if (r < 0) fprintf(stderr, "wait: %s\n", exponea_auth_strerror(r));
                }
                if (refreshed)
                        printf("refreshed %llu\n", (unsigned long long)refreshed);
                else
                        printf("nothing\n");
                fflush(stdout);
        }
        exponea_auth_close(auth);
        return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The header's thread-safety claims under ThreadSanitizer: eight threads make calls on one client (get, header, and
 * a set now and then) while the loop thread handles the group's events. Built with -fsanitize=thread from the
 * library's sources by Tests/CLibraryTests; a race is a TSan report and a non-zero exit.
 *
 * Usage: threads SOCKET GROUP < token
 *   Prints "ok refreshed=N", N the tokens set for the group that the loop thread's handler heard.
 */
#include <exponea-auth.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 8
#define CALLS 300
#define SET_EVERY 50

static exponea_auth *auth;
static char token[EXPONEA_AUTH_TOKEN_MAX + 2];
static int refreshed; /* the loop thread's alone */

static void on_refreshed(exponea_auth *a, uint64_t generation, void *userdata) {
        (void)a, (void)generation, (void)userdata;
        refreshed++;
}

static void *calls(void *argument) {
        long id = (long)argument;
        char buffer[EXPONEA_AUTH_TOKEN_MAX + 8];
        uint64_t generation;
        for (int i = 0; i < CALLS; i++) {
                int r = id == 0 && i % SET_EVERY == 0 ? exponea_auth_set_token(auth, token, &generation)
                        : i % 2                       ? exponea_auth_get_token(auth, buffer, sizeof buffer, &generation)
                                                      : exponea_auth_get_auth_header(auth, buffer, sizeof buffer, &generation);
                if (r < 0) {
                        fprintf(stderr, "thread %ld: %s\n", id, exponea_auth_strerror(r));
                        exit(1);
                }
        }
        return NULL;
}

int main(int argc, char **argv) {
        if (argc != 3 || !fgets(token, sizeof token, stdin)) return 64;
        token[strcspn(token, "\n")] = 0;
        /* A token before the threads ask for it; then subscribed (the group's state event came) before they set any. */
        if (exponea_auth_open(&auth, argv[2], argv[1]) < 0 || exponea_auth_set_token(auth, token, NULL) < 0 ||
            exponea_auth_set_token_refreshed_handler(auth, on_refreshed, NULL) < 0 || exponea_auth_wait(auth, 5000000) != 1)
                return 2;
        pthread_t threads[THREADS];
        for (long i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, calls, (void *)i);
        /* The loop thread, meanwhile: events as they come. */
        for (int i = 0; i < 100; i++) exponea_auth_wait(auth, 10000);
        for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
        /* The last events: every set's tokenRefreshed, each within a moment of its call. */
        while (refreshed < CALLS / SET_EVERY && exponea_auth_wait(auth, 2000000) > 0) {}
        printf("ok refreshed=%d\n", refreshed);
        exponea_auth_close(auth);
        return 0;
}

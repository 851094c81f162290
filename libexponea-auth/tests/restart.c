/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Calls across daemon restarts: four threads share one client, and each makes one call per round (two get the
 * token, two set it), all at once, so the client keeps up to four idle connections. The test restarts the daemon
 * between rounds; every call of every round must succeed (the library's promise: a call made after the daemon is
 * back connects again, and waits for a daemon that restarts). Built from the library's sources by
 * Tests/CLibraryTests.
 *
 * Usage: restart SOCKET GROUP < token, then one line per round on standard input.
 *   Prints, for each round, "round N:" and each thread's result (0 for success, or a negative errno).
 */
#include <exponea-auth.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4

static exponea_auth *auth;
static char token[EXPONEA_AUTH_TOKEN_MAX + 2];
static pthread_barrier_t start;

static void *call(void *argument) {
        long id = (long)argument;
        char buffer[EXPONEA_AUTH_TOKEN_MAX + 8];
        uint64_t generation;
        /* Together: each thread takes a connection of its own, so several are idle at the next restart. */
        pthread_barrier_wait(&start);
        int r = id % 2 ? exponea_auth_set_token(auth, token, &generation)
                       : exponea_auth_get_token(auth, buffer, sizeof buffer, &generation);
        return (void *)(long)(r < 0 ? r : 0); /* get_token returns the token's length */
}

int main(int argc, char **argv) {
        if (argc != 3 || !fgets(token, sizeof token, stdin)) {
                fprintf(stderr, "usage: restart SOCKET GROUP < token\n");
                return 2;
        }
        token[strcspn(token, "\n")] = 0;
        int r = exponea_auth_open(&auth, argv[2], argv[1]);
        if (r < 0) {
                fprintf(stderr, "open: %s\n", exponea_auth_strerror(r));
                return 1;
        }
        uint64_t generation;
        if ((r = exponea_auth_set_token(auth, token, &generation)) < 0) {
                fprintf(stderr, "set: %s\n", exponea_auth_strerror(r));
                return 1;
        }
        char line[64];
        for (int round = 0; fgets(line, sizeof line, stdin); round++) {
                pthread_t threads[THREADS];
                pthread_barrier_init(&start, NULL, THREADS);
                for (long i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, call, (void *)i);
                printf("round %d:", round);
                for (int i = 0; i < THREADS; i++) {
                        void *result;
                        pthread_join(threads[i], &result);
                        printf(" %ld", (long)result);
                }
                printf("\n");
                fflush(stdout);
                pthread_barrier_destroy(&start);
        }
        exponea_auth_close(auth);
        return 0;
}

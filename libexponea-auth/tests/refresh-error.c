/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A token a refresh handler supplies (EXPONEA_AUTH_REFRESH_SUPPLIED) is set by the library after the handler has
 * returned; when that set fails, the app learns it from exponea_auth_get_refresh_error(). Built from the library's
 * sources by Tests/CLibraryTests.
 *
 * Usage: refresh-error SOCKET GROUP < tokens (two lines: an expired stream JWT, then a valid one)
 *   Round 1: the group has no token; a pre-flight asks for one, and the handler supplies "not.a-jwt".
 *   Round 2: the expired token is set; a pre-flight asks for a new one, and the handler supplies the valid token.
 *   Before the rounds and after each, prints "error CODE generation GENERATION" as
 *   exponea_auth_get_refresh_error() gives them (GENERATION -1 for EXPONEA_AUTH_NO_GENERATION), and after each
 *   round "token LENGTH" as exponea_auth_get_token() gives it.
 */
#include <exponea-auth.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *supply; /* what the handler supplies this round */
static int runs;           /* the handler's runs this round */

static int on_refresh(exponea_auth *a, const exponea_auth_refresh *refresh, char *token, size_t size,
                      void *userdata) {
        (void)a, (void)refresh, (void)userdata;
        runs++;
        snprintf(token, size, "%s", supply);
        return EXPONEA_AUTH_REFRESH_SUPPLIED;
}

static void print_error(exponea_auth *a) {
        uint64_t generation = 0;
        int error = exponea_auth_get_refresh_error(a, &generation);
        printf("error %d generation %lld\n", error,
               generation == EXPONEA_AUTH_NO_GENERATION ? -1LL : (long long)generation);
}

/* Asks for a refresh with a pre-flight, and serves the events until the handler has run: at most ten waits of a
 * second, each ended by an event. */
static int round_of(exponea_auth *a, const char *token) {
        char buffer[EXPONEA_AUTH_TOKEN_MAX + 1];
        supply = token;
        runs = 0;
        int r = exponea_auth_preflight(a, buffer, sizeof buffer, NULL, NULL);
        if (r < 0) return r;
        for (int i = 0; i < 10 && runs == 0; i++)
                if ((r = exponea_auth_wait(a, 1000000)) < 0) return r;
        if (runs == 0) return -1;
        print_error(a);
        printf("token %d\n", exponea_auth_get_token(a, buffer, sizeof buffer, NULL));
        return 0;
}

int main(int argc, char **argv) {
        static char expired[EXPONEA_AUTH_TOKEN_MAX + 2], valid[EXPONEA_AUTH_TOKEN_MAX + 2];
        if (argc != 3 || !fgets(expired, sizeof expired, stdin) || !fgets(valid, sizeof valid, stdin)) return 64;
        expired[strcspn(expired, "\n")] = 0;
        valid[strcspn(valid, "\n")] = 0;
        exponea_auth *a;
        int r = exponea_auth_open(&a, argv[2], argv[1]);
        if (r == 0) r = exponea_auth_set_refresh_handler(a, on_refresh, NULL);
        /* Subscribed once the group's state has come. */
        if (r == 0) r = exponea_auth_wait(a, 5000000) == 1 ? 0 : -1;
        if (r == 0) print_error(a);
        if (r == 0) r = round_of(a, "not.a-jwt");
        if (r == 0) r = exponea_auth_set_token(a, expired, NULL);
        if (r == 0) r = round_of(a, valid);
        fflush(stdout);
        if (r < 0) fprintf(stderr, "refresh-error: %s\n", exponea_auth_strerror(r));
        exponea_auth_close(a);
        return r < 0 ? 1 : 0;
}

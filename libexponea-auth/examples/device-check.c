/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device-check: the installed library against a running daemon, as scripts/device-test runs it on a device
 * (cc device-check.c $(pkg-config --cflags --libs exponea-auth)).
 *
 * Usage: device-check GROUP [SOCKET] < token
 *
 * Stores the token read from standard input for GROUP (exponea_auth_set_token()), reads it back with
 * exponea_auth_get_token() and as the Authorization header (exponea_auth_get_auth_header(), "Bearer <token>"),
 * and prints the generation. Exits 0 only when the token, the header and the three generations all match; 1 when
 * they do not; 77 when the user may not use the group (-EACCES, as authctl); 2 on any other error; 64 on wrong
 * usage. It never prints the token, and wipes its copies before it exits.
 */
#include <errno.h>
#include <exponea-auth.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static char token[EXPONEA_AUTH_TOKEN_MAX + 2];
static char got[EXPONEA_AUTH_TOKEN_MAX + 1];
static char header[EXPONEA_AUTH_TOKEN_MAX + sizeof "Bearer "];

static int failed(const char *what, int error) {
        fprintf(stderr, "device-check: %s: %s\n", what, exponea_auth_strerror(error));
        return error == -EACCES ? 77 : 2;
}

static int check(exponea_auth *auth) {
        uint64_t set_generation = 0, get_generation = 0, header_generation = 0;
        size_t length = strlen(token);
        int r;

        r = exponea_auth_set_token(auth, token, &set_generation);
        if (r < 0) return failed("exponea_auth_set_token", r);

        r = exponea_auth_get_token(auth, got, sizeof got, &get_generation);
        if (r < 0) return failed("exponea_auth_get_token", r);
        if ((size_t) r != length || strcmp(got, token) != 0) {
                fprintf(stderr, "device-check: exponea_auth_get_token gave %d bytes, not the token set\n", r);
                return 1;
        }

        r = exponea_auth_get_auth_header(auth, header, sizeof header, &header_generation);
        if (r < 0) return failed("exponea_auth_get_auth_header", r);
        if ((size_t) r != strlen("Bearer ") + length || strncmp(header, "Bearer ", strlen("Bearer ")) != 0 ||
            strcmp(header + strlen("Bearer "), token) != 0) {
                fprintf(stderr, "device-check: exponea_auth_get_auth_header gave %d bytes, not \"Bearer \" and the "
                                "token set\n", r);
                return 1;
        }

        if (get_generation != set_generation || header_generation != set_generation) {
                fprintf(stderr, "device-check: generations differ: set %" PRIu64 ", get %" PRIu64 ", header %" PRIu64
                                "\n", set_generation, get_generation, header_generation);
                return 1;
        }
        printf("generation %" PRIu64 "\n", set_generation);
        return 0;
}

int main(int argc, char **argv) {
        exponea_auth *auth = NULL;
        size_t length;
        int r;

        if (argc < 2 || argc > 3) {
                fprintf(stderr, "usage: %s GROUP [SOCKET] < token\n", argv[0]);
                return 64;
        }

        length = fread(token, 1, sizeof token - 1, stdin);
        if (ferror(stdin)) {
                fprintf(stderr, "device-check: cannot read the token from standard input\n");
                return 2;
        }
        while (length > 0 && strchr(" \t\r\n", token[length - 1])) length--;
        token[length] = '\0';
        if (length == 0 || length > EXPONEA_AUTH_TOKEN_MAX || strlen(token) != length) {
                fprintf(stderr, "device-check: standard input holds no token of 1-%d bytes\n", EXPONEA_AUTH_TOKEN_MAX);
                return 64;
        }

        r = exponea_auth_open(&auth, argv[1], argc > 2 ? argv[2] : NULL);
        r = r < 0 ? failed("exponea_auth_open", r) : check(auth);
        exponea_auth_close(auth);

        explicit_bzero(token, sizeof token);
        explicit_bzero(got, sizeof got);
        explicit_bzero(header, sizeof header);
        return r;
}

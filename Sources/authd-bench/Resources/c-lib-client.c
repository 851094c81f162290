// SPDX-License-Identifier: Apache-2.0
// The C client of authd-bench's libexponea-auth rows: c-client.c's calls made through the library, with the same
// arguments and output (bench-client.h), so that the two differ by the library alone. authd-bench builds the
// library from libexponea-auth/ and compiles this against it at run time.
//
// Usage: c-lib-client SOCKET METHOD GROUP COUNT
//   METHOD GetToken (exponea_auth_get_token) or Preflight (exponea_auth_preflight); COUNT as c-client's.
#include <exponea-auth.h>
#include <string.h>

#include "bench-client.h"

static char token[EXPONEA_AUTH_TOKEN_MAX + 1];

struct call {
    exponea_auth *auth;
    int preflight;
};

static int call(void *context) {
    struct call *c = context;
    int state;
    int r = c->preflight ? exponea_auth_preflight(c->auth, token, sizeof token, &state, NULL)
                         : exponea_auth_get_token(c->auth, token, sizeof token, NULL);
    return r > 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: c-lib-client SOCKET METHOD GROUP COUNT\n");
        return 2;
    }
    long count = atol(argv[4]);
    struct call c = {.preflight = strcmp(argv[2], "Preflight") == 0};
    if (count < 0 || exponea_auth_open(&c.auth, argv[3], argv[1]) < 0) return 2;
    /* The first call connects, as c-client connects before its calls. */
    return run_client(count, call(&c) == 0, call, &c);
}

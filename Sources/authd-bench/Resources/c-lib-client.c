// SPDX-License-Identifier: Apache-2.0
// The C client of authd-bench's libexponea-auth rows: c-client.c's calls made through the library, with the same
// arguments and output, so that the two differ by the library alone. authd-bench builds the library from
// libexponea-auth/ and compiles this against it at run time.
//
// Usage: c-lib-client SOCKET METHOD GROUP COUNT
//   METHOD GetToken (exponea_auth_get_token) or Preflight (exponea_auth_preflight). Prints "p50_ns
//   cpu_ns_per_call switches_per_call" over COUNT calls; COUNT 1 is the one-shot client: open, one call, exit;
//   COUNT 0 makes one call and prints the process's peak RSS in KiB.
#include <exponea-auth.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* This process's peak resident set (VmHWM of /proc/self/status, in KiB): the memory of this program since its exec,
 * which getrusage's ru_maxrss is not (it keeps the peak of the process image before exec). */
static long peak_rss_kib(void) {
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (status && fgets(line, sizeof line, status))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    if (status) fclose(status);
    return kib;
}

static int compare(const void *a, const void *b) {
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

static char token[EXPONEA_AUTH_TOKEN_MAX + 1];

static int call(exponea_auth *auth, int preflight) {
    int state;
    int r = preflight ? exponea_auth_preflight(auth, token, sizeof token, &state, NULL)
                      : exponea_auth_get_token(auth, token, sizeof token, NULL);
    return r > 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: c-lib-client SOCKET METHOD GROUP COUNT\n");
        return 2;
    }
    long count = atol(argv[4]);
    int preflight = strcmp(argv[2], "Preflight") == 0;
    exponea_auth *auth;
    if (count < 0 || exponea_auth_open(&auth, argv[3], argv[1]) < 0) return 2;
    if (count == 1) return call(auth, preflight) == 0 ? 0 : 1;
    if (count == 0) {
        if (call(auth, preflight) != 0) return 1;
        printf("%ld\n", peak_rss_kib());
        return 0;
    }

    unsigned long long *samples = calloc((size_t)count, sizeof *samples);
    struct rusage before, after;
    if (call(auth, preflight) != 0) return 1; /* connects, as c-client connects before its calls */
    getrusage(RUSAGE_SELF, &before);
    for (long i = 0; i < count; i++) {
        unsigned long long start = now_ns();
        if (call(auth, preflight) != 0) {
            fprintf(stderr, "call failed\n");
            return 1;
        }
        samples[i] = now_ns() - start;
    }
    getrusage(RUSAGE_SELF, &after);
    qsort(samples, (size_t)count, sizeof *samples, compare);
    double cpu = (double)(after.ru_utime.tv_sec - before.ru_utime.tv_sec) * 1e9 +
                 (double)(after.ru_utime.tv_usec - before.ru_utime.tv_usec) * 1e3 +
                 (double)(after.ru_stime.tv_sec - before.ru_stime.tv_sec) * 1e9 +
                 (double)(after.ru_stime.tv_usec - before.ru_stime.tv_usec) * 1e3;
    double switches = (double)(after.ru_nvcsw - before.ru_nvcsw + after.ru_nivcsw - before.ru_nivcsw);
    printf("%llu %.0f %.3f\n", samples[(count + 1) / 2 - 1], cpu / (double)count, switches / (double)count);
    exponea_auth_close(auth);
    return 0;
}

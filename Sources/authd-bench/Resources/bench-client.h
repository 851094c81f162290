// SPDX-License-Identifier: Apache-2.0
// What authd-bench's C clients (c-client.c, by hand; c-lib-client.c, through libexponea-auth) share: the timing of a
// batch of calls and its output, so that the two differ by how they make a call alone. authd-bench writes it beside
// them at run time.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/resource.h>

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int compare(const void *a, const void *b) {
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
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

/* What COUNT asks for, after the first call (`first_ok`): COUNT 1, nothing more (the one-shot client); COUNT 0, the
 * peak RSS printed; more, COUNT further calls of `call` timed, then "p50_ns cpu_ns_per_call switches_per_call"
 * (CPU time and voluntary + involuntary context switches from getrusage over the calls). Returns the exit status. */
static int run_client(long count, int first_ok, int (*call)(void *), void *context) {
    if (!first_ok) return 1;
    if (count == 1) return 0;
    if (count == 0) {
        printf("%ld\n", peak_rss_kib());
        return 0;
    }
    unsigned long long *samples = calloc((size_t)count, sizeof *samples);
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    for (long i = 0; i < count; i++) {
        unsigned long long start = now_ns();
        if (call(context) != 0) {
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
    return 0;
}

// SPDX-License-Identifier: Apache-2.0
// A small blocking Varlink client in C, the anchor of authd-bench's client rows: what a client that does nothing
// but write the call and read the reply costs. authd-bench compiles it with `cc -O2` at run time.
//
// Usage: c-client SOCKET METHOD GROUP COUNT
//   Connects, makes COUNT calls of com.exponea.Auth.METHOD {"group": GROUP} one after another, and prints
//   "p50_ns cpu_ns_per_call switches_per_call" (CPU time and voluntary + involuntary context switches from
//   getrusage over the calls). COUNT 1 is the one-shot client: connect, one call, exit (nothing printed); COUNT 0
//   makes one call and prints the process's peak RSS in KiB.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

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

static char reply[1 << 20];

/* One call: write it, read until the reply's NUL. */
static int call(int fd, const char *message, size_t length) {
    if (write(fd, message, length) != (ssize_t)length) return -1;
    size_t have = 0;
    for (;;) {
        ssize_t n = read(fd, reply + have, sizeof reply - have);
        if (n <= 0) return -1;
        if (memchr(reply + have, 0, (size_t)n)) return 0;
        have += (size_t)n;
        if (have == sizeof reply) return -1;
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: c-client SOCKET METHOD GROUP COUNT\n");
        return 2;
    }
    long count = atol(argv[4]);
    char message[512];
    int length = snprintf(message, sizeof message,
                          "{\"method\":\"com.exponea.Auth.%s\",\"parameters\":{\"group\":\"%s\"}}", argv[2], argv[3]);
    if (length <= 0 || (size_t)length >= sizeof message || count < 0) return 2;
    length += 1; /* the NUL */

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof address.sun_path - 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        perror("connect");
        return 1;
    }
    if (count == 1) return call(fd, message, (size_t)length) == 0 ? 0 : 1;
    if (count == 0) {
        if (call(fd, message, (size_t)length) != 0) return 1;
        printf("%ld\n", peak_rss_kib());
        return 0;
    }

    unsigned long long *samples = calloc((size_t)count, sizeof *samples);
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    for (long i = 0; i < count; i++) {
        unsigned long long start = now_ns();
        if (call(fd, message, (size_t)length) != 0) {
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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An app with its own poll(2) loop that tracks events into a Bloomreach stream with the group's token: the
 * library's descriptor beside the app's own timer, the refresh handler fetching from the integrator's backend,
 * and the SDK's request policy (pre-flight, Authorization, one retry after a 401).
 *
 * Usage: poll-app GROUP BACKEND_PORT [REQUESTS [INTERVAL_MS]] [--hang]
 *   Sends REQUESTS (default 1) event requests to http://127.0.0.1:BACKEND_PORT/track/..., one per INTERVAL_MS
 *   (default 100). Its refresh handler fetches a token from the backend's /token. With --hang the handler claims
 *   the refresh and never ends it (to show that the claim dies with the process). Prints one line per request and
 *   per refresh, never a token; exits 0 when every request was answered 200.
 *
 * Build: cc poll-app.c $(pkg-config --cflags --libs exponea-auth)
 */
#include <errno.h>
#include <exponea-auth.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

static int backend_port;
static bool hang;
static int refreshes;

/* ---- A minimal HTTP/1.0 client, for the example's local backend only ---- */

/* Sends one request to the backend; returns the status and the body in `body`, or -1. */
static int http_post(const char *path, const char *authorization, char *body, size_t size) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)backend_port),
                                      .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
                if (fd >= 0) close(fd);
                return -1;
        }
        char request[EXPONEA_AUTH_TOKEN_MAX + 512];
        int length = snprintf(request, sizeof request,
                              "POST %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              "Accept: application/json\r\n%s%s%sContent-Length: 2\r\n\r\n{}",
                              path, authorization ? "Authorization: " : "", authorization ? authorization : "",
                              authorization ? "\r\n" : "");
        bool sent = length > 0 && (size_t)length < sizeof request && write(fd, request, (size_t)length) == length;
        explicit_bzero(request, sizeof request); /* it held the token */
        char response[EXPONEA_AUTH_TOKEN_MAX + 2048];
        size_t have = 0;
        ssize_t n;
        while (sent && have < sizeof response - 1 && (n = read(fd, response + have, sizeof response - 1 - have)) > 0)
                have += (size_t)n;
        close(fd);
        response[have] = 0;
        int status = -1;
        char *start = strstr(response, "\r\n\r\n");
        if (!sent || sscanf(response, "HTTP/%*s %d", &status) != 1 || !start) status = -1;
        snprintf(body, size, "%s", start ? start + 4 : "");
        explicit_bzero(response, sizeof response);
        return status;
}

/* ---- The refresh handler: runs in one app of the group only ---- */

static int fetch_token(exponea_auth *auth, const exponea_auth_refresh *refresh, char *token, size_t size,
                       void *userdata) {
        (void)auth, (void)userdata;
        uint64_t generation = exponea_auth_refresh_get_generation(refresh);
        refreshes++;
        if (hang) {
                printf("claimed generation %llu (%s) for a lease of %llu ms; hanging\n",
                       (unsigned long long)generation, exponea_auth_refresh_get_reason(refresh),
                       (unsigned long long)(exponea_auth_refresh_get_lease(refresh) / 1000));
                fflush(stdout);
                return EXPONEA_AUTH_REFRESH_PENDING; /* never ended: the claim lasts until this process dies */
        }
        char path[64], body[EXPONEA_AUTH_TOKEN_MAX + 256];
        snprintf(path, sizeof path, "/token?generation=%llu", (unsigned long long)generation);
        int status = http_post(path, NULL, body, sizeof body);
        /* The backend answers {"token": "<jwt>", "expiresIn": ...}: the token is the first string value. */
        char *start = strstr(body, "\"token\": \"");
        char *end = start ? strchr(start + 10, '"') : NULL;
        int result = EXPONEA_AUTH_REFRESH_NONE;
        if (status == 200 && end && (size_t)(end - start - 10) < size) {
                memcpy(token, start + 10, (size_t)(end - start - 10));
                token[end - start - 10] = 0;
                result = EXPONEA_AUTH_REFRESH_SUPPLIED;
        }
        explicit_bzero(body, sizeof body);
        printf("refresh for generation %llu (%s): %s\n", (unsigned long long)generation,
               exponea_auth_refresh_get_reason(refresh), result ? "fetched" : "failed");
        fflush(stdout);
        return result;
}

/* ---- One event request with the SDK's policy ---- */

static bool track_event(exponea_auth *auth, int number) {
        char header[EXPONEA_AUTH_TOKEN_MAX + 16], body[1024];
        uint64_t generation = EXPONEA_AUTH_NO_GENERATION;
        /* R15-R18: the pre-flight check; without a token the request goes without Authorization. */
        int length = exponea_auth_get_auth_header(auth, header, sizeof header, &generation);
        if (length < 0) {
                fprintf(stderr, "request %d: %s\n", number, exponea_auth_strerror(length));
                return false;
        }
        const char *path = "/track/u/v1/customers/events?stream_id=example";
        int status = http_post(path, length ? header : NULL, body, sizeof body);
        /* The request's line is printed whole at its end: the refresh handler may print meanwhile. */
        char line[160];
        int used = snprintf(line, sizeof line, "request %d: %d", number, status);
        if (status == 401 || status == 403) {
                /* R19-R22: the daemon decides; the handler's token comes within the retry wait. */
                char token[EXPONEA_AUTH_TOKEN_MAX + 1];
                int retry = exponea_auth_report_response(auth, status, body, strlen(body),
                                                         length ? generation : EXPONEA_AUTH_NO_GENERATION, token,
                                                         sizeof token, &generation);
                if (retry > 0) {
                        snprintf(header, sizeof header, "Bearer %s", token);
                        status = http_post(path, header, body, sizeof body);
                        snprintf(line + used, sizeof line - (size_t)used, ", retried: %d", status);
                } else if (retry < 0) {
                        snprintf(line + used, sizeof line - (size_t)used, ", no retry: %s",
                                 exponea_auth_strerror(retry));
                }
                explicit_bzero(token, sizeof token);
        }
        explicit_bzero(header, sizeof header);
        printf("%s\n", line);
        fflush(stdout);
        return status == 200;
}

int main(int argc, char **argv) {
        if (argc > 1 && strcmp(argv[argc - 1], "--hang") == 0) hang = true, argc--;
        if (argc < 3 || argc > 5) {
                fprintf(stderr, "usage: poll-app GROUP BACKEND_PORT [REQUESTS [INTERVAL_MS]] [--hang]\n");
                return 2;
        }
        backend_port = atoi(argv[2]);
        int requests = argc > 3 ? atoi(argv[3]) : 1;
        long interval_ms = argc > 4 ? atol(argv[4]) : 100;

        exponea_auth *auth = NULL;
        int r = exponea_auth_open(&auth, argv[1], NULL);
        if (r < 0) {
                fprintf(stderr, "open: %s\n", exponea_auth_strerror(r));
                return 1;
        }
        if ((r = exponea_auth_set_refresh_handler(auth, fetch_token, NULL)) < 0) {
                fprintf(stderr, "refresh handler: %s\n", exponea_auth_strerror(r));
                return 1;
        }

        /* The app's own timer: one request per interval. */
        int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
        struct itimerspec every = {.it_value = {0, 1}, .it_interval = {interval_ms / 1000, interval_ms % 1000 * 1000000}};
        timerfd_settime(timer, 0, &every, NULL);

        int sent = 0, failed = 0;
        while (sent < requests || hang) {
                struct pollfd fds[2] = {
                        {.fd = exponea_auth_get_fd(auth), .events = (short)exponea_auth_get_events(auth)},
                        {.fd = timer, .events = POLLIN},
                };
                uint64_t until;
                exponea_auth_get_timeout(auth, &until);
                struct timespec now;
                clock_gettime(CLOCK_MONOTONIC, &now);
                uint64_t now_usec = (uint64_t)now.tv_sec * 1000000 + (uint64_t)now.tv_nsec / 1000;
                int timeout = until == UINT64_MAX ? -1 : until <= now_usec ? 0 : (int)((until - now_usec + 999) / 1000);
                if (poll(fds, 2, timeout) < 0 && errno != EINTR) return 1;
                if ((r = exponea_auth_process(auth)) < 0) fprintf(stderr, "events: %s\n", exponea_auth_strerror(r));
                if (fds[1].revents & POLLIN) {
                        uint64_t ticks;
                        if (read(timer, &ticks, sizeof ticks) < 0) return 1;
                        if (sent < requests && !track_event(auth, ++sent)) failed++;
                }
        }
        printf("requests=%d ok=%d failed=%d refreshes=%d\n", sent, sent - failed, failed, refreshes);
        exponea_auth_close(auth);
        return failed ? 1 : 0;
}

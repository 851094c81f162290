/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define SYSTEM_SOCKET "/run/exponea-authd/io.socket"

/* 1-128 of A-Z a-z 0-9 . _ -, not starting with a dot: the daemon's rule, checked here so that a bad name fails
 * before anything connects. */
static bool valid_group(const char *group) {
        size_t length = strlen(group);
        if (length == 0 || length > 128 || group[0] == '.') return false;
        for (const char *p = group; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      *p == '.' || *p == '_' || *p == '-'))
                        return false;
        return true;
}

/* A directory (not a link to one) of this user that nobody else may enter: anyone can create a name under /tmp
 * first, so the fallback is used only then. */
static bool private_directory(const char *path) {
        struct stat info;
        return lstat(path, &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == getuid() &&
               (info.st_mode & 077) == 0;
}

/* The socket, found as authctl finds it, and who may serve it. */
static int find_socket(const char *given, char **ret, trusted_server *trust) {
        const char *variable = getenv("EXPONEA_AUTHD_SOCKET");
        if (!given && variable && *variable) given = variable;
        if (given) {
                *trust = TRUST_EITHER;
                return (*ret = strdup(given)) ? 0 : -ENOMEM;
        }
        char user[4096];
        const char *runtime = getenv("XDG_RUNTIME_DIR");
        bool have_user = false;
        if (runtime && runtime[0] == '/') {
                have_user = (size_t)snprintf(user, sizeof user, "%s/exponea-authd/io.socket", runtime) < sizeof user;
        } else {
                char directory[64];
                snprintf(directory, sizeof directory, "/tmp/exponea-authd-%u", (unsigned)getuid());
                have_user = private_directory(directory);
                snprintf(user, sizeof user, "%s/io.socket", directory);
        }
        struct stat info;
        if (have_user && lstat(user, &info) == 0) {
                *trust = TRUST_USER;
                return (*ret = strdup(user)) ? 0 : -ENOMEM;
        }
        *trust = TRUST_SYSTEM;
        return (*ret = strdup(SYSTEM_SOCKET)) ? 0 : -ENOMEM;
}

_Pragma("GCC visibility push(default)")

int exponea_auth_open(exponea_auth **ret, const char *group, const char *socket_path) {
        if (!ret || !group || !valid_group(group)) return -EINVAL;
        exponea_auth *a = calloc(1, sizeof *a);
        if (!a) return -ENOMEM;
        a->epoll_fd = -1;
        a->call_timeout = 5 * USEC_PER_SEC;
        a->unavailable_timeout = 2 * USEC_PER_SEC;
        a->retry_wait = 1 * USEC_PER_SEC;
        a->coalesce = true;
        a->refreshing = NEVER;
        a->heard = NEVER;
        a->supplied_generation = NEVER;
        a->backoff = 100 * USEC_PER_MSEC;
        pthread_mutex_init(&a->idle_lock, NULL);
        int r = find_socket(socket_path, &a->socket_path, &a->trust);
        if (r < 0 || !(a->group = strdup(group))) {
                exponea_auth_close(a);
                return r < 0 ? r : -ENOMEM;
        }
        *ret = a;
        return 0;
}

exponea_auth *exponea_auth_close(exponea_auth *a) {
        if (!a) return NULL;
        events_free(a);
        for (unsigned i = 0; i < a->idle_count; i++) connection_close(a->idle[i]);
        pthread_mutex_destroy(&a->idle_lock);
        free(a->group);
        free(a->socket_path);
        free(a);
        return NULL;
}

int exponea_auth_set_call_timeout(exponea_auth *a, uint64_t usec) {
        if (!a || usec == 0) return -EINVAL;
        a->call_timeout = usec;
        return 0;
}

int exponea_auth_set_unavailable_timeout(exponea_auth *a, uint64_t usec) {
        if (!a) return -EINVAL;
        a->unavailable_timeout = usec;
        return 0;
}

int exponea_auth_set_retry_wait(exponea_auth *a, uint64_t usec) {
        if (!a || usec > 5 * USEC_PER_SEC) return -EINVAL;
        a->retry_wait = usec;
        return 0;
}

const char *exponea_auth_get_group(const exponea_auth *a) { return a ? a->group : NULL; }

const char *exponea_auth_get_socket_path(const exponea_auth *a) { return a ? a->socket_path : NULL; }

_Pragma("GCC visibility pop")

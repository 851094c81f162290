// SPDX-License-Identifier: Apache-2.0
// The durability anchor shaped as the daemon is: one thread waits on epoll for the clients, hands each NUL-ended
// message to a pool of writer threads, which write it durably as the daemon's store does (a temporary file,
// fsync, rename over the connection's record, fsync of the directory), and answers once its writer is done (an
// eventfd). authd-bench compiles it with `cc -O2` at run time, twice:
// - as is, it parses, checks, seals and logs nothing, and answers with a canned reply of REPLY_SIZE bytes: beside
//   the durability floor (the file operations alone, in the benchmark's own threads), what a client/server shape
//   costs, with its wake-ups between threads;
// - with -DSET_WORK (and -lcrypto), it also does the daemon's work for a SetToken (bench-set-work.h): the call and
//   the token checked and decoded, the record sealed, the claims in the reply, the operator's line logged.
//
// Usage: c-durable-server SOCKET DIRECTORY REPLY_SIZE WRITERS
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "bench-server.h"
#ifdef SET_WORK
#include "bench-set-work.h"
#endif

#define MAX_JOBS 1024

static const char *directory;
static int directory_fd;
static int done_fd;
static char *reply;
static size_t size;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int todo[MAX_JOBS], todo_count;  // connections whose message waits for a writer
static int done[MAX_JOBS], done_count;  // connections whose message is written

#ifdef SET_WORK
static struct set_call *calls[MAX_JOBS];  // by connection: its caller, and its call while it is written

static void opened(int fd) {
    if (fd >= MAX_JOBS) return;
    if (!calls[fd]) calls[fd] = malloc(sizeof(struct set_call));
    if (calls[fd]) peer_credentials(fd, calls[fd]);
}

static void write_durably(int connection) {
    static __thread unsigned char record[MAX_TOKEN + 8192];
    struct set_call *call = calls[connection];
    size_t size = seal_record(call, record, sizeof record);
    if (size == 0) return;
    uint64_t suffix;
    if (getrandom(&suffix, sizeof suffix, 0) != sizeof suffix) return;
    char temporary[4200], final[4200];
    snprintf(temporary, sizeof temporary, "%s/.%s.token.tmp-%016llx", directory, call->group,
             (unsigned long long)suffix);
    snprintf(final, sizeof final, "%s/%s.token", directory, call->group);
    int file = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (file < 0) return;
    if (write(file, record, size) < 0) perror("c-durable-server: write");
#else
static void write_durably(int connection) {
    static const char record[600] = {0x5a};
    char temporary[4200], final[4200];
    snprintf(temporary, sizeof temporary, "%s/.t%d", directory, connection);
    snprintf(final, sizeof final, "%s/r%d", directory, connection);
    int file = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (file < 0) return;
    if (write(file, record, sizeof record) < 0) perror("c-durable-server: write");
#endif
    fsync(file);
    close(file);
    rename(temporary, final);
    fsync(directory_fd);
}

static void *writer(void *unused) {
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (todo_count == 0) pthread_cond_wait(&wake, &lock);
        int connection = todo[--todo_count];
        pthread_mutex_unlock(&lock);
        write_durably(connection);
        pthread_mutex_lock(&lock);
        done[done_count++] = connection;
        pthread_mutex_unlock(&lock);
        uint64_t one = 1;
        if (write(done_fd, &one, sizeof one) < 0) perror("c-durable-server: eventfd");
    }
    return NULL;
}

/* Hands one message to a writer (with SET_WORK, once it is parsed and checked; a bad one is answered at once). */
static int hand_over(int fd, const char *text, size_t length) {
#ifdef SET_WORK
    static const char refused[] = "{\"error\":\"com.exponea.Auth.MalformedToken\"}";
    if (fd >= MAX_JOBS || !calls[fd] || parse_set_call(text, length, calls[fd]) != 0) {
        if (write(fd, refused, sizeof refused) != (ssize_t)sizeof refused) close(fd);
        return 0;
    }
    calls[fd]->generation = next_generation(calls[fd]->group);
#else
    (void)text;
    (void)length;
#endif
    pthread_mutex_lock(&lock);
    if (todo_count < MAX_JOBS) todo[todo_count++] = fd;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    return 0;
}

/* Answers the messages the writers are done with. */
static void answer_written(int fd) {
    uint64_t value;
    if (read(fd, &value, sizeof value) < 0) return;
    pthread_mutex_lock(&lock);
    int answered[MAX_JOBS], count = done_count;
    memcpy(answered, done, sizeof(int) * (size_t)count);
    done_count = 0;
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < count; i++) {
#ifdef SET_WORK
        char answer[4096];
        struct set_call *call = calls[answered[i]];
        size_t length = set_reply(answer, sizeof answer, call);
        if (length == 0 || write(answered[i], answer, length) != (ssize_t)length) {
            close(answered[i]);
            continue;
        }
        log_token_set(call);
#else
        if (write(answered[i], reply, size + 1) != (ssize_t)(size + 1)) close(answered[i]);
#endif
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: c-durable-server SOCKET DIRECTORY REPLY_SIZE WRITERS\n");
        return 2;
    }
    directory = argv[2];
    directory_fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    size = (size_t)atol(argv[3]);
    reply = canned_reply(size);
    int writers = atoi(argv[4]);
    done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (directory_fd < 0 || !reply || writers < 1 || done_fd < 0) return 1;
    for (int i = 0; i < writers; i++) {
        pthread_t thread;
        pthread_create(&thread, NULL, writer, NULL);
    }
#ifdef SET_WORK
    return serve("c-durable-server", argv[1], done_fd, opened, hand_over, answer_written);
#else
    return serve("c-durable-server", argv[1], done_fd, NULL, hand_over, answer_written);
#endif
}

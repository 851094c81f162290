// SPDX-License-Identifier: Apache-2.0
// libsystemd, loaded the first time one of its functions is called, not at every start of the binary: authctl is
// the same binary and never calls one, and loading libsystemd with the six libraries it needs (libgcrypt,
// libgpg-error, liblzma, libzstd, liblz4, libcap) would cost every authctl command memory and start-up time for
// nothing. systemd loads its own optional libraries the same way.
//
// Each function below has the name and the type the libsystemd headers declare (the compiler checks each against
// its declaration) and calls the library's own through a table filled once. A daemon that cannot load
// libsystemd.so.0 stops with a message (the package depends on libsystemd0).
#define SD_JOURNAL_SUPPRESS_LOCATION 1

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <systemd/sd-journal.h>
#include <systemd/sd-login.h>

#include "libsystemd.h"

// Every libsystemd function the Systemd module calls.
#define EXAUTHD_SD_FUNCTIONS(X) \
    X(sd_bus_add_filter) \
    X(sd_bus_add_object_vtable) \
    X(sd_bus_attach_event) \
    X(sd_bus_call_async) \
    X(sd_bus_close) \
    X(sd_bus_creds_get_egid) \
    X(sd_bus_creds_get_euid) \
    X(sd_bus_creds_get_supplementary_gids) \
    X(sd_bus_creds_get_uid) \
    X(sd_bus_creds_unref) \
    X(sd_bus_error_free) \
    X(sd_bus_error_set) \
    X(sd_bus_flush) \
    X(sd_bus_flush_close_unref) \
    X(sd_bus_get_events) \
    X(sd_bus_get_fd) \
    X(sd_bus_get_timeout) \
    X(sd_bus_get_unique_name) \
    X(sd_bus_message_append_basic) \
    X(sd_bus_message_enter_container) \
    X(sd_bus_message_exit_container) \
    X(sd_bus_message_get_errno) \
    X(sd_bus_message_get_member) \
    X(sd_bus_message_get_sender) \
    X(sd_bus_message_is_method_error) \
    X(sd_bus_message_is_signal) \
    X(sd_bus_message_new_method_call) \
    X(sd_bus_message_new_method_error) \
    X(sd_bus_message_new_method_return) \
    X(sd_bus_message_new_signal) \
    X(sd_bus_message_read_basic) \
    X(sd_bus_message_ref) \
    X(sd_bus_message_set_destination) \
    X(sd_bus_message_skip) \
    X(sd_bus_message_unref) \
    X(sd_bus_new) \
    X(sd_bus_open_system) \
    X(sd_bus_open_user) \
    X(sd_bus_process) \
    X(sd_bus_query_sender_creds) \
    X(sd_bus_request_name) \
    X(sd_bus_request_name_async) \
    X(sd_bus_send) \
    X(sd_bus_set_address) \
    X(sd_bus_set_bus_client) \
    X(sd_bus_slot_unref) \
    X(sd_bus_start) \
    X(sd_bus_track_add_name) \
    X(sd_bus_track_new) \
    X(sd_bus_track_unref) \
    X(sd_bus_unref) \
    X(sd_bus_wait) \
    X(sd_event_add_defer) \
    X(sd_event_add_io) \
    X(sd_event_add_signal) \
    X(sd_event_add_time_relative) \
    X(sd_event_exit) \
    X(sd_event_get_iteration) \
    X(sd_event_loop) \
    X(sd_event_new) \
    X(sd_event_source_disable_unref) \
    X(sd_event_source_set_enabled) \
    X(sd_event_source_set_io_events) \
    X(sd_event_source_set_time_relative) \
    X(sd_event_unref) \
    X(sd_is_socket_unix) \
    X(sd_journal_sendv) \
    X(sd_journal_stream_fd) \
    X(sd_listen_fds) \
    X(sd_listen_fds_with_names) \
    X(sd_notify) \
    X(sd_pid_get_unit) \
    X(sd_pid_get_user_unit) \
    X(sd_watchdog_enabled)

static struct {
#define EXAUTHD_SD_POINTER(name) __typeof__(name) *name;
    EXAUTHD_SD_FUNCTIONS(EXAUTHD_SD_POINTER)
#undef EXAUTHD_SD_POINTER
} functions;

// The library's own sd_bus_object_vtable_format: a vtable's start names its address, which tells libsystemd the
// vtable's layout.
static const unsigned *vtable_format;

static pthread_once_t loaded = PTHREAD_ONCE_INIT;

static void fail(const char *what) {
    fprintf(stderr, "exponea-authd: cannot load libsystemd.so.0: %s (install libsystemd0, systemd 248 or later)\n",
        what);
    exit(EXIT_FAILURE);
}

static void load(void) {
    void *library = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        fail(dlerror());
    }
#define EXAUTHD_SD_LOAD(name) \
    functions.name = (__typeof__(name) *)dlsym(library, #name); \
    if (functions.name == NULL) { \
        fail(dlerror()); \
    }
    EXAUTHD_SD_FUNCTIONS(EXAUTHD_SD_LOAD)
#undef EXAUTHD_SD_LOAD
    vtable_format = dlsym(library, "sd_bus_object_vtable_format");
    if (vtable_format == NULL) {
        fail(dlerror());
    }
}

static inline const __typeof__(functions) *library(void) {
    pthread_once(&loaded, load);
    return &functions;
}

int sd_bus_add_filter(sd_bus *bus, sd_bus_slot **slot, sd_bus_message_handler_t callback, void *userdata) {
    return library()->sd_bus_add_filter(bus, slot, callback, userdata);
}

int sd_bus_add_object_vtable(
    sd_bus *bus, sd_bus_slot **slot, const char *path, const char *interface, const sd_bus_vtable *vtable,
    void *userdata) {
    return library()->sd_bus_add_object_vtable(bus, slot, path, interface, vtable, userdata);
}

int sd_bus_attach_event(sd_bus *bus, sd_event *e, int priority) {
    return library()->sd_bus_attach_event(bus, e, priority);
}

void sd_bus_close(sd_bus *bus) {
    library()->sd_bus_close(bus);
}

int sd_bus_creds_get_egid(sd_bus_creds *c, gid_t *egid) {
    return library()->sd_bus_creds_get_egid(c, egid);
}

int sd_bus_creds_get_supplementary_gids(sd_bus_creds *c, const gid_t **gids) {
    return library()->sd_bus_creds_get_supplementary_gids(c, gids);
}

int sd_bus_creds_get_euid(sd_bus_creds *c, uid_t *euid) {
    return library()->sd_bus_creds_get_euid(c, euid);
}

int sd_bus_creds_get_uid(sd_bus_creds *c, uid_t *uid) {
    return library()->sd_bus_creds_get_uid(c, uid);
}

sd_bus_creds* sd_bus_creds_unref(sd_bus_creds *c) {
    return library()->sd_bus_creds_unref(c);
}

void sd_bus_error_free(sd_bus_error *e) {
    library()->sd_bus_error_free(e);
}

int sd_bus_error_set(sd_bus_error *e, const char *name, const char *message) {
    return library()->sd_bus_error_set(e, name, message);
}

int sd_bus_flush(sd_bus *bus) {
    return library()->sd_bus_flush(bus);
}

sd_bus* sd_bus_flush_close_unref(sd_bus *bus) {
    return library()->sd_bus_flush_close_unref(bus);
}

int sd_bus_get_events(sd_bus *bus) {
    return library()->sd_bus_get_events(bus);
}

int sd_bus_get_fd(sd_bus *bus) {
    return library()->sd_bus_get_fd(bus);
}

int sd_bus_get_timeout(sd_bus *bus, uint64_t *timeout_usec) {
    return library()->sd_bus_get_timeout(bus, timeout_usec);
}

int sd_bus_get_unique_name(sd_bus *bus, const char **unique) {
    return library()->sd_bus_get_unique_name(bus, unique);
}

int sd_bus_message_append_basic(sd_bus_message *m, char type, const void *p) {
    return library()->sd_bus_message_append_basic(m, type, p);
}

int sd_bus_message_get_errno(sd_bus_message *m) {
    return library()->sd_bus_message_get_errno(m);
}

const char* sd_bus_message_get_member(sd_bus_message *m) {
    return library()->sd_bus_message_get_member(m);
}

const char* sd_bus_message_get_sender(sd_bus_message *m) {
    return library()->sd_bus_message_get_sender(m);
}

int sd_bus_message_is_method_error(sd_bus_message *m, const char *name) {
    return library()->sd_bus_message_is_method_error(m, name);
}

int sd_bus_message_is_signal(sd_bus_message *m, const char *interface, const char *member) {
    return library()->sd_bus_message_is_signal(m, interface, member);
}

int sd_bus_message_new_method_return(sd_bus_message *call, sd_bus_message **m) {
    return library()->sd_bus_message_new_method_return(call, m);
}

int sd_bus_message_new_signal(
    sd_bus *bus, sd_bus_message **m, const char *path, const char *interface, const char *member) {
    return library()->sd_bus_message_new_signal(bus, m, path, interface, member);
}

int sd_bus_message_read_basic(sd_bus_message *m, char type, void *p) {
    return library()->sd_bus_message_read_basic(m, type, p);
}

sd_bus_message* sd_bus_message_ref(sd_bus_message *m) {
    return library()->sd_bus_message_ref(m);
}

int sd_bus_message_skip(sd_bus_message *m, const char *types) {
    return library()->sd_bus_message_skip(m, types);
}

int sd_bus_message_enter_container(sd_bus_message *m, char type, const char *contents) {
    return library()->sd_bus_message_enter_container(m, type, contents);
}

int sd_bus_message_exit_container(sd_bus_message *m) {
    return library()->sd_bus_message_exit_container(m);
}

int sd_bus_message_new_method_call(
    sd_bus *bus, sd_bus_message **m, const char *destination, const char *path, const char *interface,
    const char *member) {
    return library()->sd_bus_message_new_method_call(bus, m, destination, path, interface, member);
}

int sd_bus_message_new_method_error(sd_bus_message *call, sd_bus_message **m, const sd_bus_error *e) {
    return library()->sd_bus_message_new_method_error(call, m, e);
}

int sd_bus_call_async(
    sd_bus *bus, sd_bus_slot **slot, sd_bus_message *m, sd_bus_message_handler_t callback, void *userdata,
    uint64_t usec) {
    return library()->sd_bus_call_async(bus, slot, m, callback, userdata, usec);
}

int sd_bus_message_set_destination(sd_bus_message *m, const char *destination) {
    return library()->sd_bus_message_set_destination(m, destination);
}

sd_bus_message* sd_bus_message_unref(sd_bus_message *m) {
    return library()->sd_bus_message_unref(m);
}

const unsigned *exauthd_sd_bus_object_vtable_format(void) {
    pthread_once(&loaded, load);
    return vtable_format;
}

int sd_bus_new(sd_bus **ret) {
    return library()->sd_bus_new(ret);
}

int sd_bus_open_system(sd_bus **ret) {
    return library()->sd_bus_open_system(ret);
}

int sd_bus_open_user(sd_bus **ret) {
    return library()->sd_bus_open_user(ret);
}

int sd_bus_process(sd_bus *bus, sd_bus_message **r) {
    return library()->sd_bus_process(bus, r);
}

int sd_bus_query_sender_creds(sd_bus_message *m, uint64_t mask, sd_bus_creds **creds) {
    return library()->sd_bus_query_sender_creds(m, mask, creds);
}

int sd_bus_request_name(sd_bus *bus, const char *name, uint64_t flags) {
    return library()->sd_bus_request_name(bus, name, flags);
}

int sd_bus_request_name_async(
    sd_bus *bus, sd_bus_slot **ret_slot, const char *name, uint64_t flags, sd_bus_message_handler_t callback,
    void *userdata) {
    return library()->sd_bus_request_name_async(bus, ret_slot, name, flags, callback, userdata);
}

int sd_bus_send(sd_bus *bus, sd_bus_message *m, uint64_t *cookie) {
    return library()->sd_bus_send(bus, m, cookie);
}

int sd_bus_set_address(sd_bus *bus, const char *address) {
    return library()->sd_bus_set_address(bus, address);
}

int sd_bus_set_bus_client(sd_bus *bus, int b) {
    return library()->sd_bus_set_bus_client(bus, b);
}

sd_bus_slot* sd_bus_slot_unref(sd_bus_slot *slot) {
    return library()->sd_bus_slot_unref(slot);
}

int sd_bus_start(sd_bus *bus) {
    return library()->sd_bus_start(bus);
}

int sd_bus_track_add_name(sd_bus_track *track, const char *name) {
    return library()->sd_bus_track_add_name(track, name);
}

int sd_bus_track_new(sd_bus *bus, sd_bus_track **track, sd_bus_track_handler_t handler, void *userdata) {
    return library()->sd_bus_track_new(bus, track, handler, userdata);
}

sd_bus_track* sd_bus_track_unref(sd_bus_track *track) {
    return library()->sd_bus_track_unref(track);
}

sd_bus* sd_bus_unref(sd_bus *bus) {
    return library()->sd_bus_unref(bus);
}

int sd_bus_wait(sd_bus *bus, uint64_t timeout_usec) {
    return library()->sd_bus_wait(bus, timeout_usec);
}

int sd_event_add_defer(sd_event *e, sd_event_source **s, sd_event_handler_t callback, void *userdata) {
    return library()->sd_event_add_defer(e, s, callback, userdata);
}

int sd_event_add_io(
    sd_event *e, sd_event_source **s, int fd, uint32_t events, sd_event_io_handler_t callback, void *userdata) {
    return library()->sd_event_add_io(e, s, fd, events, callback, userdata);
}

int sd_event_add_signal(sd_event *e, sd_event_source **s, int sig, sd_event_signal_handler_t callback, void *userdata) {
    return library()->sd_event_add_signal(e, s, sig, callback, userdata);
}

int sd_event_add_time_relative(
    sd_event *e, sd_event_source **s, clockid_t clock, uint64_t usec, uint64_t accuracy,
    sd_event_time_handler_t callback, void *userdata) {
    return library()->sd_event_add_time_relative(e, s, clock, usec, accuracy, callback, userdata);
}

int sd_event_exit(sd_event *e, int code) {
    return library()->sd_event_exit(e, code);
}

int sd_event_get_iteration(sd_event *e, uint64_t *ret) {
    return library()->sd_event_get_iteration(e, ret);
}

int sd_event_loop(sd_event *e) {
    return library()->sd_event_loop(e);
}

int sd_event_new(sd_event **e) {
    return library()->sd_event_new(e);
}

sd_event_source* sd_event_source_disable_unref(sd_event_source *s) {
    return library()->sd_event_source_disable_unref(s);
}

int sd_event_source_set_enabled(sd_event_source *s, int enabled) {
    return library()->sd_event_source_set_enabled(s, enabled);
}

int sd_event_source_set_io_events(sd_event_source *s, uint32_t events) {
    return library()->sd_event_source_set_io_events(s, events);
}

int sd_event_source_set_time_relative(sd_event_source *s, uint64_t usec) {
    return library()->sd_event_source_set_time_relative(s, usec);
}

sd_event* sd_event_unref(sd_event *e) {
    return library()->sd_event_unref(e);
}

int sd_is_socket_unix(int fd, int type, int listening, const char *path, size_t length) {
    return library()->sd_is_socket_unix(fd, type, listening, path, length);
}

int sd_journal_sendv(const struct iovec *iov, int n) {
    return library()->sd_journal_sendv(iov, n);
}

int sd_journal_stream_fd(const char *identifier, int priority, int level_prefix) {
    return library()->sd_journal_stream_fd(identifier, priority, level_prefix);
}

int sd_listen_fds(int unset_environment) {
    return library()->sd_listen_fds(unset_environment);
}

int sd_listen_fds_with_names(int unset_environment, char ***names) {
    return library()->sd_listen_fds_with_names(unset_environment, names);
}

int sd_notify(int unset_environment, const char *state) {
    return library()->sd_notify(unset_environment, state);
}

int sd_pid_get_unit(pid_t pid, char **unit) {
    return library()->sd_pid_get_unit(pid, unit);
}

int sd_pid_get_user_unit(pid_t pid, char **unit) {
    return library()->sd_pid_get_user_unit(pid, unit);
}

int sd_watchdog_enabled(int unset_environment, uint64_t *usec) {
    return library()->sd_watchdog_enabled(unset_environment, usec);
}

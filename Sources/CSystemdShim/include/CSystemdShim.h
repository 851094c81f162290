// SPDX-License-Identifier: Apache-2.0
#pragma once
// What Swift cannot express of libsystemd: the sd-bus vtable is built from C macros. Only non-variadic
// declarations here; every symbol is prefixed exauthd_.
#include <stddef.h>
#include <systemd/sd-bus.h>

/// One signal of an exported interface. `names` lists the parameter names, each ended by a NUL
/// ("group\0generation\0"), as SD_BUS_PARAM builds them.
typedef struct exauthd_bus_signal {
    const char *member;
    const char *signature;
    const char *names;
} exauthd_bus_signal;

/// One method of an exported interface, callable by unprivileged peers. `names` lists the input parameters'
/// names and then the results' names, each ended by a NUL.
typedef struct exauthd_bus_method {
    const char *member;
    const char *signature;
    const char *result;
    const char *names;
    sd_bus_message_handler_t handler;
} exauthd_bus_method;

/// Allocates a vtable with the given signals (and no methods or properties); free it with free() after the
/// object is unregistered. The strings must outlive the vtable. Returns NULL when out of memory.
sd_bus_vtable *exauthd_bus_vtable_new(const exauthd_bus_signal *signals, size_t count);

/// Allocates a vtable with the given methods and signals; free it with free() after the object is
/// unregistered. The strings must outlive the vtable. Returns NULL when out of memory.
sd_bus_vtable *exauthd_bus_vtable_new_with_methods(
    const exauthd_bus_method *methods, size_t method_count, const exauthd_bus_signal *signals, size_t count);

// SPDX-License-Identifier: Apache-2.0
#include "CSystemdShim.h"

#include <stdlib.h>

#include "libsystemd.h"

sd_bus_vtable *exauthd_bus_vtable_new(const exauthd_bus_signal *signals, size_t count) {
    return exauthd_bus_vtable_new_with_methods(NULL, 0, signals, count);
}

sd_bus_vtable *exauthd_bus_vtable_new_with_methods(
    const exauthd_bus_method *methods, size_t method_count, const exauthd_bus_signal *signals, size_t count) {
    sd_bus_vtable *vtable = calloc(method_count + count + 2, sizeof(sd_bus_vtable));
    if (vtable == NULL) {
        return NULL;
    }
    size_t next = 0;
    // SD_BUS_VTABLE_START(0), with the library's format reference found at run time (libsystemd.c).
    vtable[next++] = (sd_bus_vtable){
        .type = _SD_BUS_VTABLE_START,
        .flags = 0,
        .x = {.start = {
                  .element_size = sizeof(sd_bus_vtable),
                  .features = _SD_BUS_VTABLE_PARAM_NAMES,
                  .vtable_format_reference = exauthd_sd_bus_object_vtable_format(),
              }}};
    for (size_t i = 0; i < method_count; i++) {
        // SD_BUS_METHOD_WITH_NAMES concatenates literal names; these come at run time, already joined.
        vtable[next++] = (sd_bus_vtable){
            .type = _SD_BUS_VTABLE_METHOD,
            .flags = SD_BUS_VTABLE_UNPRIVILEGED,
            .x = {.method = {
                      .member = methods[i].member,
                      .signature = methods[i].signature,
                      .result = methods[i].result,
                      .handler = methods[i].handler,
                      .offset = 0,
                      .names = methods[i].names,
                  }}};
    }
    for (size_t i = 0; i < count; i++) {
        vtable[next++] = (sd_bus_vtable)SD_BUS_SIGNAL_WITH_NAMES(
            signals[i].member, signals[i].signature, signals[i].names, 0);
    }
    vtable[next] = (sd_bus_vtable)SD_BUS_VTABLE_END;
    return vtable;
}

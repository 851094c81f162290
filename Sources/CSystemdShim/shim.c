// SPDX-License-Identifier: Apache-2.0
#include "CSystemdShim.h"

#include <stdlib.h>

sd_bus_vtable *exauthd_bus_vtable_new(const exauthd_bus_signal *signals, size_t count) {
    sd_bus_vtable *vtable = calloc(count + 2, sizeof(sd_bus_vtable));
    if (vtable == NULL) {
        return NULL;
    }
    vtable[0] = (sd_bus_vtable)SD_BUS_VTABLE_START(0);
    for (size_t i = 0; i < count; i++) {
        vtable[i + 1] = (sd_bus_vtable)SD_BUS_SIGNAL_WITH_NAMES(
            signals[i].member, signals[i].signature, signals[i].names, 0);
    }
    vtable[count + 1] = (sd_bus_vtable)SD_BUS_VTABLE_END;
    return vtable;
}

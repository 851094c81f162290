// SPDX-License-Identifier: Apache-2.0
#pragma once
// What libsystemd.c gives the rest of the shim besides the library's functions.

/// The address of libsystemd's sd_bus_object_vtable_format (loading the library if needed), for the start of a
/// vtable, which SD_BUS_VTABLE_START would take from a link to the library.
const unsigned *exauthd_sd_bus_object_vtable_format(void);

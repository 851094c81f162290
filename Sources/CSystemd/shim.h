// SPDX-License-Identifier: Apache-2.0
// The libsystemd headers that the Systemd module wraps. Swift imports only the non-variadic functions.
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <systemd/sd-journal.h>
#include <systemd/sd-login.h>

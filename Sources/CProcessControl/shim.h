// SPDX-License-Identifier: Apache-2.0
// prctl(2) and madvise(2) flags for keeping tokens out of core dumps, and for naming threads. prctl is variadic,
// which Swift cannot call: these wrappers fix its arguments.
#include <sys/mman.h>
#include <sys/prctl.h>

/// PR_SET_DUMPABLE 0: no core dump, and no ptrace or /proc/PID/mem access by other processes of the same
/// user. Returns 0, or -1 with errno set.
static inline int authd_disable_core_dumps(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

/// PR_GET_DUMPABLE: 0 when core dumps are disabled, 1 or 2 otherwise, -1 with errno set on failure.
static inline int authd_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }

/// PR_SET_NAME: names the calling thread (at most 15 bytes; `/proc/PID/task/TID/comm`). Returns 0, or -1 with
/// errno set.
static inline int authd_name_thread(const char *name) { return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0); }

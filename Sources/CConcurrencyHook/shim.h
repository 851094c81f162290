// SPDX-License-Identifier: Apache-2.0
// The Swift runtime's hook for the global concurrency executor, set by reference rather than found with dlsym:
// with the runtime linked in (--static-swift-stdlib, whose link hides every archive symbol), dlsym cannot find it.
#pragma once

extern void *swift_task_enqueueGlobal_hook;

/// Sets the hook; call it before the first task exists. Returns 0 when a hook was already set (nothing changed).
static inline int exauthd_install_enqueue_global_hook(void *hook) {
    if (swift_task_enqueueGlobal_hook != 0) {
        return 0;
    }
    swift_task_enqueueGlobal_hook = hook;
    return 1;
}

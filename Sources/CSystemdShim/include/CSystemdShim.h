#pragma once
// Placeholder until the sd-bus vtable builder lands.
int exauthd_shim_placeholder(void);

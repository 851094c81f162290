#include "CSystemdShim.h"
int exauthd_shim_placeholder(void) { return 0; }

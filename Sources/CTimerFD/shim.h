// SPDX-License-Identifier: Apache-2.0
// glibc's timerfd API (timerfd_create, timerfd_settime, TFD_*), which the Glibc module does not include.
#include <sys/timerfd.h>

// SPDX-License-Identifier: Apache-2.0
// glibc's descriptor-based timer, event and signal APIs (timerfd_*, TFD_*, eventfd, EFD_*, signalfd, SFD_*),
// which the Glibc module does not include.
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

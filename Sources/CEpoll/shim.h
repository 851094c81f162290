// SPDX-License-Identifier: Apache-2.0
// glibc's epoll API (epoll_create1, epoll_ctl, epoll_wait), which the Glibc module does not include; the
// benchmark waits on a thousand subscribed connections with it.
#include <sys/epoll.h>

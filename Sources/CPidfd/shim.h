// SPDX-License-Identifier: Apache-2.0
// Process file descriptors (pidfds) for the peer's identity. syscall(2) and ioctl(2) are variadic, which Swift
// cannot call, and glibc 2.36 has neither SO_PEERPIDFD nor PIDFD_GET_INFO: these wrappers fix the arguments and
// carry the kernel's constants. Each returns -1 with errno set on failure.
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5, <asm-generic/socket.h> */
#endif

/// struct pidfd_info of <linux/pidfd.h> (Linux 6.13), as far as this daemon reads it (PIDFD_INFO_SIZE_VER0,
/// 64 bytes; the kernel copies what both sides know of).
struct authd_pidfd_info {
    uint64_t mask;
    uint64_t cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    int32_t exit_code;
};
#define AUTHD_PIDFD_GET_INFO _IOWR(0xFF, 11, struct authd_pidfd_info)
#define AUTHD_PIDFD_INFO_PID 1ULL
#define AUTHD_PIDFD_INFO_CREDS 2ULL
#define AUTHD_PIDFD_INFO_CGROUPID 4ULL

/// SO_PEERPIDFD: a pidfd of the process that connected the Unix socket `fd` (Linux 6.5), which stays that
/// process's whatever holds its pid later.
static inline int authd_peer_pidfd(int fd) {
    int pidfd = -1;
    socklen_t length = sizeof(pidfd);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) < 0) return -1;
    return pidfd;
}

/// pidfd_open(2) (Linux 5.3), close-on-exec.
static inline int authd_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

/// Whether the process of `pidfd` still runs: pidfd_send_signal(2) with signal 0 checks without sending. 1 when
/// it runs (EPERM: it runs as another user), 0 when it has exited, -1 with errno on another error.
static inline int authd_pidfd_alive(int pidfd) {
    if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0) return 1;
    if (errno == EPERM) return 1;
    if (errno == ESRCH) return 0;
    return -1;
}

/// PIDFD_GET_INFO (Linux 6.13): the id of the process's cgroup (cgroup v2, the inode of its directory) and its
/// effective uid. ESRCH when the process has exited; ENOTTY or EINVAL where the kernel lacks the ioctl.
static inline int authd_pidfd_cgroup(int pidfd, uint64_t *cgroupid, uint32_t *euid) {
    struct authd_pidfd_info info;
    memset(&info, 0, sizeof(info));
    info.mask = AUTHD_PIDFD_INFO_CGROUPID | AUTHD_PIDFD_INFO_CREDS;
    if (ioctl(pidfd, AUTHD_PIDFD_GET_INFO, &info) < 0) return -1;
    if (!(info.mask & AUTHD_PIDFD_INFO_CGROUPID)) {
        errno = EOPNOTSUPP;
        return -1;
    }
    *cgroupid = info.cgroupid;
    *euid = info.euid;
    return 0;
}

/// Whether `path` is the root of a cgroup v2 mount (statfs(2): CGROUP2_SUPER_MAGIC of <linux/magic.h>).
static inline int authd_is_cgroup2(const char *path) {
    struct statfs info;
    return statfs(path, &info) == 0 && info.f_type == 0x63677270;
}

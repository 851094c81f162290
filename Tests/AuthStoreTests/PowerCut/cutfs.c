// SPDX-License-Identifier: Apache-2.0
// cutfs: a one-directory FUSE file system that forgets, at a power cut, everything not yet fsynced, as a disk
// does (the idea of Jepsen's LazyFS, for the store's power-cut test).
//
//     cutfs <mountpoint>       (runs in the foreground, single-threaded; prints "mounted" once it serves)
//
// Everything lives in memory. Each file has the bytes written to it and the bytes it held at its last fsync; the
// directory has its names and the names it held at its last fsync. Writing "cut" to <mountpoint>/.cutfs is the
// power cut: from then on every change and every fsync fails with EIO. Writing "restore" brings the power back
// with what a disk would have kept: the names of the last fsync of the directory, each with the bytes of its
// file's last fsync (none: an empty file). Operations are served one at a time, so a cut falls between two of
// them, wherever the writers are.
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_NAMES 4096
#define CONTROL "/.cutfs"

struct file {
    unsigned char *data, *synced;
    size_t size, synced_size;
    int ever_synced;
};

struct entry {
    char name[256];
    int file;
};

static struct file *files;
static int file_count, file_capacity;
static struct entry live[MAX_NAMES], durable[MAX_NAMES];
static int live_count, durable_count;
static int powered_off;
static char command[64];

static int find(const char *path) {
    if (path[0] != '/') return -1;
    for (int i = 0; i < live_count; i++)
        if (strcmp(live[i].name, path + 1) == 0) return i;
    return -1;
}

static int new_file(void) {
    if (file_count == file_capacity) {
        file_capacity = file_capacity ? 2 * file_capacity : 256;
        files = realloc(files, (size_t)file_capacity * sizeof *files);
        if (!files) abort();
    }
    memset(&files[file_count], 0, sizeof files[file_count]);
    return file_count++;
}

static void *cutfs_init(struct fuse_conn_info *conn, struct fuse_config *config) {
    (void)conn;
    // Nothing cached in the kernel: after a cut, every name and byte comes from here again.
    config->entry_timeout = 0;
    config->attr_timeout = 0;
    config->negative_timeout = 0;
    config->direct_io = 1;
    config->hard_remove = 1;
    config->use_ino = 1;
    printf("mounted\n");
    fflush(stdout);
    return NULL;
}

static int cutfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    (void)fi;
    memset(st, 0, sizeof *st);
    st->st_uid = getuid();
    st->st_gid = getgid();
    if (strcmp(path, "/") == 0) {
        st->st_mode = S_IFDIR | 0700;
        st->st_nlink = 2;
        st->st_ino = 1;
        return 0;
    }
    if (strcmp(path, CONTROL) == 0) {
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        st->st_ino = 2;
        return 0;
    }
    int i = find(path);
    if (i < 0) return -ENOENT;
    st->st_mode = S_IFREG | 0600;
    st->st_nlink = 1;
    st->st_ino = (ino_t)live[i].file + 3;
    st->st_size = (off_t)files[live[i].file].size;
    return 0;
}

static int cutfs_readdir(const char *path, void *buffer, fuse_fill_dir_t fill, off_t offset,
                         struct fuse_file_info *fi, enum fuse_readdir_flags flags) {
    (void)path, (void)offset, (void)fi, (void)flags;
    fill(buffer, ".", NULL, 0, 0);
    fill(buffer, "..", NULL, 0, 0);
    for (int i = 0; i < live_count; i++) fill(buffer, live[i].name, NULL, 0, 0);
    return 0;
}

static int cutfs_create(const char *path, mode_t mode, struct fuse_file_info *fi) {
    (void)mode;
    if (powered_off) return -EIO;
    if (find(path) >= 0) return -EEXIST;
    if (live_count == MAX_NAMES || strlen(path + 1) >= sizeof live[0].name) return -ENOSPC;
    strcpy(live[live_count].name, path + 1);
    live[live_count].file = new_file();
    fi->fh = (uint64_t)live[live_count].file;
    live_count++;
    return 0;
}

static int cutfs_open(const char *path, struct fuse_file_info *fi) {
    if (strcmp(path, CONTROL) == 0) {
        fi->fh = UINT64_MAX;
        return 0;
    }
    int i = find(path);
    if (i < 0) return -ENOENT;
    fi->fh = (uint64_t)live[i].file;
    if (fi->flags & O_TRUNC) {
        if (powered_off) return -EIO;
        files[live[i].file].size = 0;
    }
    return 0;
}

static int cutfs_read(const char *path, char *buffer, size_t size, off_t offset, struct fuse_file_info *fi) {
    (void)path;
    if (fi->fh == UINT64_MAX) return 0;
    struct file *f = &files[fi->fh];
    if ((size_t)offset >= f->size) return 0;
    if (size > f->size - (size_t)offset) size = f->size - (size_t)offset;
    memcpy(buffer, f->data + offset, size);
    return (int)size;
}

static void power(const char *what) {
    if (strncmp(what, "cut", 3) == 0) {
        powered_off = 1;
    } else if (strncmp(what, "restore", 7) == 0) {
        memcpy(live, durable, sizeof live);
        live_count = durable_count;
        for (int i = 0; i < file_count; i++) {
            struct file *f = &files[i];
            free(f->data);
            f->data = NULL;
            f->size = 0;
            if (f->ever_synced && f->synced_size) {
                f->data = malloc(f->synced_size);
                if (!f->data) abort();
                memcpy(f->data, f->synced, f->synced_size);
                f->size = f->synced_size;
            }
        }
        powered_off = 0;
    }
}

static int cutfs_write(const char *path, const char *buffer, size_t size, off_t offset,
                       struct fuse_file_info *fi) {
    (void)path;
    if (fi->fh == UINT64_MAX) {
        size_t n = size < sizeof command - 1 ? size : sizeof command - 1;
        memcpy(command, buffer, n);
        command[n] = 0;
        power(command);
        return (int)size;
    }
    if (powered_off) return -EIO;
    struct file *f = &files[fi->fh];
    size_t end = (size_t)offset + size;
    if (end > f->size) {
        f->data = realloc(f->data, end);
        if (!f->data) abort();
        memset(f->data + f->size, 0, end - f->size);
        f->size = end;
    }
    memcpy(f->data + offset, buffer, size);
    return (int)size;
}

static int cutfs_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
    if (strcmp(path, CONTROL) == 0) return 0;
    if (powered_off) return -EIO;
    int i = fi ? -1 : find(path);
    if (!fi && i < 0) return -ENOENT;
    struct file *f = &files[fi ? (int)fi->fh : live[i].file];
    if ((size_t)size > f->size) {
        f->data = realloc(f->data, (size_t)size);
        if (!f->data) abort();
        memset(f->data + f->size, 0, (size_t)size - f->size);
    }
    f->size = (size_t)size;
    return 0;
}

static int cutfs_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)path, (void)datasync;
    if (fi->fh == UINT64_MAX) return 0;
    if (powered_off) return -EIO;
    struct file *f = &files[fi->fh];
    free(f->synced);
    f->synced = f->size ? malloc(f->size) : NULL;
    if (f->size && !f->synced) abort();
    if (f->size) memcpy(f->synced, f->data, f->size);
    f->synced_size = f->size;
    f->ever_synced = 1;
    return 0;
}

static int cutfs_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)path, (void)datasync, (void)fi;
    if (powered_off) return -EIO;
    memcpy(durable, live, sizeof durable);
    durable_count = live_count;
    return 0;
}

static int cutfs_rename(const char *from, const char *to, unsigned int flags) {
    if (flags) return -EINVAL;
    if (powered_off) return -EIO;
    int source = find(from);
    if (source < 0) return -ENOENT;
    if (strlen(to + 1) >= sizeof live[0].name) return -ENAMETOOLONG;
    int target = find(to);
    if (target >= 0) {
        live[target].file = live[source].file;
        live[source] = live[--live_count];
    } else {
        strcpy(live[source].name, to + 1);
    }
    return 0;
}

static int cutfs_unlink(const char *path) {
    if (powered_off) return -EIO;
    int i = find(path);
    if (i < 0) return -ENOENT;
    live[i] = live[--live_count];
    return 0;
}

static const struct fuse_operations operations = {
    .init = cutfs_init,
    .getattr = cutfs_getattr,
    .readdir = cutfs_readdir,
    .create = cutfs_create,
    .open = cutfs_open,
    .read = cutfs_read,
    .write = cutfs_write,
    .truncate = cutfs_truncate,
    .fsync = cutfs_fsync,
    .fsyncdir = cutfs_fsyncdir,
    .rename = cutfs_rename,
    .unlink = cutfs_unlink,
};

int main(int argc, char *argv[]) {
    if (argc != 2) {
        fprintf(stderr, "usage: cutfs <mountpoint>\n");
        return 64;
    }
    char *arguments[] = {argv[0], "-f", "-s", "-o", "fsname=cutfs", argv[1], NULL};
    return fuse_main(6, arguments, &operations, NULL);
}

/*
 * mountinfo.h - which mount holds a path, from /proc/self/mountinfo (mnt_):
 * the admin CLI refuses paths outside an rpfs mount and finds the mount's
 * root, and rpfs-fuse refuses to stack a second mount on a directory.
 */
#ifndef RPFS_MOUNTINFO_H
#define RPFS_MOUNTINFO_H

#include <stddef.h>

/* The file system type an rpfs mount has in /proc/self/mountinfo. */
#define MNT_RPFS_FSTYPE "fuse.rpfs"

/**
 * The mount that holds path: of the mountinfo entries on path's device,
 * the one with the longest mount point that is a prefix of path's real path.
 * @param path any existing path
 * @param[out] root the mount point (rootcap bytes)
 * @param[out] fstype its type, e.g. "fuse.rpfs" (fscap bytes)
 * @return 0; -ENOENT no entry matches; -ENAMETOOLONG a field does not fit;
 *         -errno of stat(2), realpath(3) or reading mountinfo
 */
int mnt_find(const char *path, char *root, size_t rootcap, char *fstype,
	     size_t fscap);

/**
 * Whether path is on an rpfs mount: statfs(2) says FUSE and the mount's
 * type is fuse.rpfs.
 * @param[out] root the mount point (may be NULL)
 * @return 0 on rpfs; -EMEDIUMTYPE on another file system; -errno of
 *         statfs(2) or mnt_find()
 */
int mnt_on_rpfs(const char *path, char *root, size_t rootcap);

/**
 * Whether the directory dir is itself the mount point of an rpfs mount,
 * found by name in mountinfo (no call into the mount, which may be dead).
 * @return 1 it is; 0 it is not; -errno of realpath(3) (-ENOTCONN: a dead
 *         FUSE mount is there) or of reading mountinfo
 */
int mnt_is_rpfs_mountpoint(const char *dir);

#endif

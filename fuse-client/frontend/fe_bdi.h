/*
 * fe_bdi.h - the readahead window of a FUSE mount's backing device.
 *
 * The kernel offers FUSE at most its default readahead (128 KiB) at INIT
 * and keeps the smaller of that and the server's answer, so buffered
 * sequential reads arrive as 128 KiB READs however large max_pages is. The
 * window is a property of the mount's bdi, settable afterwards through
 * /sys/class/bdi/MAJOR:MINOR/read_ahead_kb (root only).
 */
#ifndef RPFS_FE_BDI_H
#define RPFS_FE_BDI_H

/**
 * Set the readahead window of the FUSE file system mounted on mountpoint
 * (the newest mount there, found in /proc/self/mountinfo without touching
 * the mount itself, so it is safe before its INIT is answered).
 * @param mountpoint absolute path, as mounted
 * @param kb         window in KiB
 * @return 0; -ENOENT no FUSE mount there; -EACCES/-EPERM/-EROFS sysfs not
 *	writable (not root); -errno from open/write
 */
int fe_bdi_set_readahead(const char *mountpoint, unsigned kb);

#endif

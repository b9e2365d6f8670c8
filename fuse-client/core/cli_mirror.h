/*
 * cli_mirror.h - the client's side of mirrored layouts
 * (fuse-client/core/README.md "Mirroring"): which iod holds replica r of a
 * file-relative stripe index, the order in which a read asks the two
 * replicas, and the replicas this client recorded stale at the mgr
 * (STALE_MARK). That record is only a hint: the iods fence stale replicas
 * (-ESTALE), so a hinted replica is asked last, never skipped, and the hint
 * goes once that replica serves a mirrored read (the mgr resynced and
 * unfenced it) or takes a write.
 */
#ifndef RPFS_CLI_MIRROR_H
#define RPFS_CLI_MIRROR_H

#include <stdint.h>

#include "cli_core.h"

/** Replicas of a layout: 2 for mirror=2, else 1. */
static inline int cli_mirror_n(const struct proto_layout *l)
{
	return l->mirror == 2 ? 2 : 1;
}

/**
 * The iod table index of replica r (< cli_mirror_n) of file iod k: for
 * mirror 1 (first + k) % niods, for mirror 2 iod r of group
 * (first + k) % ngroups. The layout must have passed stripe_layout_check
 * against cli_mirror_width().
 */
uint16_t cli_mirror_iod(const struct cli_fs *fs, const struct proto_layout *l,
			uint16_t k, int r);

/** The table a layout's count and first index: groups or iods. */
uint16_t cli_mirror_width(const struct cli_fs *fs, const struct proto_layout *l);

/**
 * Whether this client recorded iod's replica of ino stale and neither a
 * write to it nor a mirrored read from it succeeded since. Cost: one atomic
 * load while nothing is stale; else a scan under a mutex.
 */
int cli_mirror_is_stale(struct cli_fs *fs, uint64_t ino, uint16_t iod);

/**
 * The replicas a read of file iod k of mirrored file ino asks, in order:
 * order[0] first, order[1] when that fails (-EIO, -ESTALE). The first
 * rotates with turn (a per-call counter from cli_mirror_seed), so the load
 * spreads over both; a replica this client recorded stale, or holds down
 * after a timeout, goes second. Both are always listed: the iod refuses a
 * fenced replica's reads itself, so no hint can make a readable file
 * unreadable. Cost: two cli_mirror_is_stale and two held-down checks.
 * @param[in] fs the mounted file system
 * @param[in] ino the file
 * @param[in] l its layout (mirror 2, checked by stripe_layout_check)
 * @param[in] k file-relative iod (< l->count)
 * @param[in] turn the call's rotation counter
 * @param[out] order the two iod table indexes, first choice first
 */
void cli_mirror_read_order(struct cli_fs *fs, uint64_t ino,
			   const struct proto_layout *l, uint16_t k,
			   unsigned turn, uint16_t order[2]);

/**
 * Take note of how iod answered a mirrored read of ino (IO_READ or IO_SEEK,
 * both sent with PROTO_IO_MIRROR, which a fenced replica refuses): a
 * success from a replica recorded stale here means the mgr resynced it and
 * lifted its fence, so the record is forgotten. Cost: one atomic load
 * while nothing is recorded.
 * @param[in] fs the mounted file system
 * @param[in] ino the file
 * @param[in] iod the replica that answered
 * @param[in] rc its result: 0 or -errno
 */
void cli_mirror_read_done(struct cli_fs *fs, uint64_t ino, uint16_t iod,
			  int rc);

/**
 * Record iod's replica of mirrored file ino stale at the mgr (STALE_MARK,
 * answered once the mgr committed it and the iod is fenced) and remember
 * it as a hint, so this client asks that replica last. Sent for
 * every failed replica write, even one remembered: the mgr's resync may
 * have cleared an earlier record, and each mark bumps the record's
 * generation so a resync running meanwhile does not clear it.
 * Cost: one mgr round trip (and an LMDB commit there).
 * @return 0, -ENOMEM, or the mgr call's error (-EIO, -ETIMEDOUT, the mgr's
 *	-EINVAL / -ENOENT)
 */
int cli_mirror_mark_stale(struct cli_fs *fs, uint64_t ino, uint16_t iod);

/**
 * Forget the hint of cli_mirror_mark_stale for (ino, iod): a write to that
 * replica succeeded, or a mirrored read from it did, so it is back (after
 * a write it may still be fenced at its iod until resynced, which then
 * answers its reads with -ESTALE). Cost: one atomic load while nothing is
 * remembered; else a scan under a mutex.
 */
void cli_mirror_forget(struct cli_fs *fs, uint64_t ino, uint16_t iod);

/** A random per-client start of the read rotation (so clients reading
 * the same file do not all pick the same replica first). */
unsigned cli_mirror_seed(void);

/** Free the stale memory of fs (at unmount). */
void cli_mirror_free(struct cli_fs *fs);

#endif

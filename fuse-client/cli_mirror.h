/*
 * cli_mirror.h - the client's side of mirrored layouts (HACKING.md
 * "Mirroring"): which iod holds replica r of a file-relative stripe index,
 * which replica a read goes to, and the replicas this client recorded
 * stale at the mgr (STALE_MARK), which it does not read first until a
 * write to them succeeds again (the iods fence stale replicas; this is only
 * a hint that saves the round trip of a refused read).
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
 * Whether this client recorded iod's replica of ino stale and no write to
 * it succeeded since. Cost: one atomic load while nothing is stale; else a
 * scan under a mutex.
 */
int cli_mirror_is_stale(struct cli_fs *fs, uint64_t ino, uint16_t iod);

/**
 * Record iod's replica of mirrored file ino stale at the mgr (STALE_MARK,
 * answered once the mgr committed it and the iod is fenced) and remember
 * it as a hint, so this client does not send reads there first. Sent for
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
 * replica succeeded, so it is back (it may still be fenced at its iod until
 * resynced, which then answers its reads with -ESTALE). Cost: one atomic
 * load while nothing is remembered; else a scan under a mutex.
 */
void cli_mirror_forget(struct cli_fs *fs, uint64_t ino, uint16_t iod);

/** A random per-client start of the read rotation (so clients reading
 * the same file do not all pick the same replica first). */
unsigned cli_mirror_seed(void);

/** Free the stale memory of fs (at unmount). */
void cli_mirror_free(struct cli_fs *fs);

#endif

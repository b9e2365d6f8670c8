/*
 * cli_mirror.h - the client's side of mirrored layouts (HACKING.md
 * "Mirroring"): which iod holds replica r of a file-relative stripe index,
 * which replica a read goes to, and the replicas this client recorded
 * stale at the mgr (STALE_MARK) and so never reads again.
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
 * Whether this client recorded iod's replica of ino stale. Cost: one
 * atomic load while nothing is stale; else a scan under a mutex.
 */
int cli_mirror_is_stale(struct cli_fs *fs, uint64_t ino, uint16_t iod);

/**
 * Record iod's replica of mirrored file ino stale at the mgr (STALE_MARK,
 * answered after the mgr committed it) and remember it, so this client
 * never reads that replica again. A replica already remembered costs
 * nothing. Cost: one mgr round trip the first time.
 * @return 0, -ENOMEM, or the mgr call's error (-EIO, -ETIMEDOUT, the mgr's
 *	-EINVAL / -ENOENT)
 */
int cli_mirror_mark_stale(struct cli_fs *fs, uint64_t ino, uint16_t iod);

/** A random per-client start of the read rotation (so clients reading
 * the same file do not all pick the same replica first). */
unsigned cli_mirror_seed(void);

/** Free the stale memory of fs (at unmount). */
void cli_mirror_free(struct cli_fs *fs);

#endif

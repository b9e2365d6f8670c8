/*
 * stripe.h - striping math. A file is cut into stripe units dealt round-robin
 * over the layout's iods; PVFS keeps each iod's local object contiguous:
 *   unit index   u = off / unit
 *   file iod     k = u % count              (table index (first + k) % niods)
 *   local offset   = (u / count) * unit + off % unit
 */
#ifndef RPFS_STRIPE_H
#define RPFS_STRIPE_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* One contiguous piece of a file range that lives on one iod. */
struct stripe_piece {
	uint16_t k;         /* file-relative iod index, 0..count-1 */
	uint16_t iod;       /* iod table index: (first + k) % niods */
	uint64_t local_off; /* offset in that iod's object */
	uint64_t len;
	uint64_t buf_off;   /* offset of this piece within the caller's range */
};

/**
 * Check a layout against the iod table size.
 * @return 0, or -EINVAL (unit not a power of two in [4096, 64 MiB], count 0
 *	or > niods, first >= niods)
 */
int stripe_layout_check(const struct proto_layout *l, uint16_t niods);

/**
 * Cut [off, off + len) into per-iod pieces, in file order. Pieces never span
 * a stripe unit boundary. Cost: O(pieces).
 * @param[out] out room for max pieces
 * @param[out] n pieces written
 * @return 0, -EINVAL bad layout or off + len overflows, -E2BIG more than max
 */
int stripe_map(const struct proto_layout *l, uint16_t niods, uint64_t off,
	       uint64_t len, struct stripe_piece *out, size_t max, size_t *n);

/** Pieces stripe_map() needs for [off, off + len). */
size_t stripe_npieces(const struct proto_layout *l, uint64_t off, uint64_t len);

/**
 * Size of the k-th iod's local object for a file of fsize bytes: the bytes
 * of the file that live there, measured as the end of the last one.
 */
uint64_t stripe_local_size(const struct proto_layout *l, uint16_t k,
			   uint64_t fsize);

#endif

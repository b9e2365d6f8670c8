/*
 * stripe.h - striping math. A file is cut into stripe units dealt round-robin
 * over the layout's iods; PVFS keeps each iod's local object contiguous:
 *   unit index   u = off / unit
 *   file iod     k = u % count              (table index (first + k) % niods)
 *   local offset   = (u / count) * unit + off % unit
 * A mirrored layout (mirror 2) uses the same math over the mirror groups
 * instead of the iods: "niods" below is then the number of groups, and both
 * iods of group (first + k) % ngroups hold the same object.
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
 * Check a layout against the iod table size (the group count if mirrored:
 * see stripe_width).
 * @return 0, or -EINVAL (unit not a power of two in [4096, 64 MiB], count 0
 *	or > niods, first >= niods, mirror above 2)
 */
int stripe_layout_check(const struct proto_layout *l, uint16_t niods);

/** What a layout's count and first index: ngroups when l is mirrored
 * (mirror 2), else niods. */
static inline uint16_t stripe_width(const struct proto_layout *l,
				    uint16_t niods, uint16_t ngroups)
{
	return l->mirror == 2 ? ngroups : niods;
}

#define STRIPE_MAX_DOMAIN 63 /* failure domain name length */

/**
 * Form the mirror groups of an iod table: pairs of distinct iods. Without
 * failure domains (domains NULL, or every name "") iods 2i and 2i + 1 pair.
 * With domains, every pair spans two domains: the iod of lowest index in
 * the domain with the most iods left pairs with the lowest index of the
 * next largest domain (ties: the domain seen first in the table), so the
 * result is deterministic and pairs all iods but at most one when that is
 * possible at all. Groups are sorted by their first iod, which is the lower
 * one. An odd iod out is in no group. Cost: O(niods x domains).
 * @param domains NULL or niods names (1..63 chars [A-Za-z0-9._-], or "")
 * @param[out] out room for niods / 2 groups
 * @param[out] msg on error, names the bad or unpairable domains
 * @return 0; -EINVAL a bad name, some iods named and some not, or no
 *	pairing across domains exists (one domain holds too many iods)
 */
int stripe_groups_form(const char *const *domains, uint16_t niods,
		       struct proto_group *out, uint16_t *ngroups, char *msg,
		       size_t msgcap);

/** Whether s is a valid failure domain name (1..63 of [A-Za-z0-9._-]). */
int stripe_domain_ok(const char *s);

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

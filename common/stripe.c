/*
 * stripe.c - striping math: which iod holds which bytes of a file, and where
 * in its local object. Pure arithmetic, no state; safe from any thread.
 *
 * Unit u = off / unit of a file lives on file iod k = u % count at local
 * offset (u / count) * unit + off % unit. Local offsets never exceed the
 * file offset they map, so nothing here can overflow once off + len is
 * known to fit in 64 bits.
 */
#include "stripe.h"

#include <errno.h>
#include <stdbool.h>

#define STRIPE_UNIT_MIN 4096u
#define STRIPE_UNIT_MAX (64u * 1024 * 1024)

/* A unit is a power of two in [4096, 64 MiB]. */
static bool stripe_unit_ok(uint32_t unit)
{
	return unit >= STRIPE_UNIT_MIN && unit <= STRIPE_UNIT_MAX &&
	       !(unit & (unit - 1));
}

/* Check a layout against the iod table size (see stripe.h). */
int stripe_layout_check(const struct proto_layout *l, uint16_t niods)
{
	if (!stripe_unit_ok(l->unit))
		return -EINVAL;
	if (l->count < 1 || l->count > niods)
		return -EINVAL;
	if (l->first >= niods)
		return -EINVAL;
	return 0;
}

/* Count the stripe units [off, off + len) touches; 0 for an empty range or
 * an invalid unit. A range running past 2^64 is counted up to 2^64 - 1. */
size_t stripe_npieces(const struct proto_layout *l, uint64_t off, uint64_t len)
{
	uint64_t last;

	if (len == 0 || !stripe_unit_ok(l->unit))
		return 0;
	if (__builtin_add_overflow(off, len - 1, &last))
		last = UINT64_MAX;
	return (size_t)(last / l->unit - off / l->unit + 1);
}

/* Cut [off, off + len) at stripe unit boundaries, one piece per unit, in
 * file order. Nothing is written unless all pieces fit. Cost: O(pieces). */
int stripe_map(const struct proto_layout *l, uint16_t niods, uint64_t off,
	       uint64_t len, struct stripe_piece *out, size_t max, size_t *n)
{
	uint64_t end, pos, unit;
	size_t i = 0;

	*n = 0;
	if (stripe_layout_check(l, niods))
		return -EINVAL;
	if (__builtin_add_overflow(off, len, &end))
		return -EINVAL;
	if (stripe_npieces(l, off, len) > max)
		return -E2BIG;
	unit = l->unit;
	for (pos = off; pos < end; i++) {
		uint64_t u = pos / unit, within = pos % unit;
		uint64_t plen = unit - within;
		uint16_t k = (uint16_t)(u % l->count);

		if (plen > end - pos)
			plen = end - pos;
		out[i].k = k;
		out[i].iod = (uint16_t)(((uint32_t)l->first + k) % niods);
		out[i].local_off = (u / l->count) * unit + within;
		out[i].len = plen;
		out[i].buf_off = pos - off;
		pos += plen;
	}
	*n = i;
	return 0;
}

/* Local object size of file iod k for a file of fsize bytes: whole rows of
 * count units give each iod one unit; the last partial row gives iod k the
 * part of it that falls in its unit. Cost: O(1). */
uint64_t stripe_local_size(const struct proto_layout *l, uint16_t k,
			   uint64_t fsize)
{
	uint64_t row, rows, rem, unit = l->unit, mine;

	if (!stripe_unit_ok(l->unit) || l->count < 1 || k >= l->count)
		return 0;
	row = unit * l->count; /* <= 64 MiB * 65535, no overflow */
	rows = fsize / row;
	rem = fsize % row;
	mine = 0;
	if (rem > (uint64_t)k * unit) {
		mine = rem - (uint64_t)k * unit;
		if (mine > unit)
			mine = unit;
	}
	return rows * unit + mine;
}

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

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
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
	if (l->first >= niods || l->mirror > 2)
		return -EINVAL;
	return 0;
}

/* See stripe.h. */
int stripe_domain_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > STRIPE_MAX_DOMAIN)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' &&
		    s[i] != '-')
			return 0;
	return 1;
}

/* Domain ids of the table (index of the first iod naming the same domain)
 * and the iods left per domain id. @return 0, or -EINVAL with msg set */
static int groups_domains(const char *const *domains, uint16_t niods,
			  uint16_t *dom, uint16_t *left, char *msg, size_t cap)
{
	int named = 0;

	for (uint16_t i = 0; i < niods; i++)
		named += domains[i][0] != '\0';
	if (named && named != niods) {
		snprintf(msg, cap, "failure domains: either every iod names one or "
			 "none does (%d of %u do)", named, niods);
		return -EINVAL;
	}
	for (uint16_t i = 0; i < niods; i++) {
		if (named && !stripe_domain_ok(domains[i])) {
			snprintf(msg, cap, "iod %u: domain: expected 1..%d characters "
				 "[A-Za-z0-9._-], got \"%s\"", i, STRIPE_MAX_DOMAIN,
				 domains[i]);
			return -EINVAL;
		}
		dom[i] = i;
		for (uint16_t j = 0; j < i; j++)
			if (!strcmp(domains[j], domains[i])) {
				dom[i] = dom[j];
				break;
			}
		left[i] = 0;
	}
	for (uint16_t i = 0; i < niods; i++)
		left[dom[i]]++;
	return 0;
}

/* The domain id with the most iods left, other than skip (ties: lowest
 * id); niods when none has any left. */
static uint16_t groups_biggest(const uint16_t *left, uint16_t niods,
			       uint16_t skip)
{
	uint16_t best = niods;

	for (uint16_t d = 0; d < niods; d++)
		if (d != skip && left[d] && (best == niods || left[d] > left[best]))
			best = d;
	return best;
}

/* The lowest unpaired iod of domain id d; marks it paired. */
static uint16_t groups_take(const uint16_t *dom, uint8_t *paired,
			    uint16_t niods, uint16_t d)
{
	for (uint16_t i = 0; i < niods; i++)
		if (dom[i] == d && !paired[i]) {
			paired[i] = 1;
			return i;
		}
	return niods; /* not reached: left[d] > 0 */
}

/* Whether niods / 2 pairs across domains exist: no domain may hold more
 * iods than all the others (plus the odd one out). If not, name the
 * domains and their sizes in msg. @return 0 or -EINVAL */
static int groups_feasible(const char *const *domains, uint16_t niods,
			   const uint16_t *dom, const uint16_t *left, char *msg,
			   size_t cap)
{
	uint16_t big = groups_biggest(left, niods, niods);
	size_t off;

	if (left[big] <= niods - left[big] + (niods & 1))
		return 0;
	off = (size_t)snprintf(msg, cap, "failure domains: cannot pair the iods "
			       "across domains: domain \"%s\" holds %u of the %u "
			       "iods (domains:", domains[big], left[big], niods);
	for (uint16_t i = 0; i < niods && off < cap; i++)
		if (dom[i] == i)
			off += (size_t)snprintf(msg + off, cap - off, " %s=%u",
						domains[i], left[i]);
	if (off < cap)
		snprintf(msg + off, cap - off, ")");
	return -EINVAL;
}

/* Order groups by their first iod (insertion sort: at most 128). */
static void groups_sort(struct proto_group *g, uint16_t n)
{
	for (uint16_t i = 1; i < n; i++) {
		struct proto_group x = g[i];
		uint16_t j = i;

		for (; j > 0 && g[j - 1].iod[0] > x.iod[0]; j--)
			g[j] = g[j - 1];
		g[j] = x;
	}
}

/* See stripe.h. */
int stripe_groups_form(const char *const *domains, uint16_t niods,
		       struct proto_group *out, uint16_t *ngroups, char *msg,
		       size_t msgcap)
{
	uint16_t dom[PROTO_MAX_IODS], left[PROTO_MAX_IODS], n = 0;
	uint8_t paired[PROTO_MAX_IODS] = { 0 };
	int rc, named = 0;

	*ngroups = 0;
	if (niods > PROTO_MAX_IODS)
		return -EINVAL;
	for (uint16_t i = 0; domains && i < niods; i++)
		named |= domains[i][0] != '\0';
	if (!named) {
		for (uint16_t g = 0; g < niods / 2; g++)
			out[g] = (struct proto_group){ { (uint16_t)(2 * g),
							 (uint16_t)(2 * g + 1) } };
		*ngroups = niods / 2;
		return 0;
	}
	rc = groups_domains(domains, niods, dom, left, msg, msgcap);
	if (rc)
		return rc;
	rc = groups_feasible(domains, niods, dom, left, msg, msgcap);
	if (rc)
		return rc;
	while (n < niods / 2) {
		uint16_t a = groups_biggest(left, niods, niods);
		uint16_t b = a == niods ? niods : groups_biggest(left, niods, a);
		uint16_t x, y;

		if (b == niods) {
			snprintf(msg, msgcap, "failure domains: cannot pair the iods "
				 "across domains: domain \"%s\" holds %u of the %u "
				 "iods left", domains[a], left[a], niods - 2 * n);
			return -EINVAL;
		}
		x = groups_take(dom, paired, niods, a);
		y = groups_take(dom, paired, niods, b);
		left[a]--;
		left[b]--;
		out[n++] = (struct proto_group){ { x < y ? x : y, x < y ? y : x } };
	}
	groups_sort(out, n);
	*ngroups = n;
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

/*
 * test_stripe.c - unit tests of the striping math (common/proto/stripe.c),
 * checked against a byte-by-byte brute-force reference on random layouts
 * and ranges (seeded PRNG, so failures reproduce). Exits 0 when all pass.
 */
#include "stripe.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static long checks;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		checks++;                                                    \
		if (!(cond)) {                                               \
			if (++failures <= 50) {                              \
				fprintf(stderr, "%s:%d: FAIL: %s: ",         \
					__FILE__, __LINE__, #cond);          \
				fprintf(stderr, __VA_ARGS__);                \
				fputc('\n', stderr);                         \
			}                                                    \
		}                                                            \
	} while (0)

/* xorshift64*: small, seeded, reproducible. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

static uint64_t rnd_below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

/* Reference: where one byte of the file lives, straight from the formula. */
static void ref_byte(const struct proto_layout *l, uint16_t niods, uint64_t b,
		     uint16_t *k, uint16_t *iod, uint64_t *local)
{
	uint64_t u = b / l->unit;

	*k = (uint16_t)(u % l->count);
	*iod = (uint16_t)((l->first + *k) % niods);
	*local = (u / l->count) * l->unit + b % l->unit;
}

/* Check stripe_map over [off, off+len) byte by byte against ref_byte. */
static void check_map_bytes(const struct proto_layout *l, uint16_t niods,
			    uint64_t off, uint64_t len)
{
	static struct stripe_piece p[4096];
	size_t n = 12345, want = stripe_npieces(l, off, len);
	uint64_t b = off;
	int rc = stripe_map(l, niods, off, len, p, 4096, &n);

	CHECK(rc == 0, "map rc %d unit %u count %u off %" PRIu64 " len %" PRIu64,
	      rc, l->unit, l->count, off, len);
	if (rc)
		return;
	CHECK(n == want, "npieces %zu vs %zu", n, want);
	for (size_t i = 0; i < n; i++) {
		CHECK(p[i].len > 0, "piece %zu empty", i);
		CHECK(p[i].buf_off == b - off, "piece %zu buf_off", i);
		/* never spans a unit boundary */
		CHECK(b / l->unit == (b + p[i].len - 1) / l->unit,
		      "piece %zu spans a unit", i);
		for (uint64_t j = 0; j < p[i].len; j++, b++) {
			uint16_t k, iod;
			uint64_t local;

			ref_byte(l, niods, b, &k, &iod, &local);
			if (k != p[i].k || iod != p[i].iod ||
			    local != p[i].local_off + j) {
				CHECK(false, "byte %" PRIu64 ": piece %zu k %u/%u iod %u/%u "
				      "local %" PRIu64 "/%" PRIu64, b, i, p[i].k, k,
				      p[i].iod, iod, p[i].local_off + j, local);
				return;
			}
		}
	}
	CHECK(b == off + len, "pieces cover %" PRIu64 " of %" PRIu64, b - off, len);
}

/* A random valid layout for niods iods. */
static struct proto_layout rnd_layout(uint16_t niods, unsigned max_shift)
{
	struct proto_layout l = { .mirror = 1 };

	memset(&l, 0, sizeof(l));
	l.mirror = 1;
	l.unit = 4096u << rnd_below(max_shift + 1);
	l.count = (uint16_t)(1 + rnd_below(niods));
	l.first = (uint16_t)rnd_below(niods);
	return l;
}

static void test_map_random(void)
{
	for (int t = 0; t < 3000; t++) {
		uint16_t niods = (uint16_t)(1 + rnd_below(t % 10 == 0 ? 256 : 9));
		struct proto_layout l = rnd_layout(niods, t % 7 == 0 ? 14 : 4);
		uint64_t cap = 4 * (uint64_t)l.unit, off, len;

		if (cap > 200000)
			cap = 200000; /* byte-by-byte: keep it fast */
		len = rnd_below(cap + 1);
		off = rnd_below((uint64_t)l.unit * l.count * 3);
		if (t % 5 == 0)
			off -= off % l.unit; /* aligned start */
		else if (t % 5 == 1) { /* straddle a unit boundary */
			off = (1 + rnd_below(3 * (uint64_t)l.count)) * l.unit;
			off -= rnd_below((len < off ? len : off) + 1);
		}
		if (t % 11 == 0 && l.unit <= 65536)
			len = l.unit;
		check_map_bytes(&l, niods, off, len);
	}
	/* far into the file: formula check on the pieces only */
	for (int t = 0; t < 2000; t++) {
		uint16_t niods = (uint16_t)(1 + rnd_below(256));
		struct proto_layout l = rnd_layout(niods, 14);
		static struct stripe_piece p[16];
		uint64_t off, len;
		size_t n;

		off = rnd();
		off >>= 1 + rnd_below(30);
		len = 1 + rnd_below(8 * (uint64_t)l.unit);
		if (off > UINT64_MAX - len)
			continue;
		CHECK(stripe_map(&l, niods, off, len, p, 16, &n) == 0, "far map");
		for (size_t i = 0, b = 0; i < n; b += p[i].len, i++) {
			uint16_t k, iod;
			uint64_t local, last = off + b + p[i].len - 1;

			ref_byte(&l, niods, off + b, &k, &iod, &local);
			CHECK(p[i].k == k && p[i].iod == iod && p[i].local_off == local &&
			      p[i].buf_off == b, "far piece %zu", i);
			ref_byte(&l, niods, last, &k, &iod, &local);
			CHECK(p[i].k == k && p[i].local_off + p[i].len - 1 == local,
			      "far piece %zu end", i);
		}
	}
}

static void test_map_edges(void)
{
	struct proto_layout l = { 4096, 3, 1 };
	struct stripe_piece p[8];
	size_t n;

	/* empty range */
	n = 99;
	CHECK(stripe_map(&l, 4, 12345, 0, p, 8, &n) == 0 && n == 0, "empty");
	CHECK(stripe_npieces(&l, 12345, 0) == 0, "npieces empty");
	/* one byte, one piece */
	CHECK(stripe_map(&l, 4, 4096 * 4 + 5, 1, p, 8, &n) == 0 && n == 1 &&
	      p[0].k == 1 && p[0].iod == 2 && p[0].local_off == 4096 + 5,
	      "one byte");
	/* first wraps around the iod table */
	l = (struct proto_layout){ 4096, 4, 3 };
	CHECK(stripe_map(&l, 4, 0, 4 * 4096, p, 8, &n) == 0 && n == 4 &&
	      p[0].iod == 3 && p[1].iod == 0 && p[2].iod == 1 && p[3].iod == 2,
	      "wrap");
	/* exactly max pieces / one too many */
	CHECK(stripe_map(&l, 4, 100, 4096 * 2, p, 3, &n) == 0 && n == 3, "max ok");
	n = 99;
	CHECK(stripe_map(&l, 4, 100, 4096 * 3, p, 3, &n) == -E2BIG && n == 0, "E2BIG");
	CHECK(stripe_npieces(&l, 100, 4096 * 3) == 4, "npieces 4");
	/* overflow */
	CHECK(stripe_map(&l, 4, UINT64_MAX, 2, p, 8, &n) == -EINVAL, "overflow");
	CHECK(stripe_map(&l, 4, UINT64_MAX - 10, 10, p, 8, &n) == 0 && n == 1 &&
	      p[0].len == 10, "end at 2^64-1");
	CHECK(stripe_map(&l, 4, 1, UINT64_MAX - 1, p, 8, &n) == -E2BIG, "huge E2BIG");
	CHECK(stripe_npieces(&l, 0, UINT64_MAX) == (size_t)(UINT64_MAX / 4096 + 1),
	      "npieces huge");
	CHECK(stripe_npieces(&l, 10, UINT64_MAX) == (size_t)(UINT64_MAX / 4096 + 1),
	      "npieces saturates");
	/* bad layouts */
	static const struct { struct proto_layout l; uint16_t niods; } bad[] = {
		{ { 0, 1, 0 }, 4 }, { { 2048, 1, 0 }, 4 }, { { 4097, 1, 0 }, 4 },
		{ { 1u << 27, 1, 0 }, 4 }, { { 3 * 4096, 1, 0 }, 4 },
		{ { 4096, 0, 0 }, 4 }, { { 4096, 5, 0 }, 4 }, { { 4096, 1, 4 }, 4 },
		{ { 4096, 1, 0 }, 0 }, { { 4096, 1, 65535 }, 65535 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		n = 99;
		CHECK(stripe_layout_check(&bad[i].l, bad[i].niods) == -EINVAL,
		      "check bad %zu", i);
		CHECK(stripe_map(&bad[i].l, bad[i].niods, 0, 100, p, 8, &n) == -EINVAL &&
		      n == 0, "map bad %zu", i);
	}
	static const struct { struct proto_layout l; uint16_t niods; } good[] = {
		{ { 4096, 1, 0 }, 1 }, { { 1u << 26, 256, 255 }, 256 },
		{ { 65536, 4, 3 }, 4 }, { { 65536, 2, 3 }, 4 },
		{ { 4096, 65535, 65534 }, 65535 },
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK(stripe_layout_check(&good[i].l, good[i].niods) == 0,
		      "check good %zu", i);
	/* max count and first: iod index arithmetic does not wrap at 16 bits */
	l = (struct proto_layout){ 4096, 65535, 65534 };
	CHECK(stripe_map(&l, 65535, 4096 * 3, 1, p, 8, &n) == 0 && n == 1 &&
	      p[0].k == 3 && p[0].iod == 2, "16-bit wrap");
	/* invalid layouts give no pieces and no size */
	l = (struct proto_layout){ 0, 0, 0 };
	CHECK(stripe_npieces(&l, 0, 100) == 0, "npieces no layout");
	CHECK(stripe_local_size(&l, 0, 100) == 0, "local_size no layout");
}

/* Reference local size: the end of the last byte below fsize living on k. */
static uint64_t ref_local_size_bytes(const struct proto_layout *l, uint16_t k,
				     uint64_t fsize)
{
	uint64_t end = 0;

	for (uint64_t b = 0; b < fsize; b++) {
		uint64_t u = b / l->unit;

		if (u % l->count == k)
			end = (u / l->count) * l->unit + b % l->unit + 1;
	}
	return end;
}

/* The same, unit by unit, for sizes too large to walk byte by byte. */
static uint64_t ref_local_size_units(const struct proto_layout *l, uint16_t k,
				     uint64_t fsize)
{
	uint64_t end = 0;

	for (uint64_t u = 0; u * l->unit < fsize; u++) {
		uint64_t in = fsize - u * l->unit;

		if (in > l->unit)
			in = l->unit;
		if (u % l->count == k)
			end = (u / l->count) * l->unit + in;
	}
	return end;
}

static void test_local_size(void)
{
	/* byte by byte, small layouts */
	for (int t = 0; t < 120; t++) {
		struct proto_layout l = { 4096, (uint16_t)(1 + rnd_below(5)), 0 };
		uint64_t fsize = rnd_below((uint64_t)l.unit * l.count * 3 + 2);

		if (t < 4)
			fsize = (uint64_t)t * 4096 * l.count; /* row boundaries */
		for (uint16_t k = 0; k < l.count; k++) {
			uint64_t want = ref_local_size_bytes(&l, k, fsize);
			uint64_t got = stripe_local_size(&l, k, fsize);

			CHECK(got == want, "local_size count %u k %u fsize %" PRIu64
			      ": %" PRIu64 " want %" PRIu64, l.count, k, fsize, got, want);
		}
	}
	/* unit by unit, random layouts and sizes */
	for (int t = 0; t < 3000; t++) {
		struct proto_layout l = rnd_layout(1 + (uint16_t)rnd_below(16), 14);
		uint64_t fsize = rnd_below((uint64_t)l.unit * l.count * 5 + 3);

		for (uint16_t k = 0; k < l.count; k++) {
			uint64_t want = ref_local_size_units(&l, k, fsize);
			uint64_t got = stripe_local_size(&l, k, fsize);

			CHECK(got == want, "local_size(u) unit %u count %u k %u fsize %"
			      PRIu64 ": %" PRIu64 " want %" PRIu64, l.unit, l.count, k,
			      fsize, got, want);
		}
		CHECK(stripe_local_size(&l, l.count, fsize) == 0, "k >= count");
		/* every byte of the file is on exactly one iod */
		uint64_t total = 0;
		for (uint16_t k = 0; k < l.count; k++)
			total += stripe_local_size(&l, k, fsize);
		CHECK(total == fsize, "sum of local sizes %" PRIu64 " != %" PRIu64,
		      total, fsize);
	}
	/* the end of the last piece stripe_map gives each iod */
	for (int t = 0; t < 500; t++) {
		uint16_t niods = (uint16_t)(1 + rnd_below(8));
		struct proto_layout l = rnd_layout(niods, 3);
		uint64_t fsize = rnd_below((uint64_t)l.unit * l.count * 4);
		static struct stripe_piece p[64];
		uint64_t end[8] = { 0 };
		size_t n;

		CHECK(stripe_map(&l, niods, 0, fsize, p, 64, &n) == 0, "map for size");
		for (size_t i = 0; i < n; i++)
			end[p[i].k] = p[i].local_off + p[i].len;
		for (uint16_t k = 0; k < l.count; k++)
			CHECK(stripe_local_size(&l, k, fsize) == end[k], "map vs size k %u", k);
	}
	/* huge sizes do not overflow */
	struct proto_layout l = { 1u << 26, 65535, 0 };
	CHECK(stripe_local_size(&l, 0, UINT64_MAX) ==
	      (UINT64_MAX / ((uint64_t)l.unit * l.count)) * l.unit + l.unit,
	      "huge local size k0");
	CHECK(stripe_local_size(&l, 65534, UINT64_MAX) <= UINT64_MAX / 65535 + l.unit,
	      "huge local size last");
	l = (struct proto_layout){ 4096, 1, 0 };
	CHECK(stripe_local_size(&l, 0, UINT64_MAX) == UINT64_MAX, "count 1 identity");
}

/* Whether groups g[0..n) are exactly the pairs want[0..n). */
static bool groups_are(const struct proto_group *g, uint16_t n,
		       const uint16_t (*want)[2], uint16_t nwant)
{
	if (n != nwant)
		return false;
	for (uint16_t i = 0; i < n; i++)
		if (g[i].iod[0] != want[i][0] || g[i].iod[1] != want[i][1])
			return false;
	return true;
}

/* Mirror groups: plain pairs, pairs across failure domains, refusals. */
static void test_groups(void)
{
	static const uint16_t plain[][2] = { { 0, 1 }, { 2, 3 } };
	static const uint16_t span[][2] = { { 0, 2 }, { 1, 3 } };
	static const uint16_t odd[][2] = { { 0, 1 }, { 2, 4 } };
	struct proto_group g[PROTO_MAX_IODS / 2];
	const char *none[5] = { "", "", "", "", "" };
	const char *rack[4] = { "rackA", "rackA", "rackB", "rackB" };
	const char *three[5] = { "a", "b", "b", "c", "a" };
	const char *bad[4] = { "a", "b", "c", "d/e" };
	const char *mixed[4] = { "a", "", "b", "c" };
	const char *lop[4] = { "a", "a", "a", "b" };
	const char *many[PROTO_MAX_IODS];
	static char names[PROTO_MAX_IODS][8];
	char msg[256];
	uint16_t n;

	CHECK(stripe_groups_form(NULL, 4, g, &n, msg, sizeof(msg)) == 0 &&
	      groups_are(g, n, plain, 2), "plain 4");
	CHECK(stripe_groups_form(none, 5, g, &n, msg, sizeof(msg)) == 0 &&
	      n == 2 && g[1].iod[0] == 2 && g[1].iod[1] == 3, "plain 5: odd one out");
	CHECK(stripe_groups_form(NULL, 1, g, &n, msg, sizeof(msg)) == 0 && n == 0,
	      "one iod: no group");
	CHECK(stripe_groups_form(rack, 4, g, &n, msg, sizeof(msg)) == 0 &&
	      groups_are(g, n, span, 2), "two racks span");
	/* a,b,b,c,a: a and b are largest (2 each): 0-1, then b,a: 2-4, 3 out */
	CHECK(stripe_groups_form(three, 5, g, &n, msg, sizeof(msg)) == 0 &&
	      groups_are(g, n, odd, 2), "three domains: %u groups", n);
	msg[0] = '\0';
	CHECK(stripe_groups_form(lop, 4, g, &n, msg, sizeof(msg)) == -EINVAL &&
	      strstr(msg, "\"a\" holds 3 of the 4") != NULL &&
	      strstr(msg, "a=3 b=1)") != NULL, "lopsided refused: %s", msg);
	CHECK(stripe_groups_form(bad, 4, g, &n, msg, sizeof(msg)) == -EINVAL &&
	      strstr(msg, "d/e") != NULL, "bad name: %s", msg);
	CHECK(stripe_groups_form(mixed, 4, g, &n, msg, sizeof(msg)) == -EINVAL &&
	      strstr(msg, "none") != NULL, "some named: %s", msg);
	/* 256 iods in 4 domains of 64, interleaved: every pair spans two */
	for (int i = 0; i < PROTO_MAX_IODS; i++) {
		snprintf(names[i], sizeof(names[i]), "d%d", i % 4);
		many[i] = names[i];
	}
	CHECK(stripe_groups_form(many, PROTO_MAX_IODS, g, &n, msg, sizeof(msg)) == 0 &&
	      n == PROTO_MAX_IODS / 2, "256 iods");
	for (uint16_t i = 0; i < n; i++)
		CHECK(strcmp(many[g[i].iod[0]], many[g[i].iod[1]]) != 0 &&
		      g[i].iod[0] < g[i].iod[1] && (i == 0 || g[i - 1].iod[0] < g[i].iod[0]),
		      "group %u spans and is ordered", i);
	CHECK(stripe_domain_ok("rack-1.a_b") && !stripe_domain_ok("") &&
	      !stripe_domain_ok("a b") &&
	      stripe_domain_ok("0123456789012345678901234567890123456789012345678901234567890ab") &&
	      !stripe_domain_ok("0123456789012345678901234567890123456789012345678901234567890abc"),
	      "domain names");
}

/* A mirrored layout maps over groups: stripe_width picks the table. */
static void test_mirror_width(void)
{
	struct proto_layout l = { 65536, 2, 1, 2 };
	struct stripe_piece p[8];
	size_t n = 0;

	CHECK(stripe_width(&l, 4, 2) == 2, "width mirror 2");
	l.mirror = 1;
	CHECK(stripe_width(&l, 4, 2) == 4, "width mirror 1");
	l.mirror = 2;
	CHECK(stripe_layout_check(&l, 2) == 0, "mirror 2 over 2 groups");
	l.count = 3;
	CHECK(stripe_layout_check(&l, 2) == -EINVAL, "count above groups");
	l.count = 2;
	l.mirror = 3;
	CHECK(stripe_layout_check(&l, 4) == -EINVAL, "mirror 3");
	l.mirror = 2;
	/* units 0..3 of first=1 over 2 groups: group 1, 0, 1, 0 */
	CHECK(stripe_map(&l, 2, 0, 4 * 65536, p, 8, &n) == 0 && n == 4 &&
	      p[0].iod == 1 && p[1].iod == 0 && p[2].iod == 1 && p[3].iod == 0 &&
	      p[2].local_off == 65536, "mirror map over groups");
}

int main(void)
{
	test_map_edges();
	test_map_random();
	test_local_size();
	test_groups();
	test_mirror_width();
	printf("test_stripe: %ld checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}

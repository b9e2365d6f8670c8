/*
 * test_seal.c - the sealed records of net_seal.h: a stream sealed from
 * scattered iovecs (payload pieces left in place, records cut at
 * NET_SEAL_MAX) opens to the same bytes however it arrives; a flipped bit
 * anywhere, a record replayed, dropped or swapped, the other direction's
 * key, or a bad length field fails it; a partial record waits. Each in
 * both modes: NET_SEAL_MAC, and NET_SEAL_AEAD, whose stream holds none of
 * the plain bytes and whose keys differ from the MAC mode's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "check.h"
#include "net_seal.h"

static uint8_t key[NET_KEY_LEN], cn[NET_AUTH_NONCE_LEN], sn[NET_AUTH_NONCE_LEN];
static int mode; /* NET_SEAL_MAC or NET_SEAL_AEAD: the mode under test */

/* Seal the len bytes of src, given as pieces of the sizes in cuts (0
 * ended), into a new buffer: the stream as sent. */
static uint8_t *seal_stream(struct net_seal *tx, const uint8_t *src, size_t len,
			    const size_t *cuts, size_t *out_len)
{
	struct iovec in[64], out[64];
	static uint8_t meta[NET_SEAL_META(NET_SEAL_AEAD) * 4];
	uint8_t *buf = malloc(len + 64 * NET_SEAL_OVER);
	struct net_seal_cur cur;
	size_t off = 0, n = 0;
	int cnt = 0;

	for (; off < len && cuts[cnt]; cnt++) {
		size_t k = cuts[cnt] < len - off ? cuts[cnt] : len - off;
		in[cnt] = (struct iovec){ (void *)(src + off), k };
		off += k;
	}
	if (off < len)
		in[cnt++] = (struct iovec){ (void *)(src + off), len - off };
	net_seal_cur_init(&cur, in, cnt);
	for (int got; (got = net_seal_iov(tx, &cur, out, 64, meta, 4)) > 0;)
		for (int i = 0; i < got; i++) {
			CHECK(out[i].iov_len > 0, "an empty piece");
			memcpy(buf + n, out[i].iov_base, out[i].iov_len);
			n += out[i].iov_len;
		}
	*out_len = n;
	return buf;
}

/* Feed the sealed stream to an opener step bytes at a time, as a reader's
 * staging buffer would: consume what opens. @return 0 or the error; *got
 * the opened bytes, in order */
static int open_stream(struct net_seal *rx, const uint8_t *s, size_t len, size_t step,
		       uint8_t *got, size_t *got_len)
{
	static uint8_t stg[2 * NET_SEAL_MAX + 64];
	uint32_t vlen = 0, rlen = 0;
	size_t off = 0;
	int rc = 0;

	*got_len = 0;
	while (off < len && rc == 0) {
		size_t k = step < len - off ? step : len - off;
		if (k > sizeof(stg) - vlen - rlen)
			k = sizeof(stg) - vlen - rlen;
		memcpy(stg + vlen + rlen, s + off, k);
		off += k;
		rlen += (uint32_t)k;
		rc = net_seal_open(rx, stg, &vlen, &rlen);
		memcpy(got + *got_len, stg, vlen); /* the parser takes them all */
		*got_len += vlen;
		memmove(stg, stg + vlen, rlen);
		vlen = 0;
	}
	CHECK(rc || rlen == 0, "a whole stream left %u raw bytes", rlen);
	return rc;
}

static void pair(struct net_seal *tx, struct net_seal *rx)
{
	net_seal_init(tx, key, NET_AUTH_ROLE_CLIENT, mode, cn, sn);
	net_seal_init(rx, key, NET_AUTH_ROLE_CLIENT, mode, cn, sn);
}

/* Round trips of several sizes, piece layouts and arrival steps. */
static void test_round_trip(const uint8_t *data)
{
	static const size_t sizes[] = { 1, 47, NET_SEAL_MAX - 1, NET_SEAL_MAX,
					NET_SEAL_MAX + 1, 5 * NET_SEAL_MAX + 333 };
	static const size_t cuts[][6] = { { 0 }, { 1, 2, 3, 0 },
					  { 48, 100, NET_SEAL_MAX + 7, 0 } };
	static const size_t steps[] = { 1, 7, 4096, 1 << 20 };
	static uint8_t got[6 * NET_SEAL_MAX];

	for (size_t a = 0; a < sizeof(sizes) / sizeof(sizes[0]); a++)
		for (size_t b = 0; b < 3; b++)
			for (size_t c = 0; c < 4; c++) {
				struct net_seal tx, rx;
				size_t n, g;
				uint8_t *s;

				pair(&tx, &rx);
				s = seal_stream(&tx, data, sizes[a], cuts[b], &n);
				CHECK(n == sizes[a] + net_seal_records(sizes[a]) * NET_SEAL_OVER,
				      "size %zu: %zu sealed bytes", sizes[a], n);
				CHECK(open_stream(&rx, s, n, steps[c], got, &g) == 0,
				      "size %zu cuts %zu step %zu", sizes[a], b, steps[c]);
				CHECK(g == sizes[a] && !memcmp(got, data, g),
				      "size %zu cuts %zu step %zu: %zu bytes back", sizes[a],
				      b, steps[c], g);
				CHECK(tx.seq == rx.seq, "sequence %llu vs %llu",
				      (unsigned long long)tx.seq, (unsigned long long)rx.seq);
				/* the middle 32 bytes: plain in a MAC stream only */
				CHECK(sizes[a] < 32 ||
				      !memmem(s, n, data + sizes[a] / 2 - 16, 32) ==
				      (mode == NET_SEAL_AEAD),
				      "size %zu: plain bytes %s", sizes[a],
				      mode == NET_SEAL_AEAD ? "in an encrypted stream"
							    : "missing from a MAC stream");
				free(s);
			}
}

/* Every flipped bit of a two-record stream fails it (sampled in the
 * middle of the payload), but one in the second record's length, which may
 * only make that record wait for bytes that never come. */
static void test_tamper(const uint8_t *data)
{
	static const size_t none[] = { 0 };
	static uint8_t got[3 * NET_SEAL_MAX];
	const size_t r = NET_SEAL_MAX + NET_SEAL_OVER;
	struct net_seal tx, rx;
	size_t n, g;
	uint8_t *s;

	pair(&tx, &rx);
	s = seal_stream(&tx, data, NET_SEAL_MAX + 100, none, &n);
	for (size_t i = 0; i < n; i += (i < 64 || i + 64 > n || (i >= r - 64 && i < r + 64))
					? 1 : 97) {
		if (i >= r && i < r + NET_SEAL_HDR)
			continue;
		for (int bit = 0; bit < 8; bit++) {
			s[i] ^= (uint8_t)(1u << bit);
			pair(&tx, &rx);
			CHECK(open_stream(&rx, s, n, n, got, &g) == -EBADMSG,
			      "bit %d of byte %zu flipped: opened", bit, i);
			s[i] ^= (uint8_t)(1u << bit);
		}
	}
	free(s);
}

/* Replay, drop, swap, the wrong direction, zero and oversize lengths. */
static void test_order_and_keys(const uint8_t *data)
{
	static const size_t none[] = { 0 };
	static uint8_t got[4 * NET_SEAL_MAX], two[4 * NET_SEAL_MAX];
	const size_t r = NET_SEAL_MAX + NET_SEAL_OVER; /* one whole record */
	struct net_seal tx, rx;
	size_t n, g;
	uint8_t *s, zero[NET_SEAL_OVER + 1] = { 0 }, big[4] = { 1, 0x20, 0, 0 };

	pair(&tx, &rx);
	s = seal_stream(&tx, data, 2 * NET_SEAL_MAX, none, &n);
	CHECK(n == 2 * r, "two records: %zu bytes", n);
	memcpy(two, s, r); /* first twice: a replay */
	memcpy(two + r, s, r);
	pair(&tx, &rx);
	CHECK(open_stream(&rx, two, 2 * r, 2 * r, got, &g) == -EBADMSG, "replay opened");
	CHECK(g == NET_SEAL_MAX, "the first copy opened: %zu", g);
	pair(&tx, &rx);
	CHECK(open_stream(&rx, s + r, r, r, got, &g) == -EBADMSG, "a dropped record");
	memcpy(two, s + r, r); /* swapped */
	memcpy(two + r, s, r);
	pair(&tx, &rx);
	CHECK(open_stream(&rx, two, 2 * r, 2 * r, got, &g) == -EBADMSG, "swapped opened");
	net_seal_init(&rx, key, NET_AUTH_ROLE_SERVER, mode, cn, sn);
	CHECK(open_stream(&rx, s, n, n, got, &g) == -EBADMSG, "the other direction's key");
	net_seal_init(&rx, key, NET_AUTH_ROLE_CLIENT, !mode, cn, sn);
	CHECK(open_stream(&rx, s, n, n, got, &g) == -EBADMSG, "the other mode");
	cn[0] ^= 1;
	net_seal_init(&rx, key, NET_AUTH_ROLE_CLIENT, mode, cn, sn);
	cn[0] ^= 1;
	CHECK(open_stream(&rx, s, n, n, got, &g) == -EBADMSG, "another handshake's key");
	pair(&tx, &rx);
	CHECK(open_stream(&rx, zero, sizeof(zero), sizeof(zero), got, &g) == -EBADMSG,
	      "a zero length");
	pair(&tx, &rx);
	CHECK(open_stream(&rx, big, sizeof(big), sizeof(big), got, &g) == -EBADMSG,
	      "a length over NET_SEAL_MAX");
	/* a partial record waits: nothing opened, no error */
	{
		uint32_t vlen = 0, rlen = (uint32_t)r - 1;
		pair(&tx, &rx);
		memcpy(two, s, r - 1);
		CHECK(net_seal_open(&rx, two, &vlen, &rlen) == 0 && vlen == 0 &&
		      rlen == r - 1, "partial: vlen %u rlen %u", vlen, rlen);
	}
	free(s);
}

/* Pin the documented formats (net_seal.h) to values computed by the
 * test peers' own implementations (tests/integration/wire.py: seal_key,
 * seal_record; test_seal.py: aead_record; their ChaCha20, Poly1305 and
 * AEAD are checked there against RFC 8439's vectors): a direction's key in
 * each mode (the mode byte is bound into it), and a record of each mode
 * (the AEAD's nonce and its additional data, the length field, are what
 * net_seal.h says: a receiver that agreed with a sender on something else
 * would pass every round trip here). */
static void test_known_answers(void)
{
	static const char *const want_key[2] = {
		"5b3863753b2f288ce42711ae4631c18a753ea73df167e07735817ea180d9259b",
		"50a4c757a0d7841970be6a01ba94d012e4581270e55ac43bfe488437f0a3fc1a",
	};
	static const char *const want_rec[2] = {
		"1200000072706673207365616c6564207265636f7264"
		"becd3acdee8f0214f1223eaf35be2a90",
		"120000005178f0796556225fe7cf5d6857d053ccec5a"
		"cc5ccba98c2ef65d8600c79c6a24f0f2",
	};
	static const char msg[] = "rpfs sealed record";
	uint8_t k[NET_KEY_LEN], c[NET_AUTH_NONCE_LEN] = { 0 }, sv[NET_AUTH_NONCE_LEN];
	static uint8_t meta[NET_SEAL_META(NET_SEAL_AEAD)];
	uint8_t rec[64];
	struct iovec in = { (void *)msg, sizeof(msg) - 1 }, out[4];
	struct net_seal_cur cur;
	struct net_seal s;
	char hex[2 * sizeof(rec) + 1];

	for (int i = 0; i < NET_KEY_LEN; i++)
		k[i] = (uint8_t)i;
	memset(sv, 1, sizeof(sv));
	for (int m = NET_SEAL_MAC; m <= NET_SEAL_AEAD; m++) {
		size_t len = 0;
		int n;

		net_seal_init(&s, k, NET_AUTH_ROLE_CLIENT, m, c, sv);
		sodium_bin2hex(hex, sizeof(hex), s.key, sizeof(s.key));
		CHECK(!strcmp(hex, want_key[m]), "mode %d: direction key %s", m, hex);

		memcpy(s.key, k, sizeof(s.key));
		s.seq = 5;
		net_seal_cur_init(&cur, &in, 1);
		n = net_seal_iov(&s, &cur, out, 4, meta, 1);
		for (int i = 0; i < n; i++) {
			memcpy(rec + len, out[i].iov_base, out[i].iov_len);
			len += out[i].iov_len;
		}
		sodium_bin2hex(hex, sizeof(hex), rec, len);
		CHECK(!strcmp(hex, want_rec[m]), "mode %d: record %s", m, hex);
	}
}

int main(void)
{
	static uint8_t data[6 * NET_SEAL_MAX];

	if (sodium_init() < 0)
		return 1;
	randombytes_buf(key, sizeof(key));
	randombytes_buf(cn, sizeof(cn));
	randombytes_buf(sn, sizeof(sn));
	randombytes_buf(data, sizeof(data));
	test_known_answers();
	for (mode = NET_SEAL_MAC; mode <= NET_SEAL_AEAD; mode++) {
		test_round_trip(data);
		test_tamper(data);
		test_order_and_keys(data);
	}
	return check_summary("test_seal");
}

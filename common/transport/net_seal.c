/*
 * net_seal.c - the sealed records of a keyed TCP stream (net_seal.h).
 */
#include <errno.h>
#include <string.h>

#include <sodium.h>

#include "net_seal.h"

static const char net_seal_label[] = "rpfs-seal-v1";

/* See net_seal.h. */
void net_seal_init(struct net_seal *s, const uint8_t key[NET_KEY_LEN], char role,
		   int mode, const uint8_t cn[NET_AUTH_NONCE_LEN],
		   const uint8_t sn[NET_AUTH_NONCE_LEN])
{
	crypto_generichash_state st;
	uint8_t r = (uint8_t)role, m = (uint8_t)mode;

	crypto_generichash_init(&st, key, NET_KEY_LEN, sizeof(s->key));
	crypto_generichash_update(&st, (const uint8_t *)net_seal_label,
				  sizeof(net_seal_label) - 1);
	crypto_generichash_update(&st, &r, 1);
	crypto_generichash_update(&st, &m, 1);
	crypto_generichash_update(&st, cn, NET_AUTH_NONCE_LEN);
	crypto_generichash_update(&st, sn, NET_AUTH_NONCE_LEN);
	crypto_generichash_final(&st, s->key, sizeof(s->key));
	sodium_memzero(&st, sizeof(st));
	s->seq = 0;
	s->mode = mode;
}

/* The nonce of record seq (both modes; crypto_stream_chacha20_ietf takes
 * the same 12 bytes): 4 zero bytes, then seq (u64 LE). */
static void net_seal_nonce(const struct net_seal *s,
			   uint8_t n[crypto_aead_chacha20poly1305_IETF_NPUBBYTES])
{
	memset(n, 0, crypto_aead_chacha20poly1305_IETF_NPUBBYTES);
	for (int i = 0; i < 8; i++)
		n[4 + i] = (uint8_t)(s->seq >> (8 * i));
}

/* The length field of a record of len payload bytes. */
static void net_seal_len(uint8_t hdr[NET_SEAL_HDR], uint32_t len)
{
	for (int i = 0; i < NET_SEAL_HDR; i++)
		hdr[i] = (uint8_t)(len >> (8 * i));
}

/* Start the tag of record seq of len payload bytes: the one-time
 * Poly1305 key is the first 32 bytes of the ChaCha20 keystream of the
 * record's nonce, and the state gets the 4 length bytes as on the wire (in
 * hdr). Cost: one ChaCha20 block. */
static void net_seal_start(const struct net_seal *s,
			   crypto_onetimeauth_poly1305_state *st,
			   uint8_t hdr[NET_SEAL_HDR], uint32_t len)
{
	uint8_t nonce[crypto_aead_chacha20poly1305_IETF_NPUBBYTES];
	uint8_t otk[crypto_onetimeauth_poly1305_KEYBYTES];

	net_seal_nonce(s, nonce);
	crypto_stream_chacha20_ietf(otk, sizeof(otk), nonce, s->key);
	net_seal_len(hdr, len);
	crypto_onetimeauth_poly1305_init(st, otk);
	crypto_onetimeauth_poly1305_update(st, hdr, NET_SEAL_HDR);
	sodium_memzero(otk, sizeof(otk));
}

/* See net_seal.h. */
void net_seal_cur_init(struct net_seal_cur *cur, const struct iovec *iov, int cnt)
{
	*cur = (struct net_seal_cur){ .iov = iov, .cnt = cnt };
	while (cur->i < cnt && iov[cur->i].iov_len == 0)
		cur->i++;
}

/* See net_seal.h. */
int net_seal_cur_done(const struct net_seal_cur *cur)
{
	return cur->i >= cur->cnt;
}

/* See net_seal.h. */
size_t net_seal_records(uint64_t len)
{
	return (size_t)((len + NET_SEAL_MAX - 1) / NET_SEAL_MAX);
}

/* The next piece at cur, at most max bytes, and advance past it (cur
 * must not be done). */
static struct iovec net_seal_take(struct net_seal_cur *cur, size_t max)
{
	const struct iovec *v = &cur->iov[cur->i];
	struct iovec p = { (uint8_t *)v->iov_base + cur->off, v->iov_len - cur->off };

	if (p.iov_len > max)
		p.iov_len = max;
	cur->off += p.iov_len;
	if (cur->off == v->iov_len) {
		cur->off = 0;
		cur->i++;
		while (cur->i < cur->cnt && cur->iov[cur->i].iov_len == 0)
			cur->i++;
	}
	return p;
}

/* Take the pieces of one record from cur into out[1..], leaving out[0]
 * for its length and room for its tag. @return the payload bytes */
static uint32_t net_seal_gather(struct net_seal_cur *cur, struct iovec *out,
				int room, int *used)
{
	uint32_t len = 0;
	int n = 1;

	while (!net_seal_cur_done(cur) && len < NET_SEAL_MAX && n < room) {
		out[n] = net_seal_take(cur, NET_SEAL_MAX - len);
		len += (uint32_t)out[n++].iov_len;
	}
	*used = n;
	return len;
}

/* AEAD mode of net_seal_iov: each record whole in meta, its payload
 * copied from cur and encrypted in place. @return the iovecs used */
static int net_seal_iov_aead(struct net_seal *s, struct net_seal_cur *cur,
			     struct iovec *out, int out_cap, uint8_t *meta, int max_rec)
{
	uint8_t nonce[crypto_aead_chacha20poly1305_IETF_NPUBBYTES];
	int n = 0;

	for (; n < max_rec && n < out_cap && !net_seal_cur_done(cur); n++) {
		uint8_t *rec = meta + (size_t)n * NET_SEAL_META(NET_SEAL_AEAD);
		uint8_t *pay = rec + NET_SEAL_HDR;
		uint32_t len = 0;

		while (!net_seal_cur_done(cur) && len < NET_SEAL_MAX) {
			struct iovec p = net_seal_take(cur, NET_SEAL_MAX - len);

			memcpy(pay + len, p.iov_base, p.iov_len);
			len += (uint32_t)p.iov_len;
		}
		net_seal_len(rec, len);
		net_seal_nonce(s, nonce);
		crypto_aead_chacha20poly1305_ietf_encrypt_detached(
			pay, pay + len, NULL, pay, len, rec, NET_SEAL_HDR, NULL, nonce,
			s->key);
		out[n] = (struct iovec){ rec, len + NET_SEAL_OVER };
		s->seq++;
	}
	return n;
}

/* See net_seal.h. */
int net_seal_iov(struct net_seal *s, struct net_seal_cur *cur, struct iovec *out,
		 int out_cap, uint8_t *meta, int max_rec)
{
	int n = 0;

	if (s->mode == NET_SEAL_AEAD)
		return net_seal_iov_aead(s, cur, out, out_cap, meta, max_rec);

	for (int r = 0; r < max_rec && !net_seal_cur_done(cur) && out_cap - n >= 3; r++) {
		crypto_onetimeauth_poly1305_state st;
		uint8_t *hdr = meta + (size_t)r * NET_SEAL_OVER;
		uint8_t *tag = hdr + NET_SEAL_HDR;
		int used;
		uint32_t len = net_seal_gather(cur, out + n, out_cap - n - 1, &used);

		net_seal_start(s, &st, hdr, len);
		for (int k = 1; k < used; k++)
			crypto_onetimeauth_poly1305_update(&st, out[n + k].iov_base,
							   out[n + k].iov_len);
		crypto_onetimeauth_poly1305_final(&st, tag);
		out[n] = (struct iovec){ hdr, NET_SEAL_HDR };
		out[n + used] = (struct iovec){ tag, NET_SEAL_TAG };
		n += used + 1;
		s->seq++;
	}
	return n;
}

/* See net_seal.h. Cost: one Poly1305 (or ChaCha20-Poly1305) pass and two
 * memmoves per record. */
int net_seal_open(struct net_seal *s, uint8_t *buf, uint32_t *vlen, uint32_t *rlen)
{
	while (*rlen >= NET_SEAL_HDR) {
		uint8_t *rec = buf + *vlen, hdr[NET_SEAL_HDR], tag[NET_SEAL_TAG];
		crypto_onetimeauth_poly1305_state st;
		uint32_t len = 0, whole;

		for (int i = 0; i < NET_SEAL_HDR; i++)
			len |= (uint32_t)rec[i] << (8 * i);
		if (len == 0 || len > NET_SEAL_MAX)
			return -EBADMSG;
		whole = len + NET_SEAL_OVER;
		if (*rlen < whole)
			break;
		if (s->mode == NET_SEAL_AEAD) {
			uint8_t nonce[crypto_aead_chacha20poly1305_IETF_NPUBBYTES];

			net_seal_nonce(s, nonce);
			if (crypto_aead_chacha20poly1305_ietf_decrypt_detached(
				    rec + NET_SEAL_HDR, NULL, rec + NET_SEAL_HDR, len,
				    rec + NET_SEAL_HDR + len, rec, NET_SEAL_HDR, nonce, s->key))
				return -EBADMSG;
		} else {
			net_seal_start(s, &st, hdr, len);
			crypto_onetimeauth_poly1305_update(&st, rec + NET_SEAL_HDR, len);
			crypto_onetimeauth_poly1305_final(&st, tag);
			if (crypto_verify_16(tag, rec + NET_SEAL_HDR + len))
				return -EBADMSG;
		}
		s->seq++;
		memmove(rec, rec + NET_SEAL_HDR, len);
		memmove(rec + len, rec + whole, *rlen - whole);
		*vlen += len;
		*rlen -= whole;
	}
	return 0;
}

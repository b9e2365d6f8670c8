/*
 * vb_seal.c - the message trailers and data tags of a keyed verbs
 * connection (vb_seal.h).
 */
#include <errno.h>
#include <string.h>

#include "vb_seal.h"

/* See vb_seal.h. */
void vb_mac_start(const struct net_seal *s, struct vb_mac *m, uint32_t dom,
		  uint64_t n)
{
	uint8_t nonce[crypto_stream_chacha20_ietf_NONCEBYTES];
	uint8_t otk[crypto_onetimeauth_poly1305_KEYBYTES];

	for (int i = 0; i < 4; i++)
		nonce[i] = (uint8_t)(dom >> (8 * i));
	for (int i = 0; i < 8; i++)
		nonce[4 + i] = (uint8_t)(n >> (8 * i));
	crypto_stream_chacha20_ietf(otk, sizeof(otk), nonce, s->key);
	crypto_onetimeauth_poly1305_init(&m->st, otk);
	sodium_memzero(otk, sizeof(otk));
	m->off = 0;
}

/* See vb_seal.h. */
void vb_mac_update(struct vb_mac *m, const void *p, size_t len)
{
	if (len)
		crypto_onetimeauth_poly1305_update(&m->st, p, len);
	m->off += len;
}

/* See vb_seal.h. */
void vb_mac_iov(struct vb_mac *m, const struct iovec *iov, int cnt)
{
	for (int i = 0; i < cnt; i++)
		vb_mac_update(m, iov[i].iov_base, iov[i].iov_len);
}

/* See vb_seal.h. */
void vb_mac_iov_len(struct vb_mac *m, const struct iovec *iov, int cnt,
		    uint64_t len)
{
	for (int i = 0; i < cnt && len; i++) {
		size_t l = iov[i].iov_len < len ? iov[i].iov_len : (size_t)len;

		vb_mac_update(m, iov[i].iov_base, l);
		len -= l;
	}
}

/* See vb_seal.h. */
void vb_mac_final(struct vb_mac *m, uint8_t tag[VB_SEAL_TAG])
{
	crypto_onetimeauth_poly1305_final(&m->st, tag);
}

/* See vb_seal.h. */
int vb_mac_check(struct vb_mac *m, const uint8_t tag[VB_SEAL_TAG])
{
	uint8_t t[VB_SEAL_TAG];

	vb_mac_final(m, t);
	return sodium_memcmp(t, tag, VB_SEAL_TAG) ? -EBADMSG : 0;
}

/* The mtag of msg[0..len) (len covers the dtag) under dom || n. Cost: one
 * ChaCha20 block and a Poly1305 pass over len bytes. */
static void vb_seal_mtag(const struct net_seal *s, const uint8_t *msg, uint32_t len,
			 uint32_t dom, uint64_t n, uint8_t tag[VB_SEAL_TAG])
{
	struct vb_mac m;

	vb_mac_start(s, &m, dom, n);
	vb_mac_update(&m, msg, len);
	vb_mac_final(&m, tag);
}

/* See vb_seal.h. */
uint32_t vb_seal_put(struct net_seal *s, uint8_t *msg, uint32_t len,
		     const uint8_t *dtag, uint32_t dom, uint64_t n)
{
	if (dom == VB_SEAL_MSG)
		n = s->seq++;
	if (dtag)
		memcpy(msg + len, dtag, VB_SEAL_TAG);
	else
		memset(msg + len, 0, VB_SEAL_TAG);
	vb_seal_mtag(s, msg, len + VB_SEAL_TAG, dom, n, msg + len + VB_SEAL_TAG);
	return len + VB_SEAL_TRAILER;
}

/* See vb_seal.h. */
int vb_seal_open(struct net_seal *s, const uint8_t *msg, uint32_t len,
		 uint8_t *dtag, uint32_t dom, uint64_t n, uint32_t *plen)
{
	uint8_t t[VB_SEAL_TAG];

	if (len < VB_SEAL_TRAILER)
		return -EBADMSG;
	if (dom == VB_SEAL_MSG)
		n = s->seq;
	vb_seal_mtag(s, msg, len - VB_SEAL_TAG, dom, n, t);
	if (sodium_memcmp(t, msg + len - VB_SEAL_TAG, VB_SEAL_TAG))
		return -EBADMSG;
	if (dom == VB_SEAL_MSG)
		s->seq++;
	if (dtag)
		memcpy(dtag, msg + len - VB_SEAL_TRAILER, VB_SEAL_TAG);
	*plen = len - VB_SEAL_TRAILER;
	return 0;
}

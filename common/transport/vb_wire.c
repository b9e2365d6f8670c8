/*
 * vb_wire.c - the verbs backend's wire structs, encoded little endian here
 * and nowhere else (the proto header itself goes through proto.c), plus
 * credit accounting and the RLIMIT_MEMLOCK check shared by both halves.
 */
#include "vb_int.h"
#include "log.h"
#include "net_auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

/* Store v at p little endian, byte by byte: the wire order whatever the
 * host's, and p need not be aligned. */
static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* put16 for 32 bits. */
static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* put16 for 64 bits. */
static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Load a little-endian value from p (any alignment): put16 reversed. */
static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

/* get16 for 32 bits. */
static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* get16 for 64 bits. */
static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* Encode the vb header into VB_MHDR_LEN bytes. */
void vb_mhdr_encode(uint8_t *out, const struct vb_mhdr *m)
{
	out[0] = m->kind;
	out[1] = m->flags;
	put16(out + 2, m->nwr);
	put16(out + 4, m->nrd);
	put16(out + 6, m->fslot);
	put32(out + 8, m->inl);
	put32(out + 12, m->bigmsg);
}

/* Decode a vb header; the caller validates the fields against the message. */
int vb_mhdr_decode(const uint8_t *in, struct vb_mhdr *m)
{
	m->kind = in[0];
	m->flags = in[1];
	m->nwr = get16(in + 2);
	m->nrd = get16(in + 4);
	m->fslot = get16(in + 6);
	m->inl = get32(in + 8);
	m->bigmsg = get32(in + 12);
	if (m->kind < VB_K_REQ || m->kind > VB_K_GRANT)
		return -EPROTO;
	if (m->nwr > NET_MAX_IOV || m->nrd > NET_MAX_IOV)
		return -EPROTO;
	return 0;
}

/* Layout: addr 8, len 4, rkey 4 = VB_SEG_LEN. */
void vb_seg_encode(uint8_t *out, const struct vb_seg *s)
{
	put64(out, s->addr);
	put32(out + 8, s->len);
	put32(out + 12, s->rkey);
}

/* Decode a segment (layout at vb_seg_encode). */
void vb_seg_decode(const uint8_t *in, struct vb_seg *s)
{
	s->addr = get64(in);
	s->len = get32(in + 8);
	s->rkey = get32(in + 12);
}

/* Layout: magic 4, version 1, has_nonce 1, credits 2, land_addr 8,
 * land_rkey 4, cn 32 = 52 bytes. */
void vb_cpriv_encode(uint8_t out[VB_CPRIV_LEN], const struct vb_cpriv *p)
{
	memset(out, 0, VB_CPRIV_LEN);
	put32(out, VB_PRIV_MAGIC);
	out[4] = VB_PRIV_VERSION;
	out[5] = p->has_nonce;
	put16(out + 6, p->credits);
	put64(out + 8, p->land_addr);
	put32(out + 16, p->land_rkey);
	memcpy(out + 20, p->cn, 32);
}

/* See vb_int.h. in may be NULL (no private data came); an unknown key
 * class in has_nonce is refused too. */
int vb_cpriv_decode(const void *in, size_t len, struct vb_cpriv *p)
{
	const uint8_t *b = in;

	if (!in || len < VB_CPRIV_LEN || get32(b) != VB_PRIV_MAGIC ||
	    b[4] != VB_PRIV_VERSION || b[5] > NET_AUTH_KEY_SERVERS)
		return -EPROTO;
	p->has_nonce = b[5];
	p->credits = get16(b + 6);
	p->land_addr = get64(b + 8);
	p->land_rkey = get32(b + 16);
	memcpy(p->cn, b + 20, 32);
	return 0;
}

/* Layout: magic 4, version 1, has_mac 1, credits 2, nslots 2, pad 2,
 * slot_size 4, fast_addr 8, fast_rkey 4, pad 4, sn 32, mac 32 = 96. */
void vb_spriv_encode(uint8_t out[VB_SPRIV_LEN], const struct vb_spriv *p)
{
	memset(out, 0, VB_SPRIV_LEN);
	put32(out, VB_PRIV_MAGIC);
	out[4] = VB_PRIV_VERSION;
	out[5] = p->has_mac;
	put16(out + 6, p->credits);
	put16(out + 8, p->nslots);
	put32(out + 12, p->slot_size);
	put64(out + 16, p->fast_addr);
	put32(out + 24, p->fast_rkey);
	memcpy(out + 32, p->sn, 32);
	memcpy(out + 64, p->mac, 32);
}

/* Decode the server's accept private data. @return 0, -EPROTO (short,
 * wrong magic or version, has_mac not 0 or 1, or more slots than
 * VB_FAST_SLOTS) */
int vb_spriv_decode(const void *in, size_t len, struct vb_spriv *p)
{
	const uint8_t *b = in;

	if (!in || len < VB_SPRIV_LEN || get32(b) != VB_PRIV_MAGIC ||
	    b[4] != VB_PRIV_VERSION || b[5] > 1)
		return -EPROTO;
	p->has_mac = b[5];
	p->credits = get16(b + 6);
	p->nslots = get16(b + 8);
	p->slot_size = get32(b + 12);
	p->fast_addr = get64(b + 16);
	p->fast_rkey = get32(b + 24);
	memcpy(p->sn, b + 32, 32);
	memcpy(p->mac, b + 64, 32);
	if (p->nslots > VB_FAST_SLOTS)
		return -EPROTO;
	return 0;
}

/* Layout: nslots 2, pad 2, slot_size 4, fast_addr 8, fast_rkey 4 = 20. */
void vb_grant_encode(uint8_t out[VB_GRANT_LEN], const struct vb_grant *g)
{
	memset(out, 0, VB_GRANT_LEN);
	put16(out, g->nslots);
	put32(out + 4, g->slot_size);
	put64(out + 8, g->fast_addr);
	put32(out + 16, g->fast_rkey);
}

/* See vb_int.h. */
int vb_grant_decode(const void *in, size_t len, struct vb_grant *g)
{
	const uint8_t *b = in;

	if (!in || len < VB_GRANT_LEN)
		return -EPROTO;
	g->nslots = get16(b);
	g->slot_size = get32(b + 4);
	g->fast_addr = get64(b + 8);
	g->fast_rkey = get32(b + 16);
	return g->nslots > VB_FAST_SLOTS ? -EPROTO : 0;
}

/* Slot in the top 8 bits, length in the low 24, network order as verbs
 * carries immediate data. */
uint32_t vb_imm_encode(unsigned slot, uint32_t len)
{
	return htonl(((uint32_t)slot << 24) | (len & 0xffffffu));
}

/* Split immediate data from vb_imm_encode into slot and length. */
void vb_imm_decode(uint32_t imm, unsigned *slot, uint32_t *len)
{
	uint32_t v = ntohl(imm);

	*slot = v >> 24;
	*len = v & 0xffffffu;
}

/* Spend one credit if any is left. */
int vb_credit_take(struct vb_credits *c)
{
	if (c->avail <= 0)
		return -EAGAIN;
	c->avail--;
	return 0;
}

/* Credits come back on replies; never exceed what was granted, so a peer
 * that returns too many cannot make the client overflow the SRQ. */
int vb_credit_give(struct vb_credits *c, int n)
{
	if (n < 0)
		return 0;
	if (n > c->max - c->avail)
		n = c->max - c->avail;
	c->avail += n;
	return n;
}

/* Compare what will be pinned against RLIMIT_MEMLOCK (unlimited passes). */
int vb_memlock_check(uint64_t need, const char *who)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	if ((uint64_t)rl.rlim_cur >= need)
		return 0;
	log_err("net: verbs %s needs %llu bytes of pinned memory but RLIMIT_MEMLOCK "
		"is %llu bytes; raise it (ulimit -l, LimitMEMLOCK=) or shrink the "
		"pools", who, (unsigned long long)need,
		(unsigned long long)rl.rlim_cur);
	return -ENOMEM;
}

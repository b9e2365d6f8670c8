/*
 * net_seal.h - integrity of a TCP stream after the key handshake
 * (net_auth.h): every byte a keyed connection carries after AUTH travels in
 * sealed records, so a relay that forwarded the handshake cannot inject,
 * alter, drop, reorder or replay a frame on the connection it kept.
 *
 *   record = len (u32 LE, 1..NET_SEAL_MAX) || payload || tag (16 bytes)
 *
 Both modes use the record's nonce, 4 zero bytes || seq (u64 LE), under
 * the direction's key. In NET_SEAL_MAC mode the payload is plain and
 *   tag = Poly1305 over len || payload, with the one-time key of the
 *         first 32 bytes of the ChaCha20 (IETF) keystream of that nonce
 * (the one-time key of RFC 8439's AEAD, without its padding; it never
 * repeats, since a direction's key and seq never do). In NET_SEAL_AEAD
 * mode ([net] encrypt = on) the payload is encrypted: ChaCha20-Poly1305
 * (IETF) with that nonce, the len bytes as additional data, and its
 * 16-byte tag.
 *
 * Each direction has its own key, derived from the cluster key proved in
 * the handshake, the mode and both nonces:
 *   key(role) = BLAKE2b-256 keyed with the cluster key, over
 *               "rpfs-seal-v1" || role || mode || cn || sn
 * role 'C' seals what the client sends, 'S' what the server sends; mode is
 * the byte NET_SEAL_MAC or NET_SEAL_AEAD, so peers that disagree on it (a
 * relay that rewrote the handshake) fail the first record. seq counts the
 * records of one direction from 0 and is never sent: a record out of its
 * place fails its tag. Records are cut without regard to frame
 * boundaries; a receiver passes on only payload whose tag it checked.
 */
#ifndef RPFS_NET_SEAL_H
#define RPFS_NET_SEAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "net.h"
#include "net_auth.h"

#define NET_SEAL_MAX 8192  /* payload bytes per record */
#define NET_SEAL_HDR 4
#define NET_SEAL_TAG 16
#define NET_SEAL_OVER (NET_SEAL_HDR + NET_SEAL_TAG) /* bytes a record adds */

/* What a record protects (the mode byte of the handshake). */
#define NET_SEAL_MAC 0   /* integrity: a MAC over plain payload */
#define NET_SEAL_AEAD 1  /* integrity and secrecy: encrypted payload */

/* Bytes of net_seal_iov's meta per record: the length and tag, and in
 * AEAD mode the encrypted copy of the payload between them. */
#define NET_SEAL_META(mode) \
	((mode) == NET_SEAL_AEAD ? NET_SEAL_OVER + NET_SEAL_MAX : NET_SEAL_OVER)

/* One direction of a sealed stream. Owned by that direction's writer (or
 * reader); no lock of its own. */
struct net_seal {
	uint8_t key[32];
	uint64_t seq;  /* records sealed (or opened) so far */
	int mode;      /* NET_SEAL_MAC or NET_SEAL_AEAD */
};

/* A position in the bytes being sealed: an iovec array and how far in. */
struct net_seal_cur {
	const struct iovec *iov;
	int cnt;
	int i;         /* current entry */
	size_t off;    /* bytes of iov[i] already sealed */
};

/**
 * Derive one direction's key and start its count.
 * @param[in] key the cluster key both sides proved
 * @param[in] role NET_AUTH_ROLE_CLIENT (client to server) or
 *	NET_AUTH_ROLE_SERVER (server to client)
 * @param[in] mode NET_SEAL_MAC or NET_SEAL_AEAD
 */
void net_seal_init(struct net_seal *s, const uint8_t key[NET_KEY_LEN], char role,
		   int mode, const uint8_t cn[NET_AUTH_NONCE_LEN],
		   const uint8_t sn[NET_AUTH_NONCE_LEN]);

/** Start a cursor at the first byte of iov[0..cnt). */
void net_seal_cur_init(struct net_seal_cur *cur, const struct iovec *iov, int cnt);

/** Whether every byte at cur is sealed. @return 1 or 0 */
int net_seal_cur_done(const struct net_seal_cur *cur);

/**
 * Seal the bytes at cur into at most max_rec records, as iovecs to send in
 * order. MAC mode: each record's length and tag are written to meta, its
 * payload stays where it is (no copy); a record is cut short when out has
 * no room for another piece. Cost: one ChaCha20 block per record and a
 * Poly1305 pass over the payload.
 * AEAD mode: the whole record is written to meta, the payload copied and
 * encrypted there; one iovec per record. Cost: a copy and a ChaCha20-
 * Poly1305 pass.
 * @param[out] out iovecs to send; out_cap >= 3
 * @param[out] meta NET_SEAL_META(mode) * max_rec bytes, alive until sent
 * @return the iovecs used in out (0: nothing left at cur)
 */
int net_seal_iov(struct net_seal *s, struct net_seal_cur *cur, struct iovec *out,
		 int out_cap, uint8_t *meta, int max_rec);

/** Records needed for len bytes. */
size_t net_seal_records(uint64_t len);

/**
 * Open the whole records among received bytes, in place: buf[0..*vlen)
 * holds opened payload, the *rlen bytes after it are raw records as
 * received. Each record whose tag checks has its payload (decrypted, in
 * AEAD mode) moved down to the end of the opened bytes; a partial record
 * stays raw.
 * @return 0, -EBADMSG a record's length or tag is wrong (the stream is
 *	not the peer's: close it)
 */
int net_seal_open(struct net_seal *s, uint8_t *buf, uint32_t *vlen, uint32_t *rlen);

#endif

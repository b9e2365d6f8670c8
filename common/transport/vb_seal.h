/*
 * vb_seal.h - integrity of a keyed verbs connection after the key
 * handshake: what net_seal.h is to a TCP stream, for messages and the bulk
 * data RDMA moves.
 *
 * Each direction keeps the key net_seal_init derives (mode NET_SEAL_MAC:
 * verbs data is placed by the HCA straight into its buffers, so it is
 * authenticated, not encrypted). Every message after the client's AUTH
 * (requests, ACKs, the grant, replies, in a send buffer, a fast slot, the
 * landing buffer or a fetched big request) ends in a trailer:
 *
 *   message || dtag (16 bytes) || mtag (16 bytes)
 *
 *   mtag = Poly1305 over message || dtag, one-time key = the first 32
 *          bytes of the ChaCha20 (IETF) keystream of nonce dom || n
 *          (u32 LE, u64 LE), as net_seal's records.
 *
 * A message that consumes a receive has dom VB_SEAL_MSG and n its
 * direction's count of such messages (never sent): a message dropped,
 * replayed or moved fails its tag. RC delivers them in the order posted,
 * so each side seals at post time and opens in completion order. A big
 * request, fetched by RDMA Read at its turn, has dom VB_SEAL_BIG and n
 * its proto tag (the client's call tag never repeats on a connection).
 *
 * dtag covers the bulk data of the message that is not inside it:
 *   - write data in a fast slot or RDMA Read by the server: dom
 *     VB_SEAL_WR, key of the client's direction;
 *   - read data RDMA Written by the server: dom VB_SEAL_RD, key of the
 *     server's direction;
 * each with n = the request's proto tag, over the data in stream order.
 * A message without such data has a zero dtag. The receiver checks a
 * dtag once the last byte it covers is in its memory.
 */
#ifndef RPFS_VB_SEAL_H
#define RPFS_VB_SEAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <sodium.h>

#include "net_seal.h"

#define VB_SEAL_TAG 16u
#define VB_SEAL_TRAILER (2u * VB_SEAL_TAG) /* dtag || mtag */

/* Nonce domains (the first 4 nonce bytes). */
enum vb_seal_dom {
	VB_SEAL_MSG = 0,  /* a message that consumes a receive; n = count */
	VB_SEAL_RD = 1,   /* read data the server RDMA Writes; n = proto tag */
	VB_SEAL_WR = 2,   /* write data out of the message; n = proto tag */
	VB_SEAL_BIG = 3,  /* a big request's fetched message; n = proto tag */
};

/* A running MAC over bulk data, fed in stream order. Owned by whoever
 * moves that data (no lock of its own). */
struct vb_mac {
	crypto_onetimeauth_poly1305_state st;
	uint64_t off;     /* bytes fed so far */
};

/**
 * Start a MAC under s's key with the nonce dom || n. Cost: one ChaCha20
 * block.
 */
void vb_mac_start(const struct net_seal *s, struct vb_mac *m, uint32_t dom,
		  uint64_t n);

/** Feed len bytes at p. Cost: a Poly1305 pass over them. */
void vb_mac_update(struct vb_mac *m, const void *p, size_t len);

/** Feed the bytes of iov[0..cnt) in order. */
void vb_mac_iov(struct vb_mac *m, const struct iovec *iov, int cnt);

/** Feed the first len bytes of iov[0..cnt) in order (fewer if the iovecs
 * hold fewer). */
void vb_mac_iov_len(struct vb_mac *m, const struct iovec *iov, int cnt,
		    uint64_t len);

/** Finish the MAC into tag (m is spent). */
void vb_mac_final(struct vb_mac *m, uint8_t tag[VB_SEAL_TAG]);

/**
 * Finish the MAC and compare it with tag, in constant time.
 * @return 0, -EBADMSG they differ
 */
int vb_mac_check(struct vb_mac *m, const uint8_t tag[VB_SEAL_TAG]);

/**
 * Seal the message msg[0..len): write its trailer at msg + len (the
 * buffer must have VB_SEAL_TRAILER bytes more). dom VB_SEAL_MSG takes n
 * from s's count and advances it; any other dom uses n.
 * @param dtag the data tag, or NULL (zeros)
 * @return the sealed length, len + VB_SEAL_TRAILER
 */
uint32_t vb_seal_put(struct net_seal *s, uint8_t *msg, uint32_t len,
		     const uint8_t *dtag, uint32_t dom, uint64_t n);

/**
 * Open a sealed message msg[0..len): check its mtag (dom VB_SEAL_MSG:
 * with s's count, advanced only when it checks) and hand out its dtag.
 * @param[out] dtag the data tag (VB_SEAL_TAG bytes), or NULL
 * @param[out] plen the message's length without its trailer
 * @return 0, -EBADMSG short, or its tag is wrong (close the connection)
 */
int vb_seal_open(struct net_seal *s, const uint8_t *msg, uint32_t len,
		 uint8_t *dtag, uint32_t dom, uint64_t n, uint32_t *plen);

#endif

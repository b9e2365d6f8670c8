/*
 * vb_int.h - private to the verbs backend (vb_*.c): buffer sizes, the
 * verbs-specific wire structs (message extension header, memory segment
 * descriptors, rdma_cm private data, immediate data), credit accounting,
 * the client's pin-down registration cache and the server's zone table.
 *
 * Every verbs message is
 *   [proto header, PROTO_HDR_LEN][vb header, VB_MHDR_LEN]
 *   [nwr + nrd segments, VB_SEG_LEN each][body][inline data]
 * and fits in one VB_MSG_SIZE internal buffer; a larger one ("big") is
 * fetched by the receiver (server: RDMA Read from the client's big send
 * buffer) or written into the receiver's landing buffer (client: RDMA Write
 * with Immediate by the server). Everything verbs-specific on the wire is
 * little endian and converted only in vb_wire.c.
 */
#ifndef RPFS_VB_INT_H
#define RPFS_VB_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "net_int.h"

struct ibv_pd;
struct ibv_mr;

#define VB_MSG_SIZE 8192u      /* internal (send/recv) buffer */
#define VB_MHDR_LEN 16u
#define VB_SEG_LEN 16u
#define VB_HDRS (PROTO_HDR_LEN + VB_MHDR_LEN)
#define VB_INLINE_CAP (32u * 1024)       /* largest inline_max honoured */
#define VB_FAST_CAP (1024u * 1024)       /* largest fast_max honoured */
#define VB_BIG_SIZE (VB_HDRS + 2u * NET_MAX_IOV * VB_SEG_LEN + PROTO_MAX_BODY + \
		     VB_INLINE_CAP)
#define VB_FAST_SLOTS 4        /* fast RDMA buffers per connection */
#define VB_POLL_BATCH 32       /* completions drained per poll pass */
#define VB_LEAD_SLICE_MS 10    /* a leading thread's credit wait re-checks */
#define VB_PRIV_MAGIC 0x42565052u        /* "RPVB" */
#define VB_PRIV_VERSION 1
#define VB_CPRIV_LEN 52u       /* fits the 56 bytes of a connect request */
#define VB_SPRIV_LEN 96u
#define VB_GRANT_LEN 20u
#define VB_IMM_BIG 0xffu       /* immediate slot value: the landing buffer */
#define VB_DEFAULT_PIN_MAX (256ull << 20)

/* Message kinds (vb header byte 0). */
enum vb_kind {
	VB_K_REQ = 1,   /* a request (proto header flags 0) */
	VB_K_REP = 2,   /* a reply (PROTO_F_REPLY); proto credits returns credits */
	VB_K_AUTH = 3,  /* client's HMAC proof (CTRL); body = MAC */
	VB_K_ACK = 4,   /* client consumed its landing buffer (CTRL) */
	VB_K_BIGREQ = 5,/* a big request: one segment names it for RDMA Read */
	VB_K_GRANT = 6, /* server's answer to a verified AUTH (CTRL|REPLY):
			 * body = vb_grant, the fast slots */
};

/* vb header flags. */
#define VB_F_WR_INLINE 0x01u /* req: write data follows the body */
#define VB_F_WR_FAST 0x02u   /* req: write data follows the message in the slot */
#define VB_F_WR_RDMA 0x04u   /* req: nwr segments for the server to RDMA Read */
#define VB_F_RD_INLINE 0x08u /* req: send read data inline; rep: it follows */
#define VB_F_RD_RDMA 0x10u   /* req: nrd segments to RDMA Write read data to */

/* The vb header, decoded. */
struct vb_mhdr {
	uint8_t kind;
	uint8_t flags;
	uint16_t nwr, nrd;     /* segments that follow, write then read */
	uint16_t fslot;        /* fast slot used (VB_F_WR_FAST) */
	uint32_t inl;          /* inline data bytes after the body */
	uint32_t bigmsg;       /* BIGREQ: length of the big message */
};

/* A remote memory segment. */
struct vb_seg {
	uint64_t addr;
	uint32_t len;
	uint32_t rkey;
};

/* Client -> server connect private data. */
struct vb_cpriv {
	uint16_t credits;      /* credits the client wants */
	uint8_t has_nonce;     /* 0 no key, else the NET_AUTH_KEY_* class */
	uint64_t land_addr;    /* landing buffer for big replies */
	uint32_t land_rkey;
	uint8_t cn[32];
};

/* Server -> client accept private data. */
struct vb_spriv {
	uint16_t credits;      /* granted */
	uint8_t has_mac;
	uint16_t nslots;       /* fast slots: 0 when a key is required (they
				* come in the VB_K_GRANT after the proof) */
	uint32_t slot_size;
	uint64_t fast_addr;    /* slot i at fast_addr + i * slot_size */
	uint32_t fast_rkey;
	uint8_t sn[32];
	uint8_t mac[32];
};

/* The fast slots, the one server memory a client may RDMA Write: in the
 * accept data of a keyless server (vb_spriv), or, with a key, granted
 * only once the client's proof is verified (VB_K_GRANT), so nothing is
 * remotely writable before authentication. */
struct vb_grant {
	uint16_t nslots;
	uint32_t slot_size;
	uint64_t fast_addr;    /* slot i at fast_addr + i * slot_size */
	uint32_t fast_rkey;
};

/* ---------------------------------------------------------------- vb_wire.c */

void vb_mhdr_encode(uint8_t *out, const struct vb_mhdr *m);
/* @return 0, -EPROTO (unknown kind) */
int vb_mhdr_decode(const uint8_t *in, struct vb_mhdr *m);
void vb_seg_encode(uint8_t *out, const struct vb_seg *s);
void vb_seg_decode(const uint8_t *in, struct vb_seg *s);
void vb_cpriv_encode(uint8_t out[VB_CPRIV_LEN], const struct vb_cpriv *p);
/* @return 0, -EPROTO (short, wrong magic or version) */
int vb_cpriv_decode(const void *in, size_t len, struct vb_cpriv *p);
void vb_spriv_encode(uint8_t out[VB_SPRIV_LEN], const struct vb_spriv *p);
int vb_spriv_decode(const void *in, size_t len, struct vb_spriv *p);
void vb_grant_encode(uint8_t out[VB_GRANT_LEN], const struct vb_grant *g);
/* @return 0, -EPROTO (short, or more slots than VB_FAST_SLOTS) */
int vb_grant_decode(const void *in, size_t len, struct vb_grant *g);
/* Immediate data: slot index and message length, in wire order. */
uint32_t vb_imm_encode(unsigned slot, uint32_t len);
void vb_imm_decode(uint32_t imm, unsigned *slot, uint32_t *len);

/* Credit pool of one connection (under the connection's lock). */
struct vb_credits {
	int avail;  /* credits the client may still spend */
	int max;    /* granted at connect */
};
/* Take one credit. @return 0, -EAGAIN none left */
int vb_credit_take(struct vb_credits *c);
/* Return n credits (piggybacked on a reply); clamps at max. @return the
 * number actually returned (excess from a confused peer is dropped) */
int vb_credit_give(struct vb_credits *c, int n);

/* RLIMIT_MEMLOCK check: log_err naming the limit and return -ENOMEM when
 * need bytes cannot be pinned. who names the caller for the log line. */
int vb_memlock_check(uint64_t need, const char *who);

/* ------------------------------------------------------------------ vb_mr.c */

/*
 * The client's pin-down cache. It caches registrations only of regions the
 * owner declared long-lived (net_client_register_mem); those stay mapped
 * until undeclared, so a cached registration can never outlive its memory.
 * Other memory is registered per call and deregistered after (a miss).
 */
struct vb_rent {
	uintptr_t base;
	size_t len;
	struct ibv_mr *mr;     /* NULL while declared but not registered */
	int refs;              /* in-flight users; never evicted while > 0 */
	uint64_t lru;          /* last use tick */
};

/* How undeclared memory of one call is registered. */
enum vb_reg_mode {
	VB_REG_OGR = 0,        /* Optimistic Group Registration (default) */
	VB_REG_INDIV,          /* each segment on its own ($RPFS_REG_MODE=indiv) */
};

struct vb_rcache {
	struct ibv_pd *pd;     /* set at first connect */
	enum vb_reg_mode mode;
	/* OGR cost model T = a * pages + b, registration plus deregistration,
	 * in ns: calibrated at the first connect or from $RPFS_OGR_COST */
	double cost_a, cost_b;
	int calibrated;
	uint64_t (*now)(void); /* clock of the calibration, ns (tests inject) */
	struct vb_rent *ent;   /* sorted by base, non-overlapping */
	int n, cap;
	uint64_t tick;
	uint64_t pinned;       /* bytes registered by the cache */
	uint64_t max;          /* bound on pinned */
	struct net_stats *st;
};

/* A registration one call holds: release with vb_rcache_put. */
struct vb_rref {
	struct ibv_mr *mr;
	struct vb_rent *ent;   /* NULL: per-call registration (dereg on put) */
	uintptr_t base;        /* of ent, to find it again after reshuffles */
};

void vb_rcache_init(struct vb_rcache *rc, uint64_t max, struct net_stats *st);
/* Deregister everything (calls must be done). */
void vb_rcache_fini(struct vb_rcache *rc);
/* Declare [addr, addr+len) long-lived. @return 0, -EINVAL overlap, -ENOMEM */
int vb_rcache_declare(struct vb_rcache *rc, void *addr, size_t len);
/* Forget a declared region (deregisters). @return 0, -ENOENT, -EBUSY in use */
int vb_rcache_undeclare(struct vb_rcache *rc, void *addr);
/* The registered entry covering [addr, addr+len), or NULL (no side effects
 * beyond the LRU tick): the paper's check_if_registered. */
struct ibv_mr *vb_rcache_check(struct vb_rcache *rc, const void *addr, size_t len);
/* Whether [addr, addr+len) lies in one declared region no larger than the
 * cache bound, so vb_rcache_get fills it into the cache (one miss) or hits:
 * the client moves such memory by RDMA straight, never copying it.
 * @return 1 or 0 */
int vb_rcache_declared(struct vb_rcache *rc, const void *addr, size_t len);
/* Get a registration covering [addr, addr+len) with access flags acc:
 * a hit, a cache fill of a declared region (evicting LRU entries to stay
 * under the bound) or a per-call registration. @return 0, -errno */
int vb_rcache_get(struct vb_rcache *rc, void *addr, size_t len, int acc,
		  struct vb_rref *out);
void vb_rcache_put(struct vb_rcache *rc, struct vb_rref *ref);

/*
 * Register the memory of one call direction (Optimistic Group Registration):
 * segments inside declared regions go through the cache; the others are
 * sorted by address, grouped by the cost model (a covering registration
 * where registering the holes costs less than another registration;
 * never across two allocations when alloc gives each segment's allocation
 * bounds), registered optimistically, and a group that fails (an unmapped
 * hole) is registered again by the real mappings of /proc/self/maps or
 * segment by segment. Every registration is valid for this call only.
 * @param alloc per-segment allocation bounds, or NULL
 * @param mrs out: the MR covering iov[i] (NULL for empty segments)
 * @param refs out: registrations to release with vb_rcache_put; room for cnt
 * @param nrefs in/out: entries used in refs
 * @return 0, -ENODEV (no pd), -ENOMEM, -EFAULT/-errno of ibv_reg_mr (refs
 *	taken so far stay in refs for the caller to release)
 */
int vb_rcache_get_list(struct vb_rcache *rc, const struct iovec *iov, int cnt,
		       const struct iovec *alloc, int acc, struct ibv_mr **mrs,
		       struct vb_rref *refs, int *nrefs);
/* The OGR grouping alone (no registration): sort idx[0..n) by address and
 * set grp[k] (in sorted order) to the group number of idx[k].
 * @return the number of groups */
int vb_ogr_group(const struct vb_rcache *rc, const struct iovec *iov,
		 const struct iovec *alloc, int *idx, int n, int *grp);
/*
 * Set cost_a/cost_b from $RPFS_OGR_COST="a_ns,b_ns" or else by timing
 * ibv_reg_mr + ibv_dereg_mr of VB_CAL_NSIZES sizes VB_CAL_ROUNDS times
 * each (interleaved) and fitting them with vb_ogr_fit. Logs the result at
 * info level and puts it in the counters (ogr_cost_a_ns, ogr_cost_b_ns,
 * ogr_cal_ns). Once per cache; needs rc->pd for the timing.
 */
void vb_rcache_calibrate(struct vb_rcache *rc);

/* Calibration: sizes in pages and rounds (see vb_rcache_calibrate). */
#define VB_CAL_NSIZES 5
#define VB_CAL_ROUNDS 15
#define VB_CAL_MAXSIZES 8 /* distinct sizes vb_ogr_fit considers */
#define VB_CAL_TRIES 3    /* tries per sample while the thread is preempted */
/* Sane limits of the fitted model (ns): a registration pins each page
 * (sub-microsecond to a few microseconds per page on real HCAs, more under
 * emulation) and costs a system call and driver work per call (tens of
 * microseconds on real HCAs). */
#define VB_OGR_A_MIN 10.0
#define VB_OGR_A_MAX 20000.0
#define VB_OGR_B_MIN 1000.0
#define VB_OGR_B_MAX 2000000.0
/* Defaults (no timing, or an implausible fit): the seed paper's testbed,
 * 0.77 + 0.23 us per page and 7.42 + 1.1 us per call. */
#define VB_OGR_DEF_A 1000.0
#define VB_OGR_DEF_B 8520.0

/* One timing: registering and deregistering pages pages took ns
 * (ns < 0: the registration failed). */
struct vb_cal_sample {
	uint32_t pages;
	double ns;
};

/**
 * Fit T = a * pages + b to timing samples, robustly against a noisy
 * machine: noise only ever adds time, so each size keeps its fastest
 * sample; the slope is the median of the slopes between every two sizes
 * and the intercept the median of what is left at each size (Theil-Sen),
 * so one size whose samples were all disturbed cannot drag the fit. The
 * result is clamped to [VB_OGR_A_MIN, VB_OGR_A_MAX] and [VB_OGR_B_MIN,
 * VB_OGR_B_MAX]. Pure: no clock, no verbs.
 * @param s samples, any order, sizes repeated
 * @param n number of samples (the first VB_CAL_MAXSIZES distinct sizes
 *	count; samples of further sizes are ignored)
 * @param a, b out: the model; the defaults VB_OGR_DEF_A/B on failure
 * @return 0, -EINVAL (fewer than two sizes with a good sample, or an
 *	implausible fit: not finite, a page costing nothing or less, or a
 *	call costing less than a page)
 */
int vb_ogr_fit(const struct vb_cal_sample *s, int n, double *a, double *b);

/* The server's registered zones, sorted by address for lookup. */
struct vb_zone {
	uintptr_t base;
	size_t len;
	struct ibv_mr *mr;
};

struct vb_zones {
	struct vb_zone *z;
	int n, cap;
};

/* Register and add a zone. @return 0, -EINVAL overlap, -ENOMEM, -errno */
int vb_zones_add(struct vb_zones *zs, struct ibv_pd *pd, void *addr, size_t len,
		 struct net_stats *st);
/* The zone's MR covering [addr, addr+len), or NULL. O(log n). */
struct ibv_mr *vb_zones_find(const struct vb_zones *zs, const void *addr, size_t len);
void vb_zones_fini(struct vb_zones *zs, struct net_stats *st);

/* Register memory, counting it. @return mr or NULL (errno set) */
struct ibv_mr *vb_reg(struct ibv_pd *pd, void *addr, size_t len, int acc,
		      struct net_stats *st);
void vb_dereg(struct ibv_mr *mr, struct net_stats *st);

/* Counter helpers. */
void vb_stat_max(struct net_stats *st, uint64_t v); /* sge_max */
void vb_stat_gauge(uint64_t *g, int64_t d);

extern const struct net_client_ops vb_client_ops;
extern const struct net_server_ops vb_server_ops;

#endif

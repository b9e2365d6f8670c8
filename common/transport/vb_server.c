/*
 * vb_server.c - the server half of the verbs backend, inside one libev loop.
 *
 * One protection domain, one shared receive queue (SRQ) and one receive CQ
 * serve every connection; each connection has its own RC QP and send CQ,
 * all CQs on one completion channel. The SRQ holds (credits + 1) buffers
 * per client for max_clients clients: a client spends one credit per
 * request, the extra one covers its control messages (AUTH, ACK), and
 * connections beyond max_clients are refused, so the SRQ cannot run dry.
 *
 * Credits: a request holds one of the connection's `credits` sreqs from
 * its arrival until its reply is posted; the reply hands the credit back.
 * A request that finds no free sreq closes the connection ("more requests
 * than credits"). The sreq is freed at the post, not at the send's
 * completion, so a client that reuses a credit the moment its reply
 * arrives never races our completion. What a reply holds until its send
 * completes (a send buffer, or a pooled VB_BIG_SIZE buffer once the
 * VB_SBUFS are busy) is bounded separately: the next request goes to the
 * handler only while fewer than `credits` replies are unfinished
 * (replies_out). A client that lets no reply complete (posts no receives,
 * so our SEND waits in RNR retry) therefore fills its sreqs with queued
 * requests and is closed; it pins at most `credits` pooled buffers, the
 * explicit cap of the pool (vb_bbuf_take fails past it).
 *
 * Requests of one connection are served one at a time, in order, as on
 * TCP. Pull is inline copy, fast-slot copy or RDMA Read of the client's
 * segments (a request written into a fast slot is first copied, but for
 * its write data, into the receive buffer its immediate took: the client
 * can write the slot at any time); push is a copy into the inline reply
 * or RDMA Write into the client's segments; both are asynchronous
 * (completion from the CQ or from the deferred-work watcher), so the
 * iod's double buffering overlaps the network and the disk. Local memory
 * is looked up in the registered zones (net_server_register_mem);
 * anything else is registered for the one transfer.
 *
 * With a key, every message after the client's proof is sealed
 * (vb_seal.h): a message whose trailer fails closes the connection before
 * it is parsed; write data a fast slot or an RDMA Read brings is MACed as
 * it is copied or lands, and its tag checked once the last byte is in
 * (earlier pipeline units may have reached the handler by then: a failure
 * fails the last pull and closes the connection, and the request is never
 * answered); read data is MACed as it is pushed, in order, and the tag
 * goes in the reply.
 *
 * Polling (net_opts.poll_mode): adaptive sleeps on the channel fd (ev_io),
 * and after every event spins in an ev_idle watcher for VB_SPIN_NS before
 * sleeping again; busy keeps the ev_idle watcher running.
 *
 * Loop thread only; counters are atomics.
 */
#include "vb_int.h"
#include "vb_seal.h"
#include "net_auth.h"
#include "log.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define VB_SPIN_NS 200000ull     /* adaptive: spin this long after an event */
#define VB_SQ_DEPTH 1024u
#define VB_SBUFS 4               /* reply send buffers per connection */
#define VB_HASH 256
/* Reject private data telling a keyless client that we require a key (the
 * client side checks the same 8 bytes; see vb_client.c). */
#define VB_REJ_NOKEY "rpfsNKEY"
#define VB_REJ_NOKEY_LEN 8

/* What a work request's wr_id points at: the tag at the head of an SRQ
 * buffer or of an op. vb_on_wc routes every completion on it. */
enum vb_stag_kind { VB_ST_RECV = 1, VB_ST_OP };

struct vb_stag {
	enum vb_stag_kind kind; /* set once, when the buffer or op is made */
};

/* An SRQ buffer; wr_id = &tag. */
struct vb_srbuf {
	struct vb_stag tag;
	uint8_t *p;
	struct vb_srbuf *next;   /* repost batch */
};

struct vb_sconn;

/* A server request; its life is r.state (net_sreq_advance): FREE on the
 * connection's free list, ARRIVING a big one whose message is RDMA Read
 * at its turn, QUEUED, with the handler, DONE. Loop thread. */
struct vb_sreq {
	struct net_sreq r;               /* what the handler sees */
	struct vb_sconn *c;
	struct vb_srbuf *rb;             /* held receive buffer, or NULL */
	const uint8_t *msg;              /* the message (rb, fast slot or big) */
	uint32_t len;
	struct vb_mhdr m;
	const uint8_t *segs;             /* nwr + nrd encoded segments */
	const uint8_t *inl;              /* inline/fast write data */
	uint8_t *rdinl;                  /* inline read data (inline_max) */
	uint64_t pushed;                 /* read bytes pushed */
	uint64_t big_tag;                /* BIGREQ: the proto tag its fetched
					  * message is sealed under */
	int wsealed;                     /* write data out of the message is
					  * MACed: wmac, wtag */
	int rsealed;                     /* pushed read data is MACed: rmac */
	uint8_t wtag[VB_SEAL_TAG];       /* the request's data tag */
	struct vb_mac wmac, rmac;        /* write data pulled, read data
					  * pushed, each in stream order */
	struct vb_sreq *next;            /* queue / free list */
};

/* Kinds of send-side operations. */
enum vb_op_kind { VB_OP_PULL, VB_OP_PUSH, VB_OP_REPLY, VB_OP_FETCH, VB_OP_BIGREP };

/* A registered VB_BIG_SIZE reply buffer, pooled per connection: each
 * reply that cannot use a send buffer owns one until its op is freed, so
 * replies waiting for SQ room or for the client's ACK never share memory. */
struct vb_bbuf {
	uint8_t *p;
	struct ibv_mr *mr;
	struct vb_bbuf *next;            /* free list (loop thread only) */
	struct vb_bbuf *all;             /* every buffer of the connection */
};

/* A send-side operation: posted WRs, or a copy completed later. */
struct vb_op {
	struct vb_stag tag;
	enum vb_op_kind kind;
	struct vb_sconn *c;
	struct vb_sreq *q;
	net_xfer_fn cb;
	void *arg;
	int rc;
	int sbuf;                        /* reply: send buffer index */
	struct vb_bbuf *bb;              /* reply: pooled big buffer, or NULL */
	struct ibv_send_wr *wr;          /* chain to post (NULL: copy op) */
	struct ibv_sge *sge;
	int nwr;
	int pending;                     /* signaled WRs still to complete */
	uint64_t off;                    /* pull: where its bytes start in
					  * the write data */
	struct ibv_mr *tmp[8];           /* per-op registrations */
	int ntmp;
	struct vb_op *next;              /* the connection's SQ queue */
	struct net_srv_done done;        /* completed later (vb_op_done_later) */
};

struct vb_server;

struct vb_sconn {
	struct net_sconn base;
	struct vb_server *srv;
	struct rdma_cm_id *id;
	uint32_t qpn;
	struct vb_sconn *hnext;          /* qp_num hash chain */
	struct vb_sconn *prev, *next;    /* all connections */
	struct ibv_cq *scq;
	int up;                          /* established (CM event) */
	uint8_t cn[32], sn[32];
	const uint8_t *key;              /* the key of the class it named */
	int sealed;                      /* messages after AUTH carry a
					  * trailer (vb_seal.h): rx opens
					  * what arrives, tx seals what is
					  * posted, in that order */
	struct net_seal rx, tx;
	int key_priv;                    /* that class is privileged here */
	ev_timer hs_dl;                  /* handshake deadline, while
					  * base.hs == NET_HS_AUTH */
	struct sockaddr_storage src;     /* peer address (per-source cap) */
	ev_tstamp born;                  /* accept time (oldest evicted) */
	uint64_t land_addr;              /* client landing buffer */
	uint32_t land_rkey;
	int land_busy;                   /* big reply written, no ACK yet */
	uint8_t *mem;                    /* fast slots + send buffers */
	size_t memlen, slot_size;
	struct ibv_mr *fmr;              /* the fast slots, the one region
					  * the client may RDMA Write */
	struct ibv_mr *mr;               /* the send buffers: local only */
	unsigned sbuf_busy;
	uint8_t *big;                    /* lazily, VB_BIG_SIZE */
	struct ibv_mr *big_mr;
	struct vb_bbuf *bb_free, *bb_all; /* reply buffer pool (loop thread) */
	int bb_n;                        /* buffers in the pool, at most
					  * credits (loop thread) */
	int credits;                     /* granted at accept (immutable) */
	int replies_out;                 /* reply ops not yet freed: posted or
					  * queued, send not completed or
					  * flushed (loop thread) */
	int sq_free, inflight;           /* SQ slots; posted signaled ops */
	struct vb_op *sq_head, *sq_tail; /* ops waiting for SQ room / buffers */
	struct vb_sreq *sreqs, *free_q;
	/* received requests wait their turn in base.rq (net_sconn_next);
	 * base.active is the one fetched or with the handler */
	int need_dispatch;
	struct vb_sconn *dnext;          /* deferred dispatch list */
};

struct vb_server {
	struct net_server base;
	struct ev_loop *loop;
	struct rdma_event_channel *cm_ch;
	struct rdma_cm_id *lid;
	ev_io cm_w, chan_w;
	ev_idle spin_w;
	uint64_t spin_until;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *chan;
	struct ibv_cq *rcq;
	struct ibv_srq *srq;
	uint32_t max_sge, max_sge_rd;
	int list_mode;                   /* 1: multiple message (one RDMA
					  * operation per segment) */
	uint8_t *rmem;
	size_t rmemlen;
	struct ibv_mr *rmr;
	struct vb_srbuf *rbs;
	int nrbs;
	struct vb_srbuf *repost;         /* batch to post after a poll pass */
	struct vb_zones zones;
	uint64_t pinned_need;            /* for the RLIMIT_MEMLOCK check */
	struct vb_sconn *hash[VB_HASH];
	struct vb_sconn *conns;
	int nconns;
	struct vb_sconn *disp;           /* deferred dispatches (base.kick) */
	uint16_t port;
	net_req_fn fn;
	void *fn_arg;
};

static void vb_sconn_close(struct vb_sconn *c, int warn, const char *why);
static void vb_flush_sq(struct vb_sconn *c);

/* ------------------------------------------------------------------ helpers */

/* The connection of a QP number: a completion names only its QP.
 * O(chain). */
static struct vb_sconn *vb_hash_find(struct vb_server *s, uint32_t qpn)
{
	for (struct vb_sconn *c = s->hash[qpn % VB_HASH]; c; c = c->hnext)
		if (c->qpn == qpn)
			return c;
	return NULL;
}

/* Unlink c from the QP number hash (a no-op when it is not there), so no
 * later completion finds it. O(chain). */
static void vb_hash_del(struct vb_server *s, struct vb_sconn *c)
{
	for (struct vb_sconn **pp = &s->hash[c->qpn % VB_HASH]; *pp; pp = &(*pp)->hnext)
		if (*pp == c) {
			*pp = c->hnext;
			return;
		}
}

/* Queue an SRQ buffer for the next batched repost. */
static void vb_repost(struct vb_server *s, struct vb_srbuf *rb)
{
	if (!rb)
		return; /* a fast write: its receive buffer went back already */
	rb->next = s->repost;
	s->repost = rb;
}

/* Post every queued SRQ buffer in one call. */
static void vb_repost_flush(struct vb_server *s)
{
	struct ibv_recv_wr wr[64], *bad;
	struct ibv_sge sge[64];
	int n = 0;

	while (s->repost) {
		struct vb_srbuf *rb = s->repost;
		s->repost = rb->next;
		sge[n] = (struct ibv_sge){ (uintptr_t)rb->p, VB_MSG_SIZE, s->rmr->lkey };
		wr[n] = (struct ibv_recv_wr){ .wr_id = (uintptr_t)&rb->tag,
					      .sg_list = &sge[n], .num_sge = 1 };
		if (n)
			wr[n - 1].next = &wr[n];
		n++;
		if (n == 64 || !s->repost) {
			if (ibv_post_srq_recv(s->srq, wr, &bad))
				log_err("net: verbs: ibv_post_srq_recv failed");
			else
				vb_stat_gauge(&s->base.st.srq_posted, n);
			n = 0;
		}
	}
}

/* Run deferred work from the loop (never nested in a caller). */
static void vb_defer(struct vb_server *s)
{
	net_srv_kick(&s->base);
}

/* Whether c has as many unfinished replies as credits: its next request
 * then waits (see the header comment). */
static int vb_replies_full(const struct vb_sconn *c)
{
	return c->replies_out >= c->credits;
}

/* Have the loop run c's dispatch once more (never nested in a caller)
 * when a request waits that vb_dispatch would hand over now: the handler
 * is free and c's replies are under its bound. */
static void vb_dispatch_later(struct vb_sconn *c)
{
	struct vb_server *s = c->srv;

	if (c->base.dead || c->need_dispatch || !net_sconn_ready(&c->base) ||
	    vb_replies_full(c))
		return;
	c->need_dispatch = 1;
	c->dnext = s->disp;
	s->disp = c;
	vb_defer(s);
}

/* Complete an op later with rc. */
static void vb_op_done_later(struct vb_op *op, int rc)
{
	struct vb_server *s = op->c->srv;

	op->rc = rc;
	net_sconn_hold(&op->c->base);
	net_srv_defer(&s->base, &op->done, rc);
}

/* Whether op sends a reply: those count in their connection's
 * replies_out from vb_op_new to vb_op_free. */
static int vb_op_is_reply(const struct vb_op *op)
{
	return op->kind == VB_OP_REPLY || op->kind == VB_OP_BIGREP;
}

/* Run a pull's or push's callback with rc, its request advanced first
 * (PULLED, PUSHED). */
static void vb_op_callback(struct vb_op *op, int rc)
{
	(void)net_sreq_advance(&op->q->r, op->kind == VB_OP_PULL ? NET_SREQ_EV_PULLED
								 : NET_SREQ_EV_PUSHED);
	op->cb(&op->q->r, rc, op->arg);
}

/* Free an op; a pooled reply buffer it owns goes back to its connection
 * (which outlives its ops). A reply op leaving frees a place under the
 * connection's reply bound, which may let a waiting request in. */
static void vb_op_free(struct vb_op *op)
{
	if (vb_op_is_reply(op)) {
		op->c->replies_out--;
		vb_dispatch_later(op->c);
	}
	if (op->bb) {
		op->bb->next = op->c->bb_free;
		op->c->bb_free = op->bb;
		op->bb = NULL;
	}
	for (int i = 0; i < op->ntmp; i++)
		vb_dereg(op->tmp[i], &op->c->srv->base.st);
	free(op->wr);
	free(op->sge);
	free(op);
}

static void vb_sconn_unbuild(struct vb_sconn *c);

/* Free a closed connection once nothing refers to it any more. */
static void vb_sconn_maybe_free(struct vb_sconn *c)
{
	struct vb_server *s = c->srv;
	struct rdma_cm_id *id;

	if (!c->base.dead || c->base.holds || c->inflight || c->base.active ||
	    c->need_dispatch)
		return;
	ev_timer_stop(s->loop, &c->hs_dl);
	if (c->big_mr)
		vb_dereg(c->big_mr, &s->base.st);
	while (c->bb_all) {
		struct vb_bbuf *b = c->bb_all;
		c->bb_all = b->all;
		vb_dereg(b->mr, &s->base.st);
		free(b->p);
		free(b);
		c->bb_n--;
	}
	free(c->big);
	for (int i = 0; i <= s->base.opts.credits; i++)
		free(c->sreqs[i].rdinl);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->nconns--;
	id = c->id;
	vb_sconn_unbuild(c);
	if (id)
		rdma_destroy_id(id);
}

/* The reap hook of net_sconn_release. */
static void vb_sconn_reap(struct net_sconn *b)
{
	vb_sconn_maybe_free(NET_CONTAINER_OF(b, struct vb_sconn, base));
}

/* Return a request to the free list, reposting its receive buffer. */
static void vb_sreq_free(struct vb_sconn *c, struct vb_sreq *q)
{
	if (q->rb)
		vb_repost(c->srv, q->rb);
	q->rb = NULL;
	(void)net_sreq_advance(&q->r, NET_SREQ_EV_DROP);
	q->next = c->free_q;
	c->free_q = q;
}

/* A queued request of a closing connection: freed unserved. */
static void vb_sreq_drop(struct net_sreq *r)
{
	struct vb_sreq *q = NET_CONTAINER_OF(r, struct vb_sreq, r);

	vb_sreq_free(q->c, q);
}

/* Close a connection: QP to error (posted ops flush back with errors),
 * queued ops fail with -EIO later, queued requests are dropped. */
static void vb_sconn_close(struct vb_sconn *c, int warn, const char *why)
{
	struct vb_server *s = c->srv;

	if (net_sconn_close(&c->base, warn, why))
		return;
	ev_timer_stop(s->loop, &c->hs_dl);
	vb_hash_del(s, c);
	if (c->id)
		rdma_disconnect(c->id);
	while (c->sq_head) {
		struct vb_op *op = c->sq_head;
		c->sq_head = op->next;
		vb_op_done_later(op, -EIO);
	}
	c->sq_tail = NULL;
	net_sconn_drain(&c->base, vb_sreq_drop);
	/* an active request being fetched (ARRIVING): the fetch op completes
	 * with a flush error, and vb_fetched frees it */
	net_sconn_hold(&c->base);
	net_sconn_release(&c->base);
}

/* ------------------------------------------------------------------ posting */

/* Post queued ops while the SQ has room, in order. */
static void vb_flush_sq(struct vb_sconn *c)
{
	while (c->sq_head && !c->base.dead) {
		struct vb_op *op = c->sq_head;
		struct ibv_send_wr *bad;
		if (op->kind == VB_OP_REPLY && op->sbuf < 0 && !op->bb)
			break; /* no send buffer yet (not possible: taken at build) */
		if (op->kind == VB_OP_BIGREP && c->land_busy)
			break; /* previous big reply not consumed yet */
		if (op->nwr > c->sq_free)
			break;
		c->sq_head = op->next;
		if (!c->sq_head)
			c->sq_tail = NULL;
		if (op->kind == VB_OP_BIGREP)
			c->land_busy = 1;
		if (ibv_post_send(c->id->qp, op->wr, &bad)) {
			vb_op_done_later(op, -EIO);
			vb_sconn_close(c, 0, "ibv_post_send failed");
			return;
		}
		c->sq_free -= op->nwr;
		c->inflight++;
	}
}

/* Queue an op with its WR chain and post what fits. */
static void vb_submit_op(struct vb_sconn *c, struct vb_op *op)
{
	op->next = NULL;
	if (c->sq_tail)
		c->sq_tail->next = op;
	else
		c->sq_head = op;
	c->sq_tail = op;
	vb_flush_sq(c);
}

/* lkey for local [p, p+len): a zone, or a per-op registration. */
static int vb_local_key(struct vb_sconn *c, struct vb_op *op, void *p, size_t len,
			uint32_t *lkey)
{
	struct vb_server *s = c->srv;
	struct ibv_mr *mr = vb_zones_find(&s->zones, p, len);

	if (!mr) {
		if (op->ntmp == (int)(sizeof(op->tmp) / sizeof(op->tmp[0])))
			return -ENOMEM;
		mr = vb_reg(s->pd, p, len, IBV_ACCESS_LOCAL_WRITE, &s->base.st);
		if (!mr)
			return -ENOMEM;
		op->tmp[op->ntmp++] = mr;
	}
	*lkey = mr->lkey;
	return 0;
}

/* Where vb_build_rdma is in the local iovecs: entry li, offset loff in
 * it, total bytes still to place, and each entry's lkey. */
struct vb_rdma_cur {
	const struct iovec *iov;
	const uint32_t *lkeys;
	int cnt, li;
	uint64_t loff, total;
};

/* The segment holding remote offset *roff: its index (nseg when past the
 * end), its decoded self in *sg, *roff made relative to it. */
static int vb_seg_find(const uint8_t *segs, int nseg, uint64_t *roff,
		       struct vb_seg *sg)
{
	int si;

	for (si = 0; si < nseg; si++) {
		vb_seg_decode(segs + (size_t)si * VB_SEG_LEN, sg);
		if (*roff < sg->len)
			break;
		*roff -= sg->len;
	}
	return si;
}

/* Fill WR w with SGEs from the cursor: at most room bytes (what is left
 * of its remote piece), msge entries, and the op's SGE array (*ns used of
 * scap). Every SGE ends at a local or remote boundary or fills the WR.
 * @return the bytes w moves */
static uint64_t vb_rdma_sges(struct vb_op *op, struct ibv_send_wr *w,
			     struct vb_rdma_cur *cu, uint64_t room, uint32_t msge,
			     int *ns, int scap)
{
	uint64_t wlen = 0;

	while (room > 0 && cu->total > 0 && (uint32_t)w->num_sge < msge && *ns < scap) {
		while (cu->li < cu->cnt && cu->iov[cu->li].iov_len == cu->loff) {
			cu->li++;
			cu->loff = 0;
		}
		uint64_t k = cu->iov[cu->li].iov_len - cu->loff;
		if (k > room)
			k = room;
		op->sge[(*ns)++] = (struct ibv_sge){
			(uintptr_t)cu->iov[cu->li].iov_base + cu->loff, (uint32_t)k,
			cu->lkeys[cu->li] };
		w->num_sge++;
		cu->loff += k;
		room -= k;
		cu->total -= k;
		wlen += k;
	}
	return wlen;
}

/* Signal op's nw WRs: the last (gather/scatter), or each (multiple
 * message: every piece its own transfer), all tagged with op.
 * @return 0, -ENOMEM (more WRs than the SQ holds) */
static int vb_rdma_signal(struct vb_op *op, int nw, int list_mode)
{
	for (int i = list_mode || !nw ? 0 : nw - 1; i < nw; i++) {
		op->wr[i].send_flags = IBV_SEND_SIGNALED;
		op->wr[i].wr_id = (uintptr_t)&op->tag;
	}
	op->pending = list_mode ? nw : 1;
	op->nwr = nw;
	return nw > (int)VB_SQ_DEPTH ? -ENOMEM : 0;
}

/*
 * Build the RDMA Read (pull) or Write (push) WRs moving local iov to/from
 * remote bytes [roff, roff + total) of the segments. Gather/scatter (the
 * default): one WR per remote piece gathering up to max_sge local pieces
 * (more WRs when there are more), posted as one chain with only the last
 * WR signaled. Multiple message (s->list_mode): one WR per segment piece,
 * each signaled, so every piece is its own transfer.
 * @return 0, -ENOMEM, -EINVAL (outside the segments)
 */
static int vb_build_rdma(struct vb_sconn *c, struct vb_op *op, const uint8_t *segs,
			 int nseg, uint64_t roff, const struct iovec *iov, int cnt,
			 int is_read)
{
	struct vb_server *s = c->srv;
	uint32_t msge = s->list_mode ? 1 : is_read ? s->max_sge_rd : s->max_sge;
	uint32_t lkeys[NET_MAX_IOV];
	struct vb_rdma_cur cu = { .iov = iov, .lkeys = lkeys, .cnt = cnt,
				  .total = net_iov_total(iov, cnt) };
	/* every sge ends at a local or remote boundary or fills its WR */
	int scap = 2 * (nseg + cnt) + 4, cap = nseg + scap, nw = 0, ns = 0, si;
	struct vb_seg sg = { 0 };

	for (int i = 0; i < cnt; i++)
		if (iov[i].iov_len && vb_local_key(c, op, iov[i].iov_base, iov[i].iov_len,
						   &lkeys[i]))
			return -ENOMEM;
	si = vb_seg_find(segs, nseg, &roff, &sg);
	op->wr = calloc((size_t)cap, sizeof(*op->wr));
	op->sge = calloc((size_t)scap, sizeof(*op->sge));
	if (!op->wr || !op->sge)
		return -ENOMEM;
	while (cu.total > 0) {
		if (si >= nseg)
			return -EINVAL;
		vb_seg_decode(segs + (size_t)si * VB_SEG_LEN, &sg);
		if (nw == cap)
			return -ENOMEM;
		struct ibv_send_wr *w = &op->wr[nw];
		w->opcode = is_read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		w->wr.rdma.remote_addr = sg.addr + roff;
		w->wr.rdma.rkey = sg.rkey;
		w->sg_list = &op->sge[ns];
		roff += vb_rdma_sges(op, w, &cu, sg.len - roff, msge, &ns, scap);
		vb_stat_max(&s->base.st, (uint64_t)w->num_sge);
		if (roff == sg.len) {
			si++;
			roff = 0;
		}
		if (nw)
			op->wr[nw - 1].next = w;
		nw++;
		if (ns == scap && cu.total > 0)
			return -ENOMEM;
	}
	return vb_rdma_signal(op, nw, s->list_mode);
}

/* ------------------------------------------------------------------ pull/push */

/* The verbs request holding r. */
static struct vb_sreq *vb_q_of(struct net_sreq *r)
{
	return NET_CONTAINER_OF(r, struct vb_sreq, r);
}

/* A new op of kind k on c for q, calling cb when done; a reply op counts
 * in c->replies_out until vb_op_free. @return NULL: ENOMEM */
static struct vb_op *vb_op_new(struct vb_sconn *c, struct vb_sreq *q,
			       enum vb_op_kind k, net_xfer_fn cb, void *arg)
{
	struct vb_op *op = calloc(1, sizeof(*op));

	if (!op)
		return NULL;
	op->tag.kind = VB_ST_OP;
	op->kind = k;
	op->c = c;
	op->q = q;
	op->cb = cb;
	op->arg = arg;
	op->sbuf = -1;
	if (vb_op_is_reply(op))
		c->replies_out++; /* until vb_op_free */
	return op;
}

/* On a keyed connection, once every byte of q's write data that came
 * outside its message is in (q->wmac fed up to bulk_len), check its tag.
 * @return 0, -EBADMSG (the data is not the client's: c is closed) */
static int vb_wmac_done(struct vb_sconn *c, struct vb_sreq *q)
{
	if (!q->wsealed || q->wmac.off < q->r.hdr.bulk_len)
		return 0;
	q->wsealed = 0;
	if (vb_mac_check(&q->wmac, q->wtag) == 0)
		return 0;
	NET_STAT_ADD(&c->srv->base.st, rejects, 1);
	if (!c->base.dead)
		vb_sconn_close(c, 1, "write data fails its MAC");
	return -EBADMSG;
}

/* A keyed request's RDMA Read op completed: feed the bytes it placed to
 * q's MAC, in order (its WRs' SGEs walk its iov in order), and check the
 * tag after the last. Cost: a Poly1305 pass over the bytes.
 * @return 0, -EBADMSG (c is closed) */
static int vb_pull_mac(struct vb_op *op)
{
	struct vb_sreq *q = op->q;

	if (!q->wsealed)
		return 0;
	if (op->off != q->wmac.off) { /* an earlier pull failed */
		if (!op->c->base.dead)
			vb_sconn_close(op->c, 1, "write data MACed out of order");
		return -EBADMSG;
	}
	for (int i = 0; i < op->nwr; i++)
		for (int j = 0; j < op->wr[i].num_sge; j++)
			vb_mac_update(&q->wmac,
				      (const void *)(uintptr_t)op->wr[i].sg_list[j].addr,
				      op->wr[i].sg_list[j].length);
	return vb_wmac_done(op->c, q);
}

/* Pull the next write bytes into iov: copy (inline, fast) or RDMA Read. */
static int vb_pull(struct net_sreq *r, const struct iovec *iov, int cnt,
		   net_xfer_fn cb, void *arg)
{
	struct vb_sreq *q = vb_q_of(r);
	struct vb_sconn *c = q->c;
	struct net_stats *st = &c->srv->base.st;
	struct vb_op *op;
	uint64_t total;
	int rc;

	if (net_sreq_pull_check(r, iov, cnt, cb, &total))
		return -EINVAL;
	op = vb_op_new(c, q, VB_OP_PULL, cb, arg);
	if (!op)
		return -ENOMEM;
	(void)net_sreq_advance(r, NET_SREQ_EV_PULL);
	if (c->base.dead || total == 0) {
		vb_op_done_later(op, c->base.dead ? -EIO : 0);
		return 0;
	}
	if (q->m.flags & (VB_F_WR_INLINE | VB_F_WR_FAST)) {
		uint64_t off = r->pulled;
		for (int i = 0; i < cnt; i++) {
			memcpy(iov[i].iov_base, q->inl + off, iov[i].iov_len);
			off += iov[i].iov_len;
		}
		if (q->m.flags & VB_F_WR_INLINE) {
			NET_STAT_ADD(st, inline_bytes, total);
		} else {
			NET_STAT_ADD(st, fast_bytes, total);
		}
		r->pulled += total;
		NET_STAT_ADD(st, bulk_pull_bytes, total);
		NET_STAT_ADD(st, pipeline_units, 1);
		rc = 0;
		if (q->wsealed) { /* MAC the copy: the slot may change after */
			vb_mac_iov(&q->wmac, iov, cnt);
			rc = vb_wmac_done(c, q);
		}
		vb_op_done_later(op, rc);
		return 0;
	}
	op->off = r->pulled;
	rc = vb_build_rdma(c, op, q->segs, q->m.nwr, r->pulled, iov, cnt, 1);
	if (rc) {
		vb_op_free(op);
		(void)net_sreq_advance(r, NET_SREQ_EV_PULLED);
		return rc == -EINVAL ? rc : -ENOMEM;
	}
	r->pulled += total;
	NET_STAT_ADD(st, rdma_signaled, op->pending);
	NET_STAT_ADD(st, rdma_read_ops, op->nwr);
	NET_STAT_ADD(st, rdma_read_bytes, total);
	NET_STAT_ADD(st, bulk_pull_bytes, total);
	NET_STAT_ADD(st, pipeline_units, 1);
	vb_submit_op(c, op);
	return 0;
}

/* Push read bytes at off: into the inline reply, or RDMA Write. */
static int vb_push(struct net_sreq *r, uint64_t off, const struct iovec *iov,
		   int cnt, net_xfer_fn cb, void *arg)
{
	struct vb_sreq *q = vb_q_of(r);
	struct vb_sconn *c = q->c;
	struct vb_server *s = c->srv;
	struct net_stats *st = &s->base.st;
	struct vb_op *op;
	uint64_t total;
	int rc;

	if (net_sreq_push_check(r, off, iov, cnt, cb, &total))
		return -EINVAL;
	if (q->rsealed && off != q->rmac.off) {
		log_err("net: %s: a push at %llu after %llu bytes: a keyed verbs "
			"connection MACs read data in order, so pushes must follow "
			"each other", c->base.peer, (unsigned long long)off,
			(unsigned long long)q->rmac.off);
		return -EINVAL;
	}
	op = vb_op_new(c, q, VB_OP_PUSH, cb, arg);
	if (!op)
		return -ENOMEM;
	(void)net_sreq_advance(r, NET_SREQ_EV_PUSH);
	if (c->base.dead || total == 0) {
		vb_op_done_later(op, c->base.dead ? -EIO : 0);
		return 0;
	}
	if (q->m.flags & VB_F_RD_INLINE) {
		uint64_t o = off;
		for (int i = 0; i < cnt; i++) {
			memcpy(q->rdinl + o, iov[i].iov_base, iov[i].iov_len);
			o += iov[i].iov_len;
		}
		if (off + total > q->pushed)
			q->pushed = off + total;
		NET_STAT_ADD(st, inline_bytes, total);
		NET_STAT_ADD(st, bulk_push_bytes, total);
		NET_STAT_ADD(st, pipeline_units, 1);
		vb_op_done_later(op, 0);
		return 0;
	}
	rc = vb_build_rdma(c, op, q->segs + (size_t)q->m.nwr * VB_SEG_LEN, q->m.nrd, off,
			   iov, cnt, 0);
	if (rc) {
		vb_op_free(op);
		(void)net_sreq_advance(r, NET_SREQ_EV_PUSHED);
		return rc == -EINVAL ? rc : -ENOMEM;
	}
	if (q->rsealed) /* the bytes as they leave: ours until cb */
		vb_mac_iov(&q->rmac, iov, cnt);
	if (off + total > q->pushed)
		q->pushed = off + total;
	NET_STAT_ADD(st, rdma_signaled, op->pending);
	if (r->hdr.aux <= s->base.opts.fast_max) {
		NET_STAT_ADD(st, fast_msgs, 1);
		NET_STAT_ADD(st, fast_bytes, total);
	} else {
		NET_STAT_ADD(st, rdma_write_ops, op->nwr);
		NET_STAT_ADD(st, rdma_write_bytes, total);
	}
	NET_STAT_ADD(st, bulk_push_bytes, total);
	NET_STAT_ADD(st, pipeline_units, 1);
	vb_submit_op(c, op);
	return 0;
}

/* ------------------------------------------------------------------- reply */

/* Lazily registered big buffer (VB_BIG_SIZE). @return 0, -ENOMEM */
static int vb_big_buf(struct vb_sconn *c, uint8_t **buf, struct ibv_mr **mr)
{
	if (*buf)
		return 0;
	*buf = malloc(VB_BIG_SIZE);
	if (!*buf)
		return -ENOMEM;
	*mr = vb_reg(c->srv->pd, *buf, VB_BIG_SIZE, IBV_ACCESS_LOCAL_WRITE,
		     &c->srv->base.st);
	if (!*mr) {
		free(*buf);
		*buf = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Most pooled reply buffers of c: only reply ops take them, and at most
 * `credits` replies are unfinished (vb_dispatch's gate); pushes use the
 * zones or per-op registrations, never the pool. */
static int vb_bbuf_max(const struct vb_sconn *c)
{
	return c->credits;
}

/* Give op a reply buffer from c's pool, registering a new one when all are
 * taken (at most one per reply in flight; kept until the connection goes).
 * The pool never grows past vb_bbuf_max: that would mean more replies in
 * flight than the gate lets through, so the caller closes the connection.
 * @return 0, -ENOBUFS (pool at its cap), -ENOMEM */
static int vb_bbuf_take(struct vb_sconn *c, struct vb_op *op)
{
	struct vb_bbuf *b = c->bb_free;

	if (b) {
		c->bb_free = b->next;
	} else {
		if (c->bb_n >= vb_bbuf_max(c))
			return -ENOBUFS;
		b = calloc(1, sizeof(*b));
		if (!b)
			return -ENOMEM;
		if (vb_big_buf(c, &b->p, &b->mr)) {
			free(b);
			return -ENOMEM;
		}
		b->all = c->bb_all;
		c->bb_all = b;
		c->bb_n++;
	}
	b->next = NULL;
	op->bb = b;
	return 0;
}

/* The request is finished: free it and let the next one in (later). */
static void vb_sreq_finish(struct vb_sconn *c, struct vb_sreq *q)
{
	vb_sreq_free(c, q);
	net_sconn_finished(&c->base, &q->r);
	vb_repost_flush(c->srv);
	vb_dispatch_later(c);
	vb_sconn_maybe_free(c);
}

/*
 * Point op (one SGE) at the buffer its reply is built in: a pooled one for
 * a big reply, else a free send buffer, else (all VB_SBUFS in flight) a
 * pooled one sent as an ordinary (small) reply.
 * @return 0, -ENOBUFS (the pool is at its cap), -ENOMEM
 */
static int vb_reply_buf(struct vb_sconn *c, struct vb_op *op, int big, uint8_t **msg)
{
	int i, rc;

	for (i = 0; !big && i < VB_SBUFS && (c->sbuf_busy & (1u << i)); i++)
		;
	if (big || i == VB_SBUFS) {
		rc = vb_bbuf_take(c, op);
		if (rc)
			return rc;
		*msg = op->bb->p;
		op->sge[0].lkey = op->bb->mr->lkey;
		return 0;
	}
	c->sbuf_busy |= 1u << i;
	op->sbuf = i;
	*msg = c->mem + VB_FAST_SLOTS * c->slot_size + (size_t)i * VB_MSG_SIZE;
	op->sge[0].lkey = c->mr->lkey;
	return 0;
}

/*
 * A reply op of c (for request q; NULL for the grant): one signaled WR of
 * one SGE at the buffer vb_reply_buf gives it, a SEND (the big reply's
 * caller makes it an RDMA Write). The caller sets the SGE's length.
 * @return the op, *msg its buffer; or NULL, *rc -ENOMEM or -ENOBUFS
 */
static struct vb_op *vb_reply_op(struct vb_sconn *c, struct vb_sreq *q, int big,
				 uint8_t **msg, int *rc)
{
	struct vb_op *op = vb_op_new(c, q, big ? VB_OP_BIGREP : VB_OP_REPLY, NULL, NULL);

	*rc = -ENOMEM;
	if (!op || !(op->wr = calloc(1, sizeof(*op->wr))) ||
	    !(op->sge = calloc(1, sizeof(*op->sge))) ||
	    (*rc = vb_reply_buf(c, op, big, msg))) {
		if (op)
			vb_op_free(op);
		return NULL;
	}
	op->sge[0].addr = (uintptr_t)*msg;
	op->wr->sg_list = op->sge;
	op->wr->num_sge = 1;
	op->wr->opcode = IBV_WR_SEND;
	op->wr->send_flags = IBV_SEND_SIGNALED;
	op->wr->wr_id = (uintptr_t)&op->tag;
	op->nwr = 1;
	return op;
}

/*
 * Send the reply of r (with inline read data) and free r. A reply that
 * outgrows an internal buffer is RDMA Written with Immediate into the
 * client's landing buffer, after the client acknowledged the previous one.
 */
static int vb_reply(struct net_sreq *r, int32_t status, const void *body, uint32_t len)
{
	struct vb_sreq *q = vb_q_of(r);
	struct vb_sconn *c = q->c;
	struct vb_server *s = c->srv;
	struct net_stats *st = &s->base.st;
	uint32_t inl = (q->m.flags & VB_F_RD_INLINE) ? (uint32_t)q->pushed : 0;
	uint64_t total = (uint64_t)VB_HDRS + len + inl +
			 (c->sealed ? VB_SEAL_TRAILER : 0);
	uint8_t dtag[VB_SEAL_TAG];
	struct vb_op *op = NULL;
	uint8_t *msg;
	int rc = 0, big = total > VB_MSG_SIZE;

	if (net_sreq_advance(r, NET_SREQ_EV_REPLY))
		return -EINVAL;
	if (c->base.dead)
		goto out_finish;
	if (len > PROTO_MAX_BODY || (len && !body)) {
		log_err("net: %s: reply body of %u bytes too large", c->base.peer, len);
		vb_sconn_close(c, 0, "reply too large");
		rc = -EMSGSIZE;
		goto out_finish;
	}
	op = vb_reply_op(c, q, big, &msg, &rc);
	if (!op)
		goto out_close;
	struct proto_hdr h = { .op = r->hdr.op, .tag = r->hdr.tag, .status = status,
			       .credits = 1, .flags = PROTO_F_REPLY, .body_len = len,
			       .aux = (q->m.flags & VB_F_RD_INLINE) ? 0 : q->pushed };
	struct vb_mhdr m = { .kind = VB_K_REP, .fslot = 0xffff, .inl = inl,
			     .flags = inl ? VB_F_RD_INLINE : 0 };
	if (inl) {
		NET_STAT_ADD(st, inline_msgs, 1);
	}
	/* Copy first: body may live in the request's buffer, freed below. */
	if (len)
		memmove(msg + VB_HDRS, body, len);
	if (inl)
		memcpy(msg + VB_HDRS + len, q->rdinl, inl);
	proto_hdr_encode(msg, &h);
	vb_mhdr_encode(msg + PROTO_HDR_LEN, &m);
	if (c->sealed) { /* sealed now: replies are posted in this order */
		if (q->rsealed && q->pushed)
			vb_mac_final(&q->rmac, dtag);
		vb_seal_put(&c->tx, msg, (uint32_t)total - VB_SEAL_TRAILER,
			    q->rsealed && q->pushed ? dtag : NULL, VB_SEAL_MSG, 0);
	}
	op->sge[0].length = (uint32_t)total;
	if (big) {
		op->wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		op->wr->imm_data = vb_imm_encode(VB_IMM_BIG, (uint32_t)total);
		op->wr->wr.rdma.remote_addr = c->land_addr;
		op->wr->wr.rdma.rkey = c->land_rkey;
	}
	op->q = NULL;
	NET_STAT_ADD(st, msgs_tx, 1);
	NET_STAT_ADD(st, bytes_tx, total);
	/* Repost the request's buffer before the credit goes back. */
	vb_sreq_finish(c, q);
	if (!c->base.dead)
		vb_submit_op(c, op);
	else
		vb_op_done_later(op, -EIO);
	return 0;

out_close:
	vb_sconn_close(c, 1, rc == -ENOBUFS ?
		       "more replies in flight than credits (reply buffer pool full)" :
		       "out of memory replying");
out_finish:
	vb_sreq_finish(c, q);
	return rc;
}

/* Close the connection of a malformed request. */
static void vb_reject(struct net_sreq *r, const char *why)
{
	struct vb_sreq *q = vb_q_of(r);
	struct vb_sconn *c = q->c;

	(void)net_sreq_advance(r, NET_SREQ_EV_REJECT);
	NET_STAT_ADD(&c->srv->base.st, rejects, 1);
	if (!c->base.dead)
		vb_sconn_close(c, 1, why ? why : "rejected");
	vb_sreq_finish(c, q);
}

/* ------------------------------------------------------------------- intake */

/* Sum of the lengths of n encoded segments. */
static uint64_t vb_segs_sum(const uint8_t *segs, int n)
{
	uint64_t sum = 0;
	struct vb_seg sg;

	for (int i = 0; i < n; i++) {
		vb_seg_decode(segs + (size_t)i * VB_SEG_LEN, &sg);
		sum += sg.len;
	}
	return sum;
}

/* Check q's write mechanism (none, inline, fast slot, RDMA segments)
 * against its write length. @return NULL, or why it is bad */
static const char *vb_parse_wr(const struct vb_sreq *q, const uint8_t *data_after)
{
	const struct proto_hdr *h = &q->r.hdr;
	const struct vb_mhdr *m = &q->m;

	switch (m->flags & (VB_F_WR_INLINE | VB_F_WR_FAST | VB_F_WR_RDMA)) {
	case 0:
		return h->bulk_len ? "write data without a mechanism" : NULL;
	case VB_F_WR_INLINE:
	case VB_F_WR_FAST:
		if (m->inl != h->bulk_len || m->nwr)
			return "inline/fast length mismatch";
		if ((m->flags & VB_F_WR_FAST) && !data_after)
			return "fast write outside a fast slot";
		return NULL;
	case VB_F_WR_RDMA:
		return vb_segs_sum(q->segs, m->nwr) != h->bulk_len ?
			"write segments do not add up" : NULL;
	default:
		return "several write mechanisms";
	}
}

/* Check q's read mechanism (none, inline, RDMA segments) against its read
 * length; an inline read gets its buffer (inline_max, kept with q).
 * @return NULL, or why it is bad */
static const char *vb_parse_rd(const struct net_opts *o, struct vb_sreq *q)
{
	const struct proto_hdr *h = &q->r.hdr;
	const struct vb_mhdr *m = &q->m;

	if (m->flags & VB_F_RD_INLINE) {
		if (h->aux > o->inline_max || m->nrd)
			return "inline read too large";
		if (!q->rdinl && h->aux && !(q->rdinl = malloc(o->inline_max)))
			return "out of memory";
		return NULL;
	}
	if (m->flags & VB_F_RD_RDMA)
		return vb_segs_sum(q->segs + (size_t)m->nwr * VB_SEG_LEN, m->nrd) != h->aux ?
			"read segments do not add up" : NULL;
	return h->aux ? "read memory without a mechanism" : NULL;
}

/*
 * Check a request message and point q at its parts.
 * @return 0, or a reason for the log line
 */
static const char *vb_parse_req(struct vb_sconn *c, struct vb_sreq *q,
				const uint8_t *msg, uint32_t len, const uint8_t *data_after)
{
	const char *why = NULL;
	struct proto_hdr *h = &q->r.hdr;
	struct vb_mhdr *m = &q->m;
	uint64_t need;

	if (len < VB_HDRS || proto_hdr_decode(msg, h, &why) ||
	    vb_mhdr_decode(msg + PROTO_HDR_LEN, m))
		return why ? why : "bad vb header";
	if (h->flags || h->status || m->kind != VB_K_REQ)
		return "not a request";
	if (m->flags & ~(VB_F_WR_INLINE | VB_F_WR_FAST | VB_F_WR_RDMA |
			 VB_F_RD_INLINE | VB_F_RD_RDMA))
		return "unknown vb flags";
	if ((m->flags & VB_F_RD_INLINE) && (m->flags & VB_F_RD_RDMA))
		return "several read mechanisms";
	if (h->op == PROTO_OP_NET_HELLO || h->op == PROTO_OP_NET_CREDIT)
		return "control op without control flag";
	need = VB_HDRS + (uint64_t)(m->nwr + m->nrd) * VB_SEG_LEN + h->body_len +
	       ((m->flags & VB_F_WR_INLINE) ? m->inl : 0);
	if (need > len)
		return "message shorter than its parts";
	q->msg = msg;
	q->len = len;
	q->segs = msg + VB_HDRS;
	q->r.body = q->segs + (size_t)(m->nwr + m->nrd) * VB_SEG_LEN;
	q->r.body_len = h->body_len;
	q->inl = (m->flags & VB_F_WR_FAST) ? data_after : q->r.body + h->body_len;
	if ((why = vb_parse_wr(q, data_after)) || (why = vb_parse_rd(&c->srv->base.opts, q)))
		return why;
	q->r.conn = &c->base;
	q->r.pulled = 0;
	q->r.ctx = NULL;
	q->pushed = 0;
	return NULL;
}

/* q's turn came, but it is big: RDMA Read its message into c's big buffer
 * (vb_fetched follows). Out of memory closes c. */
static void vb_fetch_start(struct vb_sconn *c, struct vb_sreq *q)
{
	struct vb_op *op = vb_op_new(c, q, VB_OP_FETCH, NULL, NULL);
	struct vb_seg sg;

	vb_seg_decode(q->segs, &sg);
	if (!op || vb_big_buf(c, &c->big, &c->big_mr) ||
	    !(op->wr = calloc(1, sizeof(*op->wr))) ||
	    !(op->sge = calloc(1, sizeof(*op->sge)))) {
		if (op)
			vb_op_free(op);
		vb_sconn_close(c, 1, "out of memory fetching a big request");
		net_sconn_finished(&c->base, &q->r);
		vb_sreq_free(c, q);
		return;
	}
	op->sge[0] = (struct ibv_sge){ (uintptr_t)c->big, sg.len, c->big_mr->lkey };
	op->wr->opcode = IBV_WR_RDMA_READ;
	op->wr->sg_list = op->sge;
	op->wr->num_sge = 1;
	op->wr->send_flags = IBV_SEND_SIGNALED;
	op->wr->wr_id = (uintptr_t)&op->tag;
	op->wr->wr.rdma.remote_addr = sg.addr;
	op->wr->wr.rdma.rkey = sg.rkey;
	op->nwr = 1;
	vb_submit_op(c, op);
}

/* Hand the next queued request to the handler (or fetch a big one),
 * unless one is there or c has `credits` replies unfinished: then the
 * request waits until vb_sreq_finish or a reply's vb_op_free calls
 * vb_dispatch_later. */
static void vb_dispatch(struct vb_sconn *c)
{
	struct vb_server *s = c->srv;
	struct net_sreq *r;
	struct vb_sreq *q;

	if (c->base.dead || vb_replies_full(c) || !(r = net_sconn_next(&c->base)))
		return;
	q = vb_q_of(r);
	if (q->r.state == NET_SREQ_ARRIVING) {
		vb_fetch_start(c, q);
		return;
	}
	(void)net_sreq_advance(&q->r, NET_SREQ_EV_DISPATCH);
	NET_STAT_ADD(&s->base.st, msgs_rx, 1);
	net_sconn_hold(&c->base);
	s->fn(&q->r, s->fn_arg);
	net_sconn_release(&c->base);
}

/* On a keyed connection, start q's data MACs: write data outside its
 * message (a fast slot, RDMA Read) against dtag, the tag it came with;
 * read data it wants RDMA Written. Cost: a ChaCha20 block each. */
static void vb_seal_intake(struct vb_sconn *c, struct vb_sreq *q,
			   const uint8_t dtag[VB_SEAL_TAG])
{
	q->wsealed = c->sealed && q->r.hdr.bulk_len &&
		     (q->m.flags & (VB_F_WR_FAST | VB_F_WR_RDMA));
	q->rsealed = c->sealed && (q->m.flags & VB_F_RD_RDMA);
	if (q->wsealed) {
		vb_mac_start(&c->rx, &q->wmac, VB_SEAL_WR, q->r.hdr.tag);
		memcpy(q->wtag, dtag, VB_SEAL_TAG);
	}
	if (q->rsealed)
		vb_mac_start(&c->tx, &q->rmac, VB_SEAL_RD, q->r.hdr.tag);
}

/* A big request's message is in c->big: check its seal (keyed), parse it
 * and dispatch. */
static void vb_fetched(struct vb_sconn *c, struct vb_sreq *q, int rc)
{
	struct vb_server *s = c->srv;
	uint8_t dtag[VB_SEAL_TAG];
	uint32_t len = q->m.bigmsg;
	const char *why = NULL;

	net_sconn_finished(&c->base, &q->r);
	if (rc || c->base.dead) {
		vb_sreq_free(c, q);
		vb_sconn_close(c, 0, "big request fetch failed");
		return;
	}
	if (c->sealed && vb_seal_open(&c->rx, c->big, len, dtag, VB_SEAL_BIG,
				      q->big_tag, &len))
		why = "big request fails its MAC";
	if (!why)
		why = vb_parse_req(c, q, c->big, len, NULL);
	if (!why && c->sealed && q->r.hdr.tag != q->big_tag)
		why = "big request under another tag than its announcement";
	if (why) {
		NET_STAT_ADD(&s->base.st, rejects, 1);
		vb_sreq_free(c, q);
		vb_sconn_close(c, 1, why);
		return;
	}
	vb_seal_intake(c, q, dtag);
	(void)net_sreq_advance(&q->r, NET_SREQ_EV_DATA);
	net_sconn_requeue(&c->base, &q->r); /* still the next in order */
	vb_dispatch(c);
}

/*
 * Register c's fast slots, the one server memory a client may RDMA Write
 * (its fast requests land there), and describe them in g: at accept for a
 * keyless server, else once the client's proof is verified (vb_send_grant),
 * so nothing is remotely writable before authentication.
 * @return 0, -ENOMEM (logged)
 */
static int vb_conn_reg_fast(struct vb_sconn *c, struct vb_grant *g)
{
	struct vb_server *s = c->srv;
	size_t flen = VB_FAST_SLOTS * c->slot_size;

	c->fmr = vb_reg(s->pd, c->mem, flen,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &s->base.st);
	if (!c->fmr) {
		log_err("net: %s: cannot register %zu bytes of fast slots: %s "
			"(RLIMIT_MEMLOCK?)", c->base.peer, flen, strerror(errno));
		return -ENOMEM;
	}
	g->nslots = VB_FAST_SLOTS;
	g->slot_size = (uint32_t)c->slot_size;
	g->fast_addr = (uintptr_t)c->mem;
	g->fast_rkey = c->fmr->rkey;
	return 0;
}

/*
 * The client's proof is verified: register the fast slots and send them
 * (VB_K_GRANT, in a send buffer; the client waits for it before it marks
 * the connection up, so it comes before any reply).
 * @return 0, -ENOMEM, -ENOBUFS (the caller closes the connection)
 */
static int vb_send_grant(struct vb_sconn *c)
{
	struct vb_grant g;
	struct vb_op *op;
	uint8_t *msg;
	int rc;

	rc = vb_conn_reg_fast(c, &g);
	if (rc)
		return rc;
	op = vb_reply_op(c, NULL, 0, &msg, &rc);
	if (!op)
		return rc;
	struct proto_hdr h = { .op = PROTO_OP_NET_HELLO, .flags = PROTO_F_REPLY | PROTO_F_CTRL,
			       .body_len = VB_GRANT_LEN };
	struct vb_mhdr m = { .kind = VB_K_GRANT, .fslot = 0xffff };
	proto_hdr_encode(msg, &h);
	vb_mhdr_encode(msg + PROTO_HDR_LEN, &m);
	vb_grant_encode(msg + VB_HDRS, &g);
	op->sge[0].length = vb_seal_put(&c->tx, msg, VB_HDRS + VB_GRANT_LEN, NULL,
					VB_SEAL_MSG, 0);
	NET_STAT_ADD(&c->srv->base.st, msgs_tx, 1);
	vb_submit_op(c, op);
	return 0;
}

/*
 * The client's proof (AUTH) in msg: a good one authenticates c and has
 * the fast slots granted, a wrong one closes c.
 * @return NULL (handled, rb posted again), or why the message is bad
 */
static const char *vb_on_auth(struct vb_sconn *c, struct vb_srbuf *rb,
			      const struct proto_hdr *h, const uint8_t *msg, uint32_t len)
{
	struct vb_server *s = c->srv;

	if (c->base.hs != NET_HS_AUTH || h->body_len != NET_AUTH_MAC_LEN ||
	    len < VB_HDRS + NET_AUTH_MAC_LEN)
		return "unexpected auth message";
	vb_repost(s, rb);
	if (net_sconn_auth_check(&c->base, c->key, c->cn, c->sn, msg + VB_HDRS)) {
		vb_sconn_close(c, 0, "cluster key refused");
		return NULL;
	}
	net_sconn_authed(&c->base, c->key_priv);
	ev_timer_stop(s->loop, &c->hs_dl);
	net_seal_init(&c->rx, c->key, NET_AUTH_ROLE_CLIENT, NET_SEAL_MAC, c->cn, c->sn);
	net_seal_init(&c->tx, c->key, NET_AUTH_ROLE_SERVER, NET_SEAL_MAC, c->cn, c->sn);
	c->sealed = 1;
	if (vb_send_grant(c))
		vb_sconn_close(c, 1, "cannot grant the fast slots");
	return NULL;
}

/* A big request's first message (q's receive buffer): the segment its
 * whole message is fetched from at its turn (ARRIVING until then).
 * @return NULL, or why it is bad */
static const char *vb_intake_big(struct vb_sreq *q, const struct proto_hdr *h,
				 const struct vb_mhdr *m, const uint8_t *msg, uint32_t len)
{
	struct vb_seg sg;

	if (len < VB_HDRS + VB_SEG_LEN || m->bigmsg > VB_BIG_SIZE)
		return "bad big request";
	vb_seg_decode(msg + VB_HDRS, &sg);
	if (sg.len != m->bigmsg)
		return "bad big request";
	q->m = *m;
	q->big_tag = h->tag;
	q->segs = msg + VB_HDRS;
	(void)net_sreq_advance(&q->r, NET_SREQ_EV_PARTIAL);
	return NULL;
}

/* A whole request message: parsed into q (QUEUED), counted by how its
 * write data came. @return NULL, or why it is bad */
static const char *vb_intake_req(struct vb_sconn *c, struct vb_sreq *q,
				 const uint8_t *msg, uint32_t len,
				 const uint8_t *data_after, const uint8_t *dtag)
{
	struct net_stats *st = &c->srv->base.st;
	const char *why = vb_parse_req(c, q, msg, len, data_after);

	if (why)
		return why;
	vb_seal_intake(c, q, dtag);
	(void)net_sreq_advance(&q->r, NET_SREQ_EV_ARRIVE);
	if (q->m.flags & VB_F_WR_INLINE)
		NET_STAT_ADD(st, inline_msgs, 1);
	else if (q->m.flags & VB_F_WR_FAST)
		NET_STAT_ADD(st, fast_msgs, 1);
	return NULL;
}

/* A message arrived on c: a request, AUTH or ACK. On a keyed connection
 * after AUTH, its trailer is checked (and stripped) before anything in it
 * is read. */
static void vb_on_msg(struct vb_sconn *c, struct vb_srbuf *rb, const uint8_t *msg,
		      uint32_t len, const uint8_t *data_after)
{
	struct vb_server *s = c->srv;
	uint8_t dtag[VB_SEAL_TAG] = { 0 };
	struct proto_hdr h;
	struct vb_mhdr m;
	const char *why = NULL;
	struct vb_sreq *q;

	NET_STAT_ADD(&s->base.st, bytes_rx, len);
	if (c->sealed && vb_seal_open(&c->rx, msg, len, dtag, VB_SEAL_MSG, 0, &len)) {
		why = "message fails its MAC (altered, replayed or out of its place)";
		goto out_bad;
	}
	if (len < VB_HDRS || proto_hdr_decode(msg, &h, &why) ||
	    vb_mhdr_decode(msg + PROTO_HDR_LEN, &m)) {
		why = why ? why : "bad vb header";
		goto out_bad;
	}
	if (m.kind == VB_K_AUTH) {
		why = vb_on_auth(c, rb, &h, msg, len);
		if (why)
			goto out_bad;
		return;
	}
	if (m.kind == VB_K_ACK) {
		c->land_busy = 0;
		vb_repost(s, rb);
		vb_flush_sq(c);
		return;
	}
	if (c->base.hs != NET_HS_OPEN) {
		why = "request before authentication";
		goto out_bad;
	}
	q = c->free_q;
	if (!q) {
		why = "more requests than credits";
		goto out_bad;
	}
	c->free_q = q->next;
	q->next = NULL;
	q->rb = rb;
	q->r.conn = &c->base;
	why = m.kind == VB_K_BIGREQ ? vb_intake_big(q, &h, &m, msg, len) :
				      vb_intake_req(c, q, msg, len, data_after, dtag);
	if (why) {
		vb_sreq_free(c, q);
		goto out_bad_norb;
	}
	net_sconn_enqueue(&c->base, &q->r);
	vb_dispatch(c);
	return;

out_bad:
	vb_repost(s, rb);
out_bad_norb:
	NET_STAT_ADD(&s->base.st, rejects, 1);
	vb_sconn_close(c, 1, why);
}

/*
 * A message RDMA Written with Immediate into a fast slot: [message][write
 * data], imm naming the slot and the length of both. The client can write
 * the slot again at any time, so the message part (headers, segments,
 * body: len minus its inline length) is copied into rb, the receive
 * buffer the immediate consumed, and parsed and served from there, so
 * nothing checked can change under the handler; the write data stays in
 * the slot (the client's own bytes, copied out by vb_pull). The copy's
 * inline length must be the one the slot was split by, or the data would
 * not end inside the slot. rb goes with the request, as a sent one's.
 */
static void vb_on_fast(struct vb_sconn *c, struct vb_srbuf *rb, uint32_t imm)
{
	struct vb_server *s = c->srv;
	struct vb_mhdr m, mc;
	const uint8_t *base;
	unsigned slot;
	uint32_t len, mlen;
	const char *why = "bad fast write";

	vb_imm_decode(imm, &slot, &len);
	if (slot >= VB_FAST_SLOTS || len > c->slot_size || len < VB_HDRS)
		goto out_bad;
	base = c->mem + (size_t)slot * c->slot_size;
	why = "bad fast write message";
	if (vb_mhdr_decode(base + PROTO_HDR_LEN, &m) || m.inl > len - VB_HDRS ||
	    !(m.flags & VB_F_WR_FAST))
		goto out_bad;
	mlen = len - m.inl;
	if (mlen > VB_MSG_SIZE)
		goto out_bad; /* a genuine client sends such a message big */
	memcpy(rb->p, base, mlen);
	if (vb_mhdr_decode(rb->p + PROTO_HDR_LEN, &mc) || mc.inl != m.inl ||
	    !(mc.flags & VB_F_WR_FAST))
		goto out_bad;
	vb_on_msg(c, rb, rb->p, mlen, base + mlen);
	return;

out_bad:
	vb_repost(s, rb);
	NET_STAT_ADD(&s->base.st, rejects, 1);
	vb_sconn_close(c, 1, why);
}

/* One receive completion from the SRQ. */
static void vb_on_recv(struct vb_server *s, struct ibv_wc *wc)
{
	struct vb_stag *t = (struct vb_stag *)(uintptr_t)wc->wr_id;
	struct vb_srbuf *rb = NET_CONTAINER_OF(t, struct vb_srbuf, tag);
	struct vb_sconn *c;

	vb_stat_gauge(&s->base.st.srq_posted, -1);
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			log_warn("net: verbs receive failed: %s", ibv_wc_status_str(wc->status));
		vb_repost(s, rb);
		return;
	}
	c = vb_hash_find(s, wc->qp_num);
	if (!c || c->base.dead) {
		vb_repost(s, rb);
		return;
	}
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		vb_on_fast(c, rb, wc->imm_data);
		return;
	}
	vb_on_msg(c, rb, rb->p, wc->byte_len, NULL);
}

/* One send-side completion: an op finished (or flushed). */
static void vb_on_send(struct vb_server *s, struct ibv_wc *wc)
{
	struct vb_stag *t = (struct vb_stag *)(uintptr_t)wc->wr_id;
	struct vb_op *op;
	struct vb_sconn *c;

	if (!t) {
		/* An unsignaled WR completing in error: the QP failed. */
		c = vb_hash_find(s, wc->qp_num);
		if (c)
			vb_sconn_close(c, 0, ibv_wc_status_str(wc->status));
		return;
	}
	op = NET_CONTAINER_OF(t, struct vb_op, tag);
	c = op->c;
	if (op->pending > 1) {
		/* multiple message: wait for the op's last signaled WR */
		op->pending--;
		if (wc->status != IBV_WC_SUCCESS) {
			op->rc = -EIO;
			if (!c->base.dead)
				vb_sconn_close(c, wc->status != IBV_WC_WR_FLUSH_ERR,
					       ibv_wc_status_str(wc->status));
		}
		return;
	}
	c->inflight--;
	c->sq_free += op->nwr;
	if (op->sbuf >= 0)
		c->sbuf_busy &= ~(1u << op->sbuf);
	if (wc->status != IBV_WC_SUCCESS && !c->base.dead)
		vb_sconn_close(c, wc->status != IBV_WC_WR_FLUSH_ERR,
			       ibv_wc_status_str(wc->status));
	int rc = wc->status == IBV_WC_SUCCESS && !op->rc ? 0 : -EIO;
	if (op->kind == VB_OP_PULL && rc == 0)
		rc = vb_pull_mac(op);
	switch (op->kind) {
	case VB_OP_PULL:
	case VB_OP_PUSH:
		net_sconn_hold(&c->base);
		vb_op_callback(op, rc);
		net_sconn_release(&c->base);
		break;
	case VB_OP_FETCH:
		vb_fetched(c, op->q, rc);
		break;
	default:
		break;
	}
	vb_op_free(op);
	if (!c->base.dead)
		vb_flush_sq(c);
	vb_sconn_maybe_free(c);
}

/* Route one completion on the tag its wr_id points at: an SRQ buffer's
 * (a receive), an op's (a send-side completion); no tag is an unsignaled
 * WR failing, which only a send queue has. */
static void vb_on_wc(struct vb_server *s, struct ibv_wc *wc)
{
	const struct vb_stag *t = (const struct vb_stag *)(uintptr_t)wc->wr_id;

	if (!t || t->kind == VB_ST_OP) {
		vb_on_send(s, wc);
	} else if (t->kind == VB_ST_RECV) {
		vb_on_recv(s, wc);
	} else {
		log_err("net: verbs: completion with an unknown tag kind %d (qp %u); "
			"ignored", (int)t->kind, wc->qp_num);
	}
}

/* Drain one CQ, 32 completions per pass. @return completions seen */
static int vb_poll_cq(struct vb_server *s, struct ibv_cq *cq)
{
	struct ibv_wc wc[VB_POLL_BATCH];
	int n, total = 0;

	do {
		n = ibv_poll_cq(cq, VB_POLL_BATCH, wc);
		for (int i = 0; i < n; i++)
			vb_on_wc(s, &wc[i]);
		total += n > 0 ? n : 0;
		vb_repost_flush(s);
	} while (n == VB_POLL_BATCH);
	return total;
}

/* Poll every CQ once. @return completions seen */
static int vb_poll_all(struct vb_server *s)
{
	int n = vb_poll_cq(s, s->rcq);

	for (struct vb_sconn *c = s->conns, *nx; c; c = nx) {
		nx = c->next;
		if (c->scq) {
			net_sconn_hold(&c->base);
			n += vb_poll_cq(s, c->scq);
			net_sconn_release(&c->base);
		}
	}
	return n;
}

/* Channel fd readable: take the events, re-arm, drain, then spin a while. */
static void vb_chan_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct vb_server *s = w->data;
	struct ibv_cq *cq;
	void *ctx;

	(void)revents;
	while (ibv_get_cq_event(s->chan, &cq, &ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		ibv_req_notify_cq(cq, 0);
	}
	vb_poll_all(s);
	s->spin_until = net_now_ns() + VB_SPIN_NS;
	ev_idle_start(loop, &s->spin_w);
}

/* Spin: poll while work keeps coming; adaptive mode stops after a quiet
 * VB_SPIN_NS and sleeps on the channel again. */
static void vb_spin_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	struct vb_server *s = w->data;

	(void)revents;
	if (vb_poll_all(s) > 0)
		s->spin_until = net_now_ns() + VB_SPIN_NS;
	else if (s->base.opts.poll_mode != NET_POLL_BUSY && net_now_ns() > s->spin_until) {
		ev_idle_stop(loop, w);
		NET_STAT_ADD(&s->base.st, poll_sleeps, 1);
	}
}

/* A deferred op completion (the server's kick watcher): its callback,
 * then the op goes. */
static void vb_done_run(struct net_srv_done *d)
{
	struct vb_op *op = NET_CONTAINER_OF(d, struct vb_op, done);
	struct vb_sconn *c = op->c;

	if (op->cb && op->q)
		vb_op_callback(op, op->rc);
	if (op->sbuf >= 0)
		c->sbuf_busy &= ~(1u << op->sbuf);
	vb_op_free(op);
	net_sconn_release(&c->base); /* vb_op_done_later's hold */
}

/* Server teardown: free an undelivered op. */
static void vb_done_drop(struct net_srv_done *d)
{
	vb_op_free(NET_CONTAINER_OF(d, struct vb_op, done));
}

/* Deferred work after the completions: the dispatches. */
static void vb_kick_more(struct net_server *ns)
{
	struct vb_server *s = NET_CONTAINER_OF(ns, struct vb_server, base);

	while (s->disp) {
		struct vb_sconn *c = s->disp;
		s->disp = c->dnext;
		c->need_dispatch = 0;
		vb_dispatch(c);
		vb_sconn_maybe_free(c);
	}
}

/* ---------------------------------------------------------------- connections */

/* Bytes a connection pins: fast slots and reply send buffers. */
static size_t vb_conn_bytes(const struct net_opts *o, size_t *slot)
{
	*slot = ((size_t)o->fast_max + VB_MSG_SIZE + 4095) & ~(size_t)4095;
	return VB_FAST_SLOTS * *slot + VB_SBUFS * VB_MSG_SIZE;
}

/*
 * Register c's memory: the reply send buffers behind the fast slots, local
 * only, so no peer can change a reply after it was built. The fast slots
 * are registered apart (vb_conn_reg_fast). @return 0, -ENOMEM (logged:
 * RLIMIT_MEMLOCK?)
 */
static int vb_conn_reg(struct vb_sconn *c)
{
	struct vb_server *s = c->srv;
	size_t flen = VB_FAST_SLOTS * c->slot_size;

	c->mr = vb_reg(s->pd, c->mem + flen, c->memlen - flen, IBV_ACCESS_LOCAL_WRITE,
		       &s->base.st);
	if (c->mr)
		return 0;
	log_err("net: %s: cannot register %zu bytes for a connection: %s "
		"(RLIMIT_MEMLOCK?)", c->base.peer, c->memlen - flen, strerror(errno));
	return -ENOMEM;
}

/* The handshake did not finish in time: an idle or stalled connect. */
static void vb_hs_dl_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct vb_sconn *c = w->data;
	char why[96];

	net_sconn_hs_late(&c->base, why, sizeof(why));
	vb_sconn_close(c, 0, why);
}

/*
 * Make room for a connection from src that will be in the handshake:
 * past NET_UNAUTH_PER_SOURCE of its host's, evict that host's oldest;
 * past NET_UNAUTH_MAX, or with max_clients live connections, evict the
 * oldest of all in the handshake. A genuine client proves its key one
 * round trip after it is accepted, so idle connects cannot lock it out.
 * Cost: one walk of the connection list.
 * @return the live connections left
 */
static int vb_unauth_admit(struct vb_server *s, const struct sockaddr *src)
{
	struct net_evict e = { .src = src };
	struct vb_sconn *c;
	int live = 0, n;

	for (c = s->conns; c; c = c->next) {
		if (c->base.dead)
			continue;
		live++;
		if (c->base.hs != NET_HS_OPEN)
			net_evict_see(&e, c, c->born, &c->src);
	}
	c = net_evict_pick(&e, live >= s->base.opts.max_clients, &n);
	if (!c)
		return live;
	NET_STAT_ADD(&s->base.st, unauth_closes, 1);
	log_notice("net: %s: evicted: %d verbs connections in the handshake%s",
		   c->base.peer, n, c == e.oldest_same ? " from its host" : "");
	vb_sconn_close(c, 0, "evicted before its handshake");
	return live - 1;
}

/*
 * Whether a connect request may be served: its private data (into cp),
 * the client limit (evicting an idle handshake if need be) and its key
 * class (the key it names into *key, and whether that is privileged
 * here). A refused request is rejected here, with its log line.
 * @return 0 admitted, -1 rejected
 */
static int vb_conn_admit(struct vb_server *s, struct rdma_cm_event *ev, const char *peer,
			 struct vb_cpriv *cp, const uint8_t **key, int *key_priv)
{
	const struct net_opts *o = &s->base.opts;
	struct rdma_cm_id *id = ev->id;
	int live;

	if (vb_cpriv_decode(ev->param.conn.private_data, ev->param.conn.private_data_len,
			    cp) || cp->credits == 0) {
		log_warn("net: %s: verbs connect without valid private data; refusing", peer);
		NET_STAT_ADD(&s->base.st, rejects, 1);
		rdma_reject(id, NULL, 0);
		return -1;
	}
	live = s->nconns;
	if (net_auth_keyed(o) && cp->has_nonce)
		live = vb_unauth_admit(s, rdma_get_peer_addr(id));
	if (live >= o->max_clients) {
		log_warn("net: %s: refusing verbs connection: already %d clients "
			 "(max_clients, sizes the SRQ)", peer, live);
		NET_STAT_ADD(&s->base.st, rejects, 1);
		rdma_reject(id, NULL, 0);
		return -1;
	}
	if (net_auth_keyed(o) && cp->has_nonce &&
	    net_auth_server_key(o, cp->has_nonce, key, key_priv)) {
		log_warn("net: %s: client offers %s, which this server does not "
			 "hold; refusing it", peer, net_auth_class_name(cp->has_nonce));
		NET_STAT_ADD(&s->base.st, auth_fail, 1);
		rdma_reject(id, VB_REJ_NOKEY, VB_REJ_NOKEY_LEN);
		return -1;
	}
	if (net_auth_keyed(o) && !cp->has_nonce) {
		log_warn("net: %s: client has no cluster key; refusing it", peer);
		NET_STAT_ADD(&s->base.st, auth_fail, 1);
		rdma_reject(id, VB_REJ_NOKEY, VB_REJ_NOKEY_LEN);
		return -1;
	}
	if (id->verbs != s->ctx) {
		log_warn("net: %s: connection on another RDMA device; refusing", peer);
		rdma_reject(id, NULL, 0);
		return -1;
	}
	return 0;
}

/* Free what vb_sconn_build made of c, and c: its QP, send CQ, memory
 * and sreqs (not its cm id, which the caller destroys or rejects). */
static void vb_sconn_unbuild(struct vb_sconn *c)
{
	struct vb_server *s = c->srv;

	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->scq)
		ibv_destroy_cq(c->scq);
	if (c->fmr)
		vb_dereg(c->fmr, &s->base.st);
	if (c->mr)
		vb_dereg(c->mr, &s->base.st);
	if (c->mem)
		munmap(c->mem, c->memlen);
	free(c->sreqs);
	free(c);
}

/*
 * Build the connection of an admitted request on id: `credits` sreqs, its
 * memory (send buffers; fast slots too when keyless, else at the grant),
 * send CQ and QP on the SRQ; and fill sp, the accept data: credits, fast
 * slots, and with a key our nonce and proof.
 * @return the connection, or NULL (out of memory or verbs resources)
 */
static struct vb_sconn *vb_sconn_build(struct vb_server *s, struct rdma_cm_id *id,
				       const char *peer, const struct vb_cpriv *cp,
				       const uint8_t *key, int key_priv,
				       struct vb_spriv *sp)
{
	const struct net_opts *o = &s->base.opts;
	int ncred = cp->credits < o->credits ? cp->credits : o->credits;
	struct vb_grant g = { 0 };
	struct vb_sconn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->credits = ncred;
	c->base.srv = &s->base;
	snprintf(c->base.peer, sizeof(c->base.peer), "%s", peer);
	c->srv = s;
	c->id = id;
	c->land_addr = cp->land_addr;
	c->land_rkey = cp->land_rkey;
	c->sreqs = calloc((size_t)o->credits + 1, sizeof(*c->sreqs));
	if (!c->sreqs)
		goto out_unbuild;
	for (int i = 0; i <= o->credits; i++) {
		c->sreqs[i].c = c;
		if (i < ncred) {
			c->sreqs[i].next = c->free_q;
			c->free_q = &c->sreqs[i];
		}
	}
	c->memlen = vb_conn_bytes(o, &c->slot_size);
	c->mem = mmap(NULL, c->memlen, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c->mem == MAP_FAILED) {
		c->mem = NULL;
		goto out_unbuild;
	}
	if (vb_conn_reg(c) || (!key && vb_conn_reg_fast(c, &g)))
		goto out_unbuild;
	c->scq = ibv_create_cq(s->ctx, (int)VB_SQ_DEPTH + 8, c, s->chan, 0);
	if (!c->scq)
		goto out_unbuild;
	ibv_req_notify_cq(c->scq, 0);
	struct ibv_qp_init_attr qa = {
		.send_cq = c->scq, .recv_cq = s->rcq, .srq = s->srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = VB_SQ_DEPTH, .max_send_sge = s->max_sge },
	};
	if (rdma_create_qp(id, s->pd, &qa))
		goto out_unbuild;
	c->qpn = id->qp->qp_num;
	c->sq_free = (int)VB_SQ_DEPTH;
	sp->credits = (uint16_t)ncred;
	sp->nslots = g.nslots; /* none yet with a key: see vb_send_grant */
	sp->slot_size = g.slot_size;
	sp->fast_addr = g.fast_addr;
	sp->fast_rkey = g.fast_rkey;
	if (key) {
		c->key = key;
		c->key_priv = key_priv;
		memcpy(c->cn, cp->cn, 32);
		net_auth_nonce(c->sn);
		memcpy(sp->sn, c->sn, 32);
		net_auth_mac(key, NET_AUTH_ROLE_SERVER, c->cn, c->sn, sp->mac);
		sp->has_mac = 1;
	} else {
		c->base.privileged = 1; /* no key here: anyone is */
	}
	return c;

out_unbuild:
	vb_sconn_unbuild(c);
	return NULL;
}

/* Accept c's request (ev) with the accept data sp: the reply class's
 * service level, and RDMA Read depths within the device's and what the
 * client offers. @return 0, -1 */
static int vb_sconn_accept(struct vb_sconn *c, struct rdma_cm_event *ev,
			   const struct vb_spriv *sp)
{
	struct vb_server *s = c->srv;
	uint8_t spb[VB_SPRIV_LEN];
	struct ibv_device_attr da;

	vb_spriv_encode(spb, sp);
	uint8_t tos = (uint8_t)(s->base.opts.sl[NET_CLASS_REPLY] << 5);
	if (tos)
		rdma_set_option(c->id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos));
	struct rdma_conn_param par = {
		.private_data = spb, .private_data_len = VB_SPRIV_LEN,
		.responder_resources = 16, .initiator_depth = 16,
		.retry_count = 7, .rnr_retry_count = 7,
	};
	if (ibv_query_device(s->ctx, &da) == 0 && da.max_qp_rd_atom < 16)
		par.initiator_depth = par.responder_resources = (uint8_t)da.max_qp_rd_atom;
	if (par.initiator_depth > ev->param.conn.responder_resources)
		par.initiator_depth = ev->param.conn.responder_resources;
	return rdma_accept(c->id, &par) ? -1 : 0;
}

/* An accepted connection joins s: the qp_num hash, the list, and (with a
 * key) the handshake deadline and the count of unauthenticated ones. */
static void vb_sconn_link(struct vb_server *s, struct vb_sconn *c)
{
	struct sockaddr *peer = rdma_get_peer_addr(c->id);

	c->hnext = s->hash[c->qpn % VB_HASH];
	s->hash[c->qpn % VB_HASH] = c;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	memcpy(&c->src, peer, peer->sa_family == AF_INET6 ?
	       sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	c->born = ev_now(s->loop);
	ev_timer_init(&c->hs_dl, vb_hs_dl_cb,
		      s->base.opts.request_timeout_ms / 1000., 0.);
	c->hs_dl.data = c;
	net_sconn_open(&c->base, c->key ? NET_HS_AUTH : NET_HS_OPEN, vb_sconn_reap);
	if (c->base.hs == NET_HS_AUTH)
		ev_timer_start(s->loop, &c->hs_dl);
}

/*
 * A client asks to connect: admit it (private data, client limit, key
 * class), build the connection (QP on the SRQ, send CQ, memory) and
 * accept with our credits, slots and key proof.
 * @return NULL when accepted; on refusal the rejected id, which the caller
 *	destroys only after acking the event (rdma_destroy_id waits for the
 *	id's unacked events, so destroying it first deadlocks the loop).
 */
static struct rdma_cm_id *vb_on_connect_req(struct vb_server *s,
					       struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	struct vb_cpriv cp;
	struct vb_spriv sp = { 0 };
	const uint8_t *key = NULL;
	struct vb_sconn *c;
	int key_priv = 1;
	char peer[64];

	net_addr_format(rdma_get_peer_addr(id), peer, sizeof(peer));
	if (vb_conn_admit(s, ev, peer, &cp, &key, &key_priv))
		return id;
	c = vb_sconn_build(s, id, peer, &cp, key, key_priv, &sp);
	if (!c)
		goto out_reject;
	if (vb_sconn_accept(c, ev, &sp))
		goto out_unbuild;
	id->context = c;
	vb_sconn_link(s, c);
	log_debug("net: verbs connection from %s (%d credits)", peer, c->credits);
	return NULL;

out_unbuild:
	vb_sconn_unbuild(c);
out_reject:
	log_warn("net: %s: cannot set up a verbs connection; refusing", peer);
	rdma_reject(id, NULL, 0);
	return id;
}

/* rdma_cm events: connect requests, establishment, disconnects. */
static void vb_cm_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct vb_server *s = w->data;
	struct rdma_cm_event *ev;

	(void)loop;
	(void)revents;
	while (rdma_get_cm_event(s->cm_ch, &ev) == 0) {
		struct vb_sconn *c = ev->id->context;
		switch (ev->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST: {
			/* copies what it needs first */
			struct rdma_cm_id *refused = vb_on_connect_req(s, ev);

			rdma_ack_cm_event(ev);
			if (refused)
				rdma_destroy_id(refused);
			continue;
		}
		case RDMA_CM_EVENT_ESTABLISHED:
			rdma_ack_cm_event(ev);
			if (c)
				c->up = 1;
			continue;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			rdma_ack_cm_event(ev);
			if (c && c != (void *)s) {
				/* Hold c across the poll: what arrived before the
				 * disconnect may close it (a failed key proof). */
				net_sconn_hold(&c->base);
				vb_poll_all(s);
				vb_sconn_close(c, 0, "peer disconnected");
				net_sconn_release(&c->base);
			}
			continue;
		default:
			rdma_ack_cm_event(ev);
		}
	}
}

/* ----------------------------------------------------------------- lifecycle */

/* Open the device the listener is bound to (or the configured/first one). */
static struct ibv_context *vb_open_dev(struct vb_server *s, const char *name)
{
	struct ibv_context **list, *ctx = NULL;
	int n;

	if (s->lid->verbs)
		return s->lid->verbs;
	list = rdma_get_devices(&n);
	if (!list)
		return NULL;
	for (int i = 0; i < n && !ctx; i++)
		if (!name || !strcmp(ibv_get_device_name(list[i]->device), name))
			ctx = list[i];
	rdma_free_devices(list);
	return ctx;
}

/* Listen on host:port (an empty host: every address) with s's cm
 * channel, non-blocking. @return 0, -EINVAL (address), -EADDRINUSE,
 * -ENODEV (no rdma_cm), -errno of rdma_listen */
static int vb_server_listen(struct vb_server *s, const char *host, uint16_t port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *res;
	char ps[8];
	int rc;

	snprintf(ps, sizeof(ps), "%u", port);
	if (getaddrinfo(host[0] ? host : NULL, ps, &hints, &res) != 0)
		return -EINVAL;
	s->cm_ch = rdma_create_event_channel();
	if (!s->cm_ch) {
		rc = -ENODEV;
		goto out_free_res;
	}
	fcntl(s->cm_ch->fd, F_SETFL, fcntl(s->cm_ch->fd, F_GETFL) | O_NONBLOCK);
	if (rdma_create_id(s->cm_ch, &s->lid, s, RDMA_PS_TCP)) {
		rc = -ENODEV;
		goto out_destroy_ch;
	}
	if (rdma_bind_addr(s->lid, res->ai_addr)) {
		rc = errno == EADDRINUSE ? -EADDRINUSE : -EINVAL;
		goto out_destroy_lid;
	}
	if (rdma_listen(s->lid, 256)) {
		rc = -errno;
		goto out_destroy_lid;
	}
	s->port = ntohs(rdma_get_src_port(s->lid));
	freeaddrinfo(res);
	return 0;

out_destroy_lid:
	rdma_destroy_id(s->lid);
out_destroy_ch:
	rdma_destroy_event_channel(s->cm_ch);
out_free_res:
	freeaddrinfo(res);
	return rc;
}

/*
 * Open the device (devname, or the first) and make the objects every
 * connection shares: PD, completion channel (non-blocking), the receive
 * CQ and the SRQ of nsrq receives.
 * @return 0, -ENODEV, -EINVAL (the SRQ exceeds the device; logged), -ENOMEM
 */
static int vb_server_dev(struct vb_server *s, const char *devname, int nsrq)
{
	const struct net_opts *o = &s->base.opts;
	struct ibv_device_attr da;
	const char *lm = getenv("RPFS_LIST_MODE");

	s->ctx = vb_open_dev(s, devname);
	if (!s->ctx || ibv_query_device(s->ctx, &da))
		return -ENODEV;
	if (nsrq > da.max_srq_wr) {
		log_err("net: verbs: SRQ of %d receives ((credits + 1) x max_clients) "
			"exceeds the device's %d", nsrq, da.max_srq_wr);
		return -EINVAL;
	}
	s->max_sge = da.max_sge < 32 ? (uint32_t)da.max_sge : 32;
	s->max_sge_rd = s->max_sge;
	s->list_mode = o->list_mode == 1 || (lm && !strcmp(lm, "multi"));
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd)
		return -ENOMEM;
	s->chan = ibv_create_comp_channel(s->ctx);
	if (!s->chan)
		goto out_dealloc_pd;
	fcntl(s->chan->fd, F_SETFL, fcntl(s->chan->fd, F_GETFL) | O_NONBLOCK);
	s->rcq = ibv_create_cq(s->ctx, nsrq + 8, NULL, s->chan, 0);
	if (!s->rcq)
		goto out_destroy_chan;
	ibv_req_notify_cq(s->rcq, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = (uint32_t)nsrq, .max_sge = 1 } };
	s->srq = ibv_create_srq(s->pd, &sa);
	if (!s->srq)
		goto out_destroy_rcq;
	return 0;

out_destroy_rcq:
	ibv_destroy_cq(s->rcq);
out_destroy_chan:
	ibv_destroy_comp_channel(s->chan);
out_dealloc_pd:
	ibv_dealloc_pd(s->pd);
	return -ENOMEM;
}

/* Undo vb_server_dev. */
static void vb_server_dev_close(struct vb_server *s)
{
	ibv_destroy_srq(s->srq);
	ibv_destroy_cq(s->rcq);
	ibv_destroy_comp_channel(s->chan);
	ibv_dealloc_pd(s->pd);
}

/* The nsrq receive buffers of the SRQ: one registered mapping, every
 * buffer posted. @return 0, -ENOMEM (logged when the registration fails:
 * RLIMIT_MEMLOCK) */
static int vb_server_rbufs(struct vb_server *s, int nsrq)
{
	s->rmemlen = (size_t)nsrq * VB_MSG_SIZE;
	s->rmem = mmap(NULL, s->rmemlen, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->rmem == MAP_FAILED)
		return -ENOMEM;
	s->rbs = calloc((size_t)nsrq, sizeof(*s->rbs));
	if (!s->rbs)
		goto out_unmap_rmem;
	s->rmr = vb_reg(s->pd, s->rmem, s->rmemlen, IBV_ACCESS_LOCAL_WRITE, &s->base.st);
	if (!s->rmr) {
		log_err("net: verbs: cannot register the SRQ buffers (%zu bytes): %s; "
			"check RLIMIT_MEMLOCK", s->rmemlen, strerror(errno));
		goto out_free_rbs;
	}
	s->nrbs = nsrq;
	for (int i = 0; i < nsrq; i++) {
		s->rbs[i].tag.kind = VB_ST_RECV;
		s->rbs[i].p = s->rmem + (size_t)i * VB_MSG_SIZE;
		vb_repost(s, &s->rbs[i]);
	}
	vb_repost_flush(s);
	return 0;

out_free_rbs:
	free(s->rbs);
out_unmap_rmem:
	munmap(s->rmem, s->rmemlen);
	return -ENOMEM;
}

/* Start s's watchers: cm events, the completion channel, and (busy
 * polling) the spin watcher. */
static void vb_server_watch(struct vb_server *s)
{
	ev_io_init(&s->cm_w, vb_cm_cb, s->cm_ch->fd, EV_READ);
	ev_io_init(&s->chan_w, vb_chan_cb, s->chan->fd, EV_READ);
	ev_idle_init(&s->spin_w, vb_spin_cb);
	net_srv_kick_init(&s->base, s->loop, vb_done_run, vb_kick_more);
	s->cm_w.data = s->chan_w.data = s->spin_w.data = s;
	ev_io_start(s->loop, &s->cm_w);
	ev_io_start(s->loop, &s->chan_w);
	if (s->base.opts.poll_mode == NET_POLL_BUSY)
		ev_idle_start(s->loop, &s->spin_w);
}

/*
 * A verbs server on host:port in loop: the SRQ holds (credits + 1)
 * receives per client for max_clients clients (checked against
 * RLIMIT_MEMLOCK first, with every client's connection memory as it can
 * grow at most: the reply pool at its cap of `credits` big buffers).
 * @return 0, -errno (see the steps)
 */
static int vb_server_new(struct net_server **out, struct ev_loop *loop,
			 const char *host, uint16_t port, net_req_fn fn, void *arg,
			 const struct net_opts *o)
{
	struct vb_server *s;
	const char *devname = o->rdma_dev ? o->rdma_dev : getenv("RPFS_RDMA_DEV");
	int nsrq = (o->credits + 1) * o->max_clients;
	size_t slot;
	/* per client at most: its fast slots and send buffers, its reply
	 * pool at the cap (vb_bbuf_max) and the big request buffer */
	uint64_t need = (uint64_t)nsrq * VB_MSG_SIZE +
			(uint64_t)o->max_clients * (vb_conn_bytes(o, &slot) +
			((uint64_t)o->credits + 1) * VB_BIG_SIZE);
	int rc;

	rc = vb_memlock_check(need, "server (SRQ buffers, and per client its fast "
			      "slots, send buffers and reply buffers at their cap)");
	if (rc)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->base.ops = &vb_server_ops;
	s->base.opts = *o;
	s->loop = loop;
	s->fn = fn;
	s->fn_arg = arg;
	s->pinned_need = need;
	rc = vb_server_listen(s, host, port);
	if (rc)
		goto out_free_s;
	rc = vb_server_dev(s, devname, nsrq);
	if (rc)
		goto out_close_listen;
	rc = vb_server_rbufs(s, nsrq);
	if (rc)
		goto out_close_dev;
	vb_server_watch(s);
	*out = &s->base;
	return 0;

out_close_dev:
	vb_server_dev_close(s);
out_close_listen:
	rdma_destroy_id(s->lid);
	rdma_destroy_event_channel(s->cm_ch);
out_free_s:
	free(s);
	return rc;
}

/* Close everything; requests with the handler are dropped. */
static void vb_server_free(struct net_server *ns)
{
	struct vb_server *s = NET_CONTAINER_OF(ns, struct vb_server, base);

	ev_io_stop(s->loop, &s->cm_w);
	ev_io_stop(s->loop, &s->chan_w);
	ev_idle_stop(s->loop, &s->spin_w);
	rdma_destroy_id(s->lid);
	while (s->conns) {
		struct vb_sconn *c = s->conns;
		if (!c->base.dead)
			vb_sconn_close(c, 0, "server stopping");
		/* Force: drop ops and handler requests. */
		net_srv_kick_drop(&s->base, vb_done_drop);
		if (s->conns == c) {
			c->base.holds = c->inflight = 0;
			c->base.active = NULL;
			c->need_dispatch = 0;
			vb_sconn_maybe_free(c);
		}
	}
	vb_zones_fini(&s->zones, &s->base.st);
	ibv_destroy_srq(s->srq);
	vb_dereg(s->rmr, &s->base.st);
	munmap(s->rmem, s->rmemlen);
	free(s->rbs);
	ibv_destroy_cq(s->rcq);
	ibv_destroy_comp_channel(s->chan);
	ibv_dealloc_pd(s->pd);
	rdma_destroy_event_channel(s->cm_ch);
	free(s);
}

/* The port listened on: the one bound when 0 was asked for. */
static uint16_t vb_server_port(const struct net_server *ns)
{
	return NET_CONTAINER_OF(ns, struct vb_server, base)->port;
}

/* Register a buffer zone of the caller (the iod's pool) once. */
static int vb_register_zone(struct net_server *ns, void *addr, size_t len)
{
	struct vb_server *s = NET_CONTAINER_OF(ns, struct vb_server, base);
	int rc;

	rc = vb_memlock_check(s->pinned_need + len, "server (buffer zones)");
	if (rc)
		return rc;
	rc = vb_zones_add(&s->zones, s->pd, addr, len, &s->base.st);
	if (rc == 0)
		s->pinned_need += len;
	return rc;
}

const struct net_server_ops vb_server_ops = {
	.name = "verbs",
	.server_new = vb_server_new,
	.server_free = vb_server_free,
	.server_port = vb_server_port,
	.pull = vb_pull,
	.push = vb_push,
	.reply = vb_reply,
	.reject = vb_reject,
	.register_mem = vb_register_zone,
};

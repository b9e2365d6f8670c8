/*
 * vb_client.c - the client half of the verbs backend.
 *
 * Connections are RC queue pairs set up with rdma_cm. Each connection owns
 * one registered region, allocated at its first connect and kept across
 * reconnects: per-slot send buffers, a control send buffer, receive
 * buffers, VB_FAST_SLOTS fast RDMA buffers, a big-message send buffer and
 * a landing buffer for big replies. A call holds one "call slot" (and one
 * credit) from submit to completion.
 *
 * Mechanism by size (thresholds from net_opts), for memory not declared
 * long-lived: write data up to inline_max rides in the request (copied in);
 * up to fast_max it goes with the request by RDMA Write with Immediate into
 * a server fast slot, gathered through our fast buffer; above that the
 * request names the memory in segments (registered for the call) and the
 * server RDMA Reads it. Read data up to inline_max comes back in the reply
 * (copied out); up to fast_max the server RDMA Writes it into our fast
 * buffer (copied out); above that into the user memory named by segments.
 *
 * Memory declared long-lived (net_client_register_mem) is never copied, at
 * any size: it is registered into the pin-down cache at its first use (one
 * miss) and hit after. Write data leaves from it in place (RDMA Write with
 * Immediate whose scatter/gather list names it, when it fits a server fast
 * slot; else RDMA Read by the server), and read data is RDMA Written by the
 * server straight into it, also below inline_max. For undeclared memory the
 * copies are cheaper than registering per call, so they stay.
 * client_copy_bytes counts every payload byte copied here.
 *
 * Threads: callers submit and wait. Reply completions come by interrupt
 * (completion channel + ibv_req_notify_cq). The channel has one owner at a
 * time: a waiting caller when none owns it (it leads: sleeps in poll() on
 * the channel itself and completes every call it meets, its own included,
 * so a lone call costs one wake-up, not two through a thread hand-off), or
 * else the progress thread, which also takes rdma_cm events and tears
 * connections down. A leader keeps taking the channel's events wherever
 * it blocks in here (a credit wait, a connect, another thread's connect),
 * so a connect to a hung server does not hold up the replies of the calls
 * it sent before; and at a call's deadline it takes what is already
 * queued before it gives up. Send completions are polled by submitters
 * before they post.
 *
 * With a key, every message after our AUTH is sealed (vb_seal.h): the
 * trailer of a request or ACK is written under the lock, just before its
 * post, so the count it carries follows the order of posts; a reply's is
 * checked in completion order before anything in it is read, and read
 * data RDMA Written into our memory is checked against the reply's data
 * tag before the call completes. Locks, in order: connect_lock -> lock -> vc->rc_lock;
 * vc->ch_lock is taken alone.
 */
#include "vb_int.h"
#include "vb_seal.h"
#include "net_auth.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Allocation bounds of a call's iovecs (extended list API), or NULL. */
/* Reject private data of a server that requires a key we lack (the server
 * sends the same 8 bytes; see vb_server.c). */
#define VB_REJ_NOKEY "rpfsNKEY"
#define VB_REJ_NOKEY_LEN 8
#define VB_CALL_WR_ALLOC(call) ((call)->wr_alloc)
#define VB_CALL_RD_ALLOC(call) ((call)->rd_alloc)

/* What a work request id points at. */
enum vb_ctag_kind { VB_CT_RECV = 1, VB_CT_SEND };

struct vb_ctag {
	enum vb_ctag_kind kind;
};

/* A receive buffer; wr_id = &tag. */
struct vb_crbuf {
	struct vb_ctag tag;
	struct vb_cconn *c;
	uint8_t *p;
};

/* Life of a call slot. */
enum vb_cs_state {
	VB_CS_FREE = 0,   /* unused; may be taken with a credit */
	VB_CS_BUILDING,   /* its submitter fills buffers and registers memory;
			   * nobody else touches it */
	VB_CS_SENT,       /* posted; the channel's owner (a leading caller or
			   * the progress thread) completes it */
};

struct vb_cslot {
	enum vb_cs_state state;   /* c->base.lock */
	struct net_call *call;
	uint64_t gen;             /* connection generation it was built for */
	int wr_fast, rd_fast;     /* fast slot index or -1 */
	int rd_in_fast;           /* read data lands in our fast buffer */
	int big;                  /* owns the big send buffer */
	uint64_t rd_total;
	struct vb_rref *refs;     /* registrations held */
	int nrefs, caprefs;
};

struct vb_client;

struct vb_cconn {
	struct net_conn base;
	struct vb_client *vc;
	char host[PROTO_MAX_HOST + 1];   /* immutable */
	uint16_t port;                   /* immutable */
	struct vb_cconn *next_conn;      /* vc->lock */

	pthread_mutex_t connect_lock;    /* serialises connection setup */
	/* base.lock covers everything below; base.cv is signalled on a
	 * credit, slot, buffer or state change; base.up, base.kill and
	 * base.gen are the core's (net_int.h) */
	int ever_up;
	struct vb_credits cr;
	uint64_t next_seq;
	struct vb_cslot *cs;             /* ncs slots */
	int ncs;
	unsigned fast_busy;              /* bitmask of our / the server's fast slots */
	int big_busy;
	int sealed;                      /* the connection's messages carry a
					  * trailer (vb_seal.h): set by its
					  * setup, atomic (a build reads it
					  * unlocked; a post checks gen) */
	struct net_seal tx, rx;          /* tx: sealed at post; rx: opened in
					  * vb_drain (the grant: by the setup,
					  * before the connection is up) */

	/* resources of the current connection (set up under connect_lock,
	 * torn down under lock by the progress thread or the channel's
	 * leader) */
	struct rdma_cm_id *id;
	struct ibv_cq *rcq, *scq;
	uint32_t max_sge;
	uint64_t s_fast_addr;            /* server fast slots */
	uint32_t s_fast_rkey, s_slot_size;
	int s_nslots;
	struct vb_ctag stag;             /* wr_id of every send */

	/* the registered region (kept across reconnects) */
	uint8_t *mem;
	size_t memlen;
	struct ibv_mr *mr;
	uint8_t *sbuf, *ctrl, *rbuf, *fast, *bigs, *land;
	struct vb_crbuf *rb;             /* ncs + 1 receive buffers */
	size_t fast_sz;
};

/* Who takes the events of the completion channel. */
enum vb_ch_owner {
	VB_CH_NONE = 0,   /* nobody: armed in epoll for the progress thread,
			   * or parked while no call is in flight */
	VB_CH_PROGRESS,   /* the progress thread is taking events */
	VB_CH_CALLER,     /* a caller leads (vb_lead); out of epoll */
};

struct vb_client {
	struct net_client base;          /* base.pg: the progress thread,
					  * its epoll set keyed 0 (the kick),
					  * 1 (chan), 2 (cm_ch) */
	int lead_fd;                     /* eventfd: wakes a leading caller */
	pthread_mutex_t lock;            /* conns list, pd, chan */
	struct vb_cconn *conns;
	struct rdma_event_channel *cm_ch;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *chan;
	pthread_mutex_t ch_lock;         /* ch_owner, ch_reg, ch_armed */
	enum vb_ch_owner ch_owner;
	int ch_reg;                      /* chan->fd is in base.pg.epfd */
	int ch_armed;                    /* ... and armed (one-shot, not fired) */
	int ch_inflight;                 /* atomic: call slots not free, all
					  * connections (events are awaited) */
	pthread_mutex_t rc_lock;         /* rc */
	struct vb_rcache rc;
};

/* Nudge the progress thread (kill requests). */
static void vb_kick(struct vb_client *vc)
{
	net_progress_kick(&vc->base.pg);
}

/* Wake the caller that leads the completion channel, if one does: a call
 * was completed by another thread (teardown), and the leader sleeps in
 * poll(), not on the call. Rare paths only; cost: one write. */
static void vb_lead_kick(struct vb_client *vc)
{
	int lead;

	pthread_mutex_lock(&vc->ch_lock);
	lead = vc->ch_owner == VB_CH_CALLER;
	pthread_mutex_unlock(&vc->ch_lock);
	if (lead)
		(void)eventfd_write(vc->lead_fd, 1);
}

/* Release everything a slot holds and free it. Caller holds c->base.lock. */
static void vb_slot_release(struct vb_cconn *c, struct vb_cslot *s)
{
	struct vb_client *vc = c->vc;

	pthread_mutex_lock(&vc->rc_lock);
	for (int i = 0; i < s->nrefs; i++)
		vb_rcache_put(&vc->rc, &s->refs[i]);
	pthread_mutex_unlock(&vc->rc_lock);
	if (s->state != VB_CS_FREE)
		__atomic_sub_fetch(&vc->ch_inflight, 1, __ATOMIC_SEQ_CST);
	s->nrefs = 0;
	if (s->wr_fast >= 0)
		c->fast_busy &= ~(1u << s->wr_fast);
	if (s->rd_fast >= 0)
		c->fast_busy &= ~(1u << s->rd_fast);
	if (s->big)
		c->big_busy = 0;
	s->wr_fast = s->rd_fast = -1;
	s->big = 0;
	s->rd_in_fast = 0;
	s->call = NULL;
	s->state = VB_CS_FREE;
	pthread_cond_broadcast(&c->base.cv);
}

/* ------------------------------------------------------------------ teardown */

/* Free the verbs objects of the current connection. Caller holds c->base.lock
 * and the QP is in the error state (no more incoming RDMA). */
static void vb_conn_destroy_res(struct vb_cconn *c)
{
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->rcq) {
		ibv_destroy_cq(c->rcq);
		c->rcq = NULL;
	}
	if (c->scq) {
		ibv_destroy_cq(c->scq);
		c->scq = NULL;
	}
	if (c->id) {
		rdma_destroy_id(c->id);
		c->id = NULL;
	}
}

/*
 * Tear a connection down (progress thread, or a leader whose drain found
 * it broken; teardown then wakes the leader): put the QP in the error state
 * so the server can no longer touch our memory, fail every sent call
 * (culprit gets cerr, calls marked by their waiter keep their error, the
 * rest -EIO), then free the verbs objects. Safe when already down.
 */
static void vb_conn_down(struct vb_cconn *c, struct net_call *culprit, int cerr)
{
	struct vb_client *vc = c->vc;

	pthread_mutex_lock(&c->base.lock);
	c->base.kill = 0;
	if (!c->base.up) {
		pthread_mutex_unlock(&c->base.lock);
		return;
	}
	c->base.up = 0;
	c->cr.avail = 0;
	if (c->id)
		rdma_disconnect(c->id); /* QP -> error */
	for (int i = 0; i < c->ncs; i++) {
		struct vb_cslot *s = &c->cs[i];
		if (s->state != VB_CS_SENT)
			continue; /* BUILDING: its submitter notices the new gen */
		struct net_call *p = s->call;
		vb_slot_release(c, s);
		net_call_fail(p, culprit, cerr);
	}
	vb_conn_destroy_res(c);
	pthread_cond_broadcast(&c->base.cv);
	pthread_mutex_unlock(&c->base.lock);
	NET_STAT_ADD(&vc->base.st, conn_errors, 1);
	log_debug("net: verbs connection to %s:%u closed", c->host, c->port);
	vb_lead_kick(vc);
}

/* ------------------------------------------------------------------- connect */

static int vb_leads(const struct vb_client *vc);
static int vb_lead_poll(struct vb_client *vc, int xfd, uint64_t deadline, int cap_ms);

/* Wait for the next cm event on ch until deadline. A thread that leads
 * vc's completion channel keeps taking its events meanwhile (the replies
 * of the calls it sent before this connect, and other threads', would
 * wait for the whole connect otherwise, and time out behind it).
 * @return 0 with *ev set (ack it), -ETIMEDOUT, -errno */
static int vb_cm_wait(struct vb_client *vc, struct rdma_event_channel *ch,
		      uint64_t deadline, struct rdma_cm_event **ev)
{
	for (;;) {
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };
		int n, ms = net_ms_left(deadline);

		if (ms == 0)
			return -ETIMEDOUT;
		if (vb_leads(vc)) {
			n = vb_lead_poll(vc, ch->fd, deadline, INT_MAX);
			if (n < 0)
				return n;
		} else {
			n = poll(&p, 1, ms);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return -errno;
		}
		if (n == 0)
			continue;
		if (rdma_get_cm_event(ch, ev) == 0)
			return 0;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
}

/* Wait for one expected cm event. @return 0, -ECONNREFUSED (rejected),
 * -EACCES (rejected because we have no cluster key), -EHOSTUNREACH
 * (address/route), -ETIMEDOUT, -ENOTCONN */
static int vb_cm_expect(struct vb_client *vc, struct rdma_event_channel *ch,
			uint64_t deadline, enum rdma_cm_event_type want,
			struct rdma_cm_event **out)
{
	struct rdma_cm_event *ev;
	int rc = vb_cm_wait(vc, ch, deadline, &ev);

	if (rc)
		return rc;
	if (ev->event == want) {
		*out = ev;
		return 0;
	}
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		rc = -ECONNREFUSED;
		if (ev->param.conn.private_data &&
		    ev->param.conn.private_data_len >= VB_REJ_NOKEY_LEN &&
		    !memcmp(ev->param.conn.private_data, VB_REJ_NOKEY, VB_REJ_NOKEY_LEN))
			rc = -EACCES;
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		rc = -EHOSTUNREACH;
		break;
	default:
		rc = -ENOTCONN;
	}
	log_debug("net: verbs connect: %s instead of %s", rdma_event_str(ev->event),
		  rdma_event_str(want));
	rdma_ack_cm_event(ev);
	return rc;
}

/* Client-wide verbs objects, made with the first connection's device. */
static int vb_client_dev(struct vb_client *vc, struct ibv_context *ctx)
{
	int rc = 0;

	pthread_mutex_lock(&vc->lock);
	if (vc->ctx && vc->ctx != ctx) {
		log_warn("net: verbs: connections over a second RDMA device are not "
			 "supported");
		rc = -ENODEV;
	} else if (!vc->ctx) {
		vc->pd = ibv_alloc_pd(ctx);
		if (!vc->pd) {
			rc = -ENOMEM;
			goto out_unlock;
		}
		vc->chan = ibv_create_comp_channel(ctx);
		if (!vc->chan) {
			rc = -ENOMEM;
			goto out_dealloc_pd;
		}
		fcntl(vc->chan->fd, F_SETFL, fcntl(vc->chan->fd, F_GETFL) | O_NONBLOCK);
		struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.u32 = 1 };
		if (epoll_ctl(vc->base.pg.epfd, EPOLL_CTL_ADD, vc->chan->fd, &ev) < 0) {
			rc = -errno;
			goto out_destroy_chan;
		}
		pthread_mutex_lock(&vc->ch_lock);
		vc->ch_reg = vc->ch_armed = 1;
		pthread_mutex_unlock(&vc->ch_lock);
		vc->ctx = ctx;
		pthread_mutex_lock(&vc->rc_lock);
		vc->rc.pd = vc->pd;
		vb_rcache_calibrate(&vc->rc);
		pthread_mutex_unlock(&vc->rc_lock);
	}
	pthread_mutex_unlock(&vc->lock);
	return rc;

out_destroy_chan:
	ibv_destroy_comp_channel(vc->chan);
	vc->chan = NULL;
out_dealloc_pd:
	ibv_dealloc_pd(vc->pd);
	vc->pd = NULL;
out_unlock:
	pthread_mutex_unlock(&vc->lock);
	return rc;
}

/* Allocate and register the connection's region once (first connect). */
static int vb_conn_mem(struct vb_cconn *c)
{
	struct vb_client *vc = c->vc;
	size_t n = (size_t)c->ncs;
	size_t len;
	uint8_t *p;

	if (c->mem)
		return 0;
	c->fast_sz = (vc->base.opts.fast_max + 4095) & ~(size_t)4095;
	len = (2 * n + 2) * VB_MSG_SIZE + VB_FAST_SLOTS * c->fast_sz + 2 * (size_t)VB_BIG_SIZE;
	len = (len + 4095) & ~(size_t)4095;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	c->rb = calloc(n + 1, sizeof(*c->rb));
	if (!c->rb)
		goto out_unmap;
	c->mr = vb_reg(vc->pd, p, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_READ, &vc->base.st);
	if (!c->mr) {
		log_err("net: verbs: cannot register %zu bytes of connection buffers: %s "
			"(check RLIMIT_MEMLOCK)", len, strerror(errno));
		goto out_free_rb;
	}
	c->mem = p;
	c->memlen = len;
	c->sbuf = p;
	c->ctrl = c->sbuf + n * VB_MSG_SIZE;
	c->rbuf = c->ctrl + VB_MSG_SIZE;
	c->fast = c->rbuf + (n + 1) * VB_MSG_SIZE;
	c->bigs = c->fast + VB_FAST_SLOTS * c->fast_sz;
	c->land = c->bigs + VB_BIG_SIZE;
	for (size_t i = 0; i <= n; i++) {
		c->rb[i].tag.kind = VB_CT_RECV;
		c->rb[i].c = c;
		c->rb[i].p = c->rbuf + i * VB_MSG_SIZE;
	}
	return 0;

out_free_rb:
	free(c->rb);
	c->rb = NULL;
out_unmap:
	munmap(p, len);
	return -ENOMEM;
}

/* Post receive buffers [from, to) in one batch. Caller holds c->base.lock. */
static int vb_post_recvs(struct vb_cconn *c, struct vb_crbuf **bufs, int n)
{
	struct ibv_recv_wr wr[VB_POLL_BATCH + 1], *bad;
	struct ibv_sge sge[VB_POLL_BATCH + 1];

	for (int i = 0; i < n; i++) {
		sge[i] = (struct ibv_sge){ (uintptr_t)bufs[i]->p, VB_MSG_SIZE, c->mr->lkey };
		wr[i] = (struct ibv_recv_wr){ .wr_id = (uintptr_t)&bufs[i]->tag,
					      .sg_list = &sge[i], .num_sge = 1,
					      .next = i + 1 < n ? &wr[i + 1] : NULL };
	}
	if (n == 0 || !c->id || !c->id->qp)
		return 0;
	return ibv_post_recv(c->id->qp, wr, &bad) ? -EIO : 0;
}

/* Reap send completions (polled, never by interrupt). An error means the
 * connection is gone: ask the progress thread to tear it down. Caller
 * holds c->base.lock. */
static void vb_poll_sends(struct vb_cconn *c)
{
	struct ibv_wc wc[VB_POLL_BATCH];
	int n;

	if (!c->scq)
		return;
	while ((n = ibv_poll_cq(c->scq, VB_POLL_BATCH, wc)) > 0) {
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS && c->base.up && !c->base.kill) {
				log_debug("net: verbs send to %s:%u failed: %s", c->host,
					  c->port, ibv_wc_status_str(wc[i].status));
				c->base.kill = 1;
				vb_kick(c->vc);
			}
		if (n < VB_POLL_BATCH)
			break;
	}
}

/* Post one send WR; caller holds c->base.lock and has checked c->base.up. */
static int vb_post(struct vb_cconn *c, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	vb_poll_sends(c);
	wr->wr_id = (uintptr_t)&c->stag;
	wr->send_flags |= IBV_SEND_SIGNALED;
	return ibv_post_send(c->id->qp, wr, &bad) ? -EIO : 0;
}

/* Post wr, whose message at msg (plain length len; NULL: not sealed)
 * gets its trailer first, with dtag (or none): the next count of our
 * direction, undone if the post fails. Caller holds c->base.lock and has
 * checked c->base.up. @return 0, -EIO */
static int vb_post_sealed(struct vb_cconn *c, struct ibv_send_wr *wr, uint8_t *msg,
			  uint32_t len, const uint8_t *dtag)
{
	int rc;

	if (msg)
		vb_seal_put(&c->tx, msg, len, dtag, VB_SEAL_MSG, 0);
	rc = vb_post(c, wr);
	if (rc && msg)
		c->tx.seq--;
	return rc;
}

/* Prove the key: the AUTH control message right after the connection is
 * established, before any request. Caller holds c->base.lock. */
static int vb_send_auth(struct vb_cconn *c, const uint8_t *key,
			const uint8_t *cn, const uint8_t *sn)
{
	struct proto_hdr h = { .op = PROTO_OP_NET_HELLO, .flags = PROTO_F_CTRL,
			       .body_len = NET_AUTH_MAC_LEN };
	struct vb_mhdr m = { .kind = VB_K_AUTH };
	struct ibv_sge sge = { (uintptr_t)c->ctrl, VB_HDRS + NET_AUTH_MAC_LEN, c->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND };

	proto_hdr_encode(c->ctrl, &h);
	vb_mhdr_encode(c->ctrl + PROTO_HDR_LEN, &m);
	net_auth_mac(key, NET_AUTH_ROLE_CLIENT, cn, sn, c->ctrl + VB_HDRS);
	NET_STAT_ADD(&c->vc->base.st, msgs_tx, 1);
	NET_STAT_ADD(&c->vc->base.st, bytes_tx, sge.length);
	return vb_post(c, &wr);
}

/*
 * The server's answer to our proof: its fast slots (VB_K_GRANT) in the
 * receive completion wc, checked, into g; the receive buffer is posted
 * again. @return 0, -ENOTCONN (the receive failed: the server refused our
 * proof or went; or the message is not a grant, logged)
 */
static int vb_on_grant(struct vb_cconn *c, const struct ibv_wc *wc, struct vb_grant *g)
{
	struct vb_ctag *t = (struct vb_ctag *)(uintptr_t)wc->wr_id;
	struct vb_crbuf *rb = NET_CONTAINER_OF(t, struct vb_crbuf, tag);
	const char *why = NULL;
	struct proto_hdr h;
	struct vb_mhdr m;
	uint32_t len = wc->byte_len;

	if (wc->status != IBV_WC_SUCCESS)
		return -ENOTCONN;
	if (wc->opcode == IBV_WC_RECV &&
	    vb_seal_open(&c->rx, rb->p, wc->byte_len, NULL, VB_SEAL_MSG, 0, &len)) {
		log_warn("net: verbs: %s:%u: the grant of fast slots fails its MAC; "
			 "closing", c->host, c->port);
		return -ENOTCONN;
	}
	if (wc->opcode != IBV_WC_RECV || len < VB_HDRS + VB_GRANT_LEN ||
	    proto_hdr_decode(rb->p, &h, &why) || vb_mhdr_decode(rb->p + PROTO_HDR_LEN, &m) ||
	    h.op != PROTO_OP_NET_HELLO || h.flags != (PROTO_F_REPLY | PROTO_F_CTRL) ||
	    h.body_len != VB_GRANT_LEN || m.kind != VB_K_GRANT ||
	    vb_grant_decode(rb->p + VB_HDRS, VB_GRANT_LEN, g)) {
		log_warn("net: verbs: %s:%u: the answer to our key proof is not a grant "
			 "of fast slots; closing", c->host, c->port);
		return -ENOTCONN;
	}
	NET_STAT_ADD(&c->vc->base.st, msgs_rx, 1);
	return vb_post_recvs(c, &rb, 1) ? -ENOTCONN : 0;
}

/*
 * The key exchange of a connect to a server that requires a key: check
 * its proof (the accept data), send ours (AUTH), and wait until deadline
 * for its grant of the fast slots, which it registers for remote write
 * only once our proof is verified. The grant is taken straight from the
 * receive CQ: the connection is not up, so no drain reads it. A thread
 * that leads the completion channel keeps taking its events meanwhile.
 * @return 0 with g set, -EACCES (the server failed its proof), -ETIMEDOUT,
 * -ENOTCONN
 */
static int vb_conn_auth(struct vb_cconn *c, const uint8_t *key, uint8_t cls,
			const uint8_t *cn, const struct vb_spriv *sp, uint64_t deadline,
			struct vb_grant *g)
{
	struct vb_client *vc = c->vc;
	struct ibv_wc wc;
	int n, rc;

	if (!sp->has_mac || net_auth_check(key, NET_AUTH_ROLE_SERVER, cn, sp->sn, sp->mac)) {
		log_err("net: %s:%u: the server failed to prove %s (%s); refusing it",
			c->host, c->port, net_auth_class_name(cls),
			sp->has_mac ? "its key differs from ours" : "it has no key");
		NET_STAT_ADD(&vc->base.st, auth_fail, 1);
		return -EACCES;
	}
	NET_STAT_ADD(&vc->base.st, auth_ok, 1);
	pthread_mutex_lock(&c->base.lock);
	rc = vb_send_auth(c, key, cn, sp->sn);
	net_seal_init(&c->tx, key, NET_AUTH_ROLE_CLIENT, NET_SEAL_MAC, cn, sp->sn);
	net_seal_init(&c->rx, key, NET_AUTH_ROLE_SERVER, NET_SEAL_MAC, cn, sp->sn);
	__atomic_store_n(&c->sealed, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->base.lock);
	if (rc)
		return -ENOTCONN;
	while ((n = ibv_poll_cq(c->rcq, 1, &wc)) == 0) {
		if (net_ms_left(deadline) == 0)
			return -ETIMEDOUT;
		if (vb_leads(vc))
			(void)vb_lead_poll(vc, -1, deadline, 1);
		else
			usleep(100);
	}
	return n < 0 ? -ENOTCONN : vb_on_grant(c, &wc, g);
}

/* Resolve c's address and route on id (events on ch) until deadline.
 * @return 0, -EHOSTUNREACH, -ETIMEDOUT, -ENOTCONN */
static int vb_conn_resolve(struct vb_cconn *c, struct rdma_event_channel *ch,
			   struct rdma_cm_id *id, uint64_t deadline)
{
	struct vb_client *vc = c->vc;
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	struct rdma_cm_event *ev;
	char ps[8];
	int rc;

	snprintf(ps, sizeof(ps), "%u", c->port);
	if (getaddrinfo(c->host, ps, &hints, &res) != 0)
		return -EHOSTUNREACH;
	rc = rdma_resolve_addr(id, NULL, res->ai_addr, net_ms_left(deadline) ?: 1);
	freeaddrinfo(res);
	if (rc)
		return -EHOSTUNREACH;
	rc = vb_cm_expect(vc, ch, deadline, RDMA_CM_EVENT_ADDR_RESOLVED, &ev);
	if (rc)
		return rc;
	rdma_ack_cm_event(ev);
	/* The QP's service level: on RoCE it follows the IP TOS. */
	uint8_t tos = (uint8_t)(vc->base.opts.sl[NET_CLASS_REQUEST] << 5);
	if (tos)
		rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos));
	if (rdma_resolve_route(id, net_ms_left(deadline) ?: 1))
		return -EHOSTUNREACH;
	rc = vb_cm_expect(vc, ch, deadline, RDMA_CM_EVENT_ROUTE_RESOLVED, &ev);
	if (rc)
		return rc;
	rdma_ack_cm_event(ev);
	return 0;
}

/* Destroy what vb_conn_qp made: the QP of id and c's CQs. */
static void vb_conn_qp_destroy(struct vb_cconn *c, struct rdma_cm_id *id)
{
	if (id->qp)
		rdma_destroy_qp(id);
	c->id = NULL;
	if (c->scq)
		ibv_destroy_cq(c->scq);
	c->scq = NULL;
	if (c->rcq)
		ibv_destroy_cq(c->rcq);
	c->rcq = NULL;
}

/*
 * Make the verbs objects of one connection on id's device (the client's
 * PD and channel at the first connection, c's registered memory at its
 * first connect): the receive CQ on the completion channel, the send CQ
 * (polled), the RC QP, and every receive buffer posted.
 * @return 0, -ENOMEM, -EIO (nothing of this call's is left on failure)
 */
static int vb_conn_qp(struct vb_cconn *c, struct rdma_cm_id *id)
{
	struct vb_client *vc = c->vc;
	struct ibv_device_attr da;
	struct vb_crbuf *bufs[VB_POLL_BATCH + 1];
	int k = 0, rc;

	rc = vb_client_dev(vc, id->verbs);
	if (!rc)
		rc = vb_conn_mem(c);
	if (rc)
		return rc;
	if (ibv_query_device(id->verbs, &da))
		return -EIO;
	c->max_sge = da.max_sge < 32 ? (uint32_t)da.max_sge : 32;
	c->rcq = ibv_create_cq(id->verbs, c->ncs + 2, c, vc->chan, 0);
	c->scq = c->rcq ? ibv_create_cq(id->verbs, c->ncs + 4, c, NULL, 0) : NULL;
	struct ibv_qp_init_attr qa = {
		.send_cq = c->scq, .recv_cq = c->rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = (uint32_t)c->ncs + 4,
			 .max_recv_wr = (uint32_t)c->ncs + 2,
			 .max_send_sge = c->max_sge, .max_recv_sge = 1 },
	};
	if (!c->scq || rdma_create_qp(id, vc->pd, &qa)) {
		vb_conn_qp_destroy(c, id);
		return -ENOMEM;
	}
	c->id = id;
	ibv_req_notify_cq(c->rcq, 0);
	for (int i = 0; i <= c->ncs; i++) {
		bufs[k++] = &c->rb[i];
		if (k < VB_POLL_BATCH + 1 && i < c->ncs)
			continue;
		if (vb_post_recvs(c, bufs, k)) {
			vb_conn_qp_destroy(c, id);
			return -EIO;
		}
		k = 0;
	}
	return 0;
}

/*
 * Connect id with our connect data (credits, landing buffer, the class and
 * nonce of key, if any: cp) and take the server's accept data into sp.
 * @return 0, -EACCES (refused for our key, or for having none; logged),
 * -ECONNREFUSED, -EHOSTUNREACH, -ETIMEDOUT, -ENOTCONN (bad accept data:
 * disconnected again)
 */
static int vb_conn_establish(struct vb_cconn *c, struct rdma_event_channel *ch,
			     struct rdma_cm_id *id, const uint8_t *key, uint8_t cls,
			     struct vb_cpriv *cp, struct vb_spriv *sp, uint64_t deadline)
{
	struct vb_client *vc = c->vc;
	struct rdma_cm_event *ev;
	uint8_t cpb[VB_CPRIV_LEN];
	int rc;

	cp->land_addr = (uintptr_t)c->land;
	cp->land_rkey = c->mr->rkey;
	if (key) {
		cp->has_nonce = cls;
		net_auth_nonce(cp->cn);
	}
	vb_cpriv_encode(cpb, cp);
	struct rdma_conn_param par = {
		.private_data = cpb, .private_data_len = VB_CPRIV_LEN,
		.responder_resources = 1, .initiator_depth = 1,
		.retry_count = 7, .rnr_retry_count = 7,
	};
	if (rdma_connect(id, &par))
		return -ENOTCONN;
	rc = vb_cm_expect(vc, ch, deadline, RDMA_CM_EVENT_ESTABLISHED, &ev);
	if (rc == -EACCES) {
		if (key)
			log_err("net: %s:%u does not accept %s", c->host, c->port,
				net_auth_class_name(cls));
		else
			log_err("net: %s:%u requires a cluster key and we have none (%s)",
				c->host, c->port, log_key_advice());
		NET_STAT_ADD(&vc->base.st, auth_fail, 1);
	}
	if (rc)
		return rc;
	rc = vb_spriv_decode(ev->param.conn.private_data,
			     ev->param.conn.private_data_len, sp);
	rdma_ack_cm_event(ev);
	if (rc || sp->credits == 0) {
		log_warn("net: verbs: %s:%u: bad accept data; closing", c->host, c->port);
		rdma_disconnect(id);
		return -ENOTCONN;
	}
	return 0;
}

/*
 * Set up one connection: resolve, create the QP on our CQs, connect with
 * our private data, check the server's (credits, fast slots), prove the
 * key both ways and take the fast slots' grant (vb_conn_auth), then hand
 * the cm_id to the client's event channel.
 * Caller holds connect_lock. @return 0, -errno
 */
static int vb_conn_setup(struct vb_cconn *c, uint64_t deadline)
{
	struct vb_client *vc = c->vc;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct vb_cpriv cp = { .credits = (uint16_t)c->ncs };
	struct vb_spriv sp;
	const uint8_t *key;
	uint8_t cls;
	int rc;

	ch = rdma_create_event_channel();
	if (!ch)
		return -ENOMEM;
	if (rdma_create_id(ch, &id, c, RDMA_PS_TCP)) {
		rc = -ENOMEM;
		goto out_destroy_ch;
	}
	rc = vb_conn_resolve(c, ch, id, deadline);
	if (!rc)
		rc = vb_conn_qp(c, id);
	if (rc)
		goto out_destroy_id;
	key = net_auth_client_key(&vc->base.opts, &cls);
	__atomic_store_n(&c->sealed, 0, __ATOMIC_RELEASE); /* until our AUTH */
	rc = vb_conn_establish(c, ch, id, key, cls, &cp, &sp, deadline);
	if (rc)
		goto out_destroy_qp;
	struct vb_grant g = { sp.nslots, sp.slot_size, sp.fast_addr, sp.fast_rkey };
	if (key) {
		rc = vb_conn_auth(c, key, cls, cp.cn, &sp, deadline, &g);
		if (rc)
			goto out_disconnect;
	}
	c->s_fast_addr = g.fast_addr;
	c->s_fast_rkey = g.fast_rkey;
	c->s_slot_size = g.slot_size;
	c->s_nslots = g.nslots;
	if (rdma_migrate_id(id, vc->cm_ch)) {
		rc = -ENOTCONN;
		goto out_disconnect;
	}
	pthread_mutex_lock(&c->base.lock);
	c->base.up = 1;
	c->base.gen++;
	c->cr.max = c->cr.avail = sp.credits < c->ncs ? sp.credits : c->ncs;
	c->base.kill = 0;
	c->fast_busy = 0;
	c->big_busy = 0;
	if (c->ever_up)
		net_conn_reconnected(&c->base);
	c->ever_up = 1;
	pthread_cond_broadcast(&c->base.cv);
	pthread_mutex_unlock(&c->base.lock);
	rdma_destroy_event_channel(ch);
	return 0;

out_disconnect:
	rdma_disconnect(id);
out_destroy_qp:
	vb_conn_qp_destroy(c, id);
out_destroy_id:
	rdma_destroy_id(id);
out_destroy_ch:
	rdma_destroy_event_channel(ch);
	return rc;
}

/* Take c->connect_lock by deadline. A thread that leads the completion
 * channel takes its events while another thread connects (see
 * vb_cm_wait), looking at the lock again every VB_LEAD_SLICE_MS.
 * @return 0, -ETIMEDOUT, -errno */
static int vb_connect_lock(struct vb_cconn *c, uint64_t deadline)
{
	int rc;

	if (vb_leads(c->vc)) {
		while ((rc = pthread_mutex_trylock(&c->connect_lock)) == EBUSY)
			if (vb_lead_poll(c->vc, -1, deadline, VB_LEAD_SLICE_MS) < 0)
				return -ETIMEDOUT;
		return -rc;
	}
	return net_conn_connect_lock(&c->connect_lock, deadline);
}

/* Make sure c is up; one caller sets up, others wait on connect_lock.
 * @return 0, -errno (see vb_conn_setup) */
static int vb_conn_connect(struct net_conn *nc, uint64_t deadline)
{
	struct vb_cconn *c = NET_CONTAINER_OF(nc, struct vb_cconn, base);
	int rc;

	rc = vb_connect_lock(c, deadline);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->base.lock);
	rc = c->base.up;
	pthread_mutex_unlock(&c->base.lock);
	if (!rc) {
		rc = vb_conn_setup(c, deadline);
		if (rc) {
			NET_STAT_ADD(&c->vc->base.st, conn_errors, 1);
			if (rc != -ETIMEDOUT && rc != -ECONNREFUSED && rc != -EHOSTUNREACH &&
			    rc != -EACCES)
				rc = -ENOTCONN;
		}
	} else {
		rc = 0;
	}
	pthread_mutex_unlock(&c->connect_lock);
	return rc;
}

/* ------------------------------------------------------------- channel lead */

/*
 * Take the completion channel for who if nobody owns it. A caller also
 * takes it out of epoll (EPOLL_CTL_DEL, one syscall) so the progress
 * thread is not woken for the events the caller takes: a MOD to no events
 * would not do, as epoll keeps EPOLLERR|EPOLLHUP and the channel wakes
 * its waiters without a key, so each event would still wake the progress
 * thread for nothing. The progress thread's one-shot event disabled it
 * already. @return 1 taken, 0 not
 */
static int vb_chan_take(struct vb_client *vc, enum vb_ch_owner who)
{
	int got = 0;

	pthread_mutex_lock(&vc->ch_lock);
	if (vc->ch_owner == VB_CH_NONE && vc->chan) {
		vc->ch_owner = who;
		got = 1;
		if (who == VB_CH_PROGRESS) {
			vc->ch_armed = 0;
		} else if (vc->ch_reg && vc->ch_armed) {
			if (epoll_ctl(vc->base.pg.epfd, EPOLL_CTL_DEL, vc->chan->fd, NULL) == 0)
				vc->ch_reg = vc->ch_armed = 0;
		}
	} else if (who == VB_CH_PROGRESS) {
		vc->ch_armed = 0; /* the owner re-arms when it lets go */
	}
	pthread_mutex_unlock(&vc->ch_lock);
	return got;
}

/* Arm the channel (one-shot) in the progress thread's epoll unless it is.
 * Caller holds ch_lock. */
static void vb_chan_arm(struct vb_client *vc)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.u32 = 1 };

	if (vc->ch_armed)
		return;
	if (epoll_ctl(vc->base.pg.epfd, vc->ch_reg ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, vc->chan->fd,
		      &ev) == 0)
		vc->ch_reg = vc->ch_armed = 1;
	else
		log_err("net: verbs: epoll_ctl: %s", strerror(errno));
}

/*
 * Let the completion channel go. With calls in flight, arm it in epoll so
 * the progress thread takes what comes next (an event left unread fires at
 * once); with none, leave it parked: no reply is awaited, and the next
 * submitter leads it or arms it (vb_chan_need). A lone caller's call thus
 * costs no epoll_ctl at all. Cost: one epoll_ctl when it arms.
 */
static void vb_chan_release(struct vb_client *vc)
{
	pthread_mutex_lock(&vc->ch_lock);
	vc->ch_owner = VB_CH_NONE;
	if (__atomic_load_n(&vc->ch_inflight, __ATOMIC_SEQ_CST) > 0)
		vb_chan_arm(vc);
	pthread_mutex_unlock(&vc->ch_lock);
}

/*
 * A call was counted in flight and its submitter does not lead: make sure
 * somebody takes the channel's events. An owner does (a leader or the
 * progress thread re-arms on release, seeing the count); with no owner,
 * arm it for the progress thread.
 */
static void vb_chan_need(struct vb_client *vc)
{
	pthread_mutex_lock(&vc->ch_lock);
	if (vc->ch_owner == VB_CH_NONE && vc->chan)
		vb_chan_arm(vc);
	pthread_mutex_unlock(&vc->ch_lock);
}

/*
 * The client whose completion channel this thread leads, and how many
 * reasons it has to: calls it submitted with wait_now and has not waited
 * for yet, plus one while a wait of a call not so counted leads. While
 * it leads, nobody else takes the channel's events: every wait of this
 * thread, a credit or buffer wait included, must take them (vb_cv_wait).
 */
static __thread struct vb_client *vb_lead_vc;
static __thread int vb_lead_n;

/* Lead vc's channel one reason more. @return 1 this thread leads it now,
 * 0 another owner has it (or this thread leads another client) */
static int vb_lead_get(struct vb_client *vc)
{
	if (vb_lead_vc == vc) {
		vb_lead_n++;
		return 1;
	}
	if (vb_lead_vc || !vb_chan_take(vc, VB_CH_CALLER))
		return 0;
	vb_lead_vc = vc;
	vb_lead_n = 1;
	return 1;
}

/* One reason less; the last one lets the channel go. */
static void vb_lead_put(struct vb_client *vc)
{
	if (--vb_lead_n > 0)
		return;
	vb_lead_vc = NULL;
	vb_chan_release(vc);
}

static void vb_chan_event(struct ibv_cq *cq, void *ctx);

/* Whether this thread leads vc's completion channel. */
static int vb_leads(const struct vb_client *vc)
{
	return vb_lead_vc == vc;
}

/* Take one event of the channel if one is there (re-arm, drain: completes
 * every call of that connection, waking their waiters). The channel's
 * owner: a leader, or the progress thread. @return 1 taken, 0 none */
static int vb_chan_one(struct vb_client *vc)
{
	struct ibv_cq *cq;
	void *ctx;

	if (ibv_get_cq_event(vc->chan, &cq, &ctx))
		return 0;
	vb_chan_event(cq, ctx);
	return 1;
}

/*
 * One step of the leader: sleep in poll() on the channel, on lead_fd
 * (written by teardown when it completes calls) and on xfd (unless -1: a
 * connect's cm channel) until an event, the deadline or cap_ms, then take
 * one channel event. One event a step: the call waited for may be done
 * after it, and poll() returns at once while more are queued. Cost: one
 * clock read, poll, one read and one re-arm per event.
 * @return 1 xfd is readable, 0 otherwise, -ETIMEDOUT when the deadline had
 * passed (no poll)
 */
static int vb_lead_poll(struct vb_client *vc, int xfd, uint64_t deadline, int cap_ms)
{
	struct pollfd p[3] = { { .fd = vc->chan->fd, .events = POLLIN },
			       { .fd = vc->lead_fd, .events = POLLIN },
			       { .fd = xfd, .events = POLLIN } };
	int ms = net_ms_left(deadline);

	if (ms <= 0)
		return -ETIMEDOUT;
	if (ms > cap_ms)
		ms = cap_ms;
	if (poll(p, xfd >= 0 ? 3 : 2, ms) <= 0)
		return 0;
	if (p[1].revents & POLLIN) {
		eventfd_t v;
		(void)eventfd_read(vc->lead_fd, &v);
	}
	if (p[0].revents & POLLIN)
		(void)vb_chan_one(vc);
	return xfd >= 0 && (p[2].revents & (POLLIN | POLLERR | POLLHUP));
}

/*
 * Lead until call is done or its deadline passes: take the channel's
 * events ourselves, completing every call met on the way (other waiters
 * are woken as the progress thread would). Saves the progress thread's
 * wake-up and the futex hand-off of each reply. At the deadline, the
 * events already queued (at most VB_POLL_BATCH, without sleeping) are
 * taken first: a reply that came in time counts even when this thread
 * looks late (it was descheduled, or busy elsewhere), as on TCP, where
 * the leader reads its socket before it checks the clock.
 * @return 0 done, -ETIMEDOUT the deadline passed first
 */
static int vb_lead(struct vb_client *vc, struct net_call *call)
{
	while (__atomic_load_n(&call->state, __ATOMIC_ACQUIRE) != NET_CALL_DONE) {
		if (vb_lead_poll(vc, -1, call->deadline_ns, INT_MAX) == 0)
			continue;
		for (int i = 0; i < VB_POLL_BATCH && vb_chan_one(vc); i++)
			if (__atomic_load_n(&call->state, __ATOMIC_ACQUIRE) == NET_CALL_DONE)
				return 0;
		return -ETIMEDOUT;
	}
	return 0;
}

/*
 * Wait on c->base.cv (caller holds c->base.lock) for a credit, a slot
 * or a buffer, until deadline. A thread that leads the channel takes its
 * events instead, nobody else would bring the completion that frees one; it
 * looks again every VB_LEAD_SLICE_MS (a failed submit frees without an
 * event). @return ETIMEDOUT once the deadline passed, else 0
 */
static int vb_cv_wait(struct vb_cconn *c, uint64_t deadline)
{
	if (vb_leads(c->vc)) {
		pthread_mutex_unlock(&c->base.lock);
		int rc = vb_lead_poll(c->vc, -1, deadline, VB_LEAD_SLICE_MS);
		pthread_mutex_lock(&c->base.lock);
		return rc ? ETIMEDOUT : 0;
	}
	struct timespec ts = net_ns_to_ts(deadline);
	return pthread_cond_timedwait(&c->base.cv, &c->base.lock, &ts);
}

/* The core's credit_wait hook: vb_cv_wait, which leads the channel while
 * it waits if this thread leads it. @return 0 look again, -ETIMEDOUT */
static int vb_credit_wait(struct net_conn *nc, uint64_t deadline)
{
	struct vb_cconn *c = NET_CONTAINER_OF(nc, struct vb_cconn, base);

	if (vb_cv_wait(c, deadline) == ETIMEDOUT && net_now_ns() >= deadline)
		return -ETIMEDOUT;
	return 0;
}

/* The core's credit_take hook: a credit and a free call slot of c, taken
 * together (c->base.lock held). Cost: a scan of the slots.
 * @return the slot's index, -1 none (no credit or no free slot) */
static int vb_slot_take(struct net_conn *nc)
{
	struct vb_cconn *c = NET_CONTAINER_OF(nc, struct vb_cconn, base);

	if (c->cr.avail <= 0)
		return -1;
	for (int i = 0; i < c->ncs; i++)
		if (c->cs[i].state == VB_CS_FREE) {
			vb_credit_take(&c->cr);
			return i;
		}
	return -1;
}

/* ------------------------------------------------------------------- submit */

/* Check a call (net_call_check: no read pipes here), and that each
 * segment fits a 32-bit scatter/gather length. @return 0 or -EINVAL */
static int vb_call_check(const struct net_call *call, uint64_t *wr, uint64_t *rd)
{
	int rc = net_call_check(call, 0, wr, rd);

	if (rc)
		return rc;
	for (int i = 0; i < call->wr_cnt; i++)
		if (call->wr_iov[i].iov_len > UINT32_MAX)
			return -EINVAL;
	for (int i = 0; i < call->rd_cnt; i++)
		if (call->rd_iov[i].iov_len > UINT32_MAX)
			return -EINVAL;
	return 0;
}

/* Make room in slot s for cnt more cache references (the registrations a
 * call holds until its reply). @return 0, -ENOMEM */
static int vb_slot_refs_reserve(struct vb_cslot *s, int cnt)
{
	int cap;
	struct vb_rref *r;

	if (s->nrefs + cnt <= s->caprefs)
		return 0;
	cap = s->nrefs + cnt + 8;
	r = realloc(s->refs, (size_t)cap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	s->refs = r;
	s->caprefs = cap;
	return 0;
}

/*
 * Register iov (declared memory through the cache, the rest by Optimistic
 * Group Registration, see vb_mr.c) and describe it as segments at out.
 * Neighbouring pieces that are contiguous in memory under one registration
 * become one segment, so the server moves them with one RDMA operation.
 * @param alloc allocation bounds per iovec (extended list API), or NULL
 * @return segments written, or -errno
 */
static int vb_iov_segs(struct vb_cconn *c, struct vb_cslot *s,
		       const struct iovec *iov, int cnt, const struct iovec *alloc,
		       int acc, uint8_t *out)
{
	struct vb_client *vc = c->vc;
	struct ibv_mr *mbuf[64], **mrs = mbuf;
	struct vb_seg cur = { 0 };
	int n = 0, rc;

	if (vb_slot_refs_reserve(s, cnt))
		return -ENOMEM;
	if (cnt > 64 && !(mrs = malloc((size_t)cnt * sizeof(*mrs))))
		return -ENOMEM;
	pthread_mutex_lock(&vc->rc_lock);
	rc = vb_rcache_get_list(&vc->rc, iov, cnt, alloc, acc, mrs, s->refs, &s->nrefs);
	pthread_mutex_unlock(&vc->rc_lock);
	if (rc)
		goto out_free_mrs;
	for (int i = 0; i < cnt; i++) {
		if (!iov[i].iov_len)
			continue;
		uintptr_t a = (uintptr_t)iov[i].iov_base;
		if (cur.len && cur.rkey == mrs[i]->rkey && cur.addr + cur.len == a &&
		    (uint64_t)cur.len + iov[i].iov_len <= UINT32_MAX) {
			cur.len += (uint32_t)iov[i].iov_len;
			continue;
		}
		if (cur.len)
			vb_seg_encode(out + (size_t)n++ * VB_SEG_LEN, &cur);
		cur = (struct vb_seg){ a, (uint32_t)iov[i].iov_len, mrs[i]->rkey };
	}
	if (cur.len)
		vb_seg_encode(out + (size_t)n++ * VB_SEG_LEN, &cur);
	rc = n;
out_free_mrs:
	if (mrs != mbuf)
		free(mrs);
	return rc;
}

/*
 * Whether every non-empty entry of iov lies in memory declared long-lived
 * (registered already, or to be registered into the pin-down cache at its
 * first use). Such memory is never copied: the RDMA operations use it in
 * place, whatever the size. Cost: O(cnt log regions) under rc_lock.
 */
static int vb_iov_declared(struct vb_cconn *c, const struct iovec *iov, int cnt)
{
	struct vb_client *vc = c->vc;
	int ok = 1;

	pthread_mutex_lock(&vc->rc_lock);
	for (int i = 0; i < cnt && ok; i++)
		if (iov[i].iov_len && !vb_rcache_declared(&vc->rc, iov[i].iov_base,
							  iov[i].iov_len))
			ok = 0;
	pthread_mutex_unlock(&vc->rc_lock);
	return ok;
}

/* Non-empty entries of iov. */
static int vb_iov_nonzero(const struct iovec *iov, int cnt)
{
	int n = 0;

	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len != 0;
	return n;
}

/*
 * Register iov through the cache (declared memory: a hit, or one miss that
 * fills the cache) and describe it as local scatter/gather entries at sge,
 * merging neighbours contiguous under one registration. The references go
 * to the slot, released when the call completes, so no eviction can drop
 * a registration the adapter still reads from.
 * @return entries written (<= max), -E2BIG more needed, -errno
 */
static int vb_iov_sges(struct vb_cconn *c, struct vb_cslot *s,
		       const struct iovec *iov, int cnt, struct ibv_sge *sge,
		       int max)
{
	struct vb_client *vc = c->vc;
	struct ibv_mr *mrs[32];
	int n = 0, rc;

	if (vb_iov_nonzero(iov, cnt) > max || cnt > 32)
		return -E2BIG;
	if (vb_slot_refs_reserve(s, cnt))
		return -ENOMEM;
	pthread_mutex_lock(&vc->rc_lock);
	rc = vb_rcache_get_list(&vc->rc, iov, cnt, NULL, IBV_ACCESS_LOCAL_WRITE, mrs,
				s->refs, &s->nrefs);
	pthread_mutex_unlock(&vc->rc_lock);
	if (rc)
		return rc;
	for (int i = 0; i < cnt; i++) {
		uintptr_t a = (uintptr_t)iov[i].iov_base;
		if (!iov[i].iov_len)
			continue;
		if (n && sge[n - 1].lkey == mrs[i]->lkey &&
		    sge[n - 1].addr + sge[n - 1].length == a &&
		    (uint64_t)sge[n - 1].length + iov[i].iov_len <= UINT32_MAX) {
			sge[n - 1].length += (uint32_t)iov[i].iov_len;
			continue;
		}
		sge[n++] = (struct ibv_sge){ a, (uint32_t)iov[i].iov_len, mrs[i]->lkey };
	}
	return n;
}

/* Copy iov into dst (gather), counting the copy. */
static void vb_gather(struct net_stats *st, const struct iovec *iov, int cnt,
		      uint8_t *dst)
{
	uint64_t n = 0;

	for (int i = 0; i < cnt; i++) {
		memcpy(dst, iov[i].iov_base, iov[i].iov_len);
		dst += iov[i].iov_len;
		n += iov[i].iov_len;
	}
	NET_STAT_ADD(st, client_copy_bytes, n);
}

/* Take a free fast slot bit (ours and the server's share the index).
 * Caller holds c->base.lock. @return index or -1 */
static int vb_fast_take(struct vb_cconn *c)
{
	for (int i = 0; i < c->s_nslots && i < VB_FAST_SLOTS; i++)
		if (!(c->fast_busy & (1u << i))) {
			c->fast_busy |= 1u << i;
			return i;
		}
	return -1;
}

/* How a request's write data travels (see the file comment). */
enum vb_wmode {
	VB_WM_NONE,    /* no write data */
	VB_WM_INLINE,  /* copied into the message */
	VB_WM_FAST,    /* after the message, RDMA Written into a server slot */
	VB_WM_RDMA,    /* named by segments; the server RDMA Reads it */
};

/* One request being built (vb_build_and_post's steps), on the stack of
 * its submitter. */
struct vb_build {
	struct net_call *call;
	uint64_t wr, rd;           /* write and read bytes */
	enum vb_wmode wm;
	struct vb_mhdr m;
	int big;                   /* the message goes big (RDMA Read) */
	int wr_user, rd_user;      /* declared memory: never copied */
	int max_sge;
	int nwr, nrd;              /* segments in segbuf, write then read */
	uint8_t *segbuf;           /* 2 * NET_MAX_IOV segments */
	uint8_t *msg;              /* the message: a slot send buffer or bigs */
	uint64_t len;              /* its length (sealed: with its trailer) */
	int sealed;                /* the connection seals (c->sealed) */
	uint8_t dtag[VB_SEAL_TAG]; /* sealed: the tag of the write data going
				    * outside the message */
	const uint8_t *seal_dtag;  /* dtag, or NULL (none) */
	uint8_t *seal_msg;         /* sealed at post: the message that takes a
				    * receive (msg, or the BIGREQ) */
	uint32_t seal_len;         /* its length without the trailer */
	struct ibv_sge sge[32];
	struct ibv_send_wr swr;
};

/*
 * Choose the mechanisms of b: write data by size (never a copy for
 * declared memory), read data inline or by RDMA (into our fast buffer
 * when small and not declared); take the fast slots they need (none
 * free: server-based), and make the message big when it would outgrow an
 * internal buffer (its write data then goes server-based with it).
 */
static void vb_build_choose(struct vb_cconn *c, struct vb_cslot *s, struct vb_build *b)
{
	const struct net_opts *o = &c->vc->base.opts;
	const struct net_call *call = b->call;
	uint64_t wr = b->wr, rd = b->rd;

	if (wr == 0)
		b->wm = VB_WM_NONE;
	else if (wr <= o->inline_max && !b->wr_user)
		b->wm = VB_WM_INLINE;
	else if (wr <= o->fast_max && wr + VB_MSG_SIZE <= c->s_slot_size &&
		 (!b->wr_user || call->wr_cnt + 1 <= b->max_sge))
		b->wm = VB_WM_FAST;
	else
		b->wm = VB_WM_RDMA;
	if (rd && rd <= o->inline_max && !b->rd_user)
		b->m.flags |= VB_F_RD_INLINE;
	else if (rd)
		b->m.flags |= VB_F_RD_RDMA;
	s->rd_total = rd;

	pthread_mutex_lock(&c->base.lock);
	if (b->wm == VB_WM_FAST && (s->wr_fast = vb_fast_take(c)) < 0)
		b->wm = VB_WM_RDMA; /* all fast slots busy: server-based */
	if ((b->m.flags & VB_F_RD_RDMA) && rd <= o->fast_max && !b->rd_user &&
	    (s->rd_fast = vb_fast_take(c)) >= 0)
		s->rd_in_fast = 1;
	pthread_mutex_unlock(&c->base.lock);

	int nz_rd = vb_iov_nonzero(call->rd_iov, call->rd_cnt);
	if (!(b->m.flags & VB_F_RD_RDMA))
		nz_rd = 0;
	else if (s->rd_in_fast)
		nz_rd = 1;
	uint64_t len = VB_HDRS + (uint64_t)nz_rd * VB_SEG_LEN + call->body_len +
		(b->sealed ? VB_SEAL_TRAILER : 0) + (b->wm == VB_WM_INLINE ? wr : 0) +
		(b->wm == VB_WM_RDMA ?
		 (uint64_t)vb_iov_nonzero(call->wr_iov, call->wr_cnt) * VB_SEG_LEN : 0);
	if (len <= VB_MSG_SIZE)
		return;
	b->big = 1;
	if (b->wm == VB_WM_FAST) {
		pthread_mutex_lock(&c->base.lock);
		c->fast_busy &= ~(1u << s->wr_fast);
		s->wr_fast = -1;
		pthread_mutex_unlock(&c->base.lock);
	}
	if (b->wm == VB_WM_INLINE || b->wm == VB_WM_FAST)
		b->wm = VB_WM_RDMA;
}

/*
 * Name the memory the server will RDMA into b->segbuf: the write data
 * when server-based, then the read destination (our fast buffer, or the
 * caller's memory), registering what needs it (held by s).
 * @return 0, -errno of the registration
 */
static int vb_build_segs(struct vb_cconn *c, struct vb_cslot *s, struct vb_build *b)
{
	struct net_call *call = b->call;
	int rc;

	if (b->wm == VB_WM_RDMA) {
		rc = vb_iov_segs(c, s, call->wr_iov, call->wr_cnt, VB_CALL_WR_ALLOC(call),
				 IBV_ACCESS_REMOTE_READ, b->segbuf);
		if (rc < 0)
			return rc;
		b->nwr = rc;
		b->m.flags |= VB_F_WR_RDMA;
	}
	if ((b->m.flags & VB_F_RD_RDMA) && s->rd_in_fast) {
		struct vb_seg sg = { (uintptr_t)(c->fast + (size_t)s->rd_fast * c->fast_sz),
				     (uint32_t)b->rd, c->mr->rkey };
		vb_seg_encode(b->segbuf + (size_t)b->nwr * VB_SEG_LEN, &sg);
		b->nrd = 1;
	} else if (b->m.flags & VB_F_RD_RDMA) {
		rc = vb_iov_segs(c, s, call->rd_iov, call->rd_cnt, VB_CALL_RD_ALLOC(call),
				 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
				 b->segbuf + (size_t)b->nwr * VB_SEG_LEN);
		if (rc < 0)
			return rc;
		b->nrd = rc;
	}
	return 0;
}

/* Wait until deadline for c's big send buffer and take it for s.
 * @return 0, -ETIMEDOUT, -EIO (the connection went) */
static int vb_build_take_big(struct vb_cconn *c, struct vb_cslot *s, uint64_t deadline)
{
	int rc = 0;

	pthread_mutex_lock(&c->base.lock);
	while (c->big_busy && c->base.up && c->base.gen == s->gen)
		if (vb_cv_wait(c, deadline) == ETIMEDOUT)
			break;
	if (c->big_busy || !c->base.up || c->base.gen != s->gen) {
		rc = c->big_busy ? -ETIMEDOUT : -EIO;
	} else {
		c->big_busy = 1;
		s->big = 1;
	}
	pthread_mutex_unlock(&c->base.lock);
	return rc;
}

/*
 * Seal what can be sealed before the post: the tag of write data going
 * outside the message (fast slot, RDMA Read), and a big message's
 * trailer (it takes no receive: sealed under its proto tag). The rest,
 * the trailer of the message that takes a receive, is written at the post
 * (vb_build_and_post); b->len counts it already. Cost: a Poly1305 pass
 * over the write data and the big message.
 */
static void vb_build_seal(struct vb_cconn *c, struct vb_build *b)
{
	const struct net_call *call = b->call;

	b->seal_dtag = NULL;
	if (b->wr && (b->wm == VB_WM_FAST || b->wm == VB_WM_RDMA)) {
		struct vb_mac m;

		vb_mac_start(&c->tx, &m, VB_SEAL_WR, call->tag);
		vb_mac_iov(&m, call->wr_iov, call->wr_cnt);
		vb_mac_final(&m, b->dtag);
		b->seal_dtag = b->dtag;
	}
	if (b->big) {
		b->len = vb_seal_put(&c->tx, b->msg, (uint32_t)b->len, b->seal_dtag,
				     VB_SEAL_BIG, call->tag);
		b->seal_dtag = NULL;
	} else {
		b->seal_msg = b->msg;
		b->seal_len = (uint32_t)b->len;
		b->len += VB_SEAL_TRAILER;
	}
}

/* Write the message into b->msg: headers, segments, body, inline write
 * data; sets b->len. */
static void vb_build_msg(struct vb_cconn *c, struct vb_cslot *s, struct vb_build *b)
{
	struct net_call *call = b->call;
	struct proto_hdr h = { .op = call->op, .tag = call->tag,
			       .body_len = call->body_len, .bulk_len = b->wr, .aux = b->rd };
	uint8_t *p = b->msg + VB_HDRS;

	b->m.nwr = (uint16_t)b->nwr;
	b->m.nrd = (uint16_t)b->nrd;
	memcpy(p, b->segbuf, (size_t)(b->nwr + b->nrd) * VB_SEG_LEN);
	p += (size_t)(b->nwr + b->nrd) * VB_SEG_LEN;
	if (call->body_len)
		memcpy(p, call->body, call->body_len);
	p += call->body_len;
	if (b->wm == VB_WM_INLINE) {
		b->m.flags |= VB_F_WR_INLINE;
		b->m.inl = (uint32_t)b->wr;
		vb_gather(&c->vc->base.st, call->wr_iov, call->wr_cnt, p);
		p += b->wr;
	}
	if (b->wm == VB_WM_FAST) {
		b->m.flags |= VB_F_WR_FAST;
		b->m.fslot = (uint16_t)s->wr_fast;
		b->m.inl = (uint32_t)b->wr;
	}
	proto_hdr_encode(b->msg, &h);
	vb_mhdr_encode(b->msg + PROTO_HDR_LEN, &b->m);
	b->len = (uint64_t)(p - b->msg);
	if (b->sealed)
		vb_build_seal(c, b);
}

/*
 * Make b->swr, the one WR that sends the message: for a big one a small
 * BIGREQ in slot si's send buffer naming it; for fast write data an RDMA
 * Write with Immediate of [message][data] into the server slot (the data
 * gathered through our fast buffer, or straight from declared memory);
 * else a SEND. @return 0, -errno of a registration
 */
static int vb_build_wr(struct vb_cconn *c, struct vb_cslot *s, int si, struct vb_build *b)
{
	struct net_call *call = b->call;
	struct ibv_send_wr *swr = &b->swr;
	int nsge = 0, rc;

	swr->sg_list = b->sge;
	swr->opcode = IBV_WR_SEND;
	if (b->big) {
		uint8_t *sm = c->sbuf + (size_t)si * VB_MSG_SIZE;
		struct vb_mhdr bm = { .kind = VB_K_BIGREQ, .fslot = 0xffff,
				      .bigmsg = (uint32_t)b->len };
		struct proto_hdr bh = { .op = call->op, .tag = call->tag };
		struct vb_seg sg = { (uintptr_t)c->bigs, (uint32_t)b->len, c->mr->rkey };
		proto_hdr_encode(sm, &bh);
		vb_mhdr_encode(sm + PROTO_HDR_LEN, &bm);
		vb_seg_encode(sm + VB_HDRS, &sg);
		b->seal_msg = sm;
		b->seal_len = VB_HDRS + VB_SEG_LEN;
		b->sge[nsge++] = (struct ibv_sge){ (uintptr_t)sm, VB_HDRS + VB_SEG_LEN +
						   (b->sealed ? VB_SEAL_TRAILER : 0),
						   c->mr->lkey };
	} else if (b->wm == VB_WM_FAST) {
		b->sge[nsge++] = (struct ibv_sge){ (uintptr_t)b->msg, (uint32_t)b->len,
						   c->mr->lkey };
		if (b->wr_user) {
			rc = vb_iov_sges(c, s, call->wr_iov, call->wr_cnt, b->sge + 1,
					 b->max_sge - 1);
			if (rc < 0)
				return rc;
			nsge += rc;
		} else {
			uint8_t *fb = c->fast + (size_t)s->wr_fast * c->fast_sz;
			vb_gather(&c->vc->base.st, call->wr_iov, call->wr_cnt, fb);
			b->sge[nsge++] = (struct ibv_sge){ (uintptr_t)fb, (uint32_t)b->wr,
							   c->mr->lkey };
		}
		swr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		swr->imm_data = vb_imm_encode((unsigned)s->wr_fast, (uint32_t)(b->len + b->wr));
		swr->wr.rdma.remote_addr = c->s_fast_addr + (uint64_t)s->wr_fast * c->s_slot_size;
		swr->wr.rdma.rkey = c->s_fast_rkey;
	} else {
		b->sge[nsge++] = (struct ibv_sge){ (uintptr_t)b->msg, (uint32_t)b->len,
						   c->mr->lkey };
	}
	swr->num_sge = nsge;
	vb_stat_max(&c->vc->base.st, (uint64_t)nsge);
	return 0;
}

/* Count a posted request by its write mechanism. */
static void vb_build_count(struct net_stats *st, const struct vb_build *b)
{
	NET_STAT_ADD(st, msgs_tx, 1);
	NET_STAT_ADD(st, bytes_tx, b->len + (b->wm == VB_WM_FAST ? b->wr : 0));
	if (b->wm == VB_WM_INLINE) {
		NET_STAT_ADD(st, inline_msgs, 1);
		NET_STAT_ADD(st, inline_bytes, b->wr);
	} else if (b->wm == VB_WM_FAST) {
		NET_STAT_ADD(st, fast_msgs, 1);
		NET_STAT_ADD(st, fast_bytes, b->wr);
	} else if (b->wm == VB_WM_RDMA) {
		NET_STAT_ADD(st, rdma_read_ops, 1);
		NET_STAT_ADD(st, rdma_read_bytes, b->wr);
	}
	NET_STAT_ADD(st, bulk_pull_bytes, b->wr);
}

/*
 * Build the request of slot s into its buffers and post it: choose the
 * mechanisms (vb_build_choose), name the memory the server will access
 * (vb_build_segs), take the big send buffer if the message outgrew an
 * internal one, write the message and its WR, and post it unless the
 * connection went meanwhile.
 * @return 0 posted, -errno (slot still BUILDING; caller releases it)
 */
static int vb_build_and_post(struct vb_cconn *c, struct vb_cslot *s, int si,
			     struct net_call *call, uint64_t wr, uint64_t rd,
			     uint64_t deadline)
{
	struct vb_build b = {
		.call = call, .wr = wr, .rd = rd,
		.m = { .kind = VB_K_REQ, .fslot = 0xffff },
		.max_sge = c->max_sge < 32 ? (int)c->max_sge : 32,
		.wr_user = wr && vb_iov_declared(c, call->wr_iov, call->wr_cnt),
		.rd_user = rd && vb_iov_declared(c, call->rd_iov, call->rd_cnt),
		.msg = c->sbuf + (size_t)si * VB_MSG_SIZE,
		.sealed = __atomic_load_n(&c->sealed, __ATOMIC_ACQUIRE),
	};
	int rc;

	vb_build_choose(c, s, &b);
	b.segbuf = malloc(2u * NET_MAX_IOV * VB_SEG_LEN);
	if (!b.segbuf)
		return -ENOMEM;
	rc = vb_build_segs(c, s, &b);
	if (!rc && b.big) {
		rc = vb_build_take_big(c, s, deadline);
		b.msg = c->bigs;
	}
	if (rc)
		goto out_free_segbuf;
	vb_build_msg(c, s, &b);
	rc = vb_build_wr(c, s, si, &b);
	if (rc)
		goto out_free_segbuf;
	pthread_mutex_lock(&c->base.lock);
	if (!c->base.up || c->base.gen != s->gen || call->err)
		rc = -EIO;
	else
		rc = vb_post_sealed(c, &b.swr, b.sealed ? b.seal_msg : NULL,
				    b.seal_len, b.seal_dtag);
	if (rc == 0) {
		s->state = VB_CS_SENT;
		__atomic_store_n(&call->state, NET_CALL_SENT, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&c->base.lock);
	if (rc == 0)
		vb_build_count(&c->vc->base.st, &b);

out_free_segbuf:
	free(b.segbuf);
	return rc;
}

/*
 * Give back what a failed submit held after admission: its lead, the
 * credit (only to the connection it was taken from: c->base.gen ==
 * s->gen and still up; a teardown zeroed the credits), the slot.
 * @return the submit's error: -ETIMEDOUT, -EINVAL, else -EIO
 */
static int vb_submit_undo(struct vb_cconn *c, struct vb_cslot *s,
			  struct net_call *call, int rc)
{
	if (call->lead)
		vb_lead_put(c->vc);
	call->lead = 0;
	pthread_mutex_lock(&c->base.lock);
	if (c->base.gen == s->gen && c->base.up)
		vb_credit_give(&c->cr, 1);
	vb_slot_release(c, s);
	pthread_mutex_unlock(&c->base.lock);
	rc = net_call_unsent(call, rc);
	return rc == -ETIMEDOUT || rc == -EINVAL ? rc : -EIO;
}

/*
 * Send a call: admission through the core (connect if needed, take a
 * credit and a slot, waiting up to the deadline), take the lead of a
 * wait_now call, then build and post the request. Cost: one
 * post_send, plus ibv_reg_mr per group of memory not declared long-lived
 * (server-based transfers only), or once per declared region (its first
 * use).
 * @return 0, -EINVAL (the call), -ETIMEDOUT, -errno of the connect
 *	(vb_conn_connect), -EIO
 */
static int vb_submit(struct net_conn *nc, struct net_call *call)
{
	struct vb_cconn *c = NET_CONTAINER_OF(nc, struct vb_cconn, base);
	struct vb_client *vc = c->vc;
	struct vb_cslot *s;
	uint64_t wr, rd, deadline;
	int rc, si;

	rc = vb_call_check(call, &wr, &rd);
	if (rc)
		return rc;
	deadline = net_now_ns() + net_call_timeout_ns(call, &vc->base.opts);
	si = net_conn_admit(nc, deadline);
	if (si < 0)
		return si;
	s = &c->cs[si];
	s->state = VB_CS_BUILDING;
	__atomic_add_fetch(&vc->ch_inflight, 1, __ATOMIC_SEQ_CST);
	s->call = call;
	s->gen = c->base.gen;
	s->wr_fast = s->rd_fast = -1;
	net_call_start(call, nc, (++c->next_seq << 16) | (uint64_t)si, deadline,
		       NET_CALL_IDLE);
	pthread_mutex_unlock(&c->base.lock);

	/* Lead before the post: a fast reply then reaches us, not the
	 * progress thread and a hand-off. */
	call->lead = call->wait_now && vb_lead_get(vc);
	if (!call->lead)
		vb_chan_need(vc);
	rc = vb_build_and_post(c, s, si, call, wr, rd, deadline);
	if (rc)
		return vb_submit_undo(c, s, call, rc);
	return 0;
}

/*
 * The core's lead hook (net_call_await): a call counted in this thread's
 * lead (submitted with wait_now, w->held from the start), or one whose
 * wait finds the channel free, is waited for by leading (vb_lead), which
 * reads the clock once per step, nothing more. At the deadline the lead
 * is given back before the core aborts the call.
 * @return 1 led until done, 0 another owner has the channel (the core
 *	sleeps), -ETIMEDOUT the deadline passed while leading
 */
static int vb_wait_lead(struct net_call *call, struct net_wait *w)
{
	struct vb_client *vc = NET_CONTAINER_OF(call->conn, struct vb_cconn, base)->vc;

	if (!w->held)
		w->held = vb_lead_get(vc);
	if (!w->held)
		return 0;
	if (vb_lead(vc, call) == 0)
		return 1;
	vb_lead_put(vc);
	w->held = 0;
	return -ETIMEDOUT;
}

/* The core's wait_end hook: give back the lead the wait held. */
static void vb_wait_end(struct net_call *call, struct net_wait *w)
{
	if (w->held)
		vb_lead_put(NET_CONTAINER_OF(call->conn, struct vb_cconn, base)->vc);
}

/* ---------------------------------------------------------- progress thread */

/* Tell the server our landing buffer is free again. Caller holds c->base.lock. */
static void vb_send_ack(struct vb_cconn *c)
{
	struct proto_hdr h = { .op = PROTO_OP_NET_CREDIT, .flags = PROTO_F_CTRL };
	struct vb_mhdr m = { .kind = VB_K_ACK };
	struct ibv_sge sge = { (uintptr_t)c->ctrl, VB_HDRS, c->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND };

	proto_hdr_encode(c->ctrl, &h);
	vb_mhdr_encode(c->ctrl + PROTO_HDR_LEN, &m);
	if (c->sealed)
		sge.length += VB_SEAL_TRAILER;
	if (vb_post_sealed(c, &wr, c->sealed ? c->ctrl : NULL, VB_HDRS, NULL) == 0) {
		NET_STAT_ADD(&c->vc->base.st, msgs_tx, 1);
		NET_STAT_ADD(&c->vc->base.st, bytes_tx, sge.length);
	}
}

/* Check the read data the server RDMA Wrote for the call of slot s, aux
 * bytes (in our fast buffer, or the caller's memory), against the reply's
 * data tag. Cost: a Poly1305 pass over them. @return 0, -EBADMSG */
static int vb_rd_check(struct vb_cconn *c, const struct vb_cslot *s, uint64_t aux,
		       const uint8_t dtag[VB_SEAL_TAG])
{
	const struct net_call *call = s->call;
	struct vb_mac m;

	vb_mac_start(&c->rx, &m, VB_SEAL_RD, call->tag);
	if (s->rd_in_fast)
		vb_mac_update(&m, c->fast + (size_t)s->rd_fast * c->fast_sz, aux);
	else
		vb_mac_iov_len(&m, call->rd_iov, call->rd_cnt, aux);
	if (m.off != aux)
		return -EBADMSG;
	return vb_mac_check(&m, dtag);
}

/* Place the read data of the reply (h, m) to the call of slot s: copy
 * it in from the reply (inline, at inl) or from our fast buffer, or find
 * it RDMA Written into the caller's memory; count it by mechanism. */
static void vb_reply_data(struct vb_cconn *c, struct vb_cslot *s,
			  const struct proto_hdr *h, const struct vb_mhdr *m,
			  const uint8_t *inl)
{
	struct net_stats *st = &c->vc->base.st;
	struct net_call *call = s->call;

	if (m->flags & VB_F_RD_INLINE) {
		net_iov_copy_in(call->rd_iov, call->rd_cnt, 0, inl, m->inl);
		call->rd_bytes = m->inl;
		NET_STAT_ADD(st, inline_msgs, 1);
		NET_STAT_ADD(st, inline_bytes, m->inl);
		NET_STAT_ADD(st, client_copy_bytes, m->inl);
		return;
	}
	if (!h->aux)
		return;
	if (s->rd_in_fast) {
		net_iov_copy_in(call->rd_iov, call->rd_cnt, 0,
				c->fast + (size_t)s->rd_fast * c->fast_sz, h->aux);
		NET_STAT_ADD(st, client_copy_bytes, h->aux);
	}
	call->rd_bytes = h->aux;
	if (s->rd_total <= c->vc->base.opts.fast_max) {
		NET_STAT_ADD(st, fast_msgs, 1);
		NET_STAT_ADD(st, fast_bytes, h->aux);
	} else {
		NET_STAT_ADD(st, rdma_write_ops, 1);
		NET_STAT_ADD(st, rdma_write_bytes, h->aux);
	}
}

/*
 * A reply arrived in msg (len bytes): check its seal (keyed), complete its
 * call. Caller holds c->base.lock.
 * @return 0, or -EPROTO with *culprit set (connection to close)
 */
static int vb_on_reply(struct vb_cconn *c, const uint8_t *msg, uint32_t len,
		       struct net_call **culprit)
{
	struct net_stats *st = &c->vc->base.st;
	uint8_t dtag[VB_SEAL_TAG];
	struct proto_hdr h;
	struct vb_mhdr m;
	const char *why = NULL;
	struct vb_cslot *s = NULL;
	struct net_call *call;
	unsigned si;

	if (c->sealed && vb_seal_open(&c->rx, msg, len, dtag, VB_SEAL_MSG, 0, &len)) {
		why = "reply fails its MAC (altered, replayed or out of its place)";
		goto out_bad;
	}
	if (len < VB_HDRS || proto_hdr_decode(msg, &h, &why) ||
	    vb_mhdr_decode(msg + PROTO_HDR_LEN, &m)) {
		why = why ? why : "bad message header";
		goto out_bad;
	}
	si = (unsigned)(h.tag & 0xffff);
	if (h.flags != PROTO_F_REPLY || m.kind != VB_K_REP || si >= (unsigned)c->ncs ||
	    c->cs[si].state != VB_CS_SENT || c->cs[si].call->tag != h.tag) {
		why = "reply for unknown tag";
		goto out_bad;
	}
	s = &c->cs[si];
	call = s->call;
	if (h.body_len > call->rep_cap || (uint64_t)VB_HDRS + h.body_len + m.inl > len ||
	    m.inl > s->rd_total || h.aux > s->rd_total) {
		*culprit = call;
		why = "reply larger than its buffers";
		goto out_bad;
	}
	if (c->sealed && h.aux && !(m.flags & VB_F_RD_INLINE) &&
	    vb_rd_check(c, s, h.aux, dtag)) {
		*culprit = call;
		why = "read data fails its MAC";
		goto out_bad;
	}
	if (h.body_len)
		memcpy(call->rep_buf, msg + VB_HDRS, h.body_len);
	call->status = h.status;
	call->rep_len = h.body_len;
	vb_reply_data(c, s, &h, &m, msg + VB_HDRS + h.body_len);
	NET_STAT_ADD(st, bulk_push_bytes, call->rd_bytes);
	NET_STAT_ADD(st, msgs_rx, 1);
	NET_STAT_ADD(st, bytes_rx, len);
	call->err = 0;
	vb_credit_give(&c->cr, h.credits);
	vb_slot_release(c, s);
	net_call_done(call);
	return 0;

out_bad:
	log_warn("net: verbs %s:%u: %s; closing", c->host, c->port, why);
	return -EPROTO;
}

/* Drain c's receive CQ: complete replies, then repost the buffers in one
 * batch. The channel's owner (a leader or the progress thread), or the
 * progress thread on a disconnect. */
static void vb_drain(struct vb_cconn *c)
{
	struct ibv_wc wc[VB_POLL_BATCH];
	struct vb_crbuf *re[VB_POLL_BATCH];
	struct net_call *culprit = NULL;
	int n, nre, bad = 0;

	pthread_mutex_lock(&c->base.lock);
	if (!c->base.up || !c->rcq) {
		pthread_mutex_unlock(&c->base.lock);
		return;
	}
	do {
		n = ibv_poll_cq(c->rcq, VB_POLL_BATCH, wc);
		nre = 0;
		for (int i = 0; i < n && !bad; i++) {
			struct vb_ctag *t = (struct vb_ctag *)(uintptr_t)wc[i].wr_id;
			struct vb_crbuf *rb = NET_CONTAINER_OF(t, struct vb_crbuf, tag);
			if (wc[i].status != IBV_WC_SUCCESS) {
				bad = 1;
				break;
			}
			if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
				unsigned slot;
				uint32_t len;
				vb_imm_decode(wc[i].imm_data, &slot, &len);
				if (slot != VB_IMM_BIG || len > VB_BIG_SIZE ||
				    vb_on_reply(c, c->land, len, &culprit))
					bad = 1;
				else
					vb_send_ack(c);
			} else if (vb_on_reply(c, rb->p, wc[i].byte_len, &culprit)) {
				bad = 1;
			}
			re[nre++] = rb;
		}
		if (!bad && vb_post_recvs(c, re, nre))
			bad = 1;
	} while (n == VB_POLL_BATCH && !bad);
	pthread_mutex_unlock(&c->base.lock);
	if (bad)
		vb_conn_down(c, culprit, culprit ? -EPROTO : -EIO);
}

/* One event of the completion channel, for cq of connection ctx: re-arm,
 * then drain. Channel owner. */
static void vb_chan_event(struct ibv_cq *cq, void *ctx)
{
	/* Re-arm, then ack at once: ibv_destroy_cq waits until every event
	 * taken is acked, so the CQ outlives the re-arm, and a destroyer (a
	 * failed connect, a teardown) never waits on us. vb_drain re-checks
	 * c->rcq under c->base.lock. */
	ibv_req_notify_cq(cq, 0);
	ibv_ack_cq_events(cq, 1);
	vb_drain(ctx);
}

/* Completion channel readable (progress thread): unless a caller leads,
 * take every CQ event, re-arm, drain. */
static void vb_on_chan(struct vb_client *vc)
{
	if (!vb_chan_take(vc, VB_CH_PROGRESS))
		return;
	while (vb_chan_one(vc))
		;
	vb_chan_release(vc);
}

/* rdma_cm events of established connections: a disconnect fails the calls. */
static void vb_on_cm(struct vb_client *vc)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(vc->cm_ch, &ev) == 0) {
		struct vb_cconn *c = ev->id->context;
		enum rdma_cm_event_type t = ev->event;
		rdma_ack_cm_event(ev);
		if (t == RDMA_CM_EVENT_DISCONNECTED || t == RDMA_CM_EVENT_DEVICE_REMOVAL ||
		    t == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
			vb_drain(c); /* replies that made it first */
			vb_conn_down(c, NULL, 0); /* wakes a leader */
		}
	}
}

/* Serve teardown requests. */
static void vb_do_kills(struct vb_client *vc)
{
	pthread_mutex_lock(&vc->lock);
	for (struct vb_cconn *c = vc->conns; c; c = c->next_conn) {
		pthread_mutex_lock(&c->base.lock);
		int k = c->base.kill;
		pthread_mutex_unlock(&c->base.lock);
		if (k)
			vb_conn_down(c, NULL, 0);
	}
	pthread_mutex_unlock(&vc->lock);
}

/* The progress thread: wait on epoll for kill requests (the eventfd),
 * completions (the channel, armed one-shot) and rdma_cm events. */
static void *vb_progress(void *arg)
{
	struct vb_client *vc = arg;
	struct epoll_event ev[8];

	while (!net_progress_stopping(&vc->base.pg)) {
		int n = net_progress_wait(&vc->base.pg, ev, 8);

		for (int i = 0; i < n; i++) {
			if (ev[i].data.u32 == 0) {
				vb_do_kills(vc);
			} else if (ev[i].data.u32 == 1) {
				vb_on_chan(vc);
			} else {
				vb_on_cm(vc);
			}
		}
	}
	return NULL;
}

/* ----------------------------------------------------------------- lifecycle */

/* Create a verbs client: check RLIMIT_MEMLOCK holds one connection's
 * buffers, set up the pin-down cache, the rdma_cm channel, the epoll set
 * and its eventfds, and start the progress thread. The pd comes later,
 * with the first connect. */
static int vb_client_new(struct net_client **out, const struct net_opts *o)
{
	struct vb_client *vc;
	uint64_t per_conn, pin_max;
	int rc;

	per_conn = (2ull * (uint64_t)o->credits + 2) * VB_MSG_SIZE +
		   VB_FAST_SLOTS * (uint64_t)o->fast_max + 2ull * VB_BIG_SIZE;
	rc = vb_memlock_check(per_conn, "client (one connection's buffers)");
	if (rc)
		return rc;
	vc = calloc(1, sizeof(*vc));
	if (!vc)
		return -ENOMEM;
	vc->base.ops = &vb_client_ops;
	vc->base.opts = *o;
	pin_max = o->pin_max ? o->pin_max : VB_DEFAULT_PIN_MAX;
	pthread_mutex_init(&vc->lock, NULL);
	pthread_mutex_init(&vc->ch_lock, NULL);
	pthread_mutex_init(&vc->rc_lock, NULL);
	vb_rcache_init(&vc->rc, pin_max, &vc->base.st);
	vc->cm_ch = rdma_create_event_channel();
	if (!vc->cm_ch) {
		rc = -ENODEV;
		goto out_free;
	}
	fcntl(vc->cm_ch->fd, F_SETFL, fcntl(vc->cm_ch->fd, F_GETFL) | O_NONBLOCK);
	rc = net_progress_init(&vc->base.pg);
	if (rc)
		goto out_destroy_cm_ch;
	vc->lead_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (vc->lead_fd < 0) {
		rc = -errno;
		goto out_fini_pg;
	}
	struct epoll_event e2 = { .events = EPOLLIN, .data.u32 = 2 };
	if (epoll_ctl(vc->base.pg.epfd, EPOLL_CTL_ADD, vc->cm_ch->fd, &e2) < 0) {
		rc = -errno;
		goto out_close_lead_fd;
	}
	rc = net_progress_start(&vc->base.pg, vb_progress, vc);
	if (rc)
		goto out_close_lead_fd;
	*out = &vc->base;
	return 0;

out_close_lead_fd:
	close(vc->lead_fd);
out_fini_pg:
	net_progress_fini(&vc->base.pg);
out_destroy_cm_ch:
	rdma_destroy_event_channel(vc->cm_ch);
out_free:
	pthread_mutex_destroy(&vc->rc_lock);
	pthread_mutex_destroy(&vc->ch_lock);
	pthread_mutex_destroy(&vc->lock);
	free(vc);
	return rc;
}

/* Stop and join the progress thread, then disconnect and free every
 * connection and the pin-down cache, deregistering all (calls must be
 * done). */
static void vb_client_free(struct net_client *cl)
{
	struct vb_client *vc = NET_CONTAINER_OF(cl, struct vb_client, base);
	struct vb_cconn *c, *nx;

	net_progress_fini(&vc->base.pg);
	for (c = vc->conns; c; c = nx) {
		nx = c->next_conn;
		pthread_mutex_lock(&c->base.lock);
		if (c->id)
			rdma_disconnect(c->id);
		vb_conn_destroy_res(c);
		for (int i = 0; i < c->ncs; i++)
			free(c->cs[i].refs);
		if (c->mr)
			vb_dereg(c->mr, &vc->base.st);
		pthread_mutex_unlock(&c->base.lock);
		if (c->mem)
			munmap(c->mem, c->memlen);
		free(c->rb);
		free(c->cs);
		net_conn_fini(&c->base);
		pthread_mutex_destroy(&c->connect_lock);
		free(c);
	}
	vb_rcache_fini(&vc->rc);
	if (vc->chan)
		ibv_destroy_comp_channel(vc->chan);
	if (vc->pd)
		ibv_dealloc_pd(vc->pd);
	rdma_destroy_event_channel(vc->cm_ch);
	close(vc->lead_fd);
	pthread_mutex_destroy(&vc->rc_lock);
	pthread_mutex_destroy(&vc->ch_lock);
	pthread_mutex_destroy(&vc->lock);
	free(vc);
}

/* A connection to host:port with one call slot per credit, on vc's
 * list; not connected yet (it connects on first use). */
static int vb_conn_new(struct net_client *cl, const char *host, uint16_t port,
		       struct net_conn **out)
{
	struct vb_client *vc = NET_CONTAINER_OF(cl, struct vb_client, base);
	struct vb_cconn *c;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->ncs = vc->base.opts.credits;
	c->cs = calloc((size_t)c->ncs, sizeof(*c->cs));
	if (!c->cs) {
		free(c);
		return -ENOMEM;
	}
	net_conn_init(&c->base, cl);
	c->vc = vc;
	c->stag.kind = VB_CT_SEND;
	snprintf(c->host, sizeof(c->host), "%s", host);
	c->port = port;
	pthread_mutex_init(&c->connect_lock, NULL);
	pthread_mutex_lock(&vc->lock);
	c->next_conn = vc->conns;
	vc->conns = c;
	pthread_mutex_unlock(&vc->lock);
	*out = &c->base;
	return 0;
}

/* Declare a long-lived region for the pin-down cache. */
static int vb_register_mem(struct net_client *cl, void *addr, size_t len)
{
	struct vb_client *vc = NET_CONTAINER_OF(cl, struct vb_client, base);
	int rc;

	pthread_mutex_lock(&vc->rc_lock);
	rc = vb_rcache_declare(&vc->rc, addr, len);
	pthread_mutex_unlock(&vc->rc_lock);
	return rc;
}

/* Forget a region declared with vb_register_mem; deregisters it when
 * cached. @return 0, -ENOENT, -EBUSY (a call still uses it) */
static int vb_unregister_mem(struct net_client *cl, void *addr)
{
	struct vb_client *vc = NET_CONTAINER_OF(cl, struct vb_client, base);
	int rc;

	pthread_mutex_lock(&vc->rc_lock);
	rc = vb_rcache_undeclare(&vc->rc, addr);
	pthread_mutex_unlock(&vc->rc_lock);
	return rc;
}

const struct net_client_ops vb_client_ops = {
	.name = "verbs",
	.client_new = vb_client_new,
	.client_free = vb_client_free,
	.conn_new = vb_conn_new,
	.submit = vb_submit,
	.wait = net_call_await,
	.connect = vb_conn_connect,
	.credit_take = vb_slot_take,
	.credit_wait = vb_credit_wait,
	.kick = net_conn_kick,
	.lead = vb_wait_lead,
	.wait_end = vb_wait_end,
	.register_mem = vb_register_mem,
	.unregister_mem = vb_unregister_mem,
};

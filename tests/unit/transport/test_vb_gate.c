/*
 * test_vb_gate.c - the verbs server's bound on a connection's unfinished
 * replies, and its intake of fast-slot requests, without RDMA: vb_server.c
 * is included with registration (vb_stub.h), the post calls and the
 * rdma_cm calls of a close stubbed, and requests are handed to vb_on_msg
 * as if received; sends complete when the test calls vb_on_wc (which
 * routes on the wr_id tag). Covers: a connection with `credits` replies
 * posted and not completed gets no further request to its
 * handler, but its requests queue on their credits (a client that reuses
 * each credit as its reply arrives is not closed); a completion lets the
 * next one in; past the credits the connection is closed; the reply
 * buffer pool stops at the credits (-ENOBUFS); a close with replies in
 * flight frees everything once they flush. A request RDMA Written into a
 * fast slot is served from a copy in its receive buffer: the client
 * writing the slot again while the handler has it changes nothing the
 * server checked (the write data stays in the slot).
 * Keyed (vb_seal.h): a sealed request is served and its reply opens with
 * the server's direction; a replayed, an altered and a skipped message
 * each close the connection before the handler sees them; fast-slot write
 * data altered after its tag was taken fails the pull and closes. The
 * RLIMIT_MEMLOCK check at start counts every client's reply pool at its
 * cap and its big request buffer: a limit of exactly that is accepted,
 * one byte less refused, and so is a limit that holds all but those.
 */
#include <sys/resource.h>
#include <rdma/rdma_cma.h>

#include "vb_stub.h"

static uint64_t stub_ids[256]; /* wr_id of every signaled WR posted */
static int stub_nids, stub_disconnects;
static struct ibv_qp stub_qp;

/* Stub: remember the signaled WRs; the SQ always takes them. */
static int stub_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad)
{
	(void)qp;
	(void)bad;
	for (; wr; wr = wr->next)
		if ((wr->send_flags & IBV_SEND_SIGNALED) && stub_nids < 256)
			stub_ids[stub_nids++] = wr->wr_id;
	return 0;
}

/* Stub: receives are reposted (nothing to do). */
static int stub_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			      struct ibv_recv_wr **bad)
{
	(void)srq;
	(void)wr;
	(void)bad;
	return 0;
}

static int stub_disconnect(struct rdma_cm_id *id)
{
	(void)id;
	stub_disconnects++;
	return 0;
}

static void stub_destroy_qp(struct rdma_cm_id *id)
{
	id->qp = NULL;
}

static int stub_destroy_id(struct rdma_cm_id *id)
{
	free(id);
	return 0;
}

static int stub_channels; /* rdma_create_event_channel calls */

/* Stub: count the call and fail, so vb_server_new stops (-ENODEV) at its
 * first verbs step, just past the RLIMIT_MEMLOCK check. */
static struct rdma_event_channel *stub_create_event_channel(void)
{
	stub_channels++;
	errno = ENODEV;
	return NULL;
}

#define ibv_post_send stub_post_send
#define ibv_post_srq_recv stub_post_srq_recv
#define rdma_disconnect stub_disconnect
#define rdma_destroy_qp stub_destroy_qp
#define rdma_destroy_id stub_destroy_id
#define rdma_create_event_channel stub_create_event_channel

#include "../../../common/transport/vb_mr.c"
#include "../../../common/transport/vb_wire.c"
#include "../../../common/transport/vb_server.c"

#define CREDITS 8
#define NRB 64

static struct vb_server srv;
static struct vb_srbuf rbs[NRB];
static int handled;

/* The handler: answer every request at once (an empty ECHO). */
static void handler(struct net_sreq *r, void *arg)
{
	(void)arg;
	handled++;
	vb_reply(r, 0, NULL, 0);
}

/* A server with only what intake, dispatch and replies touch. */
static void srv_init(void)
{
	net_opts_default(&srv.base.opts);
	srv.base.opts.credits = CREDITS;
	srv.loop = ev_loop_new(EVFLAG_AUTO);
	net_srv_kick_init(&srv.base, srv.loop, vb_done_run, vb_kick_more);
	srv.rmr = vb_reg(NULL, rbs, sizeof(rbs), 0, &srv.base.st);
	srv.fn = handler;
	for (int i = 0; i < NRB; i++) {
		rbs[i].tag.kind = VB_ST_RECV;
		rbs[i].p = calloc(1, VB_MSG_SIZE);
	}
}

/* A connection as vb_on_connect_req leaves it, with CREDITS credits. */
static struct vb_sconn *conn_new(void)
{
	struct vb_sconn *c = calloc(1, sizeof(*c));

	c->srv = &srv;
	c->base.srv = &srv.base;
	net_sconn_open(&c->base, NET_HS_OPEN, vb_sconn_reap);
	c->credits = CREDITS;
	c->sreqs = calloc(CREDITS + 1, sizeof(*c->sreqs));
	for (int i = 0; i < CREDITS; i++) {
		c->sreqs[i].c = c;
		c->sreqs[i].next = c->free_q;
		c->free_q = &c->sreqs[i];
	}
	c->memlen = vb_conn_bytes(&srv.base.opts, &c->slot_size);
	c->mem = mmap(NULL, c->memlen, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	c->mr = vb_reg(NULL, c->mem, c->memlen, 0, &srv.base.st);
	c->id = calloc(1, sizeof(*c->id));
	c->id->qp = &stub_qp;
	c->sq_free = (int)VB_SQ_DEPTH;
	c->up = 1;
	ev_timer_init(&c->hs_dl, vb_hs_dl_cb, 1., 0.);
	srv.conns = c;
	srv.nconns = 1;
	return c;
}

/* Request number n arrives (a small ECHO in receive buffer n), then the
 * loop runs its deferred work. */
static void request(struct vb_sconn *c, int n)
{
	struct proto_hdr h = { .op = 100, .tag = (uint64_t)n, .body_len = 2 };
	struct vb_mhdr m = { .kind = VB_K_REQ, .fslot = 0xffff };
	uint8_t *p = rbs[n % NRB].p;

	proto_hdr_encode(p, &h);
	vb_mhdr_encode(p + PROTO_HDR_LEN, &m);
	memcpy(p + VB_HDRS, "hi", 2);
	vb_on_msg(c, &rbs[n % NRB], p, VB_HDRS + 2, NULL);
	ev_invoke_pending(srv.loop);
}

/* The i-th signaled WR posted completes with status st; the loop runs. */
static void complete(int i, enum ibv_wc_status st)
{
	struct ibv_wc wc = { .wr_id = stub_ids[i], .status = st };

	vb_on_wc(&srv, &wc); /* routed on the op's tag */
	ev_invoke_pending(srv.loop);
}

static int fast_ok;

/* Handler of the fast-slot request: the client writes slot 0 again (its
 * message part) while we have it; what was parsed must not change. */
static void fast_handler(struct net_sreq *r, void *arg)
{
	struct vb_sreq *q = vb_q_of(r);
	uint8_t *slot = q->c->mem;

	(void)arg;
	handled++;
	memset(slot, 0xee, VB_HDRS + 2);
	fast_ok = r->body_len == 2 && !memcmp(r->body, "hi", 2) &&
		  r->hdr.bulk_len == 4 && q->m.inl == 4 &&
		  (q->m.flags & VB_F_WR_FAST) && q->inl == slot + VB_HDRS + 2 &&
		  !memcmp(q->inl, "data", 4) && q->rb == &rbs[0] &&
		  (const uint8_t *)r->body == rbs[0].p + VB_HDRS;
	vb_reply(r, 0, NULL, 0);
}

/* A request RDMA Written with Immediate into fast slot 0: [message: ECHO
 * "hi"][write data "data"], its immediate consuming receive buffer 0. */
static int fast_request(void)
{
	struct vb_sconn *c = conn_new();
	struct proto_hdr h = { .op = 100, .tag = 1, .body_len = 2, .bulk_len = 4 };
	struct vb_mhdr m = { .kind = VB_K_REQ, .flags = VB_F_WR_FAST, .fslot = 0,
			     .inl = 4 };
	uint32_t len = VB_HDRS + 2 + 4;

	c->qpn = 7;
	srv.hash[c->qpn % VB_HASH] = c;
	proto_hdr_encode(c->mem, &h);
	vb_mhdr_encode(c->mem + PROTO_HDR_LEN, &m);
	memcpy(c->mem + VB_HDRS, "hidata", 6);
	srv.fn = fast_handler;
	handled = 0;
	struct ibv_wc wc = { .wr_id = (uintptr_t)&rbs[0].tag, .status = IBV_WC_SUCCESS,
			     .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
			     .imm_data = vb_imm_encode(0, len), .qp_num = c->qpn };
	vb_on_wc(&srv, &wc); /* routed on the buffer's tag */
	ev_invoke_pending(srv.loop);
	CHECK(handled == 1 && fast_ok && !c->base.dead);
	vb_sconn_close(c, 0, "test done");
	complete(stub_nids - 1, IBV_WC_WR_FLUSH_ERR);
	CHECK(srv.conns == NULL);
	return 0;
}

/* The client's two directions of a keyed connection (vb_seal.h). */
static struct net_seal cli_tx, cli_rx;

/* A connection as vb_on_auth leaves a keyed one: sealed both ways, and
 * the client's ends of its seals in cli_tx, cli_rx. */
static struct vb_sconn *sealed_conn(void)
{
	static uint8_t key[NET_KEY_LEN], cn[32], sn[32];
	struct vb_sconn *c = conn_new();

	memset(key, 7, sizeof(key));
	memset(cn, 1, sizeof(cn));
	memset(sn, 2, sizeof(sn));
	net_seal_init(&c->rx, key, NET_AUTH_ROLE_CLIENT, NET_SEAL_MAC, cn, sn);
	net_seal_init(&c->tx, key, NET_AUTH_ROLE_SERVER, NET_SEAL_MAC, cn, sn);
	net_seal_init(&cli_tx, key, NET_AUTH_ROLE_CLIENT, NET_SEAL_MAC, cn, sn);
	net_seal_init(&cli_rx, key, NET_AUTH_ROLE_SERVER, NET_SEAL_MAC, cn, sn);
	c->sealed = 1;
	return c;
}

/* Request n (a small ECHO) sealed by the client's next count, byte flip
 * of it then altered (0: none), handed to vb_on_msg; the loop runs. */
static void sealed_request(struct vb_sconn *c, int n, int flip)
{
	struct proto_hdr h = { .op = 100, .tag = (uint64_t)n, .body_len = 2 };
	struct vb_mhdr m = { .kind = VB_K_REQ, .fslot = 0xffff };
	uint8_t *p = rbs[n % NRB].p;
	uint32_t len;

	proto_hdr_encode(p, &h);
	vb_mhdr_encode(p + PROTO_HDR_LEN, &m);
	memcpy(p + VB_HDRS, "hi", 2);
	len = vb_seal_put(&cli_tx, p, VB_HDRS + 2, NULL, VB_SEAL_MSG, 0);
	if (flip)
		p[flip] ^= 0x01;
	vb_on_msg(c, &rbs[n % NRB], p, len, NULL);
	ev_invoke_pending(srv.loop);
}

/* The reply posted as signaled WR i opens with the client's receive
 * direction. @return 0, -EBADMSG */
static int reply_opens(int i)
{
	struct vb_op *op = NET_CONTAINER_OF((struct vb_stag *)(uintptr_t)stub_ids[i],
					    struct vb_op, tag);
	uint32_t plen;

	return vb_seal_open(&cli_rx, (const uint8_t *)(uintptr_t)op->sge[0].addr,
			    op->sge[0].length, NULL, VB_SEAL_MSG, 0, &plen);
}

/* Whether c was closed: freed at once (nothing in flight), or dead. */
#define CLOSED(c) (srv.conns != (c) || (c)->base.dead)

/* Close c (unless closed) and flush the replies it still has in flight
 * (WRs from..). */
static int sealed_done(struct vb_sconn *c, int from)
{
	if (!CLOSED(c))
		vb_sconn_close(c, 0, "test done");
	for (int i = from; i < stub_nids; i++)
		complete(i, IBV_WC_WR_FLUSH_ERR);
	CHECK(srv.conns == NULL);
	return 0;
}

static int pull_rc;
static uint8_t pulled[4];

/* pull_handler's pull finished: remember how, answer. */
static void pull_cb(struct net_sreq *r, int rc, void *arg)
{
	(void)arg;
	pull_rc = rc;
	vb_reply(r, rc, NULL, 0);
}

/* Handler of the sealed fast write: pull its 4 bytes. */
static void pull_handler(struct net_sreq *r, void *arg)
{
	struct iovec v = { pulled, sizeof(pulled) };

	(void)arg;
	handled++;
	if (vb_pull(r, &v, 1, pull_cb, NULL))
		abort();
}

/* A sealed fast write of "data", its tag taken over "data"; the slot's
 * data is then altered when alter (a relay rewriting it). */
static int sealed_fast(int alter)
{
	struct vb_sconn *c = sealed_conn();
	struct proto_hdr h = { .op = 100, .tag = 9, .body_len = 2, .bulk_len = 4 };
	struct vb_mhdr m = { .kind = VB_K_REQ, .flags = VB_F_WR_FAST, .fslot = 0,
			     .inl = 4 };
	uint8_t dtag[VB_SEAL_TAG];
	struct vb_mac mac;
	uint32_t mlen;
	int from = stub_nids;

	c->qpn = 8;
	srv.hash[c->qpn % VB_HASH] = c;
	vb_mac_start(&cli_tx, &mac, VB_SEAL_WR, 9);
	vb_mac_update(&mac, "data", 4);
	vb_mac_final(&mac, dtag);
	proto_hdr_encode(c->mem, &h);
	vb_mhdr_encode(c->mem + PROTO_HDR_LEN, &m);
	memcpy(c->mem + VB_HDRS, "hi", 2);
	mlen = vb_seal_put(&cli_tx, c->mem, VB_HDRS + 2, dtag, VB_SEAL_MSG, 0);
	memcpy(c->mem + mlen, alter ? "dada" : "data", 4);
	srv.fn = pull_handler;
	handled = 0;
	pull_rc = 1;
	/* a receive buffer of its own: a closed connection's stays queued
	 * for the next repost */
	struct ibv_wc wc = { .wr_id = (uintptr_t)&rbs[20 + alter].tag,
			     .status = IBV_WC_SUCCESS,
			     .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
			     .imm_data = vb_imm_encode(0, mlen + 4), .qp_num = c->qpn };
	vb_on_wc(&srv, &wc);
	ev_invoke_pending(srv.loop);
	CHECK(handled == 1);
	if (alter) {
		CHECK(pull_rc == -EBADMSG && CLOSED(c));
	} else {
		CHECK(pull_rc == 0 && !memcmp(pulled, "data", 4) && !c->base.dead);
		CHECK(reply_opens(stub_nids - 1) == 0);
	}
	return sealed_done(c, from);
}

/* The keyed cases of the header comment. */
static int sealed(void)
{
	struct vb_sconn *c = sealed_conn();
	uint64_t rejects = srv.base.st.rejects;
	int from = stub_nids;

	srv.fn = handler;
	handled = 0;
	sealed_request(c, 0, 0);
	sealed_request(c, 1, 0);
	CHECK(handled == 2 && !c->base.dead && stub_nids == from + 2);
	CHECK(reply_opens(from) == 0 && reply_opens(from + 1) == 0);
	CHECK(reply_opens(from + 1) == -EBADMSG); /* a reply replayed */
	cli_tx.seq--; /* the client's last request again */
	sealed_request(c, 2, 0);
	CHECK(CLOSED(c) && handled == 2 && srv.base.st.rejects == rejects + 1);
	CHECK(sealed_done(c, from) == 0);
	/* one bit of the body altered */
	c = sealed_conn();
	sealed_request(c, 10, VB_HDRS + 1);
	CHECK(CLOSED(c) && handled == 2);
	CHECK(sealed_done(c, stub_nids) == 0);
	/* a message dropped on the way: the next one's count is off */
	c = sealed_conn();
	cli_tx.seq++;
	sealed_request(c, 11, 0);
	CHECK(CLOSED(c) && handled == 2);
	CHECK(sealed_done(c, stub_nids) == 0);
	CHECK(sealed_fast(0) == 0);
	CHECK(sealed_fast(1) == 0);
	return 0;
}

/* The pool stops at the credits: CREDITS - VB_SBUFS buffers are in use
 * when this runs; take the rest, then one more fails. */
static int pool_cap(struct vb_sconn *c)
{
	struct vb_op *ops[CREDITS + 1];
	int n = 0, out = c->replies_out;

	for (; n < VB_SBUFS; n++) {
		ops[n] = vb_op_new(c, NULL, VB_OP_REPLY, NULL, NULL);
		CHECK(vb_bbuf_take(c, ops[n]) == 0);
	}
	ops[n] = vb_op_new(c, NULL, VB_OP_REPLY, NULL, NULL);
	CHECK(c->bb_n == CREDITS && vb_bbuf_take(c, ops[n]) == -ENOBUFS);
	for (int i = 0; i <= n; i++)
		vb_op_free(ops[i]);
	CHECK(c->replies_out == out && c->bb_n == CREDITS);
	return 0;
}

/* vb_server_new of a server with o's options under an RLIMIT_MEMLOCK of
 * lim bytes (the hard limit as it is). @return its result: -ENOMEM
 * refused by the check, -ENODEV past it (the stubbed first verbs step) */
static int server_new_at(const struct net_opts *o, uint64_t lim)
{
	struct net_server *ns = NULL;
	struct rlimit old, l;
	int rc;

	if (getrlimit(RLIMIT_MEMLOCK, &old))
		return -errno;
	if (old.rlim_max != RLIM_INFINITY && lim > old.rlim_max)
		return -ERANGE;
	l = old;
	l.rlim_cur = lim;
	if (setrlimit(RLIMIT_MEMLOCK, &l))
		return -errno;
	rc = vb_server_new(&ns, srv.loop, "127.0.0.1", 0, handler, NULL, o);
	if (setrlimit(RLIMIT_MEMLOCK, &old) || ns)
		return -EIO;
	return rc;
}

/* The RLIMIT_MEMLOCK check of vb_server_new counts, per client, its fast
 * slots and send buffers, its reply pool at the cap (credits big buffers)
 * and its big request buffer, and the SRQ: a limit of exactly that is
 * accepted (the server goes on to its first verbs call), one byte less
 * is refused (-ENOMEM, before any verbs call), and so is a limit that
 * holds all but the reply pools and big buffers. */
static int memlock_counts_pools(void)
{
	struct net_opts o;
	size_t slot;

	net_opts_default(&o);
	o.max_clients = 1; /* small enough for the hard limit of a test */
	o.credits = 4;
	uint64_t base = (uint64_t)(o.credits + 1) * o.max_clients * VB_MSG_SIZE +
			(uint64_t)o.max_clients * vb_conn_bytes(&o, &slot);
	uint64_t need = base + (uint64_t)o.max_clients * (o.credits + 1) * VB_BIG_SIZE;

	stub_channels = 0;
	CHECK(server_new_at(&o, need) == -ENODEV && stub_channels == 1);
	CHECK(server_new_at(&o, need - 1) == -ENOMEM && stub_channels == 1);
	CHECK(server_new_at(&o, base + 65536) == -ENOMEM && stub_channels == 1);
	return 0;
}

int main(void)
{
	struct vb_sconn *c;
	int regs;

	srv_init();
	regs = stub_regs;
	c = conn_new();
	/* CREDITS replies posted, none completed: 4 send buffers, then the
	 * pool */
	for (int i = 0; i < CREDITS; i++)
		request(c, i);
	CHECK(handled == CREDITS && stub_nids == CREDITS && c->replies_out == CREDITS);
	CHECK(c->bb_n == CREDITS - VB_SBUFS);
	CHECK(pool_cap(c) == 0);
	/* the client reuses every credit at once: queued, not closed, not
	 * handled */
	for (int i = CREDITS; i < 2 * CREDITS; i++)
		request(c, i);
	CHECK(handled == CREDITS && !c->base.dead && c->free_q == NULL);
	/* each completion lets one in */
	complete(0, IBV_WC_SUCCESS);
	CHECK(handled == CREDITS + 1 && c->replies_out == CREDITS);
	complete(1, IBV_WC_SUCCESS);
	CHECK(handled == CREDITS + 2 && c->replies_out == CREDITS && !c->base.dead);
	/* two credits came back with those replies; past them: closed */
	request(c, 2 * CREDITS);
	request(c, 2 * CREDITS + 1);
	CHECK(!c->base.dead && handled == CREDITS + 2);
	request(c, 2 * CREDITS + 2);
	CHECK(c->base.dead && stub_disconnects == 1 && srv.base.st.rejects == 1);
	CHECK(handled == CREDITS + 2 && c->bb_n <= CREDITS);
	/* the replies still in flight flush; then everything goes */
	for (int i = 2; i < stub_nids; i++)
		complete(i, IBV_WC_WR_FLUSH_ERR);
	CHECK(srv.conns == NULL && srv.nconns == 0);
	CHECK(fast_request() == 0);
	CHECK(sealed() == 0);
	CHECK(memlock_counts_pools() == 0);
	CHECK(stub_regs - regs == stub_deregs && srv.base.st.pinned_bytes == sizeof(rbs));
	vb_dereg(srv.rmr, &srv.base.st);
	ev_loop_destroy(srv.loop);
	for (int i = 0; i < NRB; i++)
		free(rbs[i].p);
	printf("test_vb_gate: ok\n");
	return 0;
}

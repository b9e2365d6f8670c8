/*
 * test_vb_lead.c - who takes the verbs client's completion events, without
 * RDMA: vb_client.c is included with the channel calls stubbed, and a
 * client is given a fake completion channel (an eventfd). Covers: a caller
 * that leads takes the channel out of the progress thread's epoll and,
 * when its last reason goes, puts it back armed if calls are in flight (an
 * event left unread is then reported at once) or leaves it parked if none
 * are, so a lone caller's calls cost no epoll_ctl; a submitter that does
 * not lead arms a parked channel; the progress thread cannot take a led channel
 * and a caller cannot take one the progress thread holds; leading nests
 * per thread and never spans two clients; a leader is woken by lead_fd
 * when another thread completes its call, and takes channel events itself
 * (re-arm and ack per event); a leading thread's credit wait returns after
 * its slice, not at the deadline; at a deadline that passed, the leader
 * still takes the events already queued (a reply that came in time
 * counts); and a leader that blocks in a connect (its cm wait, or another
 * thread's connect_lock) keeps taking the channel's events meanwhile.
 * Keyed replies (vb_seal.h): a sealed reply completes its call with the
 * read data its data tag covers; read data altered after the server took
 * its tag fails the call (-EPROTO, the call the culprit), and so does a
 * reply replayed.
 */
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#include "vb_stub.h"
#include "net_int.h"

static int stub_events, stub_notifies, stub_acks;
static struct ibv_cq stub_cq;
static void *stub_ctx; /* a connection that is down: its drain does nothing */
static struct net_call *stub_done; /* completed by the next event, if set */

/* Stub: read the eventfd as one CQ event of stub_cq, for stub_ctx; the
 * event completes stub_done, as a drain completes the call it replies. */
static int stub_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx)
{
	uint64_t v;

	if (read(ch->fd, &v, sizeof(v)) != sizeof(v))
		return -1;
	stub_events++;
	*cq = &stub_cq;
	*ctx = stub_ctx;
	if (stub_done) {
		net_call_done(stub_done);
		stub_done = NULL;
	}
	return 0;
}

static struct rdma_cm_event stub_cm_ev;

/* Stub: an rdma_cm channel whose fd is an eventfd; a read is one event. */
static int stub_get_cm_event(struct rdma_event_channel *ch, struct rdma_cm_event **ev)
{
	uint64_t v;

	if (read(ch->fd, &v, sizeof(v)) != sizeof(v))
		return -1;
	*ev = &stub_cm_ev;
	return 0;
}

static int stub_req_notify_cq(struct ibv_cq *cq, int solicited)
{
	(void)cq;
	(void)solicited;
	stub_notifies++;
	return 0;
}

static void stub_ack_cq_events(struct ibv_cq *cq, unsigned n)
{
	(void)cq;
	stub_acks += (int)n;
}

#define ibv_get_cq_event stub_get_cq_event
#define ibv_req_notify_cq stub_req_notify_cq
#define ibv_ack_cq_events stub_ack_cq_events
#define rdma_get_cm_event stub_get_cm_event

#include "../../../common/transport/vb_mr.c"
#include "../../../common/transport/vb_wire.c"
#include "../../../common/transport/vb_client.c"

static struct vb_cconn down_conn;

static struct ibv_comp_channel chan;

/* A client with only what the channel lead touches. */
static int client_init(struct vb_client *vc)
{
	memset(vc, 0, sizeof(*vc));
	pthread_mutex_init(&vc->ch_lock, NULL);
	vc->base.pg.epfd = epoll_create1(0);
	vc->lead_fd = eventfd(0, EFD_NONBLOCK);
	if (vc->base.pg.epfd < 0 || vc->lead_fd < 0)
		return -1;
	vc->chan = &chan;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.u32 = 1 };
	if (epoll_ctl(vc->base.pg.epfd, EPOLL_CTL_ADD, chan.fd, &ev) < 0)
		return -1;
	vc->ch_reg = vc->ch_armed = 1;
	return 0;
}

static void client_fini(struct vb_client *vc)
{
	close(vc->base.pg.epfd);
	close(vc->lead_fd);
	pthread_mutex_destroy(&vc->ch_lock);
}

/* Events epoll reports now (what would wake the progress thread). */
static int reported(struct vb_client *vc)
{
	struct epoll_event ev[4];

	return epoll_wait(vc->base.pg.epfd, ev, 4, 0);
}

static void chan_post(void)
{
	uint64_t one = 1;

	if (write(chan.fd, &one, sizeof(one)) != sizeof(one))
		abort();
}

static void chan_clear(void)
{
	uint64_t v;

	while (read(chan.fd, &v, sizeof(v)) == sizeof(v))
		;
}

/* What the progress thread does when epoll reports the channel: take it,
 * read the events, let it go. @return 1 it was reported and taken */
static int progress_round(struct vb_client *vc)
{
	if (reported(vc) != 1)
		return 0;
	if (!vb_chan_take(vc, VB_CH_PROGRESS))
		return 0;
	chan_clear();
	vb_chan_release(vc);
	return 1;
}

static int test_owners(void)
{
	struct vb_client vc, other;

	CHECK(client_init(&vc) == 0);
	/* the progress thread's one-shot event: it owns the channel, a
	 * caller cannot take it; with no call in flight its release parks
	 * the channel (an unread event is not reported) */
	chan_post();
	CHECK(reported(&vc) == 1);
	CHECK(reported(&vc) == 0); /* one-shot: fired */
	CHECK(vb_chan_take(&vc, VB_CH_PROGRESS) == 1);
	CHECK(vb_lead_get(&vc) == 0 && vb_lead_vc == NULL);
	vb_chan_release(&vc);
	CHECK(vc.ch_owner == VB_CH_NONE && !vc.ch_armed);
	CHECK(reported(&vc) == 0);
	/* a submitter that does not lead arms it: the unread event fires */
	vc.ch_inflight = 1;
	vb_chan_need(&vc);
	CHECK(vc.ch_reg && vc.ch_armed);
	CHECK(progress_round(&vc) == 1);
	CHECK(vc.ch_armed); /* a call still in flight: re-armed */
	CHECK(reported(&vc) == 0);

	/* a caller leads: out of epoll, so an event is not reported */
	CHECK(vb_lead_get(&vc) == 1 && vb_lead_vc == &vc && vb_lead_n == 1);
	CHECK(vc.ch_owner == VB_CH_CALLER && !vc.ch_reg && !vc.ch_armed);
	chan_post();
	CHECK(reported(&vc) == 0);
	CHECK(vb_chan_take(&vc, VB_CH_PROGRESS) == 0);
	CHECK(vc.ch_owner == VB_CH_CALLER);
	vb_chan_need(&vc); /* an owner: nothing to do */
	CHECK(!vc.ch_reg && reported(&vc) == 0);
	/* nesting, and never a second client */
	CHECK(vb_lead_get(&vc) == 1 && vb_lead_n == 2);
	CHECK(client_init(&other) == 0);
	CHECK(vb_lead_get(&other) == 0 && other.ch_owner == VB_CH_NONE);
	client_fini(&other);
	vb_lead_put(&vc);
	CHECK(vc.ch_owner == VB_CH_CALLER && reported(&vc) == 0);
	vb_lead_put(&vc);
	/* let go with a call in flight: armed, what came meanwhile fires */
	CHECK(vb_lead_vc == NULL && vc.ch_owner == VB_CH_NONE && vc.ch_reg &&
	      vc.ch_armed);
	CHECK(progress_round(&vc) == 1);

	/* nothing in flight: a lone caller's lead changes no epoll state
	 * after the first (no epoll_ctl per call), and lets it go parked */
	vc.ch_inflight = 0;
	CHECK(vb_lead_get(&vc) == 1);
	vb_lead_put(&vc);
	CHECK(!vc.ch_armed && !vc.ch_reg);
	CHECK(vb_lead_get(&vc) == 1 && !vc.ch_reg);
	chan_post();
	vb_lead_put(&vc);
	CHECK(vc.ch_owner == VB_CH_NONE && !vc.ch_reg && reported(&vc) == 0);
	chan_clear();
	client_fini(&vc);
	return 0;
}

struct completer {
	struct vb_client *vc;
	struct net_call *call;
};

/* Complete the call from another thread after 50 ms, as teardown does. */
static void *complete_later(void *arg)
{
	struct completer *k = arg;
	struct timespec ts = { 0, 50 * 1000000 };

	nanosleep(&ts, NULL);
	net_call_done(k->call);
	vb_lead_kick(k->vc);
	return NULL;
}

static int test_lead(void)
{
	struct vb_client vc;
	struct net_call call = { 0 };
	struct completer k = { &vc, &call };
	pthread_t thr;
	uint64_t t0;

	CHECK(client_init(&vc) == 0);
	/* a kick without a leader writes nothing */
	vb_lead_kick(&vc);
	uint64_t v;
	CHECK(read(vc.lead_fd, &v, sizeof(v)) < 0);

	/* events the leader takes itself: re-armed and acked one by one */
	CHECK(vb_lead_get(&vc) == 1);
	chan_post();
	stub_events = stub_notifies = stub_acks = 0;
	CHECK(vb_lead_poll(&vc, -1, net_now_ns() + 1000000000ull, 1000) == 0);
	CHECK(stub_events == 1 && stub_notifies == 1 && stub_acks == 1);

	/* woken by lead_fd when another thread completes the call: long
	 * before its 10 s deadline */
	call.state = NET_CALL_SENT;
	call.deadline_ns = net_now_ns() + 10000000000ull;
	t0 = net_now_ns();
	CHECK(pthread_create(&thr, NULL, complete_later, &k) == 0);
	CHECK(vb_lead(&vc, &call) == 0);
	pthread_join(thr, NULL);
	CHECK(call.state == NET_CALL_DONE);
	CHECK(net_now_ns() - t0 < 5000000000ull);

	/* a deadline that passed: vb_lead returns without waiting */
	call.state = NET_CALL_SENT;
	call.deadline_ns = net_now_ns();
	CHECK(vb_lead(&vc, &call) == -ETIMEDOUT);
	CHECK(call.state == NET_CALL_SENT);
	/* ... but first takes what is queued: the reply came in time, the
	 * leader looks late (it was busy elsewhere) */
	chan_post();
	stub_done = &call;
	stub_events = 0;
	CHECK(vb_lead(&vc, &call) == 0);
	CHECK(call.state == NET_CALL_DONE && stub_events == 1);
	vb_lead_put(&vc);
	client_fini(&vc);
	return 0;
}

/* Make fd readable after 50 ms (a cm event arriving, a lock let go). */
static void *post_later(void *arg)
{
	int fd = *(int *)arg;
	struct timespec ts = { 0, 50 * 1000000 };
	uint64_t one = 1;

	nanosleep(&ts, NULL);
	if (write(fd, &one, sizeof(one)) != sizeof(one))
		abort();
	return NULL;
}

/* Hold connect_lock for 50 ms, as another thread's connect does. */
static void *connect_elsewhere(void *arg)
{
	struct vb_cconn *c = arg;
	struct timespec ts = { 0, 50 * 1000000 };

	pthread_mutex_lock(&c->connect_lock);
	nanosleep(&ts, NULL);
	pthread_mutex_unlock(&c->connect_lock);
	return NULL;
}

/* A leader in a connect's cm wait, or waiting for another thread's
 * connect (connect_lock), takes the channel's events meanwhile: the reply
 * of a call it sent before is not held up until the connect ends (a hung
 * server's connect lasts the whole timeout). A thread that does not lead
 * leaves them to the owner. */
static int test_connect_leads(void)
{
	struct vb_client vc;
	struct vb_cconn c = { 0 };
	struct rdma_event_channel cm = { 0 };
	struct rdma_cm_event *ev = NULL;
	struct net_call call = { 0 };
	pthread_t thr;

	CHECK(client_init(&vc) == 0);
	cm.fd = eventfd(0, EFD_NONBLOCK);
	CHECK(cm.fd >= 0);
	CHECK(vb_lead_get(&vc) == 1);
	call.state = NET_CALL_SENT;
	chan_post();
	stub_done = &call;
	stub_events = 0;
	CHECK(pthread_create(&thr, NULL, post_later, &cm.fd) == 0);
	CHECK(vb_cm_wait(&vc, &cm, net_now_ns() + 5000000000ull, &ev) == 0);
	pthread_join(thr, NULL);
	CHECK(ev == &stub_cm_ev);
	CHECK(call.state == NET_CALL_DONE && stub_events == 1);
	/* the deadline ends a cm wait that gets no event */
	CHECK(vb_cm_wait(&vc, &cm, net_now_ns() + 20000000ull, &ev) == -ETIMEDOUT);

	/* another thread connects: the leader takes events until the lock */
	c.vc = &vc;
	pthread_mutex_init(&c.connect_lock, NULL);
	call.state = NET_CALL_SENT;
	chan_post();
	stub_done = &call;
	stub_events = 0;
	CHECK(pthread_create(&thr, NULL, connect_elsewhere, &c) == 0);
	while (pthread_mutex_trylock(&c.connect_lock) == 0) /* until it holds it */
		pthread_mutex_unlock(&c.connect_lock);
	CHECK(vb_connect_lock(&c, net_now_ns() + 5000000000ull) == 0);
	pthread_join(thr, NULL);
	CHECK(call.state == NET_CALL_DONE && stub_events == 1);
	pthread_mutex_unlock(&c.connect_lock);
	vb_lead_put(&vc);

	/* not leading: the cm wait leaves the channel's event alone */
	chan_post();
	stub_done = NULL;
	stub_events = 0;
	CHECK(pthread_create(&thr, NULL, post_later, &cm.fd) == 0);
	CHECK(vb_cm_wait(&vc, &cm, net_now_ns() + 5000000000ull, &ev) == 0);
	pthread_join(thr, NULL);
	CHECK(stub_events == 0);
	chan_clear();
	pthread_mutex_destroy(&c.connect_lock);
	close(cm.fd);
	client_fini(&vc);
	return 0;
}

static int test_cv_wait(void)
{
	struct vb_client vc;
	struct vb_cconn c = { 0 };
	uint64_t t0;

	CHECK(client_init(&vc) == 0);
	c.vc = &vc;
	net_conn_init(&c.base, &vc.base);
	pthread_mutex_lock(&c.base.lock);
	/* leading: back after one slice (nobody would signal the cond) */
	CHECK(vb_lead_get(&vc) == 1);
	t0 = net_now_ns();
	CHECK(vb_cv_wait(&c, t0 + 10000000000ull) == 0);
	CHECK(net_now_ns() - t0 < 5000000000ull);
	CHECK(vb_cv_wait(&c, net_now_ns()) == ETIMEDOUT);
	vb_lead_put(&vc);
	/* not leading: the cond, up to the deadline */
	t0 = net_now_ns();
	CHECK(vb_cv_wait(&c, t0 + 20000000ull) == ETIMEDOUT);
	pthread_mutex_unlock(&c.base.lock);
	net_conn_fini(&c.base);
	client_fini(&vc);
	return 0;
}

/* A sealed reply to the call of slot si (tag, aux bytes RDMA Written
 * into data), its data tag over want, built by the server's direction. */
static uint32_t sealed_reply(struct net_seal *tx, uint8_t *msg, int si,
			     const uint8_t *want, uint32_t aux)
{
	struct proto_hdr h = { .tag = (1u << 16) | (unsigned)si, .flags = PROTO_F_REPLY,
			       .credits = 1, .aux = aux };
	struct vb_mhdr m = { .kind = VB_K_REP, .fslot = 0xffff };
	uint8_t dtag[VB_SEAL_TAG];
	struct vb_mac mac;

	vb_mac_start(tx, &mac, VB_SEAL_RD, h.tag);
	vb_mac_update(&mac, want, aux);
	vb_mac_final(&mac, dtag);
	proto_hdr_encode(msg, &h);
	vb_mhdr_encode(msg + PROTO_HDR_LEN, &m);
	return vb_seal_put(tx, msg, VB_HDRS, dtag, VB_SEAL_MSG, 0);
}

static int test_reply_seal(void)
{
	static struct vb_client vc;
	static struct vb_cconn c;
	static struct vb_cslot cs[2];
	static uint8_t key[NET_KEY_LEN], cn[32], sn[32];
	uint8_t want[64], data[2][64], msg[2][256];
	struct iovec v[2] = { { data[0], 64 }, { data[1], 64 } };
	struct net_call call[2];
	struct net_call *culprit = NULL;
	struct net_seal tx;
	uint32_t len[2];

	memset(key, 3, sizeof(key));
	memset(cn, 4, sizeof(cn));
	memset(sn, 5, sizeof(sn));
	for (int i = 0; i < 64; i++)
		want[i] = (uint8_t)(i * 7);
	c.vc = &vc;
	c.cs = cs;
	c.ncs = 2;
	c.cr.max = 2;
	net_seal_init(&c.rx, key, NET_AUTH_ROLE_SERVER, NET_SEAL_MAC, cn, sn);
	net_seal_init(&tx, key, NET_AUTH_ROLE_SERVER, NET_SEAL_MAC, cn, sn);
	c.sealed = 1;
	for (int i = 0; i < 2; i++) {
		call[i] = (struct net_call){ .tag = (1u << 16) | (unsigned)i,
					     .rd_iov = &v[i], .rd_cnt = 1 };
		cs[i] = (struct vb_cslot){ .state = VB_CS_SENT, .call = &call[i],
					   .rd_total = 64, .wr_fast = -1, .rd_fast = -1 };
		memcpy(data[i], want, 64); /* as the server's RDMA Write left it */
		len[i] = sealed_reply(&tx, msg[i], i, want, 64);
	}
	data[1][33] ^= 0x04; /* altered on the way */
	CHECK(vb_on_reply(&c, msg[0], len[0], &culprit) == 0);
	CHECK(call[0].rd_bytes == 64 && cs[0].state == VB_CS_FREE && culprit == NULL);
	CHECK(vb_on_reply(&c, msg[1], len[1], &culprit) == -EPROTO && culprit == &call[1]);
	/* the first reply again: its count is spent */
	cs[0] = (struct vb_cslot){ .state = VB_CS_SENT, .call = &call[0], .rd_total = 64,
				   .wr_fast = -1, .rd_fast = -1 };
	culprit = NULL;
	CHECK(vb_on_reply(&c, msg[0], len[0], &culprit) == -EPROTO && culprit == NULL);
	return 0;
}

int main(void)
{
	int fails = 0;

	chan.fd = eventfd(0, EFD_NONBLOCK);
	if (chan.fd < 0)
		return 1;
	stub_ctx = &down_conn;
	fails += test_owners();
	fails += test_lead();
	stub_done = NULL; /* a failed check may leave it set */
	fails += test_cv_wait();
	stub_done = NULL;
	fails += test_connect_leads();
	fails += test_reply_seal();
	close(chan.fd);
	printf("%s\n", fails ? "FAIL" : "ok");
	return fails != 0;
}

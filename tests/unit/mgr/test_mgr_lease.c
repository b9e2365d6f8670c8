/*
 * test_mgr_lease.c - unit tests of the callback channel's session table
 * (mgr/lease/mgr_lease.c): waits parked and answered by an event or their
 * slice, acknowledgements and the events sent again after a lost reply,
 * a mgr that forgot a session, the queue's collapse into a RESET, lease
 * expiry, the session caps, READ and WRITE grants, changes and accesses
 * parked for recalls, and the CB_WAIT codec. No network, no loop:
 * time is passed in and answered waits land in done_cb.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <syslog.h>

#include "log.h"
#include "mgr_lease.h"
#include "check.h"

#define BOOT 0xb007u

/* What done_cb saw: the last answered wait and its events. */
struct seen {
	int calls;
	void *ctx;
	unsigned nev;
	uint64_t boot;
	uint64_t seq[PROTO_CB_MAX_EVENTS];
	uint8_t kind[PROTO_CB_MAX_EVENTS];
	char name0[PROTO_MAX_NAME + 1];
};

/* mgr_lease_done_fn: record the answer (the rep is valid only now). */
static void done_cb(void *ctx, const struct proto_cbrep *rep, void *arg)
{
	struct seen *s = arg;

	s->calls++;
	s->ctx = ctx;
	s->boot = rep->boot;
	s->nev = rep->nev;
	for (unsigned i = 0; i < rep->nev; i++) {
		s->seq[i] = rep->ev[i].seq;
		s->kind[i] = rep->ev[i].kind;
	}
	s->name0[0] = '\0';
	if (rep->nev)
		snprintf(s->name0, sizeof(s->name0), "%.*s",
			 (int)rep->ev[0].name.len, rep->ev[0].name.p);
}

/* What ready_cb saw: the changes let run, in order. */
static void *readied[16];
static int nready;

/* mgr_lease_ready_fn: record the change (or access). */
static void ready_cb(void *ctx, void *arg)
{
	(void)arg;
	if (nready < 16)
		readied[nready++] = ctx;
}

/* A wait of session sess that acknowledges acked, knowing boot. */
static struct proto_cbwait W(uint64_t sess, uint64_t boot, uint64_t acked)
{
	return (struct proto_cbwait){ .session = sess, .boot = boot,
				      .acked = acked, .wait_ms = 5000,
				      .lease_ms = 10000 };
}

static struct proto_cbrep rep; /* large: not on the stack */

/* A new session's first wait: answered at once, empty, with the boot id
 * (so that the mount learns it). @return mgr_lease_wait's result */
static int join(struct mgr_lease *ml, uint64_t sess, const char *host,
		uint64_t now)
{
	struct proto_cbwait q = W(sess, 0, 0);
	int ctx, rc = mgr_lease_wait(ml, &q, host, now, &ctx, &rep);

	CHECK(rc < 0 || (rc == 0 && rep.nev == 0 && rep.boot == BOOT),
	      "a new session is answered at once: %d", rc);
	return rc;
}

/* A wait parks; an event answers it; the next wait acknowledges it. */
static void test_park_and_post(void)
{
	struct mgr_lease *ml;
	struct seen seen = { 0 };
	struct proto_cbwait q = W(7, BOOT, 0);
	size_t ns, np, nq;
	uint64_t acked = 99;
	int ctx1, ctx2;

	CHECK(mgr_lease_new(&ml, BOOT, done_cb, ready_cb, &seen) == 0, "new");
	CHECK(join(ml, 7, "h1", 0) == 0, "joined");
	CHECK(mgr_lease_wait(ml, &q, "h1", 0, &ctx1, &rep) == 1, "parked");
	mgr_lease_counts(ml, &ns, &np, &nq);
	CHECK(ns == 1 && np == 1 && nq == 0, "%zu %zu %zu", ns, np, nq);
	CHECK(mgr_lease_post(ml, 7, PROTO_CB_INVAL_ENTRY, 5, "abc", 3) == 1,
	      "first event is 1");
	CHECK(seen.calls == 1 && seen.ctx == &ctx1 && seen.nev == 1 &&
	      seen.boot == BOOT && seen.seq[0] == 1 &&
	      seen.kind[0] == PROTO_CB_INVAL_ENTRY &&
	      strcmp(seen.name0, "abc") == 0, "answered with it");
	CHECK(mgr_lease_acked(ml, 7, &acked) && acked == 0, "not acked yet");
	/* the reply is lost: the next wait acks nothing and gets it again */
	q = W(7, BOOT, 0);
	CHECK(mgr_lease_wait(ml, &q, "h1", 10, &ctx2, &rep) == 0 &&
	      rep.nev == 1 && rep.ev[0].seq == 1, "sent again");
	q = W(7, BOOT, 1);
	CHECK(mgr_lease_wait(ml, &q, "h1", 20, &ctx2, &rep) == 1, "acked: parks");
	CHECK(mgr_lease_acked(ml, 7, &acked) && acked == 1, "acked 1");
	mgr_lease_counts(ml, &ns, &np, &nq);
	CHECK(nq == 0, "acked event freed: %zu", nq);
	/* an ack past what was sent is refused */
	q = W(7, BOOT, 2);
	CHECK(mgr_lease_wait(ml, &q, "h1", 30, &ctx1, &rep) == -EBADMSG,
	      "ack beyond the last sent");
	CHECK(mgr_lease_post(ml, 8, PROTO_CB_RECALL, 5, NULL, 0) == -ENOENT,
	      "no such session");
	CHECK(mgr_lease_post(ml, 7, PROTO_CB_INVAL_ENTRY, 5, NULL, 0) == -EINVAL,
	      "INVAL_ENTRY needs a name");
	CHECK(mgr_lease_post(ml, 7, PROTO_CB_RECALL, 5, "x", 1) == -EINVAL,
	      "RECALL has none");
	CHECK(mgr_lease_post(ml, 7, 9, 5, NULL, 0) == -EINVAL, "bad kind");
	CHECK(mgr_lease_post(ml, 7, PROTO_CB_RECALL, 0, NULL, 0) == -EINVAL,
	      "ino 0");
	seen.calls = 0;
	mgr_lease_free(ml);
	CHECK(seen.calls == 1 && seen.ctx == &ctx2, "free answers the parked wait");
}

/* A slice ends empty; a second wait answers the first; a silent session
 * is forgotten after its lease, and one that comes back gets a RESET. */
static void test_slices_and_expiry(void)
{
	struct mgr_lease *ml;
	struct seen seen = { 0 };
	struct proto_cbwait q = W(9, BOOT, 0);
	size_t ns, np, nq;
	int a, b;

	CHECK(mgr_lease_new(&ml, BOOT, done_cb, ready_cb, &seen) == 0, "new");
	CHECK(join(ml, 9, NULL, 1000) == 0, "joined");
	CHECK(mgr_lease_wait(ml, &q, NULL, 1000, &a, &rep) == 1, "parked");
	mgr_lease_tick(ml, 5999);
	CHECK(seen.calls == 0, "not before its slice");
	mgr_lease_tick(ml, 6000);
	CHECK(seen.calls == 1 && seen.ctx == &a && seen.nev == 0, "slice ends");
	q = W(9, BOOT, 0);
	CHECK(mgr_lease_wait(ml, &q, NULL, 6000, &a, &rep) == 1, "parked again");
	CHECK(mgr_lease_wait(ml, &q, NULL, 6001, &b, &rep) == 1, "and again");
	CHECK(seen.calls == 2 && seen.ctx == &a, "the older wait answered");
	mgr_lease_tick(ml, 11001);
	CHECK(seen.calls == 3 && seen.ctx == &b, "slice");
	/* silent from 11001: alive at +lease, gone after */
	mgr_lease_tick(ml, 21001);
	mgr_lease_counts(ml, &ns, &np, &nq);
	CHECK(ns == 1, "still known at its lease");
	mgr_lease_post(ml, 9, PROTO_CB_INVAL_INODE, 3, NULL, 0);
	mgr_lease_tick(ml, 21002);
	mgr_lease_counts(ml, &ns, &np, &nq);
	CHECK(ns == 0 && nq == 0, "forgotten with its events: %zu %zu", ns, nq);
	/* it comes back knowing this boot: it missed events */
	q = W(9, BOOT, 1);
	CHECK(mgr_lease_wait(ml, &q, NULL, 30000, &a, &rep) == 0 &&
	      rep.nev == 1 && rep.ev[0].kind == PROTO_CB_RESET &&
	      rep.ev[0].seq == 1, "a RESET first");
	/* a session from another boot starts clean, and its ack is ignored */
	q = W(10, 0x1234, 77);
	CHECK(mgr_lease_wait(ml, &q, NULL, 30000, &b, &rep) == 0 &&
	      rep.nev == 0 && rep.boot == BOOT, "another boot: no RESET");
	mgr_lease_free(ml);
}

/* Past MGR_LEASE_MAX_QUEUED events the queue collapses into one RESET,
 * whose seq is above every dropped one; a reply carries at most
 * PROTO_CB_MAX_EVENTS. */
static void test_collapse(void)
{
	struct mgr_lease *ml;
	struct seen seen = { 0 };
	struct proto_cbwait q = W(11, BOOT, 0);
	int64_t seq = 0, reset;
	uint64_t acked;
	int a;

	CHECK(mgr_lease_new(&ml, BOOT, done_cb, ready_cb, &seen) == 0, "new");
	CHECK(join(ml, 11, NULL, 0) == 0, "joined");
	CHECK(mgr_lease_wait(ml, &q, NULL, 0, &a, &rep) == 1, "parked");
	CHECK(mgr_lease_post(ml, 11, PROTO_CB_RECALL, 2, NULL, 0) == 1, "1");
	CHECK(seen.calls == 1, "answered");
	for (unsigned i = 1; i < MGR_LEASE_MAX_QUEUED; i++)
		seq = mgr_lease_post(ml, 11, PROTO_CB_RECALL, 2, NULL, 0);
	CHECK(seq == MGR_LEASE_MAX_QUEUED, "%lld", (long long)seq);
	q = W(11, BOOT, 0);
	CHECK(mgr_lease_wait(ml, &q, NULL, 1, &a, &rep) == 0 &&
	      rep.nev == PROTO_CB_MAX_EVENTS &&
	      rep.ev[PROTO_CB_MAX_EVENTS - 1].seq == PROTO_CB_MAX_EVENTS,
	      "one reply's worth");
	reset = mgr_lease_post(ml, 11, PROTO_CB_RECALL, 2, NULL, 0);
	CHECK(reset == MGR_LEASE_MAX_QUEUED + 1, "%lld", (long long)reset);
	q = W(11, BOOT, PROTO_CB_MAX_EVENTS);
	CHECK(mgr_lease_wait(ml, &q, NULL, 2, &a, &rep) == 0 && rep.nev == 1 &&
	      rep.ev[0].kind == PROTO_CB_RESET && rep.ev[0].seq == (uint64_t)reset,
	      "collapsed into a RESET");
	CHECK(mgr_lease_acked(ml, 11, &acked) && acked == PROTO_CB_MAX_EVENTS,
	      "a collapse acknowledges nothing: %llu", (unsigned long long)acked);
	mgr_lease_free(ml);
}

/* The table's and a host's session caps refuse a new session with
 * -EUSERS, and a forgotten session frees its place. */
static void test_caps(void)
{
	struct mgr_lease *ml;
	struct seen seen = { 0 };
	struct proto_cbwait q;
	size_t ns, np, nq;
	int a, rc = 0;

	CHECK(mgr_lease_new(&ml, BOOT, done_cb, ready_cb, &seen) == 0, "new");
	for (unsigned i = 0; i < MGR_LEASE_MAX_CLIENT_SESSIONS && rc == 0; i++) {
		rc = join(ml, 100 + i, "hostA", 0);
		q = W(100 + i, BOOT, 0);
		if (rc == 0)
			rc = mgr_lease_wait(ml, &q, "hostA", 0, &a, &rep) == 1 ? 0 : -1;
	}
	CHECK(rc == 0, "a host's share");
	q = W(99, 0, 0);
	CHECK(mgr_lease_wait(ml, &q, "hostA", 0, &a, &rep) == -EUSERS,
	      "past a host's share");
	CHECK(join(ml, 99, "hostB", 0) == 0, "another host");
	mgr_lease_tick(ml, 5000);  /* every slice ends */
	mgr_lease_tick(ml, 15001); /* every lease */
	mgr_lease_counts(ml, &ns, &np, &nq);
	CHECK(ns == 0 && np == 0, "all forgotten: %zu", ns);
	CHECK(join(ml, 98, "hostA", 15001) == 0, "room again");
	mgr_lease_free(ml);
	CHECK(mgr_lease_new(&ml, 0, done_cb, ready_cb, &seen) == -EINVAL, "boot 0");
}

/* The CB_WAIT bodies round-trip and refuse what is malformed, naming it. */
static void test_codec(void)
{
	struct proto_cbwait q = W(1, 2, 3), q2;
	struct proto_cbrep *r = calloc(1, sizeof(*r)), *r2 = calloc(1, sizeof(*r2));
	uint8_t buf[PROTO_MAX_BODY];
	const char *why = NULL;
	struct wbuf w;

	wb_init(&w, buf, sizeof(buf));
	CHECK(proto_cbwait_encode(&w, &q) == 0, "encode");
	CHECK(proto_cbwait_decode(buf, w.len, &q2, &why) == 0 &&
	      memcmp(&q, &q2, sizeof(q)) == 0, "round trip");
	CHECK(proto_cbwait_decode(buf, w.len - 1, &q2, &why) == -EBADMSG, "short");
	buf[0] = buf[1] = buf[2] = buf[3] = buf[4] = buf[5] = buf[6] = buf[7] = 0;
	CHECK(proto_cbwait_decode(buf, w.len, &q2, &why) == -EBADMSG &&
	      strcmp(why, "session") == 0, "session 0: %s", why);
	q.wait_ms = 0;
	wb_init(&w, buf, sizeof(buf));
	CHECK(proto_cbwait_encode(&w, &q) == -EINVAL, "wait_ms 0");

	r->boot = 5;
	r->nev = 2;
	r->ev[0] = (struct proto_cbev){ .seq = 4, .ino = 9,
					.kind = PROTO_CB_INVAL_ENTRY,
					.name = { "a", 1 } };
	r->ev[1] = (struct proto_cbev){ .seq = 6, .ino = 9,
					.kind = PROTO_CB_RECALL,
					.name = { "", 0 } };
	wb_init(&w, buf, sizeof(buf));
	CHECK(proto_cbrep_encode(&w, r) == 0, "encode rep");
	CHECK(proto_cbrep_decode(buf, w.len, r2, &why) == 0 && r2->nev == 2 &&
	      r2->ev[1].seq == 6 && r2->ev[0].name.len == 1 &&
	      r2->ev[0].name.p[0] == 'a', "rep round trip");
	CHECK(proto_cbrep_decode(buf, w.len + 1, r2, &why) == -EBADMSG &&
	      strcmp(why, "trailing bytes") == 0, "trailing: %s", why);
	r->ev[1].seq = 4;
	wb_init(&w, buf, sizeof(buf));
	CHECK(proto_cbrep_encode(&w, r) == -EINVAL, "seq must increase");
	r->ev[1].seq = 6;
	r->ev[0].name = (struct proto_str){ "a/b", 3 };
	wb_init(&w, buf, sizeof(buf));
	CHECK(proto_cbrep_encode(&w, r) == -EINVAL, "bad name");
	r->ev[0].name = (struct proto_str){ "a", 1 };
	r->ev[1].kind = 0;
	wb_init(&w, buf, sizeof(buf));
	CHECK(proto_cbrep_encode(&w, r) == -EINVAL, "bad kind");
	/* a decoder fed a bad kind names it */
	r->ev[1].kind = PROTO_CB_RECALL;
	wb_init(&w, buf, sizeof(buf));
	CHECK(proto_cbrep_encode(&w, r) == 0, "encode again");
	buf[w.len - 3] = 7; /* the last event's kind (then a u16 name length) */
	CHECK(proto_cbrep_decode(buf, w.len, r2, &why) == -EBADMSG &&
	      strcmp(why, "event kind") == 0, "bad kind: %s", why);
	free(r);
	free(r2);
}

/* A request's session and a reply's grant round-trip; a session 0 and a
 * grant on an op that carries none are refused; a reply without a grant
 * decodes as before (ino 0). */
static void test_session_and_grant(void)
{
	struct proto_mreq m = { .cred = { .uid = 1, .gid = 2, .ngroups = 1,
					  .groups = { 3 }, .session = 0xabc },
				.parent = 1, .name = { "n", 1 } }, m2;
	struct proto_mrep p = { .grant = { 7, 9 } }, p2;
	uint8_t buf[1024];
	const char *why = NULL;
	struct wbuf w;
	size_t len;

	wb_init(&w, buf, sizeof(buf));
	CHECK(proto_mreq_encode(&w, PROTO_OP_LOOKUP, &m) == 0, "encode");
	CHECK(proto_mreq_decode(buf, w.len, PROTO_OP_LOOKUP, &m2, &why) == 0 &&
	      m2.cred.session == 0xabc && m2.cred.ngroups == 1 &&
	      m2.cred.groups[0] == 3, "session round trip: %s", why);
	memset(buf + 10 + 4, 0, 8); /* the session (after uid, gid, n, group) */
	CHECK(proto_mreq_decode(buf, w.len, PROTO_OP_LOOKUP, &m2, &why) == -EBADMSG &&
	      strcmp(why, "cred.session") == 0, "session 0: %s", why);
	m.cred.session = 0;
	wb_init(&w, buf, sizeof(buf));
	CHECK(proto_mreq_encode(&w, PROTO_OP_LOOKUP, &m) == 0 && w.len == 10 + 4 + 8 + 3,
	      "no session: no bytes (%zu)", w.len);

	p.attr.ino = 7;
	p.attr.nlink = 1;
	p.attr.mode = 040755;
	wb_init(&w, buf, sizeof(buf));
	CHECK(proto_mrep_encode(&w, PROTO_OP_LOOKUP, &p) == 0, "encode grant");
	len = w.len;
	CHECK(proto_mrep_decode(buf, len, PROTO_OP_LOOKUP, &p2, &why) == 0 &&
	      p2.grant.ino == 7 && p2.grant.evseq == 9, "grant: %s", why);
	CHECK(proto_mrep_decode(buf, len - 16, PROTO_OP_LOOKUP, &p2, &why) == 0 &&
	      p2.grant.ino == 0, "none");
	CHECK(proto_mrep_decode(buf, len - 8, PROTO_OP_LOOKUP, &p2, &why) == -EBADMSG,
	      "half a grant: %s", why);
	wb_init(&w, buf, sizeof(buf));
	CHECK(proto_mrep_encode(&w, PROTO_OP_GETATTR, &p) == -EINVAL,
	      "GETATTR carries no grant");
}

/* Grants and changes: a change recalls the other holders' leases (an
 * INVAL_ENTRY and a RECALL each) and waits for their acks (not the
 * origin's); grants are refused while it waits or runs and for a back-off
 * after it; a grant carries the holder's event number; a forgotten holder
 * is not waited for. */
static void test_changes(void)
{
	struct mgr_lease *ml;
	struct seen seen = { 0 };
	struct proto_cbwait q;
	struct mgr_lease_name nm = { .dir = 50, .name = "f", .len = 1 };
	struct mgr_lease_name two[2] = { { 50, "a", 1 }, { 60, "b", 1 } };
	uint64_t ev = 99, t = 5; /* a monotonic clock is never 0 */
	size_t no, np;
	int wa, wb, c1, c2, c3;

	CHECK(mgr_lease_new(&ml, BOOT, done_cb, ready_cb, &seen) == 0, "new");
	CHECK(mgr_lease_grant(ml, 1, 50, t, &ev) == 0, "no channel: no grant");
	CHECK(join(ml, 1, NULL, t) == 0 && join(ml, 2, NULL, t) == 0, "joined");
	q = W(1, BOOT, 0);
	CHECK(mgr_lease_wait(ml, &q, NULL, t, &wa, &rep) == 1, "A parked");
	q = W(2, BOOT, 0);
	CHECK(mgr_lease_wait(ml, &q, NULL, t, &wb, &rep) == 1, "B parked");
	CHECK(mgr_lease_grant(ml, 1, 50, t, &ev) == 1 && ev == 0, "A granted");
	CHECK(mgr_lease_grant(ml, 2, 50, t, &ev) == 1 && ev == 0, "B granted");
	/* A changes dir 50: B must drop the name and the lease, A need not */
	nready = 0;
	CHECK(mgr_lease_change(ml, 1, &nm, 1, t, &c1) == 1, "parked for B");
	CHECK(seen.calls == 1 && seen.ctx == &wb && seen.nev == 2 &&
	      seen.kind[0] == PROTO_CB_INVAL_ENTRY && strcmp(seen.name0, "f") == 0 &&
	      seen.kind[1] == PROTO_CB_RECALL && seen.seq[1] == 2,
	      "B told (name, then recall), A not");
	CHECK(mgr_lease_grant(ml, 2, 50, t, &ev) == 0, "no grant while it waits");
	CHECK(mgr_lease_grant(ml, 2, 51, t, &ev) == 1 && ev == 2,
	      "another dir: granted, after event 2");
	q = W(2, BOOT, 1);
	CHECK(mgr_lease_wait(ml, &q, NULL, t + 1, &wb, &rep) == 0 && rep.nev == 1 &&
	      rep.ev[0].kind == PROTO_CB_RECALL, "acked the name only: the recall again");
	CHECK(nready == 0, "not yet");
	q = W(2, BOOT, 2);
	CHECK(mgr_lease_wait(ml, &q, NULL, t + 2, &wb, &rep) == 1, "B acks both");
	CHECK(nready == 1 && readied[0] == &c1, "the change may run");
	CHECK(mgr_lease_grant(ml, 1, 50, t + 2, &ev) == 0, "no grant while it runs");
	mgr_lease_done(ml, &nm, 1, t + 3);
	CHECK(mgr_lease_grant(ml, 1, 50, t + 3, &ev) == 0, "nor in the back-off");
	t += MGR_LEASE_BACKOFF_MIN_MS; /* the back-off is over */
	CHECK(mgr_lease_grant(ml, 1, 50, t, &ev) == 1, "A again");
	CHECK(mgr_lease_change(ml, 1, &nm, 1, t, &c1) == 0,
	      "B holds no lease any more: A's change runs at once");
	mgr_lease_done(ml, &nm, 1, t);
	/* a recall soon after the last doubles the back-off */
	q = W(2, BOOT, 2);
	CHECK(mgr_lease_wait(ml, &q, NULL, t, &wb, &rep) == 1, "B parked again");
	CHECK(mgr_lease_grant(ml, 2, 50, t, &ev) == 1, "B granted again");
	CHECK(mgr_lease_change(ml, 1, &nm, 1, t, &c1) == 1, "recalled again");
	q = W(2, BOOT, 4);
	nready = 0;
	CHECK(mgr_lease_wait(ml, &q, NULL, t, &wb, &rep) == 1 && nready == 1, "acked");
	mgr_lease_done(ml, &nm, 1, t);
	CHECK(mgr_lease_grant(ml, 2, 50, t + MGR_LEASE_BACKOFF_MIN_MS, &ev) == 0,
	      "still in the doubled back-off");
	t += 2 * MGR_LEASE_BACKOFF_MIN_MS;
	CHECK(mgr_lease_grant(ml, 2, 50, t, &ev) == 1, "over");
	/* nobody else holds 60: a change there runs at once */
	CHECK(mgr_lease_change(ml, 2, &two[1], 1, t, &c2) == 0, "runs now");
	mgr_lease_done(ml, &two[1], 1, t);
	/* a rename over both dirs waits for A (holder of 50); a change B
	 * must acknowledge runs when B is forgotten */
	CHECK(mgr_lease_grant(ml, 1, 50, t, &ev) == 1, "A holds 50");
	CHECK(mgr_lease_grant(ml, 2, 60, t, &ev) == 1, "B holds 60");
	nready = 0;
	CHECK(mgr_lease_change(ml, 2, two, 2, t, &c2) == 1, "waits for A");
	CHECK(mgr_lease_change(ml, 1, &two[1], 1, t, &c3) == 1, "waits for B");
	mgr_lease_object_counts(ml, &no, &np);
	CHECK(np == 2, "two parked: %zu", np);
	q = W(1, BOOT, 2);
	CHECK(mgr_lease_wait(ml, &q, NULL, t, &wa, &rep) == 1, "A acks");
	CHECK(nready == 1 && readied[0] == &c2, "the rename runs");
	/* B's wait was answered by c3's recall at t and it sends no other:
	 * alive at t + 6001, forgotten past its lease (10 s) */
	mgr_lease_tick(ml, t + 6001);
	CHECK(nready == 1, "B still known");
	mgr_lease_tick(ml, t + 10001);
	CHECK(nready == 2 && readied[1] == &c3, "B forgotten: c3 runs");
	mgr_lease_done(ml, two, 2, t + 10001);
	mgr_lease_done(ml, &two[1], 1, t + 10001);
	t += 10001 + MGR_LEASE_BACKOFF_MAX_MS;
	CHECK(mgr_lease_grant(ml, 1, 60, t, &ev) == 1, "grants again");
	mgr_lease_free(ml);
}

/* A holder recalled and not acknowledged yet holds up every later change
 * of the directory too, not only the one that recalled it; a goodbye
 * (PROTO_CBW_BYE) forgets the session at once and lets them all run. */
static void test_pending_recall_and_bye(void)
{
	struct mgr_lease *ml;
	struct seen seen = { 0 };
	struct mgr_lease_name n1 = { 70, "x", 1 }, n2 = { 70, "y", 1 };
	struct proto_cbwait q;
	uint64_t ev, t = 5;
	int wb, c1, c2;

	CHECK(mgr_lease_new(&ml, BOOT, done_cb, ready_cb, &seen) == 0, "new");
	CHECK(join(ml, 1, NULL, t) == 0 && join(ml, 2, NULL, t) == 0, "joined");
	CHECK(mgr_lease_grant(ml, 2, 70, t, &ev) == 1, "B holds 70");
	nready = 0;
	CHECK(mgr_lease_change(ml, 1, &n1, 1, t, &c1) == 1, "x waits for B");
	mgr_lease_done(ml, &n1, 1, t); /* (as if it had run: only to test c2) */
	CHECK(mgr_lease_change(ml, 1, &n2, 1, t, &c2) == 1,
	      "y waits for B's pending recall too");
	CHECK(mgr_lease_grant(ml, 2, 70, t + 5000, &ev) == 0,
	      "no grant to B before it acknowledged");
	q = W(2, BOOT, 0);
	q.flags = PROTO_CBW_BYE;
	CHECK(mgr_lease_wait(ml, &q, NULL, t, &wb, &rep) == 0 && rep.nev == 0,
	      "goodbye answered at once");
	CHECK(nready == 2 && readied[0] == &c1 && readied[1] == &c2,
	      "both run once B is gone");
	CHECK(mgr_lease_acked(ml, 2, &ev) == 0, "B forgotten");
	q.flags = 2;
	{
		uint8_t buf[64];
		struct wbuf w;

		wb_init(&w, buf, sizeof(buf));
		CHECK(proto_cbwait_encode(&w, &q) == -EINVAL, "unknown flag");
	}
	mgr_lease_done(ml, &n2, 1, t);
	mgr_lease_free(ml);
}

/* A directory's holders grow past the first few and stop at
 * MGR_LEASE_MAX_HOLDERS; a change waits for every one of them. */
static void test_many_holders(void)
{
	struct mgr_lease *ml;
	struct seen seen = { 0 };
	struct mgr_lease_name nm = { 80, "z", 1 };
	uint64_t ev, t = 5, n = MGR_LEASE_MAX_HOLDERS + 2;
	size_t ns, np, nq;
	int granted = 0, c;

	CHECK(mgr_lease_new(&ml, BOOT, done_cb, ready_cb, &seen) == 0, "new");
	for (uint64_t i = 1; i <= n; i++) {
		CHECK(join(ml, 100 + i, NULL, t) == 0, "joined");
		granted += mgr_lease_grant(ml, 100 + i, 80, t, &ev);
	}
	CHECK(granted == MGR_LEASE_MAX_HOLDERS, "%d granted", granted);
	nready = 0;
	CHECK(mgr_lease_change(ml, 100 + n, &nm, 1, t, &c) == 1, "parked");
	mgr_lease_counts(ml, &ns, &np, &nq);
	CHECK(nq == 2 * MGR_LEASE_MAX_HOLDERS, "every holder told: %zu events", nq);
	mgr_lease_tick(ml, t + 20000); /* all silent: forgotten */
	CHECK(nready == 1 && readied[0] == &c, "then it runs");
	mgr_lease_done(ml, &nm, 1, t + 20000);
	mgr_lease_free(ml);
}

/* Session sess's events so far are sent (a wait acking nothing answers at
 * once with them), then acknowledged up to acked; the second wait parks
 * (ctx). */
static void ack_all(struct mgr_lease *ml, uint64_t sess, uint64_t acked,
		    uint64_t now, int *ctx)
{
	struct proto_cbwait q = W(sess, BOOT, 0);

	CHECK(mgr_lease_wait(ml, &q, NULL, now, ctx, &rep) == 0 &&
	      rep.nev > 0 && rep.ev[rep.nev - 1].seq == acked,
	      "session %llu has its events up to %llu",
	      (unsigned long long)sess, (unsigned long long)acked);
	q = W(sess, BOOT, acked);
	CHECK(mgr_lease_wait(ml, &q, NULL, now, ctx, &rep) == 1,
	      "session %llu acks %llu", (unsigned long long)sess,
	      (unsigned long long)acked);
}

/* WRITE grants: only to a session alone on the directory (a READ holder,
 * another writer, a holder being recalled refuse it), upgrading its own
 * READ lease; not while a change waits or runs, nor in the back-off;
 * none to a session the table does not know. READ grants are refused to
 * others while a WRITE lease is held, and a writer asking READ keeps its
 * WRITE lease. */
static void test_write_grants(void)
{
	struct mgr_lease *ml;
	struct seen seen = { 0 };
	struct mgr_lease_name n92 = { 92, "f", 1 }, n93 = { 93, "g", 1 },
			      n94 = { 94, "h", 1 };
	uint64_t ev = 99, t = 5, g0, g1;
	int c, wb;

	CHECK(mgr_lease_new(&ml, BOOT, done_cb, ready_cb, &seen) == 0, "new");
	CHECK(mgr_lease_grant_write(ml, 1, 90, t, &ev) == 0,
	      "no channel: no WRITE grant");
	CHECK(join(ml, 1, NULL, t) == 0 && join(ml, 2, NULL, t) == 0 &&
	      join(ml, 3, NULL, t) == 0, "joined");
	CHECK(mgr_lease_grant(ml, 2, 90, t, &ev) == 1, "B reads 90");
	CHECK(mgr_lease_grant_write(ml, 1, 90, t, &ev) == 0,
	      "no WRITE for A beside B's READ");
	CHECK(mgr_lease_writer(ml, 90) == 0, "no writer");
	mgr_lease_totals(ml, &g0, &ev);
	CHECK(mgr_lease_grant_write(ml, 2, 90, t, &ev) == 1 && ev == 0,
	      "B alone: its READ becomes WRITE");
	mgr_lease_totals(ml, &g1, &ev);
	CHECK(g1 == g0 + 1, "a grant counted");
	CHECK(mgr_lease_writer(ml, 90) == 2, "B writes 90");
	CHECK(mgr_lease_grant(ml, 1, 90, t, &ev) == 0, "no READ for A beside it");
	CHECK(mgr_lease_grant_write(ml, 1, 90, t, &ev) == 0, "nor WRITE");
	CHECK(mgr_lease_grant(ml, 2, 90, t, &ev) == 1 &&
	      mgr_lease_writer(ml, 90) == 2, "B asking READ keeps WRITE");
	CHECK(mgr_lease_grant_write(ml, 1, 91, t, &ev) == 1 &&
	      mgr_lease_writer(ml, 91) == 1, "A alone on a new dir");
	CHECK(mgr_lease_grant_write(ml, 3, 91, t, &ev) == 0, "not C too");
	/* a change waiting or running refuses it */
	CHECK(mgr_lease_change(ml, 1, &n92, 1, t, &c) == 0, "a change of 92 runs");
	CHECK(mgr_lease_grant_write(ml, 1, 92, t, &ev) == 0, "no WRITE while it runs");
	mgr_lease_done(ml, &n92, 1, t);
	CHECK(mgr_lease_grant_write(ml, 1, 92, t, &ev) == 1, "after it");
	/* the back-off after a recall refuses it */
	CHECK(mgr_lease_grant(ml, 2, 93, t, &ev) == 1, "B reads 93");
	nready = 0;
	CHECK(mgr_lease_change(ml, 1, &n93, 1, t, &c) == 1, "A's change recalls B");
	ack_all(ml, 2, 2, t, &wb);
	CHECK(nready == 1, "it runs");
	mgr_lease_done(ml, &n93, 1, t);
	CHECK(mgr_lease_grant_write(ml, 1, 93, t + 1, &ev) == 0, "not in the back-off");
	CHECK(mgr_lease_grant_write(ml, 1, 93, t + MGR_LEASE_BACKOFF_MIN_MS, &ev) == 1,
	      "after it");
	/* a holder being recalled refuses it after the back-off too */
	CHECK(mgr_lease_grant(ml, 2, 94, t, &ev) == 1, "B reads 94");
	nready = 0;
	CHECK(mgr_lease_change(ml, 3, &n94, 1, t, &c) == 1, "C's change recalls B");
	mgr_lease_done(ml, &n94, 1, t); /* (as if it had run) */
	t += MGR_LEASE_BACKOFF_MIN_MS;
	CHECK(mgr_lease_grant_write(ml, 1, 94, t, &ev) == 0,
	      "B has not acknowledged: no WRITE for A");
	ack_all(ml, 2, 4, t, &wb);
	CHECK(nready == 1, "C's change ran");
	CHECK(mgr_lease_grant_write(ml, 1, 94, t, &ev) == 1 && ev == 0,
	      "B acknowledged: A writes 94");
	mgr_lease_free(ml);
}

/* An access by another session (or none) recalls the writer with a RECALL
 * alone and parks until it acknowledges; a second access parks too
 * without a second RECALL; the writer's own accesses and changes run at
 * once though its recall is pending; READ holders are left alone. */
static void test_access(void)
{
	struct mgr_lease *ml;
	struct seen seen = { 0 };
	struct mgr_lease_name nm = { 100, "n", 1 };
	uint64_t ev, t = 5, r0, r1, in[5] = { 100, 0, 555, 0, 0 };
	size_t ns, np, nq, no, npk;
	int wa, wc, x1, x2, x3;

	CHECK(mgr_lease_new(&ml, BOOT, done_cb, ready_cb, &seen) == 0, "new");
	CHECK(join(ml, 1, NULL, t) == 0 && join(ml, 2, NULL, t) == 0 &&
	      join(ml, 3, NULL, t) == 0, "joined");
	CHECK(mgr_lease_grant_write(ml, 1, 100, t, &ev) == 1, "A writes 100");
	CHECK(mgr_lease_grant(ml, 3, 101, t, &ev) == 1, "C reads 101");
	{
		struct proto_cbwait q = W(1, BOOT, 0);

		CHECK(mgr_lease_wait(ml, &q, NULL, t, &wa, &rep) == 1, "A parked");
		q = W(3, BOOT, 0);
		CHECK(mgr_lease_wait(ml, &q, NULL, t, &wc, &rep) == 1, "C parked");
	}
	CHECK(mgr_lease_access(ml, 2, in, 5, t, &x1) == -EINVAL, "5 inos");
	CHECK(mgr_lease_access(ml, 2, &in[1], 3, t, &x1) == 0,
	      "nobody writes 0, 555: runs");
	CHECK(mgr_lease_access(ml, 2, (uint64_t[]){ 101 }, 1, t, &x1) == 0 &&
	      seen.calls == 0, "C's READ lease untouched");
	mgr_lease_totals(ml, &ev, &r0);
	nready = 0;
	CHECK(mgr_lease_access(ml, 0, in, 3, t, &x1) == 1, "no session: parked");
	CHECK(seen.calls == 1 && seen.ctx == &wa && seen.nev == 1 &&
	      seen.kind[0] == PROTO_CB_RECALL && seen.seq[0] == 1,
	      "A recalled: a RECALL, no INVAL_ENTRY");
	mgr_lease_totals(ml, &ev, &r1);
	CHECK(r1 == r0 + 1, "a recall counted");
	CHECK(mgr_lease_writer(ml, 100) == 1, "A writes until it acknowledges");
	CHECK(mgr_lease_access(ml, 2, in, 1, t, &x2) == 1, "B parked too");
	mgr_lease_counts(ml, &ns, &np, &nq);
	mgr_lease_totals(ml, &ev, &r1);
	CHECK(nq == 1 && seen.calls == 1 && r1 == r0 + 1, "no second RECALL");
	mgr_lease_object_counts(ml, &no, &npk);
	CHECK(npk == 2, "two accesses parked: %zu", npk);
	CHECK(mgr_lease_access(ml, 1, in, 1, t, &x3) == 0, "A's own access runs");
	CHECK(mgr_lease_change(ml, 1, &nm, 1, t, &x3) == 0,
	      "A's own change runs, its recall pending");
	mgr_lease_done(ml, &nm, 1, t);
	CHECK(mgr_lease_grant(ml, 2, 100, t + MGR_LEASE_BACKOFF_MIN_MS, &ev) == 0,
	      "no READ for B before A acknowledged");
	CHECK(nready == 0, "none ran");
	{
		struct proto_cbwait q = W(1, BOOT, 1);

		CHECK(mgr_lease_wait(ml, &q, NULL, t + 2, &wa, &rep) == 1, "A acks");
	}
	CHECK(nready == 2 && readied[0] == &x1 && readied[1] == &x2,
	      "both run, in order");
	CHECK(mgr_lease_writer(ml, 100) == 0, "A's WRITE lease is gone");
	CHECK(mgr_lease_access(ml, 2, in, 1, t + 2, &x1) == 0, "B's next runs");
	CHECK(mgr_lease_grant(ml, 2, 100, t + 3, &ev) == 1,
	      "B reads 100 at once: an access starts no back-off (the writer "
	      "cannot take it back, so nothing ping-pongs)");
	mgr_lease_free(ml);
}

/* A change by another session recalls the writer as it recalls readers
 * (INVAL_ENTRY, RECALL) and runs once it acknowledged. */
static void test_change_recalls_writer(void)
{
	struct mgr_lease *ml;
	struct seen seen = { 0 };
	struct mgr_lease_name nm = { 110, "m", 1 };
	struct proto_cbwait q = W(1, BOOT, 0);
	uint64_t ev, t = 5;
	int wa, c;

	CHECK(mgr_lease_new(&ml, BOOT, done_cb, ready_cb, &seen) == 0, "new");
	CHECK(join(ml, 1, NULL, t) == 0 && join(ml, 2, NULL, t) == 0, "joined");
	CHECK(mgr_lease_grant_write(ml, 1, 110, t, &ev) == 1, "A writes 110");
	CHECK(mgr_lease_wait(ml, &q, NULL, t, &wa, &rep) == 1, "A parked");
	nready = 0;
	CHECK(mgr_lease_change(ml, 2, &nm, 1, t, &c) == 1, "B's change parks");
	CHECK(seen.calls == 1 && seen.nev == 2 &&
	      seen.kind[0] == PROTO_CB_INVAL_ENTRY && strcmp(seen.name0, "m") == 0 &&
	      seen.kind[1] == PROTO_CB_RECALL, "A told the name and recalled");
	q = W(1, BOOT, 2);
	CHECK(mgr_lease_wait(ml, &q, NULL, t, &wa, &rep) == 1 && nready == 1 &&
	      readied[0] == &c, "A acks: it runs");
	CHECK(mgr_lease_writer(ml, 110) == 0, "A writes no more");
	mgr_lease_done(ml, &nm, 1, t);
	mgr_lease_free(ml);
}

/* A writer silent past its lease is forgotten: the accesses parked for it
 * run, and back under the same id it holds nothing; a writer's goodbye
 * does the same at once. */
static void test_writer_expires(void)
{
	struct mgr_lease *ml;
	struct seen seen = { 0 };
	struct proto_cbwait q;
	uint64_t ev, t = 5, in[1] = { 120 }, in2[1] = { 121 };
	int x1, x2, w;

	CHECK(mgr_lease_new(&ml, BOOT, done_cb, ready_cb, &seen) == 0, "new");
	CHECK(join(ml, 1, NULL, t) == 0 && join(ml, 2, NULL, t) == 0 &&
	      join(ml, 3, NULL, t) == 0, "joined");
	CHECK(mgr_lease_grant_write(ml, 1, 120, t, &ev) == 1, "A writes 120");
	CHECK(mgr_lease_grant_write(ml, 3, 121, t, &ev) == 1, "C writes 121");
	nready = 0;
	CHECK(mgr_lease_access(ml, 2, in, 1, t, &x1) == 1, "B parked for A");
	CHECK(mgr_lease_access(ml, 2, in2, 1, t, &x2) == 1, "B parked for C");
	q = W(2, BOOT, 0);
	CHECK(mgr_lease_wait(ml, &q, NULL, t + 9000, &w, &rep) == 1, "B alive");
	mgr_lease_tick(ml, t + 6001);
	CHECK(nready == 0, "A still known");
	q = W(3, BOOT, 0);
	q.flags = PROTO_CBW_BYE;
	CHECK(mgr_lease_wait(ml, &q, NULL, t + 6001, &w, &rep) == 0, "C says bye");
	CHECK(nready == 1 && readied[0] == &x2, "C gone: its access runs");
	CHECK(mgr_lease_writer(ml, 121) == 0, "C writes no more");
	mgr_lease_tick(ml, t + 10001);
	CHECK(nready == 2 && readied[1] == &x1, "A forgotten: its access runs");
	CHECK(mgr_lease_writer(ml, 120) == 0, "A writes no more");
	q = W(1, BOOT, 1);
	CHECK(mgr_lease_wait(ml, &q, NULL, t + 10002, &w, &rep) == 0 &&
	      rep.nev == 1 && rep.ev[0].kind == PROTO_CB_RESET, "A back: a RESET");
	CHECK(mgr_lease_writer(ml, 120) == 0, "and no WRITE lease");
	CHECK(mgr_lease_access(ml, 2, in, 1, t + 10002, &x1) == 0,
	      "B's access runs at once");
	mgr_lease_free(ml);
}

/* One change of 200 names (150 directories, 50 repeated) that 140
 * sessions hold READ leases on: each is recalled once, the change waits
 * for all (acks past the stack's room) and runs after the last; the
 * directories grant again once mgr_lease_done undid every name. Past
 * MGR_LEASE_MAX_NAMES: -EINVAL. */
static void test_many_names(void)
{
	enum { NNAMES = 200, NDIRS = 150, NSESS = 140 };
	static struct mgr_lease_name names[MGR_LEASE_MAX_NAMES + 1];
	struct mgr_lease *ml;
	struct seen seen = { 0 };
	uint64_t ev, t = 5;
	size_t ns, np, nq;
	int c, w, granted = 0;

	CHECK(mgr_lease_new(&ml, BOOT, done_cb, ready_cb, &seen) == 0, "new");
	for (unsigned i = 0; i <= MGR_LEASE_MAX_NAMES; i++)
		names[i] = (struct mgr_lease_name){ 300 + i % NDIRS, "x", 1 };
	for (uint64_t i = 0; i < NSESS; i++) {
		CHECK(join(ml, 1000 + i, NULL, t) == 0, "joined");
		granted += mgr_lease_grant(ml, 1000 + i, 300 + i, t, &ev);
	}
	CHECK(granted == NSESS, "%d granted", granted);
	CHECK(mgr_lease_change(ml, 0, names, MGR_LEASE_MAX_NAMES + 1, t, &c) ==
	      -EINVAL, "too many names");
	nready = 0;
	CHECK(mgr_lease_change(ml, 0, names, NNAMES, t, &c) == 1, "parked");
	mgr_lease_counts(ml, &ns, &np, &nq);
	CHECK(nq == 2 * NSESS, "each told once: %zu events", nq);
	for (uint64_t i = 0; i < NSESS; i++) {
		CHECK(nready == 0, "waits for the last");
		ack_all(ml, 1000 + i, 2, t, &w);
	}
	CHECK(nready == 1 && readied[0] == &c, "runs after the last ack");
	mgr_lease_done(ml, names, NNAMES - 1, t);
	t += 2 * MGR_LEASE_BACKOFF_MIN_MS;
	CHECK(mgr_lease_grant(ml, 1000, 300 + (NNAMES - 1) % NDIRS, t, &ev) == 0,
	      "a repeated dir's last name not done yet");
	mgr_lease_done(ml, &names[NNAMES - 1], 1, t);
	CHECK(mgr_lease_grant(ml, 1000, 300 + (NNAMES - 1) % NDIRS, t, &ev) == 1,
	      "all done: it grants");
	CHECK(mgr_lease_change(ml, 0, names, MGR_LEASE_MAX_NAMES, t, &c) == 1,
	      "256 names taken");
	mgr_lease_done(ml, names, MGR_LEASE_MAX_NAMES, t);
	mgr_lease_free(ml);
}

int main(void)
{
	log_init("test_mgr_lease", LOG_NOTICE); /* no line per expiry */
	test_park_and_post();
	test_slices_and_expiry();
	test_collapse();
	test_caps();
	test_changes();
	test_pending_recall_and_bye();
	test_many_holders();
	test_write_grants();
	test_access();
	test_change_recalls_writer();
	test_writer_expires();
	test_many_names();
	test_codec();
	test_session_and_grant();
	return check_summary("test_mgr_lease");
}

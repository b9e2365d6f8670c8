/*
 * mgr_fence.c - the IO_FENCE message sequence of one iod (mgr_fence.h).
 *
 * The rule that keeps a fenced replica from serving reads: a STALE_MARK is
 * answered only when the iod's set in force holds the inode (its reply
 * says so: complete, not loading, and no load of ours in progress), or
 * when the iod can no longer hold a lease (lease_bound_ns passed with no
 * reply in flight). In the second case the iod's set may lack the inode,
 * so it must not get a lease again before it has a complete set read
 * after the record committed: `delivered` drops to 0, and while it is 0
 * every message confirms nothing (confirm 0) except the COMPLETE of a
 * load, which puts the new set in force in the same message that starts
 * the lease. The same holds after any failure: the iod may have restarted
 * with no set, or missed a mark; it gets a lease again only together with
 * a whole set.
 */
#include "mgr_fence.h"

#include <errno.h>
#include <string.h>

/* See mgr_fence.h. */
void mgr_fence_init(struct mgr_fence_iod *fi, uint16_t iod, uint64_t seq0,
		    uint64_t now_ns, uint32_t lease_ms)
{
	memset(fi, 0, sizeof(*fi));
	fi->iod = iod;
	fi->lease_ms = lease_ms;
	fi->next_seq = seq0 ? seq0 : 1;
	fi->lease_bound_ns = now_ns + (uint64_t)lease_ms * 1000000u;
	fi->need_full = 1;
}

/* See mgr_fence.h. */
void mgr_fence_round(struct mgr_fence_iod *fi)
{
	fi->up = 1;
	fi->due = 1;
}

/* See mgr_fence.h. Cost: O(marks of the iod). */
void mgr_fence_add_mark(struct mgr_fence_iod *fi, struct mgr_fence_mark *m)
{
	struct mgr_fence_mark **pp = &fi->marks;

	while (*pp)
		pp = &(*pp)->next;
	m->next = NULL;
	m->sent = 0;
	*pp = m;
}

/* Whether a mark has not been sent yet. */
static int marks_waiting(const struct mgr_fence_iod *fi)
{
	for (const struct mgr_fence_mark *m = fi->marks; m; m = m->next)
		if (!m->sent)
			return 1;
	return 0;
}

/* See mgr_fence.h. */
int mgr_fence_want(const struct mgr_fence_iod *fi)
{
	if (!fi->up || fi->inflight)
		return 0;
	return fi->loading || fi->follow || fi->due || marks_waiting(fi);
}

/* The next seq (0 is skipped: it means "none" in confirm). */
static uint64_t next_seq(struct mgr_fence_iod *fi)
{
	uint64_t s = fi->next_seq++;

	if (fi->next_seq == 0)
		fi->next_seq = 1;
	return s;
}

/* Put the waiting marks' inodes into the add list (at most a page). */
static uint32_t build_marks(struct mgr_fence_iod *fi)
{
	uint32_t n = 0;

	for (struct mgr_fence_mark *m = fi->marks; m && n < PROTO_MAX_INOS;
	     m = m->next) {
		if (m->sent)
			continue;
		fi->add[n++] = m->ino;
		m->sent = 1;
	}
	return n;
}

/* The next page of the load into the add list; COMPLETE on the last.
 * @return inodes in the page, or -errno */
static int build_page(struct mgr_fence_iod *fi, mgr_fence_page_fn page,
		      void *arg)
{
	uint32_t n = 0;
	int rc = page(arg, fi->iod, fi->load_after, fi->add,
		      PROTO_MAX_INOS + 1, &n);

	if (rc)
		return rc;
	if (n > PROTO_MAX_INOS)
		n = PROTO_MAX_INOS;
	else
		fi->msg_flags |= PROTO_FENCE_COMPLETE;
	if (n)
		fi->load_after = fi->add[n - 1];
	fi->load_n += n;
	return (int)n;
}

/* Start loading the whole set: RESET goes with the first page. */
static void start_load(struct mgr_fence_iod *fi, uint64_t ver)
{
	fi->loading = 1;
	fi->load_after = 0;
	fi->load_n = 0;
	fi->load_ver = ver;
	fi->need_full = 0;
	fi->msg_flags = PROTO_FENCE_RESET;
}

/* See mgr_fence.h. */
int mgr_fence_build(struct mgr_fence_iod *fi, uint64_t ver,
		    mgr_fence_page_fn page, void *arg, struct proto_fence *f)
{
	uint32_t nadd = 0;
	int rc;

	if (!fi->up || fi->inflight)
		return 1;
	fi->msg_flags = 0;
	fi->msg_nmarks = 0;
	fi->msg_renewal = 0;
	if (!fi->loading && (fi->need_full || !fi->delivered)) {
		/* no set known in force: load one; it is read after every
		 * waiting mark's record committed, so it carries them */
		start_load(fi, ver);
		for (struct mgr_fence_mark *m = fi->marks; m; m = m->next)
			m->sent = 1;
	} else if (marks_waiting(fi)) {
		/* a message of its own, to the set in force or being loaded */
		nadd = fi->msg_nmarks = build_marks(fi);
	} else if (!fi->loading && fi->due && ver != fi->delivered_ver) {
		start_load(fi, ver);
	} else if (!fi->loading && (fi->due || fi->follow)) {
		fi->msg_renewal = fi->due && !fi->follow;
		fi->due = fi->follow = 0; /* a renewal */
	} else if (!fi->loading) {
		return 1;
	}
	if (fi->loading && !fi->msg_nmarks) {
		rc = build_page(fi, page, arg);
		if (rc < 0) {
			fi->loading = 0;
			fi->need_full = 1;
			fi->due = fi->follow = 0;
			for (struct mgr_fence_mark *m = fi->marks; m; m = m->next)
				m->sent = 0;
			return rc;
		}
		nadd = (uint32_t)rc;
		fi->due = fi->follow = 0;
	}
	memset(f, 0, sizeof(*f));
	f->seq = next_seq(fi);
	/* a set not known good gets no lease, except from the COMPLETE that
	 * puts a whole new one in force */
	f->confirm = fi->delivered || (fi->msg_flags & PROTO_FENCE_COMPLETE) ?
		     fi->confirm : 0;
	f->lease_ms = fi->lease_ms;
	f->flags = fi->msg_flags;
	f->add = (struct proto_inos){ nadd, nadd ? fi->add : NULL, NULL };
	fi->inflight = f->seq;
	return 0;
}

/* Move the marks already sent (ack) or all of them (all) to *done with
 * status (and why: expired); keep the rest in order. */
static void marks_out(struct mgr_fence_iod *fi, int all, int status,
		      int expired, struct mgr_fence_mark ***done)
{
	struct mgr_fence_mark **pp = &fi->marks;

	while (*pp) {
		struct mgr_fence_mark *m = *pp;

		if (!all && !m->sent) {
			pp = &m->next;
			continue;
		}
		*pp = m->next;
		m->next = NULL;
		m->status = status;
		m->expired = expired;
		**done = m;
		*done = &m->next;
	}
}

/* Forget what was sent: the marks go again, the set is loaded anew. */
static void fence_reset(struct mgr_fence_iod *fi)
{
	fi->inflight = 0;
	fi->loading = 0;
	fi->need_full = 1;
	fi->delivered = 0;
	fi->follow = 0;
	for (struct mgr_fence_mark *m = fi->marks; m; m = m->next)
		m->sent = 0;
}

/* See mgr_fence.h. */
int mgr_fence_reply(struct mgr_fence_iod *fi, int status,
		    const struct proto_fencestate *st, uint64_t now_ns,
		    struct mgr_fence_mark ***done)
{
	uint64_t seq = fi->inflight, bound;
	uint32_t prev_n = fi->last_n;
	int was_delivered = fi->delivered, completed = 0;

	if (!seq)
		return 0;
	fi->inflight = 0;
	/* whatever the answer, the iod got the message by now: its lease, if
	 * this message is ever confirmed, ends before now + lease */
	bound = now_ns + (uint64_t)fi->lease_ms * 1000000u;
	if (bound > fi->lease_bound_ns)
		fi->lease_bound_ns = bound;
	if (status == -EOPNOTSUPP) {
		/* an iod without fencing: nothing to wait for */
		fi->unsupported = 1;
		if (fi->loading)
			fi->delivered_ver = fi->load_ver;
		fi->loading = fi->need_full = 0;
		fi->due = fi->follow = 0;
		fi->delivered = 1;
		marks_out(fi, 1, 0, 0, done);
		return 0;
	}
	if (status || !st) {
		fence_reset(fi);
		fi->up = 0; /* try again at the next round, not in a loop */
		return 0;
	}
	fi->unsupported = 0;
	fi->confirm = seq;
	if (fi->loading && (fi->msg_flags & PROTO_FENCE_COMPLETE)) {
		fi->loading = 0;
		completed = 1;
	}
	if (fi->loading) {
		if (!st->loading) { /* the iod lost our load: restarted */
			fence_reset(fi);
			fi->due = 1;
		}
		return 0;
	}
	if (!st->complete || st->loading) {
		/* no set in force: the iod restarted (or took a load of
		 * someone else's); load ours, now unless this was it */
		fence_reset(fi);
		if (completed)
			fi->up = 0; /* refused our set: next round, no loop */
		else
			fi->due = 1;
		return 0;
	}
	if (completed) {
		fi->delivered = 1;
		fi->delivered_ver = fi->load_ver;
		fi->last_n = fi->load_n;
		fi->follow = 1; /* confirm it at once: the lease starts */
	}
	if (fi->delivered && fi->msg_renewal)
		fi->follow = 1; /* confirm this round's renewal at once */
	if (fi->delivered)
		marks_out(fi, 0, 0, 0, done);
	else
		fi->due = 1; /* a mark went to an iod without our set: load it */
	return completed && (fi->last_n != prev_n || !was_delivered) &&
	       (fi->last_n || prev_n);
}

/* See mgr_fence.h. */
void mgr_fence_refused(struct mgr_fence_iod *fi, uint64_t now_ns)
{
	if (fi->lease_bound_ns > now_ns)
		fi->lease_bound_ns = now_ns;
}

/* See mgr_fence.h. */
void mgr_fence_failed(struct mgr_fence_iod *fi)
{
	fence_reset(fi);
	fi->up = 0;
	fi->due = 0;
}

/* See mgr_fence.h. */
void mgr_fence_expire(struct mgr_fence_iod *fi, uint64_t now_ns,
		      struct mgr_fence_mark ***done)
{
	if (!fi->marks || fi->inflight || now_ns < fi->lease_bound_ns)
		return;
	/* the iod holds no lease; it must not get one before a whole set
	 * with these inodes is in force */
	marks_out(fi, 1, 0, 1, done);
	fence_reset(fi);
}

/* See mgr_fence.h. */
uint64_t mgr_fence_deadline(const struct mgr_fence_iod *fi)
{
	return fi->marks ? fi->lease_bound_ns : UINT64_MAX;
}

/* See mgr_fence.h. */
void mgr_fence_drain(struct mgr_fence_iod *fi, int rc,
		     struct mgr_fence_mark ***done)
{
	marks_out(fi, 1, rc, 0, done);
}

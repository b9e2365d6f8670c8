/*
 * mgr_leased.h - the mgr's callback channel on the wire: decodes CB_WAIT,
 * runs it on the session table (mgr_lease.h) and answers, at once when
 * the session has events, else when it gets one or its wait ends; a
 * libev timer ends waits and forgets silent sessions. Loop thread only.
 * Design: HACKING.md "Leases and callbacks".
 */
#ifndef RPFS_MGR_LEASED_H
#define RPFS_MGR_LEASED_H

#include <stddef.h>
#include <stdint.h>

#include "mgr_lease.h"
#include "net.h"

struct ev_loop;
struct mgr_leased;

/**
 * Create the service with a fresh random boot id and start its timer.
 * @return 0, -ENOMEM
 */
int mgr_leased_new(struct mgr_leased **out, struct ev_loop *loop);

/** Answer the parked waits (with what they have), stop, free. Call
 * before the server is freed. NULL: nothing. */
void mgr_leased_free(struct mgr_leased *ld);

/** Whether op is the callback channel's. @return 1 or 0 */
int mgr_leased_owns(uint16_t op);

/** Handle one request of a callback op (see mgr_leased_owns). */
void mgr_leased_handle(struct mgr_leased *ld, struct net_sreq *r);

/**
 * Queue an event for a session (mgr_lease_post): its parked wait, if any,
 * is answered with it.
 * @return the event's seq (> 0), or -ENOENT, -EINVAL, -ENOMEM
 */
int64_t mgr_leased_post(struct mgr_leased *ld, uint64_t session,
			uint8_t kind, uint64_t ino, const char *name,
			size_t len);

/* A change (or an access) parked until the holders it recalled have
 * acknowledged; ready is called (loop thread) when it may run. Embed it
 * in the op's own struct. */
struct mgr_leased_wait {
	void (*ready)(struct mgr_leased_wait *w);
};

/**
 * A change of names is about to run (mgr_lease_change): it runs now, or
 * once the other holders acknowledged. ld NULL: run now.
 * @return 0 run now; 1 parked (w->ready later); -EINVAL (more than
 *	MGR_LEASE_MAX_NAMES names), -ENOMEM (fail it)
 */
int mgr_leased_change(struct mgr_leased *ld, uint64_t origin,
		      const struct mgr_lease_name *names, unsigned n,
		      struct mgr_leased_wait *w);

/** A change mgr_leased_change let run is committed or failed. ld NULL:
 * nothing. */
void mgr_leased_done(struct mgr_leased *ld, const struct mgr_lease_name *names,
		     unsigned n);

/** A READ lease for a reply being made now (mgr_lease_grant). ld NULL or
 * session 0: none. @return 1 granted (g filled), 0 not */
int mgr_leased_grant(struct mgr_leased *ld, uint64_t session, uint64_t dir,
		     struct proto_grant *g);

/** A WRITE lease on a directory the session just made
 * (mgr_lease_grant_write). ld NULL or session 0: none. @return 1 granted
 * (g filled), 0 not */
int mgr_leased_grant_write(struct mgr_leased *ld, uint64_t session,
			   uint64_t dir, struct proto_grant *g);

/** An op of origin uses inos (mgr_lease_access): it runs now, or once the
 * WRITE holders of those objects acknowledged their recall. ld NULL: run
 * now. @return 0 run now; 1 parked (w->ready later); -EINVAL (n over
 * MGR_LEASE_MAX_INOS), -ENOMEM (fail it) */
int mgr_leased_access(struct mgr_leased *ld, uint64_t origin,
		      const uint64_t *inos, unsigned n,
		      struct mgr_leased_wait *w);

/** The session holding a WRITE lease on ino (mgr_lease_writer), or 0;
 * ld NULL or ino 0: 0. Cost: a hash lookup. */
uint64_t mgr_leased_writer(const struct mgr_leased *ld, uint64_t ino);

/** Sessions known, waits parked, events queued; grants made and leases
 * recalled since the start. Loop thread. */
void mgr_leased_counts(struct mgr_leased *ld, size_t *sessions,
		       size_t *parked, size_t *queued, uint64_t *grants,
		       uint64_t *recalls);

#endif

/*
 * mgr_scrub.h - the mgr's scrub service: answers which inodes exist and
 * lists the orphan table, for `rpfs scrub` (mgr/repair/README.md "Scrub").
 * Bodies are struct proto_scrubq / proto_inostate / proto_orphans.
 *
 * Loop thread only, but for mgr_scrub_counts.
 */
#ifndef RPFS_MGR_SCRUB_H
#define RPFS_MGR_SCRUB_H

#include <stdint.h>

#include "mgr_db.h"
#include "net.h"

struct mgr_scrub;

/* What the service has answered since the mgr started (mgr_scrub_counts). */
struct mgr_scrub_counts {
	uint64_t inos_requests;    /* SCRUB_INOS run (any status) */
	uint64_t orphans_requests; /* SCRUB_ORPHANS run (any status) */
	uint64_t inos_checked;     /* inodes whose state SCRUB_INOS returned */
	uint64_t orphans_reported; /* orphans SCRUB_ORPHANS listed */
	int64_t last_ns;           /* when the last one ran, ns since the
				    * epoch; 0 before any */
};

/**
 * Create the service.
 * @param[in] db the namespace (borrowed)
 * @param[in] boot_ns when the mgr started, ns since the epoch (reported in
 *	SCRUB_ORPHANS replies: the scrub reclaims orphans older than that)
 * @return 0, -ENOMEM
 */
int mgr_scrub_new(struct mgr_scrub **out, struct mgr_db *db, int64_t boot_ns);

/** t in nanoseconds since the epoch, clamped to the i64 range. */
int64_t mgr_scrub_ns(const struct proto_time *t);

/** Free the service (NULL is fine). */
void mgr_scrub_free(struct mgr_scrub *sc);

/** Whether op belongs to the scrub service (PROTO_OP_SCRUB_*). */
int mgr_scrub_owns(uint16_t op);

/**
 * Serve one scrub request and reply: status 0 with the body, -EIO on a
 * database failure; a malformed body closes the connection.
 */
void mgr_scrub_handle(struct mgr_scrub *sc, struct net_sreq *r);

/**
 * The service's counters (relaxed atomics): any thread, e.g. the metrics
 * endpoint's.
 * @param[out] out filled
 */
void mgr_scrub_counts(const struct mgr_scrub *sc, struct mgr_scrub_counts *out);

#endif

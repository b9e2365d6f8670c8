/*
 * mgr_metrics.h - the mgr's Prometheus endpoint (metrics.h): its requests
 * by op, the transport counters, each iod's up and stale-object gauges,
 * the resync's progress, each iod's lease, the scrub service's counters
 * and the lock table. Loop-only numbers (the lock
 * table) are copied once a second by a loop timer into a snapshot the
 * HTTP thread reads under a mutex; the rest is atomic or thread-safe. The
 * endpoint itself is daemon.h's (dmn_metrics_start).
 */
#ifndef RPFS_MGR_METRICS_H
#define RPFS_MGR_METRICS_H

#include <stdint.h>

#include "daemon.h"
#include "mgr_db.h"
#include "mgr_iodpoll.h"
#include "mgr_leased.h"
#include "mgr_lockd.h"
#include "mgr_resync.h"
#include "mgr_scrub.h"

/* What the endpoint reports beside dmn_metrics_src (the server); every
 * pointer must outlive dmn_metrics_stop. */
struct mgr_metrics_src {
	struct mgr_db *db;         /* stale counts: a read txn of the HTTP thread */
	struct mgr_iodpoll *poll;  /* iod up (any thread) */
	struct mgr_resync *resync; /* NULL when resync is off */
	struct mgr_lockd *lockd;
	struct mgr_leased *leased; /* the callback channel (loop thread) */
	struct mgr_scrub *scrub;   /* counters (any thread) */
	uint16_t niods;
	long resync_rate;          /* MB/s, the configured limit */
};

/* The mgr's endpoint, for dmn_metrics_start with a struct mgr_metrics_src
 * (zeroed when built without libmicrohttpd: dmn_metrics_start refuses). */
extern const struct dmn_metrics_kind mgr_metrics_kind;

#endif

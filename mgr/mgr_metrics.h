/*
 * mgr_metrics.h - the mgr's Prometheus endpoint (metrics.h): its requests
 * by op, the transport counters, each iod's up and stale-object gauges,
 * the resync's progress, each iod's lease, the scrub service's counters
 * and the lock table. Loop-only numbers (the lock
 * table) are copied once a second by a loop timer into a snapshot the
 * HTTP thread reads under a mutex; the rest is atomic or thread-safe.
 */
#ifndef RPFS_MGR_METRICS_H
#define RPFS_MGR_METRICS_H

#include <ev.h>
#include <stdint.h>

#include "mgr_db.h"
#include "mgr_iodpoll.h"
#include "mgr_lockd.h"
#include "mgr_resync.h"
#include "mgr_scrub.h"
#include "net.h"

struct mgr_metrics;

/* What the endpoint reports; every pointer must outlive mgr_metrics_stop. */
struct mgr_metrics_src {
	const char *what;          /* "--metrics" or "[metrics] listen", for errors */
	struct ev_loop *loop;
	struct net_server *srv;
	struct mgr_db *db;         /* stale counts: a read txn of the HTTP thread */
	struct mgr_iodpoll *poll;  /* iod up (any thread) */
	struct mgr_resync *resync; /* NULL when resync is off */
	struct mgr_lockd *lockd;
	struct mgr_scrub *scrub;   /* counters (any thread) */
	uint16_t niods;
	long resync_rate;          /* MB/s, the configured limit */
};

/**
 * Serve /metrics on host:port. Starts the snapshot timer on src->loop and
 * times every request of src->srv by op.
 * @param err on failure one line naming the address and why
 * @return 0, or metrics_start()'s error (-EADDRINUSE, -EINVAL, ...),
 *	-ENOMEM, -ENOTSUP (built without libmicrohttpd)
 */
int mgr_metrics_start(struct mgr_metrics **out, const char *host, uint16_t port,
		      const struct mgr_metrics_src *src, char *err, size_t errcap);

/** The port bound (for port 0). */
uint16_t mgr_metrics_port(const struct mgr_metrics *m);

/** Stop the HTTP thread and the timer, free (NULL is fine). Loop thread. */
void mgr_metrics_stop(struct mgr_metrics *m);

#endif

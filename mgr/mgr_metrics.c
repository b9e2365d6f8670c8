/* mgr_metrics.c - the mgr's /metrics families; see mgr_metrics.h. */
#include "mgr_metrics.h"

#include <stddef.h>
#include <stdio.h>

#if RPFS_HAVE_METRICS
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "metrics.h"
#include "mgr_batch.h"

/* The endpoint (d first: the tick's container). src is immutable; snap is
 * written by the loop's tick and read by the HTTP thread, both under
 * d.lock; d.ops is atomics. */
struct mgr_metrics {
	struct dmn_metrics d;
	struct mgr_metrics_src src;
	struct {                  /* the lock table at the last tick (d.lock) */
		size_t locks, waiters, sessions;
		uint64_t woken;
		size_t cb_sessions, cb_parked, cb_queued; /* the callback channel */
		uint64_t grants, recalls;                 /* and leases */
	} snap;
};

/* dmn_metrics tick: copy the loop-only numbers into the snapshot. Loop
 * thread; cost: reading the lock table's and the callback channel's
 * counters. */
static void mgr_metrics_on_tick(struct dmn_metrics *d)
{
	struct mgr_metrics *m = (struct mgr_metrics *)d;
	size_t locks, waiters, sessions, cbs, cbp, cbq;
	uint64_t woken, grants = 0, recalls = 0;

	mgr_lockd_counts(m->src.lockd, &locks, &waiters, &sessions, &woken);
	cbs = cbp = cbq = 0;
	if (m->src.leased)
		mgr_leased_counts(m->src.leased, &cbs, &cbp, &cbq, &grants,
				  &recalls);
	pthread_mutex_lock(&m->d.lock);
	m->snap.cb_sessions = cbs;
	m->snap.cb_parked = cbp;
	m->snap.cb_queued = cbq;
	m->snap.grants = grants;
	m->snap.recalls = recalls;
	m->snap.locks = locks;
	m->snap.waiters = waiters;
	m->snap.sessions = sessions;
	m->snap.woken = woken;
	pthread_mutex_unlock(&m->d.lock);
}

/* A CLOCK_MONOTONIC time in ns as seconds since the epoch (the clocks
 * read now: a wall clock step moves past and future alike). */
static double mono_to_unix(uint64_t mono_ns)
{
	struct timespec rt, mt;
	double now_rt, now_mt;

	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	now_rt = (double)rt.tv_sec + (double)rt.tv_nsec * 1e-9;
	now_mt = (double)mt.tv_sec + (double)mt.tv_nsec * 1e-9;
	return now_rt + ((double)mono_ns * 1e-9 - now_mt);
}

/* Each iod's lease bound as a unix timestamp (common/service/README.md
 * "Metrics": a timestamp, not seconds left, so that it is right whenever
 * scraped and stops moving when the iod stops answering). HTTP thread. */
static void mgr_metrics_leases(struct metrics_buf *b, struct mgr_metrics *m)
{
	const char *n = "rpfs_mgr_iod_lease_expiry_timestamp_seconds";
	char id[8];
	uint16_t i;

	metrics_family(b, n, "gauge",
		       "When the lease the mgr last granted or renewed to the iod runs "
		       "out, in seconds since the epoch; it stops advancing when the "
		       "iod stops answering.");
	for (i = 0; i < m->src.niods; i++) {
		snprintf(id, sizeof(id), "%u", i);
		metrics_f64(b, n, mono_to_unix(mgr_iodpoll_lease(m->src.poll, i)),
			    "iod", id, NULL);
	}
}

/* The scrub service's families: what `rpfs scrub` asked and was told.
 * HTTP thread. */
static void mgr_metrics_scrub(struct metrics_buf *b, struct mgr_metrics *m)
{
	struct mgr_scrub_counts c;
	const char *n;

	mgr_scrub_counts(m->src.scrub, &c);
	n = "rpfs_mgr_scrub_requests_total";
	metrics_family(b, n, "counter", "Scrub requests answered, by kind.");
	metrics_u64(b, n, c.inos_requests, "kind", "inodes", NULL);
	metrics_u64(b, n, c.orphans_requests, "kind", "orphans", NULL);
	n = "rpfs_mgr_scrub_inodes_checked_total";
	metrics_family(b, n, "counter", "Inodes whose state a scrub asked for.");
	metrics_u64(b, n, c.inos_checked, NULL);
	n = "rpfs_mgr_scrub_orphans_reported_total";
	metrics_family(b, n, "counter", "Orphans listed to a scrub.");
	metrics_u64(b, n, c.orphans_reported, NULL);
	n = "rpfs_mgr_scrub_last_request_timestamp_seconds";
	metrics_family(b, n, "gauge",
		       "When the last scrub request ran, in seconds since the epoch "
		       "(0: none since the mgr started).");
	metrics_f64(b, n, (double)c.last_ns * 1e-9, NULL);
}

/* The per-iod families: up, stale records (one read transaction of this
 * thread), resync progress. HTTP thread. */
static void mgr_metrics_iods(struct metrics_buf *b, struct mgr_metrics *m)
{
	uint64_t stale[PROTO_MAX_IODS], done, bytes;
	int have_stale = mgr_db_stale_count(m->src.db, stale, m->src.niods) == 0;
	char id[8];
	uint16_t i;

	metrics_family(b, "rpfs_mgr_iod_up", "gauge",
		       "1 if the iod answered the mgr's last poll round, else 0.");
	for (i = 0; i < m->src.niods; i++) {
		snprintf(id, sizeof(id), "%u", i);
		metrics_u64(b, "rpfs_mgr_iod_up", (uint64_t)mgr_iodpoll_up(m->src.poll, i),
			    "iod", id, NULL);
	}
	if (have_stale) {
		metrics_family(b, "rpfs_mgr_stale_objects", "gauge",
			       "Mirrored replicas on the iod marked stale, not yet resynced.");
		for (i = 0; i < m->src.niods; i++) {
			snprintf(id, sizeof(id), "%u", i);
			metrics_u64(b, "rpfs_mgr_stale_objects", stale[i], "iod", id, NULL);
		}
	}
	if (!m->src.resync)
		return;
	metrics_family(b, "rpfs_mgr_resync_objects_total", "counter",
		       "Stale replicas resynced (or dropped) on the iod.");
	for (i = 0; i < m->src.niods; i++) {
		snprintf(id, sizeof(id), "%u", i);
		mgr_resync_counts(m->src.resync, i, &done, &bytes);
		metrics_u64(b, "rpfs_mgr_resync_objects_total", done, "iod", id, NULL);
	}
	metrics_family(b, "rpfs_mgr_resync_bytes_total", "counter",
		       "Bytes copied to the iod by the resync.");
	for (i = 0; i < m->src.niods; i++) {
		snprintf(id, sizeof(id), "%u", i);
		mgr_resync_counts(m->src.resync, i, &done, &bytes);
		metrics_u64(b, "rpfs_mgr_resync_bytes_total", bytes, "iod", id, NULL);
	}
}

/* metrics_fn: every family of the mgr. HTTP thread. */
static void mgr_metrics_write(struct metrics_buf *b, void *arg)
{
	struct mgr_metrics *m = arg;
	struct net_stats st;
	typeof(m->snap) snap;
	uint64_t batches, batch_ops;

	metrics_ops_write(b, "rpfs_server", m->d.ops);
	net_server_stats(m->d.srv, &st);
	metrics_net_write(b, &st, net_server_transport(m->d.srv));
	metrics_net_server_write(b, &st, net_server_transport(m->d.srv));
	mgr_metrics_iods(b, m);
	mgr_metrics_leases(b, m);
	mgr_metrics_scrub(b, m);
	metrics_family(b, "rpfs_mgr_resync_rate_limit_bytes_per_second", "gauge",
		       "The resync's configured rate limit (0: resync off).");
	metrics_u64(b, "rpfs_mgr_resync_rate_limit_bytes_per_second",
		    (uint64_t)m->src.resync_rate * 1000000u, NULL);
	pthread_mutex_lock(&m->d.lock);
	snap = m->snap;
	pthread_mutex_unlock(&m->d.lock);
	metrics_family(b, "rpfs_mgr_store_commit_seconds", "histogram",
		       "Namespace store write commits (top-level), each with its sync.");
	metrics_hist(b, "rpfs_mgr_store_commit_seconds", NULL, NULL, mgr_db_commit_latency());
	mgr_batch_stats(&batches, &batch_ops);
	metrics_family(b, "rpfs_mgr_group_commit_batches_total", "counter",
		       "Group commit: batches of write ops committed (one sync each).");
	metrics_u64(b, "rpfs_mgr_group_commit_batches_total", batches, NULL);
	metrics_family(b, "rpfs_mgr_group_commit_ops_total", "counter",
		       "Group commit: write ops in the committed batches (divided by "
		       "the batches: ops per sync).");
	metrics_u64(b, "rpfs_mgr_group_commit_ops_total", batch_ops, NULL);
	metrics_family(b, "rpfs_mgr_locks_held", "gauge", "Byte-range locks held.");
	metrics_u64(b, "rpfs_mgr_locks_held", snap.locks, NULL);
	metrics_family(b, "rpfs_mgr_lock_waiters", "gauge", "Lock WAITs queued.");
	metrics_u64(b, "rpfs_mgr_lock_waiters", snap.waiters, NULL);
	metrics_family(b, "rpfs_mgr_lock_sessions", "gauge", "Client lock sessions.");
	metrics_u64(b, "rpfs_mgr_lock_sessions", snap.sessions, NULL);
	metrics_family(b, "rpfs_mgr_lock_wakeups_total", "counter",
		       "Lock WAITs granted by a wake-up.");
	metrics_u64(b, "rpfs_mgr_lock_wakeups_total", snap.woken, NULL);
	metrics_family(b, "rpfs_mgr_callback_sessions", "gauge",
		       "Mount sessions of the callback channel.");
	metrics_u64(b, "rpfs_mgr_callback_sessions", snap.cb_sessions, NULL);
	metrics_family(b, "rpfs_mgr_callback_waits", "gauge",
		       "CB_WAITs parked (a mount waiting for its events).");
	metrics_u64(b, "rpfs_mgr_callback_waits", snap.cb_parked, NULL);
	metrics_family(b, "rpfs_mgr_callback_events_queued", "gauge",
		       "Callback events not acknowledged yet.");
	metrics_u64(b, "rpfs_mgr_callback_events_queued", snap.cb_queued, NULL);
	metrics_family(b, "rpfs_mgr_lease_grants_total", "counter",
		       "READ leases on directories granted with replies.");
	metrics_u64(b, "rpfs_mgr_lease_grants_total", snap.grants, NULL);
	metrics_family(b, "rpfs_mgr_lease_recalls_total", "counter",
		       "READ leases recalled by another mount's change.");
	metrics_u64(b, "rpfs_mgr_lease_recalls_total", snap.recalls, NULL);
}

/* See mgr_metrics.h. */
const struct dmn_metrics_kind mgr_metrics_kind = {
	.size = sizeof(struct mgr_metrics),
	.priv_off = offsetof(struct mgr_metrics, src),
	.priv_size = sizeof(struct mgr_metrics_src),
	.on_tick = mgr_metrics_on_tick,
	.write = mgr_metrics_write,
};

#else /* !RPFS_HAVE_METRICS */

/* See mgr_metrics.h: dmn_metrics_start refuses without libmicrohttpd. */
const struct dmn_metrics_kind mgr_metrics_kind;

#endif

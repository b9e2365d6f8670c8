/* iod_metrics.c - an iod's /metrics families; see iod_metrics.h. */
#include "iod_metrics.h"

#include <stddef.h>
#include <stdio.h>

#if RPFS_HAVE_METRICS
#include <pthread.h>

#include "iod_store.h"
#include "iod_work.h"
#include "metrics.h"

/* The endpoint (d first: the tick's container). src is immutable; nfree
 * is written by the loop's tick and read by the HTTP thread under d.lock. */
struct iod_metrics {
	struct dmn_metrics d;
	struct iod_metrics_src src;
	unsigned nfree[IOD_BUF_NZONES]; /* free buffers per zone (d.lock) */
};

/* dmn_metrics tick: copy the pool's free counts. Loop thread. */
static void iod_metrics_on_tick(struct dmn_metrics *d)
{
	struct iod_metrics *m = (struct iod_metrics *)d;
	unsigned nfree[IOD_BUF_NZONES];
	unsigned z;

	for (z = 0; z < IOD_BUF_NZONES; z++)
		nfree[z] = m->src.bufs.count[z] ? iod_buf_nfree(m->src.pool, z) : 0;
	pthread_mutex_lock(&m->d.lock);
	for (z = 0; z < IOD_BUF_NZONES; z++)
		m->nfree[z] = nfree[z];
	pthread_mutex_unlock(&m->d.lock);
}

/* metrics_fn: every family of the iod. HTTP thread. */
static void iod_metrics_write(struct metrics_buf *b, void *arg)
{
	struct iod_metrics *m = arg;
	unsigned nfree[IOD_BUF_NZONES], z;
	uint64_t waiting, running, refused;
	struct net_stats st;
	char size[24];

	metrics_ops_write(b, "rpfs_server", m->d.ops);
	net_server_stats(m->d.srv, &st);
	metrics_net_write(b, &st, net_server_transport(m->d.srv));
	metrics_net_server_write(b, &st, net_server_transport(m->d.srv));
	pthread_mutex_lock(&m->d.lock);
	for (z = 0; z < IOD_BUF_NZONES; z++)
		nfree[z] = m->nfree[z];
	pthread_mutex_unlock(&m->d.lock);
	metrics_family(b, "rpfs_iod_disk_seconds", "histogram",
		       "Disk calls of the request handlers: pwrite, pread, fsync loops.");
	metrics_hist(b, "rpfs_iod_disk_seconds", "call", "write",
		     iod_store_latency(IOD_STORE_WRITE));
	metrics_hist(b, "rpfs_iod_disk_seconds", "call", "read",
		     iod_store_latency(IOD_STORE_READ));
	metrics_hist(b, "rpfs_iod_disk_seconds", "call", "fsync",
		     iod_store_latency(IOD_STORE_FSYNC));
	iod_work_counts(&waiting, &running, &refused);
	metrics_family(b, "rpfs_iod_slow_jobs", "gauge",
		       "Slow disk jobs (fsync, fallocate, checksums, listings) of the "
		       "worker threads, by state.");
	metrics_u64(b, "rpfs_iod_slow_jobs", waiting, "state", "waiting", NULL);
	metrics_u64(b, "rpfs_iod_slow_jobs", running, "state", "running", NULL);
	metrics_family(b, "rpfs_iod_slow_jobs_refused_total", "counter",
		       "Slow disk jobs refused because the workers' queue was full.");
	metrics_u64(b, "rpfs_iod_slow_jobs_refused_total", refused, NULL);
	metrics_family(b, "rpfs_iod_buffers", "gauge",
		       "Bulk buffers per zone (buffer size in bytes).");
	for (z = 0; z < IOD_BUF_NZONES; z++) {
		if (!m->src.bufs.count[z])
			continue;
		snprintf(size, sizeof(size), "%llu", (unsigned long long)(65536ull << z));
		metrics_u64(b, "rpfs_iod_buffers", m->src.bufs.count[z], "size", size, NULL);
	}
	metrics_family(b, "rpfs_iod_buffers_in_use", "gauge",
		       "Bulk buffers in use per zone, at the last second's snapshot.");
	for (z = 0; z < IOD_BUF_NZONES; z++) {
		if (!m->src.bufs.count[z])
			continue;
		snprintf(size, sizeof(size), "%llu", (unsigned long long)(65536ull << z));
		metrics_u64(b, "rpfs_iod_buffers_in_use",
			    m->src.bufs.count[z] - nfree[z], "size", size, NULL);
	}
}

/* See iod_metrics.h. */
const struct dmn_metrics_kind iod_metrics_kind = {
	.size = sizeof(struct iod_metrics),
	.priv_off = offsetof(struct iod_metrics, src),
	.priv_size = sizeof(struct iod_metrics_src),
	.on_tick = iod_metrics_on_tick,
	.write = iod_metrics_write,
};

#else /* !RPFS_HAVE_METRICS */

/* See iod_metrics.h: dmn_metrics_start refuses without libmicrohttpd. */
const struct dmn_metrics_kind iod_metrics_kind;

#endif

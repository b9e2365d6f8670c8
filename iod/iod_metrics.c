/* iod_metrics.c - an iod's /metrics families; see iod_metrics.h. */
#include "iod_metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#if RPFS_HAVE_METRICS
#include <pthread.h>

#include "iod_store.h"
#include "iod_work.h"
#include "metrics.h"

/* The endpoint. src is immutable; nfree is written by the loop's timer
 * and read by the HTTP thread under lock; ops is atomics. */
struct iod_metrics {
	struct iod_metrics_src src;
	struct metrics_srv *http;
	struct metrics_ops *ops;     /* server latency by op */
	ev_timer tick;               /* loop: refreshes nfree every second */
	pthread_mutex_t lock;
	unsigned nfree[IOD_BUF_NZONES]; /* free buffers per zone (lock) */
};

/* ev_timer: copy the pool's free counts. Loop thread. */
static void iod_metrics_on_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct iod_metrics *m = t->data;
	unsigned nfree[IOD_BUF_NZONES];
	unsigned z;

	for (z = 0; z < IOD_BUF_NZONES; z++)
		nfree[z] = m->src.bufs.count[z] ? iod_buf_nfree(m->src.pool, z) : 0;
	pthread_mutex_lock(&m->lock);
	for (z = 0; z < IOD_BUF_NZONES; z++)
		m->nfree[z] = nfree[z];
	pthread_mutex_unlock(&m->lock);
}

/* metrics_fn: every family of the iod. HTTP thread. */
static void iod_metrics_write(struct metrics_buf *b, void *arg)
{
	struct iod_metrics *m = arg;
	unsigned nfree[IOD_BUF_NZONES], z;
	uint64_t waiting, running, refused;
	struct net_stats st;
	char size[24];

	metrics_ops_write(b, "rpfs_server", m->ops);
	net_server_stats(m->src.srv, &st);
	metrics_net_write(b, &st, net_server_transport(m->src.srv));
	metrics_net_server_write(b, &st, net_server_transport(m->src.srv));
	pthread_mutex_lock(&m->lock);
	for (z = 0; z < IOD_BUF_NZONES; z++)
		nfree[z] = m->nfree[z];
	pthread_mutex_unlock(&m->lock);
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
int iod_metrics_start(struct iod_metrics **out, const char *host, uint16_t port,
		      const struct iod_metrics_src *src, char *err, size_t errcap)
{
	struct iod_metrics *m = calloc(1, sizeof(*m));
	int rc;

	rc = -ENOMEM;
	snprintf(err, errcap, "%s: out of memory", src->what);
	if (!m)
		return rc;
	m->ops = calloc(1, sizeof(*m->ops));
	if (!m->ops)
		goto out_free_m;
	m->src = *src;
	pthread_mutex_init(&m->lock, NULL);
	m->tick.data = m;
	iod_metrics_on_tick(src->loop, &m->tick, 0); /* the first snapshot */
	rc = metrics_start(&m->http, src->what, host, port, iod_metrics_write, m,
			   err, errcap);
	if (rc)
		goto out_destroy_lock;
	ev_timer_init(&m->tick, iod_metrics_on_tick, 1.0, 1.0);
	m->tick.data = m;
	ev_timer_start(src->loop, &m->tick);
	net_server_set_opstats(src->srv, m->ops);
	*out = m;
	return 0;

out_destroy_lock:
	pthread_mutex_destroy(&m->lock);
	free(m->ops);
out_free_m:
	free(m);
	return rc;
}

/* See iod_metrics.h. */
uint16_t iod_metrics_port(const struct iod_metrics *m)
{
	return metrics_port(m->http);
}

/* See iod_metrics.h. The server stops timing before ops is freed. */
void iod_metrics_stop(struct iod_metrics *m)
{
	if (!m)
		return;
	metrics_stop(m->http);
	ev_timer_stop(m->src.loop, &m->tick);
	net_server_set_opstats(m->src.srv, NULL);
	pthread_mutex_destroy(&m->lock);
	free(m->ops);
	free(m);
}

#else /* !RPFS_HAVE_METRICS */

/* See iod_metrics.h: built without libmicrohttpd. */
int iod_metrics_start(struct iod_metrics **out, const char *host, uint16_t port,
		      const struct iod_metrics_src *src, char *err, size_t errcap)
{
	snprintf(err, errcap, "%s: this rpfs-iod was built without metrics "
		 "(meson -Dmetrics=enabled, libmicrohttpd-dev)", src->what);
	return -ENOTSUP;
}

/* See iod_metrics.h. */
uint16_t iod_metrics_port(const struct iod_metrics *m)
{
	return 0;
}

/* See iod_metrics.h. */
void iod_metrics_stop(struct iod_metrics *m)
{
}

#endif

/*
 * iod_metrics.h - an iod's Prometheus endpoint (metrics.h): its requests
 * by op, the transport counters (with the server gauges: requests in
 * progress, credit limit, handshakes) and the bulk buffer pool's use. The
 * pool is loop-only, so a loop timer copies its free counts once a second
 * into a snapshot the HTTP thread reads under a mutex.
 */
#ifndef RPFS_IOD_METRICS_H
#define RPFS_IOD_METRICS_H

#include <ev.h>
#include <stdint.h>

#include "iod_buf.h"
#include "net.h"

struct iod_metrics;

/* What the endpoint reports; every pointer must outlive iod_metrics_stop. */
struct iod_metrics_src {
	const char *what;            /* "--metrics" or "[metrics] listen" */
	struct ev_loop *loop;
	struct net_server *srv;
	struct iod_buf_pool *pool;
	struct iod_buf_config bufs;  /* buffers per zone */
};

/**
 * Serve /metrics on host:port; time every request of src->srv by op.
 * @param err on failure one line naming the address and why
 * @return 0, or metrics_start()'s error (-EADDRINUSE, -EINVAL, ...),
 *	-ENOMEM, -ENOTSUP (built without libmicrohttpd)
 */
int iod_metrics_start(struct iod_metrics **out, const char *host, uint16_t port,
		      const struct iod_metrics_src *src, char *err, size_t errcap);

/** The port bound (for port 0). */
uint16_t iod_metrics_port(const struct iod_metrics *m);

/** Stop the HTTP thread and the timer, free (NULL is fine). Loop thread. */
void iod_metrics_stop(struct iod_metrics *m);

#endif

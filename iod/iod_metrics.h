/*
 * iod_metrics.h - an iod's Prometheus endpoint (metrics.h): its requests
 * by op, the transport counters (with the server gauges: requests in
 * progress, credit limit, handshakes) and the bulk buffer pool's use. The
 * pool is loop-only, so a loop timer copies its free counts once a second
 * into a snapshot the HTTP thread reads under a mutex. The endpoint itself
 * is daemon.h's (dmn_metrics_start).
 */
#ifndef RPFS_IOD_METRICS_H
#define RPFS_IOD_METRICS_H

#include "daemon.h"
#include "iod_buf.h"

/* What the endpoint reports beside dmn_metrics_src (the server); every
 * pointer must outlive dmn_metrics_stop. */
struct iod_metrics_src {
	struct iod_buf_pool *pool;
	struct iod_buf_config bufs;  /* buffers per zone */
};

/* The iod's endpoint, for dmn_metrics_start with a struct iod_metrics_src
 * (zeroed when built without libmicrohttpd: dmn_metrics_start refuses). */
extern const struct dmn_metrics_kind iod_metrics_kind;

#endif

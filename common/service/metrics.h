/*
 * metrics.h - the Prometheus endpoint of a daemon or a mount: GET /metrics
 * served by libmicrohttpd from its own thread, never from the daemon's
 * loop, and a small writer for the text exposition format 0.0.4 (HELP and
 * TYPE lines, escaped label values, histograms).
 *
 * Each program registers one callback that writes its families; it runs
 * on the HTTP thread, one scrape at a time, so it may read only what is
 * safe from another thread: relaxed atomics (net_stats, metrics_ops) or a
 * snapshot the loop publishes under a lock.
 */
#ifndef RPFS_METRICS_H
#define RPFS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "metrics_op.h"
#include "net.h"

/* The text a scrape builds (grows as needed; err set on out of memory,
 * then the scrape answers 500). One scrape's, HTTP thread only. */
struct metrics_buf {
	char *p;
	size_t len, cap;
	int err;
};

struct metrics_srv;

/* Writes a program's families into b (HTTP thread). */
typedef void (*metrics_fn)(struct metrics_buf *b, void *arg);

/**
 * Listen on host:port and answer GET /metrics from libmicrohttpd's thread.
 * @param what the option or key that gave the address, for messages
 * @param fn writes the program's families (process_* are added)
 * @param err on failure one line: "WHAT HOST:PORT: why"
 * @return 0; -EINVAL host does not resolve; -EADDRINUSE, -EADDRNOTAVAIL,
 *	-EACCES or another -errno from socket/bind/listen; -ENOMEM; -EIO
 *	libmicrohttpd did not start
 */
int metrics_start(struct metrics_srv **out, const char *what, const char *host,
		  uint16_t port, metrics_fn fn, void *arg, char *err,
		  size_t errcap);

/** The port bound (for port 0). */
uint16_t metrics_port(const struct metrics_srv *s);

/** Stop the HTTP thread (waits for a scrape in progress) and free. NULL ok. */
void metrics_stop(struct metrics_srv *s);

/**
 * Start a family: "# HELP name help" and "# TYPE name type".
 * @param type "counter", "gauge" or "histogram"
 */
void metrics_family(struct metrics_buf *b, const char *name, const char *type,
		    const char *help);

/**
 * One sample line: name{k1="v1",...} value. The labels are NULL-terminated
 * key, value pairs of strings; values are escaped (\\, \", \n).
 */
void metrics_u64(struct metrics_buf *b, const char *name, uint64_t v, ...)
	__attribute__((sentinel));
/** As metrics_u64 with a floating-point value. */
void metrics_f64(struct metrics_buf *b, const char *name, double v, ...)
	__attribute__((sentinel));

/**
 * A histogram's samples in seconds: name_bucket{...,le="..."} (cumulative,
 * 2^j microseconds), name_sum, name_count. label/value: one label, or NULL.
 */
void metrics_hist(struct metrics_buf *b, const char *name, const char *label,
		  const char *value, const struct metrics_hist *h);

/**
 * The per-op families of one endpoint: prefix_requests_total{op},
 * prefix_errors_total{op,errno} and prefix_latency_seconds{op} (only ops
 * seen). prefix e.g. "rpfs_server" or "rpfs_client".
 */
void metrics_ops_write(struct metrics_buf *b, const char *prefix,
		       const struct metrics_ops *m);

/** The transport counters st (net_stats) with a transport label. */
void metrics_net_write(struct metrics_buf *b, const struct net_stats *st,
		       const char *transport);

/**
 * The server-only transport gauges of st with a transport label: requests
 * in progress (credits in use over all connections), the credit limit of
 * each connection, connections in the handshake.
 */
void metrics_net_server_write(struct metrics_buf *b, const struct net_stats *st,
			      const char *transport);

/** process_cpu_seconds_total, process_resident_memory_bytes,
 * process_open_fds, process_start_time_seconds from /proc/self. */
void metrics_process_write(struct metrics_buf *b);

#endif

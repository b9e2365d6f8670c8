/*
 * fe_metrics.h - a mount's Prometheus endpoint (-o metrics=HOST:PORT;
 * metrics.h): the client's requests by op (latency from submit to reply,
 * errors by errno), its transport counters, and per server (the mgr and
 * each iod) whether it answers and the calls in flight to it. Everything
 * it reads is atomic, so the HTTP thread needs no snapshot.
 */
#ifndef RPFS_FE_METRICS_H
#define RPFS_FE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "cli_core.h"

struct fe_metrics;

/**
 * Serve /metrics on host:port and time every call of fs->net by op.
 * @param fs the mounted file system; must outlive fe_metrics_stop
 * @param err on failure one line naming the address and why
 * @return 0, or metrics_start()'s error (-EADDRINUSE, -EINVAL, ...),
 *	-ENOMEM, -ENOTSUP (built without libmicrohttpd)
 */
int fe_metrics_start(struct fe_metrics **out, const char *host, uint16_t port,
		     struct cli_fs *fs, char *err, size_t errcap);

/** The port bound (for port 0). */
uint16_t fe_metrics_port(const struct fe_metrics *m);

/** Stop timing calls, stop the HTTP thread, free (NULL is fine). */
void fe_metrics_stop(struct fe_metrics *m);

#endif

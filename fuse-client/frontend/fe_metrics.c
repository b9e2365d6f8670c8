/* fe_metrics.c - a mount's /metrics families; see fe_metrics.h. */
#include "fe_metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#if RPFS_HAVE_METRICS
#include "fe_loop.h"
#include "metrics.h"

/* The endpoint; immutable after start except ops (atomics). */
struct fe_metrics {
	struct cli_fs *fs;
	struct net_client *cl;
	struct metrics_srv *http;
	struct metrics_ops *ops; /* client latency by op (net_client_set_opstats) */
};

/* Per server: connected (no transport failure since the last success),
 * reconnections and calls in flight; the mgr with role="mgr", each iod
 * with role="iod" and its id. HTTP thread; cost: three atomic loads per
 * server. */
static void fe_metrics_servers(struct metrics_buf *b, struct fe_metrics *m)
{
	const char *up = "rpfs_client_connected";
	const char *fl = "rpfs_client_server_calls_in_flight";
	const char *rc = "rpfs_client_server_reconnects_total";
	struct cli_fs *fs = m->fs;
	char id[8];
	uint16_t i;

	metrics_family(b, up, "gauge",
		       "1 while the server answers this mount: 0 from a call that failed "
		       "in the transport (refused, reset, timed out) until one succeeds.");
	metrics_u64(b, up, !atomic_load_explicit(&fs->mgr_failing, memory_order_relaxed),
		    "role", "mgr", NULL);
	for (i = 0; i < fs->niods; i++) {
		snprintf(id, sizeof(id), "%u", i);
		metrics_u64(b, up, !atomic_load_explicit(&fs->iods[i].failing,
							 memory_order_relaxed),
			    "role", "iod", "iod", id, NULL);
	}
	metrics_family(b, rc, "counter",
		       "Times the connection to the server was set up again after its "
		       "first time.");
	metrics_u64(b, rc, net_conn_reconnects(fs->mgr), "role", "mgr", NULL);
	for (i = 0; i < fs->niods; i++) {
		snprintf(id, sizeof(id), "%u", i);
		metrics_u64(b, rc, net_conn_reconnects(fs->iods[i].conn),
			    "role", "iod", "iod", id, NULL);
	}
	metrics_family(b, fl, "gauge",
		       "Calls sent to the server and not yet collected; each holds one of "
		       "its credits until the reply.");
	metrics_u64(b, fl, net_conn_calls_in_flight(fs->mgr), "role", "mgr", NULL);
	for (i = 0; i < fs->niods; i++) {
		snprintf(id, sizeof(id), "%u", i);
		metrics_u64(b, fl, net_conn_calls_in_flight(fs->iods[i].conn),
			    "role", "iod", "iod", id, NULL);
	}
}

/* The FUSE requests the kernel sent, by opcode (fe_loop_fuse_count): the
 * first half of a metadata op's cost, the calls by op above the second.
 * HTTP thread; cost: one atomic load per opcode. */
static void fe_metrics_fuse(struct metrics_buf *b)
{
	const char *fam = "rpfs_client_fuse_requests_total";
	const char *name;
	unsigned op;

	metrics_family(b, fam, "counter",
		       "FUSE requests the kernel sent this mount, by opcode.");
	for (op = 0; op <= FE_LOOP_FUSE_OPS; op++) {
		uint64_t n = fe_loop_fuse_count(op, &name);

		if (name && n) /* as the per-op families: no zero series */
			metrics_u64(b, fam, n, "op", name, NULL);
	}
}

/* metrics_fn: the client's families. HTTP thread. */
static void fe_metrics_write(struct metrics_buf *b, void *arg)
{
	struct fe_metrics *m = arg;
	struct net_stats st;

	metrics_ops_write(b, "rpfs_client", m->ops);
	fe_metrics_fuse(b);
	metrics_family(b, "rpfs_client_calls_in_flight", "gauge",
		       "Calls sent and not yet collected; each holds a server credit "
		       "until its reply.");
	metrics_u64(b, "rpfs_client_calls_in_flight", net_client_calls_in_flight(m->cl), NULL);
	fe_metrics_servers(b, m);
	metrics_family(b, "rpfs_client_lease_resets_total", "counter",
		       "Times -o leases dropped every leased name at once: a callback "
		       "wait that failed, a mgr restart, a RESET from the mgr.");
	metrics_u64(b, "rpfs_client_lease_resets_total",
		    atomic_load(&m->fs->lease_resets), NULL);
	net_client_stats(m->cl, &st);
	metrics_net_write(b, &st, net_client_transport(m->cl));
}

/* See fe_metrics.h. */
int fe_metrics_start(struct fe_metrics **out, const char *host, uint16_t port,
		     struct cli_fs *fs, char *err, size_t errcap)
{
	struct fe_metrics *m = calloc(1, sizeof(*m));
	int rc;

	rc = -ENOMEM;
	snprintf(err, errcap, "-o metrics: out of memory");
	if (!m)
		return rc;
	m->ops = calloc(1, sizeof(*m->ops));
	if (!m->ops)
		goto out_free_m;
	m->fs = fs;
	m->cl = fs->net;
	rc = metrics_start(&m->http, "-o metrics", host, port, fe_metrics_write,
			   m, err, errcap);
	if (rc)
		goto out_free_ops;
	net_client_set_opstats(fs->net, m->ops);
	*out = m;
	return 0;

out_free_ops:
	free(m->ops);
out_free_m:
	free(m);
	return rc;
}

/* See fe_metrics.h. */
uint16_t fe_metrics_port(const struct fe_metrics *m)
{
	return metrics_port(m->http);
}

/* See fe_metrics.h. Timing stops first; calls still in flight may have
 * read the pointer, so ops is freed only when the client is idle (the
 * caller stops this after the FUSE loop ended). */
void fe_metrics_stop(struct fe_metrics *m)
{
	if (!m)
		return;
	net_client_set_opstats(m->cl, NULL);
	metrics_stop(m->http);
	free(m->ops);
	free(m);
}

#else /* !RPFS_HAVE_METRICS */

/* See fe_metrics.h: built without libmicrohttpd. */
int fe_metrics_start(struct fe_metrics **out, const char *host, uint16_t port,
		     struct cli_fs *fs, char *err, size_t errcap)
{
	snprintf(err, errcap, "-o metrics: this rpfs-fuse was built without "
		 "metrics (meson -Dmetrics=enabled, libmicrohttpd-dev)");
	return -ENOTSUP;
}

/* See fe_metrics.h. */
uint16_t fe_metrics_port(const struct fe_metrics *m)
{
	return 0;
}

/* See fe_metrics.h. */
void fe_metrics_stop(struct fe_metrics *m)
{
}

#endif

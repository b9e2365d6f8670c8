/*
 * net.c - the backend-independent part of the transport: defaults, option
 * checks, dispatch of every net_* call to the backend chosen when the
 * client or server was created, counters, and small iovec/time helpers the
 * backends share.
 */
#include "net_int.h"
#include "metrics_op.h"
#include "log.h"
#include "net_auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#if RPFS_HAVE_VERBS
#include <infiniband/verbs.h>
#endif

/* Fill o with the defaults; the transport comes from $RPFS_TRANSPORT when
 * that names one (config files and flags override it afterwards). */
void net_opts_default(struct net_opts *o)
{
	const char *env = getenv("RPFS_TRANSPORT");

	memset(o, 0, sizeof(*o));
	o->credits = NET_DEFAULT_CREDITS;
	o->timeout_ms = NET_DEFAULT_TIMEOUT_MS;
	o->request_timeout_ms = NET_DEFAULT_REQUEST_TIMEOUT_MS;
	o->tcp_lanes = NET_DEFAULT_TCP_LANES;
	o->transport = NET_TRANSPORT_TCP;
	if (env && env[0])
		(void)net_transport_parse(env, &o->transport);
	o->poll_mode = NET_POLL_ADAPTIVE;
	o->inline_max = NET_DEFAULT_INLINE_MAX;
	o->fast_max = NET_DEFAULT_FAST_MAX;
	o->pipeline_unit = NET_DEFAULT_PIPELINE_UNIT;
	o->max_clients = NET_DEFAULT_MAX_CLIENTS;
	o->pin_max = 256ull << 20;
}

static const char *const net_transport_names[] = {
	[NET_TRANSPORT_TCP] = "tcp",
	[NET_TRANSPORT_VERBS] = "verbs",
	[NET_TRANSPORT_AUTO] = "auto",
};

/* Map a transport name to its enum value. */
int net_transport_parse(const char *s, enum net_transport *t)
{
	for (size_t i = 0; i < sizeof(net_transport_names) / sizeof(net_transport_names[0]); i++) {
		if (strcmp(s, net_transport_names[i]) == 0) {
			*t = (enum net_transport)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* Name of a transport value, "?" when out of range. */
const char *net_transport_name(enum net_transport t)
{
	if ((unsigned)t >= sizeof(net_transport_names) / sizeof(net_transport_names[0]))
		return "?";
	return net_transport_names[t];
}

/* Every counter of struct net_stats, in the order they are reported. */
#define NET_STATS_FIELDS(X)                                                   \
	X(msgs_tx) X(msgs_rx) X(bytes_tx) X(bytes_rx) X(bulk_pull_bytes)      \
	X(bulk_push_bytes) X(data_frames) X(credit_waits) X(timeouts)         \
	X(reconnects) X(conn_errors) X(rejects) X(auth_ok) X(auth_fail)       \
	X(inline_msgs) X(inline_bytes) X(fast_msgs) X(fast_bytes)             \
	X(rdma_read_ops) X(rdma_read_bytes) X(rdma_write_ops)                 \
	X(rdma_write_bytes) X(pipeline_units) X(sge_max) X(reg_count)         \
	X(dereg_count) X(reg_bytes) X(reg_cache_hits) X(reg_cache_misses)     \
	X(reg_cache_evictions) X(pinned_bytes) X(srq_posted) X(poll_sleeps) \
	X(reg_ns) X(ogr_groups) X(ogr_fallbacks) X(rdma_signaled)            \
	X(ogr_cost_a_ns) X(ogr_cost_b_ns) X(ogr_cal_ns)                      \
	X(client_copy_bytes) X(data_ops) X(pipe_bytes) X(pipe_staged_bytes) \
	X(conns_open) X(deadline_closes) X(unauth_open) X(unauth_closes)  \
	X(reqs_active) X(credit_limit)

/* Format st as one JSON object; see net.h. Cost: one pass, no allocation. */
int net_stats_json(const struct net_stats *st, const char *transport,
		   char *buf, size_t cap)
{
	size_t n = 0;
	int w;

	w = snprintf(buf, cap, "{\"transport\":\"%s\"", transport);
	if (w < 0 || (size_t)w >= cap)
		return -ERANGE;
	n = (size_t)w;
#define NET_JSON(f)                                                           \
	w = snprintf(buf + n, cap - n, ",\"" #f "\":%llu",                    \
		     (unsigned long long)st->f);                               \
	if (w < 0 || (size_t)w >= cap - n)                                    \
		return -ERANGE;                                                \
	n += (size_t)w;
	NET_STATS_FIELDS(NET_JSON)
#undef NET_JSON
	if (n + 2 > cap)
		return -ERANGE;
	buf[n++] = '}';
	buf[n] = '\0';
	return (int)n;
}

/* Copy o (or the defaults when NULL) into out and check the ranges.
 * credits go on the wire as u16. */
int net_opts_check(const struct net_opts *o, struct net_opts *out)
{
	if (o)
		*out = *o;
	else
		net_opts_default(out);
	if (out->credits < 1 || out->credits > 65535 || out->timeout_ms < 1)
		return -EINVAL;
	if (out->request_timeout_ms == 0)
		out->request_timeout_ms = NET_DEFAULT_REQUEST_TIMEOUT_MS;
	if (out->request_timeout_ms < 0 ||
	    out->request_timeout_ms > NET_MAX_REQUEST_TIMEOUT_MS)
		return -EINVAL;
	if (out->tcp_lanes == 0)
		out->tcp_lanes = NET_DEFAULT_TCP_LANES;
	if (out->tcp_lanes < 1 || out->tcp_lanes > NET_MAX_TCP_LANES)
		return -EINVAL;
	/* verbs knobs left zero (opts not from net_opts_default): defaults */
	if (out->max_clients < 1)
		out->max_clients = NET_DEFAULT_MAX_CLIENTS;
	if (!out->inline_max && !out->fast_max) {
		out->inline_max = NET_DEFAULT_INLINE_MAX;
		out->fast_max = NET_DEFAULT_FAST_MAX;
	}
	if (!out->pipeline_unit)
		out->pipeline_unit = NET_DEFAULT_PIPELINE_UNIT;
	if (out->inline_max > 32u * 1024)
		out->inline_max = 32u * 1024;
	if (out->fast_max > 1024u * 1024)
		out->fast_max = 1024u * 1024;
	return 0;
}

/*
 * Pick the backend for a transport: tcp, verbs, or (auto) verbs when an
 * RDMA device is present. @return 0, -EPROTONOSUPPORT (verbs asked for but
 * not built in)
 */
int net_backend(enum net_transport t, const struct net_client_ops **c,
		       const struct net_server_ops **s)
{
	*c = &tcp_client_ops;
	*s = &tcp_server_ops;
	if (t == NET_TRANSPORT_TCP)
		return 0;
#if RPFS_HAVE_VERBS
	if (t == NET_TRANSPORT_AUTO) {
		int n = 0;
		struct ibv_device **l = ibv_get_device_list(&n);
		if (l)
			ibv_free_device_list(l);
		if (n <= 0)
			return 0;
	}
	*c = &vb_client_ops;
	*s = &vb_server_ops;
	return 0;
#else
	return t == NET_TRANSPORT_AUTO ? 0 : -EPROTONOSUPPORT;
#endif
}

/* With [net] encrypt on, say once per client or server that its backend
 * does not encrypt: verbs seals its messages and bulk data with a MAC
 * (vb_seal.h) but the HCA places the data as it is, so only TCP encrypts
 * (net_seal.h), and the setting must not be silently void. */
void net_encrypt_check(const struct net_opts *o,
			      const struct net_client_ops *co, const char *what)
{
	if (o->encrypt && net_auth_keyed(o) && co != &tcp_client_ops)
		log_warn("net: [net] encrypt is on, but this %s runs on %s, which "
			 "does not encrypt: its messages and data carry a MAC but "
			 "travel in the clear", what, co->name);
}

/* ------------------------------------------------------------------ client */

/* Create a client through its backend (which starts the progress thread). */
int net_client_new(struct net_client **out, const struct net_opts *o)
{
	struct net_opts opts;
	int rc = net_opts_check(o, &opts);

	const struct net_client_ops *co;
	const struct net_server_ops *so;

	if (rc)
		return rc;
	rc = net_backend(opts.transport, &co, &so);
	if (rc)
		return rc;
	net_encrypt_check(&opts, co, "client");
	return co->client_new(out, &opts);
}

/* Stop the progress thread and free everything (calls must be done). */
void net_client_free(struct net_client *cl)
{
	if (cl)
		cl->ops->client_free(cl);
}

/* Create a lazily connecting handle to host:port. */
int net_conn_new(struct net_client *cl, const char *host, uint16_t port,
		 struct net_conn **out)
{
	if (!cl || !host || !host[0] || strlen(host) > PROTO_MAX_HOST ||
	    port == 0 || !out)
		return -EINVAL;
	return cl->ops->conn_new(cl, host, port, out);
}

/* Snapshot one counter block field by field (relaxed loads). */
void net_stats_snapshot(const struct net_stats *in, struct net_stats *out)
{
#define NET_SNAP(f) out->f = __atomic_load_n(&in->f, __ATOMIC_RELAXED);
	NET_STATS_FIELDS(NET_SNAP)
#undef NET_SNAP
}

/* Counters of the whole client. */
void net_client_stats(struct net_client *cl, struct net_stats *st)
{
	net_stats_snapshot(&cl->st, st);
}

/* Declare long-lived client memory; tcp needs none. */
int net_client_register_mem(struct net_client *cl, void *addr, size_t len)
{
	if (!cl || !addr || !len)
		return -EINVAL;
	if (!cl->ops->register_mem)
		return 0;
	return cl->ops->register_mem(cl, addr, len);
}

/* Forget declared client memory. */
int net_client_unregister_mem(struct net_client *cl, void *addr)
{
	if (!cl || !addr)
		return -EINVAL;
	if (!cl->ops->unregister_mem)
		return 0;
	return cl->ops->unregister_mem(cl, addr);
}

/* The backend this client runs on. */
const char *net_client_transport(const struct net_client *cl)
{
	return cl->ops->name;
}

/* Whether submit sends write data before returning; see net.h. */
int net_client_wr_sent_at_submit(const struct net_client *cl)
{
	return cl->ops->wr_sent_at_submit;
}

/* Whether the backend can append read data to a pipe: see net.h. */
int net_client_rd_to_pipe(const struct net_client *cl)
{
	return cl->ops->rd_to_pipe;
}

/* See net.h. */
uint64_t net_client_calls_in_flight(struct net_client *cl)
{
	return __atomic_load_n(&cl->calls_timed, __ATOMIC_RELAXED);
}

/* See net.h. */
uint64_t net_conn_calls_in_flight(const struct net_conn *c)
{
	return __atomic_load_n(&c->calls_open, __ATOMIC_RELAXED);
}

/* See net_int.h. */
void net_conn_reconnected(struct net_conn *c)
{
	NET_STAT_ADD(c->head ? c->head : c, reconnects, 1);
	NET_STAT_ADD(&c->cl->st, reconnects, 1);
}

/* See net.h. */
uint64_t net_conn_reconnects(const struct net_conn *c)
{
	return __atomic_load_n(&c->reconnects, __ATOMIC_RELAXED);
}

/* See net.h. */
void net_client_set_opstats(struct net_client *cl, struct metrics_ops *m)
{
	__atomic_store_n(&cl->opstats, m, __ATOMIC_RELAXED);
}

/* ----------------------------------------------------------------- helpers */

/* See net_int.h. Cost: one clock_gettime (usually vDSO, no syscall). */
uint64_t net_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* See net_int.h. The timespec form of a deadline, for the futex and
 * pthread timed waits. */
struct timespec net_ns_to_ts(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };
	return ts;
}

/* See net_int.h. Rounds up, so a wait of the result does not wake
 * just before the deadline and spin. Cost: one clock read. */
int net_ms_left(uint64_t deadline_ns)
{
	uint64_t now = net_now_ns();
	uint64_t ms;

	if (now >= deadline_ns)
		return 0;
	ms = (deadline_ns - now + 999999) / 1000000;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* See net_int.h. Cost: O(cnt). */
uint64_t net_iov_total(const struct iovec *iov, int cnt)
{
	uint64_t sum = 0;

	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len > UINT64_MAX - sum)
			return UINT64_MAX;
		sum += iov[i].iov_len;
	}
	return sum;
}

/* Walks iov from the start: O(cnt) per call, fine for <= NET_MAX_IOV. */
void net_iov_copy_in(const struct iovec *iov, int cnt, uint64_t off,
		     const void *src, size_t n)
{
	const uint8_t *s = src;

	for (int i = 0; i < cnt && n > 0; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t k = iov[i].iov_len - off;
		if (k > n)
			k = n;
		memcpy((uint8_t *)iov[i].iov_base + off, s, k);
		s += k;
		n -= k;
		off = 0;
	}
}

/* See net_int.h. No copy: out points into iov's memory. Walks iov
 * from the start: O(cnt) per call, fine for <= NET_MAX_IOV. */
int net_iov_slice(const struct iovec *iov, int cnt, uint64_t off, uint64_t len,
		  struct iovec *out, int max)
{
	int n = 0;

	for (int i = 0; i < cnt && len > 0 && n < max; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		uint64_t k = iov[i].iov_len - off;
		if (k > len)
			k = len;
		out[n].iov_base = (uint8_t *)iov[i].iov_base + off;
		out[n].iov_len = k;
		n++;
		len -= k;
		off = 0;
	}
	return n;
}

/* IPv4 and IPv6 addresses compared by their address bytes alone: the
 * per-source caps of the servers' handshake limits. */
int net_addr_same_host(const void *a, const void *b)
{
	const struct sockaddr *x = a, *y = b;

	if (x->sa_family != y->sa_family)
		return 0;
	if (x->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (x->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr,
			       sizeof(struct in6_addr));
	return 0;
}

/* See net_int.h. */
void net_evict_see(struct net_evict *e, void *c, double born, const void *addr)
{
	e->n++;
	if (!e->oldest || born < e->born) {
		e->oldest = c;
		e->born = born;
	}
	if (!net_addr_same_host(addr, e->src))
		return;
	e->same++;
	if (!e->oldest_same || born < e->born_same) {
		e->oldest_same = c;
		e->born_same = born;
	}
}

/* See net_int.h. */
void *net_evict_pick(const struct net_evict *e, int full, int *count)
{
	if (e->same >= NET_UNAUTH_PER_SOURCE) {
		*count = e->same;
		return e->oldest_same;
	}
	*count = e->n;
	return e->n >= NET_UNAUTH_MAX || full ? e->oldest : NULL;
}

/* See net_int.h. */
void net_addr_format(const void *sa, char *buf, size_t cap)
{
	const struct sockaddr *s = sa;
	char host[INET6_ADDRSTRLEN] = "?";

	if (s->sa_family == AF_INET) {
		const struct sockaddr_in *in = sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, cap, "%s:%u", host, ntohs(in->sin_port));
	} else if (s->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, cap, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, cap, "unknown");
	}
}

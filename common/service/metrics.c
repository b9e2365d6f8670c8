/* metrics.c - the Prometheus /metrics endpoint and its text writer; see
 * metrics.h. */
#include "metrics.h"
#include "addr.h"
#include "proto.h"

#include <dirent.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define METRICS_CTYPE "text/plain; version=0.0.4; charset=utf-8"

/* One endpoint. Immutable after metrics_start; the HTTP thread reads it. */
struct metrics_srv {
	struct MHD_Daemon *mhd;
	int fd;          /* the listening socket (MHD does not own it) */
	uint16_t port;   /* bound */
	metrics_fn fn;
	void *arg;
};

/* ------------------------------------------------------------------ writer */

/* Make room for n more bytes (and a NUL). @return 0, -ENOMEM (b->err set) */
static int mb_reserve(struct metrics_buf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 16384;
	char *p;

	if (b->err)
		return -ENOMEM;
	if (b->len + n + 1 <= b->cap)
		return 0;
	while (cap < b->len + n + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->err = 1;
		return -ENOMEM;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

/* Append the N bytes at S. A scrape appends a few thousand pieces, so
 * the plain ones go through here, not through printf. */
static void mb_put(struct metrics_buf *b, const char *s, size_t n)
{
	if (mb_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* Append the string S. */
static void mb_puts(struct metrics_buf *b, const char *s)
{
	mb_put(b, s, strlen(s));
}

/* Append V in decimal. */
static void mb_u64(struct metrics_buf *b, uint64_t v)
{
	char d[24];
	size_t i = sizeof(d);

	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	mb_put(b, d + i, sizeof(d) - i);
}

/* Append printf-formatted text: formatted once into the room left, and
 * once more only when it did not fit. */
static void __attribute__((format(printf, 2, 3)))
mb_printf(struct metrics_buf *b, const char *fmt, ...)
{
	size_t room;
	va_list ap;
	int n;

	if (b->err)
		return;
	room = b->cap > b->len ? b->cap - b->len : 0;
	va_start(ap, fmt);
	n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= room) {
		if (mb_reserve(b, (size_t)n))
			return;
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

/* Append a label value with \\, \" and \n escaped, as the format asks;
 * the runs between them are copied whole. */
static void mb_escaped(struct metrics_buf *b, const char *s)
{
	const char *run = s, *esc;

	for (; *s; s++) {
		esc = *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : *s == '\n' ? "\\n" : NULL;
		if (!esc)
			continue;
		mb_put(b, run, (size_t)(s - run));
		mb_put(b, esc, 2);
		run = s + 1;
	}
	mb_put(b, run, (size_t)(s - run));
}

/* Append KEY="VALUE" (escaped), after "{" if FIRST, else after ",". */
static void mb_label(struct metrics_buf *b, int first, const char *k, const char *v)
{
	mb_puts(b, first ? "{" : ",");
	mb_puts(b, k);
	mb_puts(b, "=\"");
	mb_escaped(b, v ? v : "");
	mb_puts(b, "\"");
}

/* Append name{k="v",...} from NULL-terminated key/value pairs in ap, with
 * an optional last pair (lk, lv) (the histogram's le), and a space. */
static void mb_series(struct metrics_buf *b, const char *name, va_list ap,
		      const char *lk, const char *lv)
{
	const char *k, *v;
	int n = 0;

	mb_puts(b, name);
	while ((k = va_arg(ap, const char *)) != NULL) {
		v = va_arg(ap, const char *);
		mb_label(b, n++ == 0, k, v);
	}
	if (lk)
		mb_label(b, n++ == 0, lk, lv);
	mb_puts(b, n ? "} " : " ");
}

/* See metrics.h. */
void metrics_family(struct metrics_buf *b, const char *name, const char *type,
		    const char *help)
{
	mb_puts(b, "# HELP ");
	mb_puts(b, name);
	mb_puts(b, " ");
	mb_puts(b, help);
	mb_puts(b, "\n# TYPE ");
	mb_puts(b, name);
	mb_puts(b, " ");
	mb_puts(b, type);
	mb_puts(b, "\n");
}

/* See metrics.h. */
void metrics_u64(struct metrics_buf *b, const char *name, uint64_t v, ...)
{
	va_list ap;

	va_start(ap, v);
	mb_series(b, name, ap, NULL, NULL);
	va_end(ap);
	mb_u64(b, v);
	mb_puts(b, "\n");
}

/* See metrics.h. */
void metrics_f64(struct metrics_buf *b, const char *name, double v, ...)
{
	va_list ap;

	va_start(ap, v);
	mb_series(b, name, ap, NULL, NULL);
	va_end(ap);
	mb_printf(b, "%.15g\n", v);
}

/* Write one series of a histogram: NAME with one optional label and the
 * le label (NULL: none), then its count N, or the text NUM if not NULL. */
static void mb_hist_line(struct metrics_buf *b, const char *name,
			 const char *label, const char *value, const char *le,
			 uint64_t n, const char *num)
{
	mb_puts(b, name);
	if (label)
		mb_label(b, 1, label, value);
	if (le)
		mb_label(b, !label, "le", le);
	mb_puts(b, label || le ? "} " : " ");
	if (num)
		mb_puts(b, num);
	else
		mb_u64(b, n);
	mb_puts(b, "\n");
}

/* The le values of the buckets, 2^j microseconds in seconds ("%.9g"),
 * formatted once per process (metrics_hist). */
static char bucket_le[METRICS_BUCKETS][24];
static pthread_once_t bucket_le_once = PTHREAD_ONCE_INIT;

/* Fill bucket_le (once, through bucket_le_once). */
static void bucket_le_init(void)
{
	int j;

	for (j = 0; j < METRICS_BUCKETS; j++)
		snprintf(bucket_le[j], sizeof(bucket_le[j]), "%.9g", (double)(1ull << j) * 1e-6);
}

/* See metrics.h. Reads count first: a sample recorded meanwhile may show
 * in a bucket but not the count, so cumulative counts are capped at it.
 * Cost: 28 lines, no printf but the sum's. */
void metrics_hist(struct metrics_buf *b, const char *name, const char *label,
		  const char *value, const struct metrics_hist *h)
{
	struct metrics_hist s;
	char series[160], num[32];
	uint64_t cum = 0;
	int j;

	pthread_once(&bucket_le_once, bucket_le_init);
	metrics_hist_read(h, &s);
	snprintf(series, sizeof(series), "%s_bucket", name);
	for (j = 0; j < METRICS_BUCKETS; j++) {
		cum += s.bucket[j];
		mb_hist_line(b, series, label, value, bucket_le[j],
			     cum < s.count ? cum : s.count, NULL);
	}
	mb_hist_line(b, series, label, value, "+Inf", s.count, NULL);
	snprintf(series, sizeof(series), "%s_sum", name);
	snprintf(num, sizeof(num), "%.15g", (double)s.sum_ns * 1e-9);
	mb_hist_line(b, series, label, value, NULL, 0, num);
	snprintf(series, sizeof(series), "%s_count", name);
	mb_hist_line(b, series, label, value, NULL, s.count, NULL);
}

/* The errno label: its symbolic name (ENOENT), or the number. */
static const char *errno_label(int e, char *buf, size_t cap)
{
	const char *s = e ? strerrorname_np(e) : NULL;

	if (s)
		return s;
	if (!e)
		return "other";
	snprintf(buf, cap, "%d", e);
	return buf;
}

/* See metrics.h. */
void metrics_ops_write(struct metrics_buf *b, const char *prefix,
		       const struct metrics_ops *m)
{
	char name[96], eb[16];
	uint64_t n;
	int op, e;

	snprintf(name, sizeof(name), "%s_requests_total", prefix);
	metrics_family(b, name, "counter", "Requests finished, by op.");
	for (op = 0; op < METRICS_OPS; op++) {
		n = __atomic_load_n(&m->lat[op].count, __ATOMIC_RELAXED);
		if (n)
			metrics_u64(b, name, n, "op", proto_op_name((uint16_t)op), NULL);
	}
	snprintf(name, sizeof(name), "%s_errors_total", prefix);
	metrics_family(b, name, "counter", "Requests that failed, by op and errno.");
	for (op = 0; op < METRICS_OPS; op++)
		for (e = 0; e < METRICS_ERRNOS; e++) {
			n = __atomic_load_n(&m->errors[op][e], __ATOMIC_RELAXED);
			if (n)
				metrics_u64(b, name, n, "op", proto_op_name((uint16_t)op),
					    "errno", errno_label(e, eb, sizeof(eb)), NULL);
		}
	snprintf(name, sizeof(name), "%s_latency_seconds", prefix);
	metrics_family(b, name, "histogram", "Request latency, by op.");
	for (op = 0; op < METRICS_OPS; op++)
		if (__atomic_load_n(&m->lat[op].count, __ATOMIC_RELAXED))
			metrics_hist(b, name, "op", proto_op_name((uint16_t)op),
				     &m->lat[op]);
}

/* One counter family with one series labelled by transport. */
static void net_counter(struct metrics_buf *b, const char *name,
			const char *help, uint64_t v, const char *transport)
{
	metrics_family(b, name, "counter", help);
	metrics_u64(b, name, v, "transport", transport, NULL);
}

/* The traffic families: frames, wire bytes, bulk bytes, bytes and
 * operations by mechanism. */
static void net_write_traffic(struct metrics_buf *b, const struct net_stats *st,
			      const char *t)
{
	const char *n;

	n = "rpfs_net_messages_total";
	metrics_family(b, n, "counter", "Request, reply and control frames.");
	metrics_u64(b, n, st->msgs_tx, "transport", t, "direction", "tx", NULL);
	metrics_u64(b, n, st->msgs_rx, "transport", t, "direction", "rx", NULL);
	n = "rpfs_net_wire_bytes_total";
	metrics_family(b, n, "counter", "Bytes on the wire, all frames.");
	metrics_u64(b, n, st->bytes_tx, "transport", t, "direction", "tx", NULL);
	metrics_u64(b, n, st->bytes_rx, "transport", t, "direction", "rx", NULL);
	n = "rpfs_net_bulk_bytes_total";
	metrics_family(b, n, "counter",
		       "Data of writes (pull: the server takes it) and reads (push: the "
		       "server sends it), counted at either end.");
	metrics_u64(b, n, st->bulk_pull_bytes, "transport", t, "direction", "pull", NULL);
	metrics_u64(b, n, st->bulk_push_bytes, "transport", t, "direction", "push", NULL);
	n = "rpfs_net_mechanism_bytes_total";
	metrics_family(b, n, "counter", "Payload bytes by the mechanism that moved them.");
	metrics_u64(b, n, st->inline_bytes, "transport", t, "mechanism", "inline", NULL);
	metrics_u64(b, n, st->fast_bytes, "transport", t, "mechanism", "fast", NULL);
	metrics_u64(b, n, st->rdma_read_bytes, "transport", t, "mechanism", "rdma_read", NULL);
	metrics_u64(b, n, st->rdma_write_bytes, "transport", t, "mechanism", "rdma_write", NULL);
	metrics_u64(b, n, st->pipe_bytes - st->pipe_staged_bytes, "transport", t,
		    "mechanism", "splice", NULL);
	metrics_u64(b, n, st->client_copy_bytes, "transport", t, "mechanism", "copy", NULL);
	n = "rpfs_net_mechanism_operations_total";
	metrics_family(b, n, "counter", "Messages or operations by mechanism.");
	metrics_u64(b, n, st->inline_msgs, "transport", t, "mechanism", "inline", NULL);
	metrics_u64(b, n, st->fast_msgs, "transport", t, "mechanism", "fast", NULL);
	metrics_u64(b, n, st->rdma_read_ops, "transport", t, "mechanism", "rdma_read", NULL);
	metrics_u64(b, n, st->rdma_write_ops, "transport", t, "mechanism", "rdma_write", NULL);
}

/* The memory registration families (verbs; zero on tcp). */
static void net_write_registration(struct metrics_buf *b,
				   const struct net_stats *st, const char *t)
{
	const char *n;

	net_counter(b, "rpfs_net_registrations_total", "Memory registrations (ibv_reg_mr).",
		    st->reg_count, t);
	net_counter(b, "rpfs_net_registered_bytes_total", "Bytes registered in total.",
		    st->reg_bytes, t);
	n = "rpfs_net_registration_cache_total";
	metrics_family(b, n, "counter", "Pin-down cache lookups by result.");
	metrics_u64(b, n, st->reg_cache_hits, "transport", t, "result", "hit", NULL);
	metrics_u64(b, n, st->reg_cache_misses, "transport", t, "result", "miss", NULL);
	metrics_u64(b, n, st->reg_cache_evictions, "transport", t, "result", "eviction", NULL);
	n = "rpfs_net_pinned_bytes";
	metrics_family(b, n, "gauge", "Memory pinned now.");
	metrics_u64(b, n, st->pinned_bytes, "transport", t, NULL);
}

/* The flow control, failure and connection families. */
static void net_write_health(struct metrics_buf *b, const struct net_stats *st,
			     const char *t)
{
	const char *n;

	net_counter(b, "rpfs_net_credit_waits_total", "Submits that waited for a credit.",
		    st->credit_waits, t);
	net_counter(b, "rpfs_net_timeouts_total", "Calls that timed out.", st->timeouts, t);
	net_counter(b, "rpfs_net_reconnects_total", "Reconnections.", st->reconnects, t);
	net_counter(b, "rpfs_net_connection_errors_total", "Connections that failed.",
		    st->conn_errors, t);
	net_counter(b, "rpfs_net_rejects_total", "Connections closed as malformed (server).",
		    st->rejects, t);
	n = "rpfs_net_handshakes_total";
	metrics_family(b, n, "counter", "Handshakes by whether they proved the cluster key.");
	metrics_u64(b, n, st->auth_ok, "transport", t, "result", "ok", NULL);
	metrics_u64(b, n, st->auth_fail, "transport", t, "result", "fail", NULL);
	n = "rpfs_net_connections_open";
	metrics_family(b, n, "gauge", "Connections open now (server).");
	metrics_u64(b, n, st->conns_open, "transport", t, NULL);
	net_counter(b, "rpfs_net_deadline_closes_total",
		    "Connections closed because a request's data came too late.",
		    st->deadline_closes, t);
}

/* See metrics.h. Names follow net_stats (net.h). */
void metrics_net_write(struct metrics_buf *b, const struct net_stats *st,
		       const char *t)
{
	net_write_traffic(b, st, t);
	net_write_registration(b, st, t);
	net_write_health(b, st, t);
}

/* See metrics.h. One series per family: per connection labels would
 * have no bound. */
void metrics_net_server_write(struct metrics_buf *b, const struct net_stats *st,
			      const char *t)
{
	const char *n;

	n = "rpfs_net_requests_in_progress";
	metrics_family(b, n, "gauge",
		       "Requests received and not yet answered, over all connections: "
		       "the credits in use.");
	metrics_u64(b, n, st->reqs_active, "transport", t, NULL);
	n = "rpfs_net_credit_limit";
	metrics_family(b, n, "gauge",
		       "Credits (requests outstanding) granted to each client connection.");
	metrics_u64(b, n, st->credit_limit, "transport", t, NULL);
	n = "rpfs_net_connections_unauthenticated";
	metrics_family(b, n, "gauge",
		       "Connections open and not yet through the key handshake.");
	metrics_u64(b, n, st->unauth_open, "transport", t, NULL);
}

/* Count the open descriptors (entries of /proc/self/fd, less the one the
 * listing itself holds). @return the count, -1 if unreadable */
static long count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;
}

/* The boot time (boot_time), read once per process. */
static unsigned long long boot_btime;
static pthread_once_t boot_btime_once = PTHREAD_ONCE_INIT;

/* Read btime from /proc/stat into boot_btime (0 if unknown); once, through
 * boot_btime_once: /proc/stat lists every interrupt, too dear to read on
 * each scrape for a constant. */
static void boot_btime_init(void)
{
	char line[256];
	FILE *f = fopen("/proc/stat", "re");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %llu", &boot_btime) == 1)
			break;
	fclose(f);
}

/* The boot time in seconds since the epoch (/proc/stat btime), 0 if
 * unknown. */
static unsigned long long boot_time(void)
{
	pthread_once(&boot_btime_once, boot_btime_init);
	return boot_btime;
}

/* CPU ticks (user + system) and the start time in ticks after boot, from
 * /proc/self/stat; zeros if unreadable. */
static void proc_stat(unsigned long long *ticks, unsigned long long *start)
{
	unsigned long long ut, st;
	char buf[1024], *p;
	FILE *f = fopen("/proc/self/stat", "re");
	size_t n;

	*ticks = *start = 0;
	if (!f)
		return;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	/* the fields after the command's ')': state is field 3 */
	p = strrchr(buf, ')');
	if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u"
			" %llu %llu %*d %*d %*d %*d %*d %*d %llu", &ut, &st, start) == 3)
		*ticks = ut + st;
	else
		*start = 0;
}

/* Resident pages, from /proc/self/statm; 0 if unreadable. */
static unsigned long long proc_rss_pages(void)
{
	unsigned long long pages, rss = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &pages, &rss) != 2)
		rss = 0;
	fclose(f);
	return rss;
}

/* See metrics.h. Cost: two small /proc reads and a directory listing
 * (/proc/stat only at the first scrape). */
void metrics_process_write(struct metrics_buf *b)
{
	double tck = (double)sysconf(_SC_CLK_TCK);
	unsigned long long ticks, start;
	struct rlimit rl;
	long fds;

	proc_stat(&ticks, &start);
	metrics_family(b, "process_cpu_seconds_total", "counter",
		       "User and system CPU time spent, in seconds.");
	metrics_f64(b, "process_cpu_seconds_total", (double)ticks / tck, NULL);
	metrics_family(b, "process_resident_memory_bytes", "gauge",
		       "Resident memory size in bytes.");
	metrics_u64(b, "process_resident_memory_bytes",
		    proc_rss_pages() * (unsigned long long)sysconf(_SC_PAGESIZE), NULL);
	metrics_family(b, "process_start_time_seconds", "gauge",
		       "Start time of the process since the epoch, in seconds.");
	metrics_f64(b, "process_start_time_seconds",
		    (double)boot_time() + (double)start / tck, NULL);
	fds = count_fds();
	if (fds >= 0) {
		metrics_family(b, "process_open_fds", "gauge", "Open file descriptors.");
		metrics_u64(b, "process_open_fds", (uint64_t)fds, NULL);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		metrics_family(b, "process_max_fds", "gauge",
			       "Limit on open file descriptors.");
		metrics_u64(b, "process_max_fds", (uint64_t)rl.rlim_cur, NULL);
	}
}

/* ------------------------------------------------------------------ server */

/* Queue a small plain-text answer with an HTTP status. */
static enum MHD_Result http_plain(struct MHD_Connection *conn,
				  unsigned int status, const char *text)
{
	struct MHD_Response *rsp;
	enum MHD_Result ret;

	rsp = MHD_create_response_from_buffer(strlen(text), (void *)text,
					      MHD_RESPMEM_PERSISTENT);
	if (!rsp)
		return MHD_NO;
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
	ret = MHD_queue_response(conn, status, rsp);
	MHD_destroy_response(rsp);
	return ret;
}

/* MHD_AccessHandlerCallback: GET /metrics builds the text (the program's
 * families, then process_*); anything else is 404 or 405. HTTP thread. */
static enum MHD_Result http_handle(void *cls, struct MHD_Connection *conn,
				   const char *url, const char *method,
				   const char *version, const char *upload,
				   size_t *upload_len, void **con_cls)
{
	struct metrics_srv *s = cls;
	struct metrics_buf b = { 0 };
	struct MHD_Response *rsp;
	enum MHD_Result ret;

	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return http_plain(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
	if (strcmp(url, "/metrics"))
		return http_plain(conn, MHD_HTTP_NOT_FOUND, "see /metrics\n");
	s->fn(&b, s->arg);
	metrics_process_write(&b);
	if (b.err || !b.p) {
		free(b.p);
		return http_plain(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	}
	rsp = MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_FREE);
	if (!rsp) {
		free(b.p);
		return MHD_NO;
	}
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONTENT_TYPE, METRICS_CTYPE);
	ret = MHD_queue_response(conn, MHD_HTTP_OK, rsp);
	MHD_destroy_response(rsp);
	return ret;
}

/* Resolve host:port and bind a listening TCP socket to the first address
 * that takes it. @return the socket, or -errno (-EINVAL: no such host) */
static int metrics_listen(const char *host, uint16_t port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	char ps[8];
	int fd = -EINVAL, one = 1;

	snprintf(ps, sizeof(ps), "%u", port);
	if (getaddrinfo(host, ps, &hints, &res))
		return -EINVAL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			fd = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0)
			break;
		close(fd);
		fd = -errno;
	}
	freeaddrinfo(res);
	return fd;
}

/* The port a socket is bound to. */
static uint16_t bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return 0;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* See metrics.h. The socket is bound here, so that a busy or bad address
 * gives its own errno; libmicrohttpd then serves it from its thread. */
int metrics_start(struct metrics_srv **out, const char *what, const char *host,
		  uint16_t port, metrics_fn fn, void *arg, char *err,
		  size_t errcap)
{
	struct metrics_srv *s = calloc(1, sizeof(*s));
	char addr[ADDR_STRLEN];
	int rc;

	addr_format(addr, sizeof(addr), host, port);
	if (!s) {
		snprintf(err, errcap, "%s %s: out of memory", what, addr);
		return -ENOMEM;
	}
	s->fn = fn;
	s->arg = arg;
	s->fd = metrics_listen(host, port);
	if (s->fd < 0) {
		rc = s->fd;
		snprintf(err, errcap, "%s %s: %s", what, addr,
			 rc == -EINVAL ? "host does not resolve" : strerror(-rc));
		goto out_free;
	}
	s->port = bound_port(s->fd);
	s->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL,
				  0, NULL, NULL, http_handle, s,
				  MHD_OPTION_LISTEN_SOCKET, (MHD_socket)s->fd,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned int)32,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10,
				  MHD_OPTION_END);
	if (!s->mhd) {
		rc = -EIO;
		snprintf(err, errcap, "%s %s: libmicrohttpd did not start", what, addr);
		goto out_close_fd;
	}
	*out = s;
	return 0;

out_close_fd:
	close(s->fd);
out_free:
	free(s);
	return rc;
}

/* See metrics.h. */
uint16_t metrics_port(const struct metrics_srv *s)
{
	return s->port;
}

/* See metrics.h. MHD_stop_daemon joins the thread; the socket is ours. */
void metrics_stop(struct metrics_srv *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->mhd);
	close(s->fd);
	free(s);
}

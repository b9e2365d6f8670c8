/*
 * test_metrics.c - the metrics module: log2 bucket boundaries, per-op
 * recording (errno slots), the exposition writer (label escaping,
 * cumulative histogram in seconds), the server transport gauges and the
 * HTTP endpoint (GET /metrics,
 * 404, a busy address refused with -EADDRINUSE and a message naming it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "metrics.h"

/* Bucket j holds latencies up to 2^j microseconds. */
static void test_buckets(void)
{
	CHECK(metrics_bucket(0) == 0, "0 ns");
	CHECK(metrics_bucket(1000) == 0, "1 us");
	CHECK(metrics_bucket(1001) == 1, "1.001 us");
	CHECK(metrics_bucket(2000) == 1, "2 us");
	CHECK(metrics_bucket(2001) == 2, "2.001 us");
	CHECK(metrics_bucket(1024000) == 10, "1024 us");
	CHECK(metrics_bucket((1ull << 24) * 1000) == 24, "2^24 us");
	CHECK(metrics_bucket((1ull << 24) * 1000 + 1) == METRICS_BUCKETS, "past the last");
	CHECK(metrics_bucket(UINT64_MAX) == METRICS_BUCKETS, "max");
}

/* Errors land in their errno's slot, odd statuses in slot 0. */
static void test_record(void)
{
	struct metrics_ops *m = calloc(1, sizeof(*m));

	metrics_op_record(m, 40, 0, 1500);
	metrics_op_record(m, 40, -ENOENT, 500);
	metrics_op_record(m, 40, -100000, 500);
	metrics_op_record(m, METRICS_OPS, -EIO, 1);   /* ignored */
	metrics_op_record(NULL, 40, 0, 1);            /* ignored */
	CHECK(m->lat[40].count == 3, "count %llu", (unsigned long long)m->lat[40].count);
	CHECK(m->lat[40].sum_ns == 2500, "sum");
	CHECK(m->lat[40].bucket[0] == 2 && m->lat[40].bucket[1] == 1, "buckets");
	CHECK(m->errors[40][ENOENT] == 1 && m->errors[40][0] == 1, "errno slots");
	free(m);
}

/* Escaping and the histogram text. */
static void test_writer(void)
{
	struct metrics_buf b = { 0 };
	struct metrics_hist h = { 0 };

	metrics_family(&b, "rpfs_x_total", "counter", "An x.");
	metrics_u64(&b, "rpfs_x_total", 7, "a", "q\"b\\c\nd", "e", "f", NULL);
	metrics_u64(&b, "rpfs_y", 1, NULL);
	metrics_hist_add(&h, 900);       /* bucket 0 */
	metrics_hist_add(&h, 3000);      /* bucket 2 */
	metrics_hist_add(&h, 100000000000ull); /* only +Inf */
	metrics_hist(&b, "rpfs_l_seconds", "op", "READ", &h);
	CHECK(!b.err && b.p, "no text");
	CHECK(strstr(b.p, "# HELP rpfs_x_total An x.\n# TYPE rpfs_x_total counter\n") != NULL,
	      "%s", b.p);
	CHECK(strstr(b.p, "rpfs_x_total{a=\"q\\\"b\\\\c\\nd\",e=\"f\"} 7\n") != NULL, "%s", b.p);
	CHECK(strstr(b.p, "\nrpfs_y 1\n") != NULL, "%s", b.p);
	CHECK(strstr(b.p, "rpfs_l_seconds_bucket{op=\"READ\",le=\"1e-06\"} 1\n") != NULL, "%s", b.p);
	CHECK(strstr(b.p, "rpfs_l_seconds_bucket{op=\"READ\",le=\"2e-06\"} 1\n") != NULL, "%s", b.p);
	CHECK(strstr(b.p, "rpfs_l_seconds_bucket{op=\"READ\",le=\"4e-06\"} 2\n") != NULL, "%s", b.p);
	CHECK(strstr(b.p, "rpfs_l_seconds_bucket{op=\"READ\",le=\"16.777216\"} 2\n") != NULL,
	      "%s", b.p);
	CHECK(strstr(b.p, "rpfs_l_seconds_bucket{op=\"READ\",le=\"+Inf\"} 3\n") != NULL, "%s", b.p);
	CHECK(strstr(b.p, "rpfs_l_seconds_sum{op=\"READ\"} 100.0000039\n") != NULL, "%s", b.p);
	CHECK(strstr(b.p, "rpfs_l_seconds_count{op=\"READ\"} 3\n") != NULL, "%s", b.p);
	free(b.p);
}

/* The server gauges: one series each, labelled by transport alone. */
static void test_net_server(void)
{
	struct metrics_buf b = { 0 };
	struct net_stats st = { .reqs_active = 3, .credit_limit = 32, .unauth_open = 1 };

	metrics_net_server_write(&b, &st, "tcp");
	CHECK(!b.err && b.p, "no text");
	CHECK(strstr(b.p, "# TYPE rpfs_net_requests_in_progress gauge\n"
		      "rpfs_net_requests_in_progress{transport=\"tcp\"} 3\n") != NULL, "%s", b.p);
	CHECK(strstr(b.p, "\nrpfs_net_credit_limit{transport=\"tcp\"} 32\n") != NULL,
	      "%s", b.p);
	CHECK(strstr(b.p, "\nrpfs_net_connections_unauthenticated{transport=\"tcp\"} 1\n")
	      != NULL, "%s", b.p);
	free(b.p);
}

/* metrics_fn for the endpoint test. */
static void write_one(struct metrics_buf *b, void *arg)
{
	metrics_family(b, "rpfs_test", "gauge", "A test.");
	metrics_u64(b, "rpfs_test", *(uint64_t *)arg, NULL);
}

/* Send a request line to 127.0.0.1:port; @return the answer (malloc'd) */
static char *http(uint16_t port, const char *line)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	char *out = calloc(1, 65536);
	size_t len = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		return out;
	}
	dprintf(fd, "%s HTTP/1.0\r\nHost: x\r\n\r\n", line);
	while (len < 65535 && (n = read(fd, out + len, 65535 - len)) > 0)
		len += (size_t)n;
	close(fd);
	return out;
}

/* GET /metrics, a 404, and a second endpoint on the same port refused. */
static void test_endpoint(void)
{
	struct metrics_srv *s, *s2 = NULL;
	uint64_t v = 42;
	char err[256] = "", want[128], *r;
	int rc = metrics_start(&s, "--t", "127.0.0.1", 0, write_one, &v, err, sizeof(err));

	CHECK(rc == 0, "start: %d %s", rc, err);
	if (rc)
		return;
	r = http(metrics_port(s), "GET /metrics");
	CHECK(strstr(r, "200 OK") && strstr(r, "\nrpfs_test 42\n") &&
	      strstr(r, "process_open_fds ") && strstr(r, "text/plain; version=0.0.4"),
	      "%s", r);
	free(r);
	r = http(metrics_port(s), "GET /other");
	CHECK(strstr(r, " 404 ") != NULL, "%s", r);
	free(r);
	rc = metrics_start(&s2, "--t", "127.0.0.1", metrics_port(s), write_one, &v, err,
			   sizeof(err));
	snprintf(want, sizeof(want), "--t 127.0.0.1:%u: Address already in use",
		 metrics_port(s));
	CHECK(rc == -EADDRINUSE && !strcmp(err, want), "busy: %d \"%s\"", rc, err);
	rc = metrics_start(&s2, "--t", "no.such.host.invalid", 0, write_one, &v, err,
			   sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "does not resolve"), "bad host: %d %s", rc, err);
	metrics_stop(s);
}

int main(void)
{
	test_buckets();
	test_record();
	test_writer();
	test_net_server();
	test_endpoint();
	return check_summary("metrics");
}

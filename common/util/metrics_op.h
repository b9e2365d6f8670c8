/*
 * metrics_op.h - cheap per-op counters for the Prometheus endpoint
 * (metrics.h): for each protocol op, a latency histogram with fixed log2
 * buckets, the request count and the errors by errno. Recording is a few
 * relaxed atomic adds, safe from any thread; reading (metrics_op_read) is
 * too, so the HTTP thread reads them while the loop or the client's
 * threads record. Part of libcommon (no HTTP dependency): the transport
 * records into it (net_client_set_opstats, net_server_set_opstats).
 */
#ifndef RPFS_METRICS_OP_H
#define RPFS_METRICS_OP_H

#include <stdint.h>

#define METRICS_OPS 64      /* op numbers 0..63 (proto.h) */
#define METRICS_ERRNOS 134  /* errno 1..133 counted by value; others in 0 */
/* Bucket j's upper bound is 2^j microseconds, j = 0..METRICS_BUCKETS-1
 * (1 us .. about 16.8 s); slower samples count only in +Inf. */
#define METRICS_BUCKETS 25

/* A latency histogram. Every field is updated and read with relaxed
 * atomics (no lock). Buckets are not cumulative here. */
struct metrics_hist {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t bucket[METRICS_BUCKETS];
};

/* Per-op counters of one endpoint (a server, or a client). Relaxed
 * atomics; a zeroed struct is empty. About 80 KiB: allocate it. */
struct metrics_ops {
	struct metrics_hist lat[METRICS_OPS];
	/* errors[op][e]: replies with status -e (e in 1..133), or with
	 * another negative status (e = 0) */
	uint64_t errors[METRICS_OPS][METRICS_ERRNOS];
};

/**
 * The bucket a latency falls into: the smallest j with ns <= 2^j us.
 * @return 0..METRICS_BUCKETS-1, or METRICS_BUCKETS (only +Inf)
 */
int metrics_bucket(uint64_t ns);

/** CLOCK_MONOTONIC now in nanoseconds, for timing a sample. */
uint64_t metrics_now_ns(void);

/** Add one sample of ns nanoseconds to h. Any thread; cost: 3 atomic adds. */
void metrics_hist_add(struct metrics_hist *h, uint64_t ns);

/**
 * Record one finished request: its latency, and an error when status < 0.
 * Ops >= METRICS_OPS are ignored. Any thread.
 * @param m the endpoint's counters (NULL: nothing recorded)
 * @param op the protocol op
 * @param status 0 or positive for success, -errno for an error
 * @param ns the latency in nanoseconds
 */
void metrics_op_record(struct metrics_ops *m, uint16_t op, int32_t status,
		       uint64_t ns);

/** Copy h with relaxed atomic loads into out (any thread). */
void metrics_hist_read(const struct metrics_hist *h, struct metrics_hist *out);

#endif

/* metrics_op.c - per-op latency histograms and error counts; see
 * metrics_op.h. */
#include "metrics_op.h"

#include <stddef.h>
#include <time.h>

/* See metrics_op.h. */
uint64_t metrics_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* See metrics_op.h: ceil(ns / 1000) microseconds (without overflow),
 * then the log2 bucket with one count-leading-zeros. */
int metrics_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000 + (ns % 1000 != 0);
	int j;

	if (us <= 1)
		return 0;
	j = 64 - __builtin_clzll(us - 1);
	return j < METRICS_BUCKETS ? j : METRICS_BUCKETS;
}

/* See metrics_op.h. */
void metrics_hist_add(struct metrics_hist *h, uint64_t ns)
{
	int j = metrics_bucket(ns);

	__atomic_fetch_add(&h->count, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->sum_ns, ns, __ATOMIC_RELAXED);
	if (j < METRICS_BUCKETS)
		__atomic_fetch_add(&h->bucket[j], 1, __ATOMIC_RELAXED);
}

/* See metrics_op.h. */
void metrics_op_record(struct metrics_ops *m, uint16_t op, int32_t status,
		       uint64_t ns)
{
	int e;

	if (!m || op >= METRICS_OPS)
		return;
	metrics_hist_add(&m->lat[op], ns);
	if (status >= 0)
		return;
	e = status < -(METRICS_ERRNOS - 1) ? 0 : -status;
	__atomic_fetch_add(&m->errors[op][e], 1, __ATOMIC_RELAXED);
}

/* See metrics_op.h. */
void metrics_hist_read(const struct metrics_hist *h, struct metrics_hist *out)
{
	int j;

	out->count = __atomic_load_n(&h->count, __ATOMIC_RELAXED);
	out->sum_ns = __atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED);
	for (j = 0; j < METRICS_BUCKETS; j++)
		out->bucket[j] = __atomic_load_n(&h->bucket[j], __ATOMIC_RELAXED);
}

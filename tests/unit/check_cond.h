/*
 * check_cond.h - the checks the iod and mgr unit tests share:
 *   CHECK(cond)            counts a failure and prints file:line and cond
 *                          when cond is false;
 *   CHECK_EQ(a, b)         the same for a == b (as long long), printing both
 *                          values;
 *   CHECK_RC(expr, want)   the same for an int return code, printing it with
 *                          strerror(-rc).
 * The test's main() returns failures != 0. Include it in one .c file only
 * (the counter is that file's). tests/unit/check.h is the variant with a
 * printf-style context and a check count.
 */
#ifndef RPFS_TEST_CHECK_COND_H
#define RPFS_TEST_CHECK_COND_H

#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                            \
			failures++;                                          \
		}                                                            \
	} while (0)

#define CHECK_EQ(a, b)                                                       \
	do {                                                                 \
		long long a_ = (long long)(a), b_ = (long long)(b);          \
		if (a_ != b_) {                                              \
			fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", \
				__FILE__, __LINE__, #a, a_, #b, b_);         \
			failures++;                                          \
		}                                                            \
	} while (0)

#define CHECK_RC(expr, want)                                                 \
	do {                                                                 \
		int rc_ = (expr);                                            \
		if (rc_ != (want)) {                                         \
			fprintf(stderr, "%s:%d: %s = %d (%s), want %d\n",     \
				__FILE__, __LINE__, #expr, rc_,               \
				strerror(-rc_), (want));                     \
			failures++;                                          \
		}                                                            \
	} while (0)

#endif

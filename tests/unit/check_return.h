/*
 * check_return.h - the CHECK of the transport unit tests whose test
 * functions return int: CHECK(cond) prints file:line and cond, and makes
 * the enclosing function return 1, when cond is false (later checks of
 * that function would only report the same fault again). The caller adds
 * the results up. tests/unit/check.h and check_cond.h are the counting
 * variants, which go on after a failure.
 */
#ifndef RPFS_TEST_CHECK_RETURN_H
#define RPFS_TEST_CHECK_RETURN_H

#include <stdio.h>

#define CHECK(c)                                                              \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__,   \
				__LINE__, #c);                                \
			return 1;                                             \
		}                                                             \
	} while (0)

#endif

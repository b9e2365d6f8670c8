/*
 * check.h - the CHECK macro the C unit tests share: CHECK(cond, fmt, ...)
 * counts a check and, when cond is false, a failure, printing file:line,
 * the condition and the printf-style context to stderr. check_summary()
 * prints "NAME: N checks, N failed" and gives the exit status. Include it
 * in one .c file only (the counters are that file's).
 */
#ifndef RPFS_TEST_CHECK_H
#define RPFS_TEST_CHECK_H

#include <stdio.h>

static int failures;
static long checks;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		checks++;                                                    \
		if (!(cond)) {                                               \
			failures++;                                          \
			fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__,       \
				__LINE__, #cond);                            \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
		}                                                            \
	} while (0)

/* Print the summary line of test name. @return 0 if every check passed,
 * else 1 (the exit status) */
static inline int check_summary(const char *name)
{
	printf("%s: %ld checks, %d failed\n", name, checks, failures);
	return failures ? 1 : 0;
}

#endif

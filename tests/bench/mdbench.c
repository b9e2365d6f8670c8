/*
 * mdbench.c - metadata benchmark: create, stat and unlink N files, spread
 * round-robin over D directories, and print ops/s per phase as JSON.
 *
 *   bench-md [-D] DIR NFILES NDIRS
 *
 * DIR must exist and is left as it was found. With NDIRS 1 the files go
 * straight into DIR; otherwise into DIR/d0..d{NDIRS-1} (made and removed
 * outside the timed phases). -D drops the kernel caches (dentries, inodes,
 * pages: /proc/sys/vm/drop_caches, needs root) before the stat and the
 * unlink phase, so they reach the file system instead of the dcache.
 * A create is open(O_CREAT|O_EXCL|O_WRONLY) plus close.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* md_now: monotonic seconds. */
static double md_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* md_path: path of file I into BUF. */
static void md_path(char *buf, size_t len, const char *dir, long i, long ndirs)
{
	if (ndirs > 1)
		snprintf(buf, len, "%s/d%ld/f%ld", dir, i % ndirs, i);
	else
		snprintf(buf, len, "%s/f%ld", dir, i);
}

/* md_drop: drop clean caches so the next phase reaches the file system.
 * Returns 0 or -errno. */
static int md_drop(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	int err = 0;

	sync();
	if (fd < 0)
		return -errno;
	if (write(fd, "3\n", 2) != 2)
		err = -errno;
	close(fd);
	return err;
}

/* md_parse: positive long from S, or -1. */
static long md_parse(const char *s, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < 1 || v > max)
		return -1;
	return v;
}

int main(int argc, char **argv)
{
	double t0, tc, ts, tu;
	char path[4096];
	struct stat st;
	long n, d, i;
	int drop = 0, a = 1, fd;

	if (argc > 1 && strcmp(argv[1], "-D") == 0) {
		drop = 1;
		a++;
	}
	if (argc - a != 3) {
		fprintf(stderr, "usage: %s [-D] DIR NFILES NDIRS\n", argv[0]);
		return 2;
	}
	n = md_parse(argv[a + 1], 100000000);
	d = md_parse(argv[a + 2], 1000000);
	if (n < 0 || d < 0) {
		fprintf(stderr, "%s: NFILES, NDIRS: expected positive integers, got \"%s\" \"%s\"\n",
			argv[0], argv[a + 1], argv[a + 2]);
		return 2;
	}
	const char *dir = argv[a];

	if (d > 1)
		for (i = 0; i < d; i++) {
			snprintf(path, sizeof(path), "%s/d%ld", dir, i);
			if (mkdir(path, 0755) < 0) {
				fprintf(stderr, "mkdir %s: %s\n", path, strerror(errno));
				return 1;
			}
		}

	t0 = md_now();
	for (i = 0; i < n; i++) {
		md_path(path, sizeof(path), dir, i, d);
		fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0) {
			fprintf(stderr, "create %s: %s\n", path, strerror(errno));
			return 1;
		}
		close(fd);
	}
	tc = md_now() - t0;

	if (drop && md_drop() < 0)
		fprintf(stderr, "%s: cannot drop caches\n", argv[0]);
	t0 = md_now();
	for (i = 0; i < n; i++) {
		md_path(path, sizeof(path), dir, i, d);
		if (stat(path, &st) < 0) {
			fprintf(stderr, "stat %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	ts = md_now() - t0;

	if (drop && md_drop() < 0)
		fprintf(stderr, "%s: cannot drop caches\n", argv[0]);
	t0 = md_now();
	for (i = 0; i < n; i++) {
		md_path(path, sizeof(path), dir, i, d);
		if (unlink(path) < 0) {
			fprintf(stderr, "unlink %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	tu = md_now() - t0;

	if (d > 1)
		for (i = 0; i < d; i++) {
			snprintf(path, sizeof(path), "%s/d%ld", dir, i);
			rmdir(path);
		}
	printf("{\"files\": %ld, \"dirs\": %ld, \"create\": %.1f, \"stat\": %.1f, "
	       "\"unlink\": %.1f, \"seconds\": %.3f}\n",
	       n, d, n / tc, n / ts, n / tu, tc + ts + tu);
	return 0;
}

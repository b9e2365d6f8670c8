/*
 * space_test.c - rpfs_fallocate and rpfs_seek checker for librpfs, run by
 * tests/integration/test_space.py against real daemons (default layout:
 * 64 KiB units over 4 iods).
 *
 *   rpfs-space-test MGR PATH
 *	Create PATH with 8 units of 'a', punch a hole from 100 bytes into
 *	unit 2 to 100 bytes into unit 5, allocate up to 12 units, zero 100
 *	bytes around the end of unit 0 and 10 bytes past the end, and check
 *	sizes, contents, st_blocks, SEEK_DATA/SEEK_HOLE answers and the
 *	errors of bad calls. Leaves the file for the caller to read through
 *	a mount.
 * Exit 0 all checks passed, 1 a check failed, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rpfs.h"

#define U 65536ull
#define FL_KEEP_SIZE 0x01
#define FL_PUNCH_HOLE 0x02
#define FL_COLLAPSE_RANGE 0x08
#define FL_ZERO_RANGE 0x10

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "space: %s:%d: %s\n", \
	__FILE__, __LINE__, #c); return 1; } } while (0)

/* Read the whole file and compare with want (len bytes). */
static int check_content(rpfs_file_t *f, const uint8_t *want, size_t len)
{
	uint8_t *got = malloc(len);
	int ok;

	if (!got)
		return 1;
	ok = rpfs_pread(f, got, len, 0) == (ssize_t)len &&
	     memcmp(got, want, len) == 0;
	free(got);
	CHECK(ok);
	return 0;
}

/* The checks on an open read-write handle. */
static int run(rpfs_file_t *f)
{
	static uint8_t want[12 * U + 10];
	struct stat sb;

	memset(want, 'a', 8 * U);
	CHECK(rpfs_pwrite(f, want, 8 * U, 0) == (ssize_t)(8 * U));
	CHECK(rpfs_fallocate(f, FL_PUNCH_HOLE | FL_KEEP_SIZE, 2 * U + 100,
			     3 * U) == 0);
	memset(want + 2 * U + 100, 0, 3 * U);
	CHECK(rpfs_fstat(f, &sb) == 0 && sb.st_size == (off_t)(8 * U));
	CHECK(check_content(f, want, 8 * U) == 0);
	CHECK(rpfs_fallocate(f, 0, 8 * U, 4 * U) == 0);
	CHECK(rpfs_fstat(f, &sb) == 0 && sb.st_size == (off_t)(12 * U));
	CHECK(check_content(f, want, 12 * U) == 0);
	/* 12 units minus the freed whole blocks of the hole */
	CHECK((uint64_t)sb.st_blocks * 512 >= 9 * U &&
	      (uint64_t)sb.st_blocks * 512 <= 10 * U);
	CHECK(rpfs_seek(f, 0, SEEK_HOLE) == (int64_t)(2 * U + 4096));
	CHECK(rpfs_seek(f, 2 * U + 4096, SEEK_DATA) == (int64_t)(5 * U));
	CHECK(rpfs_seek(f, 100, SEEK_DATA) == 100);
	CHECK(rpfs_seek(f, 12 * U, SEEK_DATA) == -ENXIO);
	CHECK(rpfs_seek(f, 12 * U, SEEK_HOLE) == -ENXIO);
	CHECK(rpfs_seek(f, 0, SEEK_SET) == -EINVAL);
	CHECK(rpfs_fallocate(f, FL_COLLAPSE_RANGE, 0, U) == -EOPNOTSUPP);
	CHECK(rpfs_fallocate(f, FL_PUNCH_HOLE, 0, U) == -EOPNOTSUPP);
	CHECK(rpfs_fallocate(f, 0, 0, 0) == -EINVAL);
	CHECK(rpfs_fallocate(f, 0, 1ull << 62, 1) == -EFBIG);
	CHECK(check_content(f, want, 12 * U) == 0);
	/* zero across iods 0 and 1 keeping the size, then past the end */
	CHECK(rpfs_fallocate(f, FL_ZERO_RANGE | FL_KEEP_SIZE, U - 50, 100) == 0);
	memset(want + U - 50, 0, 100);
	CHECK(rpfs_fstat(f, &sb) == 0 && sb.st_size == (off_t)(12 * U));
	CHECK(rpfs_fallocate(f, FL_ZERO_RANGE, 12 * U - 10, 20) == 0);
	CHECK(rpfs_fstat(f, &sb) == 0 && sb.st_size == (off_t)(12 * U + 10));
	CHECK(check_content(f, want, 12 * U + 10) == 0);
	return 0;
}

int main(int argc, char **argv)
{
	rpfs_file_t *f, *ro;
	rpfs_fs_t *fs;
	int rc;

	if (argc != 3) {
		fprintf(stderr, "usage: %s MGR PATH\n", argv[0]);
		return 2;
	}
	rc = rpfs_mount(argv[1], NULL, &fs);
	if (rc) {
		fprintf(stderr, "space: mount %s: %s\n", argv[1], strerror(-rc));
		return 1;
	}
	rc = rpfs_open(fs, argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644, &f);
	if (rc) {
		fprintf(stderr, "space: open %s: %s\n", argv[2], strerror(-rc));
		return 1;
	}
	rc = run(f);
	if (rpfs_close(f))
		rc = 1;
	if (rc == 0 && rpfs_open(fs, argv[2], O_RDONLY, 0, &ro) == 0) {
		if (rpfs_fallocate(ro, 0, 0, U) != -EBADF) {
			fprintf(stderr, "space: fallocate on O_RDONLY\n");
			rc = 1;
		}
		if (rpfs_close(ro))
			rc = 1;
	}
	if (rpfs_unmount(fs))
		rc = 1;
	if (rc == 0)
		printf("space: ok\n");
	return rc;
}

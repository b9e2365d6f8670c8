/*
 * listio_test.c - list I/O checker for librpfs, run by
 * tests/integration/test_listio.py against real daemons.
 *
 *   rpfs-listio-test write MGR PATH SEED MEM REFOUT
 *	Create PATH, apply random list writes (and check random list reads
 *	after each against an in-memory reference), check a contiguous
 *	rpfs_pread of the whole file, close, and store the reference image
 *	in the local file REFOUT (so the caller can compare it with the
 *	file read through a FUSE mount).
 *   rpfs-listio-test verify MGR PATH SEED MEM REFFILE
 *	Open PATH read-only and check random list reads and a contiguous
 *	read against the local file REFFILE (written through a mount).
 *   rpfs-listio-test setid MGR PATH pwrite|list|truncate
 *	Open the existing PATH write-only, write one byte at offset 0 with
 *	rpfs_pwrite or rpfs_write_list, or rpfs_ftruncate it to 1 byte, and
 *	print "mode OOOO" (rpfs_fstat before close, permission bits): run as
 *	another uid, it shows the set-id bits librpfs dropped.
 *
 * MEM picks the memory the lists point into and the interface:
 *   plain    malloc, rpfs_read_list / rpfs_write_list
 *   ext      malloc (two allocations), the _ext calls with allocations
 *   alloc    rpfs_mem_alloc memory, the _ext calls
 *   reg      malloc + rpfs_mem_register, the plain calls
 * Exit 0 all checks passed, 1 a check failed, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rpfs.h"

#define FSIZE (3u * 1024 * 1024 + 12345)  /* file image size */
#define MEMSZ (4u * 1024 * 1024)          /* each memory arena */
#define MAXSEG 6000

static uint64_t rng_state;

/* xorshift64*: deterministic per seed. */
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

/* Uniform in [lo, hi]. */
static uint64_t rnd_in(uint64_t lo, uint64_t hi)
{
	return lo + rnd() % (hi - lo + 1);
}

#define FAIL(...) do { fprintf(stderr, "listio: " __VA_ARGS__); \
	fputc('\n', stderr); return 1; } while (0)

/* Test state: the file, the reference image and the memory arenas. */
struct st {
	rpfs_fs_t *fs;
	rpfs_file_t *f;
	const char *mem;
	uint8_t *ref;            /* expected file content, FSIZE bytes */
	uint64_t ref_len;        /* bytes of ref that exist in the file */
	uint8_t *arena[2];       /* memory the lists point into */
	uint64_t foff[MAXSEG], flen[MAXSEG];
	struct iovec iov[MAXSEG], alloc[MAXSEG];
};

/* Split total bytes into n >= 1 random positive parts in lens[]. */
static int split(uint64_t total, int n, uint64_t *lens)
{
	uint64_t left = total;

	if ((uint64_t)n > total)
		n = (int)total;
	for (int i = 0; i < n; i++) {
		uint64_t rest = (uint64_t)(n - i - 1);
		uint64_t max = left - rest;
		uint64_t hi = left / (uint64_t)(n - i) * 2;

		if (hi < 1)
			hi = 1;
		if (hi > max)
			hi = max;
		lens[i] = i == n - 1 ? left : rnd_in(1, hi);
		left -= lens[i];
	}
	return n;
}

/* A random shape: total bytes and segment counts, small or large. */
static void shape(uint64_t *total, int *nf, int *nm)
{
	switch (rnd() % 4) {
	case 0: /* many tiny segments: beyond max_sge and one round */
		*total = rnd_in(3000, 40000);
		*nf = (int)rnd_in(2500, 5000);
		*nm = (int)rnd_in(2500, 5000);
		break;
	case 1: /* small total, few segments: the packed path */
		*total = rnd_in(1, 60000);
		*nf = (int)rnd_in(1, 20);
		*nm = (int)rnd_in(1, 20);
		break;
	case 2: /* large total, medium lists */
		*total = rnd_in(70000, 1500000);
		*nf = (int)rnd_in(1, 300);
		*nm = (int)rnd_in(1, 300);
		break;
	default: /* large total, many segments */
		*total = rnd_in(200000, 2000000);
		*nf = (int)rnd_in(500, 3000);
		*nm = (int)rnd_in(500, 3000);
		break;
	}
}

/*
 * Build a file list of nf non-overlapping segments totalling total bytes
 * inside [0, FSIZE), in shuffled order when shuffle. Returns the count.
 */
static int make_file_list(struct st *s, uint64_t total, int nf, int shuffle)
{
	uint64_t gaps = FSIZE - total, pos = 0;

	nf = split(total, nf, s->flen);
	for (int i = 0; i < nf; i++) {
		uint64_t g = gaps ? rnd_in(0, gaps / (uint64_t)(nf - i)) : 0;

		gaps -= g;
		pos += g;
		s->foff[i] = pos;
		pos += s->flen[i];
	}
	for (int i = nf - 1; shuffle && i > 0; i--) {
		int j = (int)(rnd() % (uint64_t)(i + 1));
		uint64_t o = s->foff[i], l = s->flen[i];

		s->foff[i] = s->foff[j];
		s->flen[i] = s->flen[j];
		s->foff[j] = o;
		s->flen[j] = l;
	}
	return nf;
}

/* Build a memory list of nm segments with random gaps over the arenas;
 * alloc[i] is the arena each lies in. Returns the count. */
static int make_mem_list(struct st *s, uint64_t total, int nm)
{
	uint64_t lens[MAXSEG];
	uint64_t pos = 0, gaps;
	int a = 0;

	nm = split(total, nm, lens);
	gaps = 2 * (uint64_t)MEMSZ - total - 64;
	for (int i = 0; i < nm; i++) {
		uint64_t g = rnd_in(0, gaps / (uint64_t)(nm - i) / 2);

		gaps -= g;
		pos += g;
		if (a == 0 && pos + lens[i] > MEMSZ) { /* next arena */
			a = 1;
			pos = rnd_in(0, 32);
		}
		s->iov[i].iov_base = s->arena[a] + pos;
		s->iov[i].iov_len = lens[i];
		s->alloc[i].iov_base = s->arena[a];
		s->alloc[i].iov_len = MEMSZ;
		pos += lens[i];
	}
	return nm;
}

/* Copy between the file image and the memory list, as list I/O does. */
static void walk(struct st *s, int nf, int nm, int to_ref)
{
	int mi = 0;
	uint64_t mo = 0;

	for (int i = 0; i < nf; i++) {
		uint64_t fo = 0;

		while (fo < s->flen[i]) {
			uint8_t *m = (uint8_t *)s->iov[mi].iov_base + mo;
			uint64_t n = s->iov[mi].iov_len - mo;

			if (n > s->flen[i] - fo)
				n = s->flen[i] - fo;
			if (to_ref)
				memcpy(s->ref + s->foff[i] + fo, m, n);
			else
				memcpy(m, s->ref + s->foff[i] + fo, n);
			fo += n;
			mo += n;
			if (mo == s->iov[mi].iov_len) {
				mi++;
				mo = 0;
			}
		}
	}
}

/* Whether this memory mode uses the extended calls. */
static int use_ext(const struct st *s)
{
	return !strcmp(s->mem, "ext") || !strcmp(s->mem, "alloc");
}

/* One random list write, mirrored into the reference. */
static int one_write(struct st *s)
{
	uint64_t total;
	int nf, nm;
	ssize_t n;

	shape(&total, &nf, &nm);
	nf = make_file_list(s, total, nf, (int)(rnd() % 2));
	nm = make_mem_list(s, total, nm);
	for (int i = 0; i < nm; i++)
		for (size_t j = 0; j < s->iov[i].iov_len; j++)
			((uint8_t *)s->iov[i].iov_base)[j] = (uint8_t)rnd();
	n = use_ext(s) ?
		rpfs_write_list_ext(s->f, nm, s->iov, s->alloc, nf, s->foff,
				    s->flen) :
		rpfs_write_list(s->f, nm, s->iov, nf, s->foff, s->flen);
	if (n != (ssize_t)total)
		FAIL("write_list(%d mem, %d file, %llu bytes) = %zd (%s)", nm,
		     nf, (unsigned long long)total, n,
		     n < 0 ? strerror((int)-n) : "short");
	walk(s, nf, nm, 1);
	for (int i = 0; i < nf; i++)
		if (s->foff[i] + s->flen[i] > s->ref_len)
			s->ref_len = s->foff[i] + s->flen[i];
	return 0;
}

/* One random list read checked against the reference (file segments may
 * overlap and repeat here); gaps in memory must stay untouched. */
static int one_read(struct st *s)
{
	static uint8_t expect[2 * MEMSZ];
	uint64_t total;
	int nf, nm;
	ssize_t n;

	shape(&total, &nf, &nm);
	nf = make_file_list(s, total, nf, 1);
	if (rnd() % 3 == 0 && nf > 1) { /* a repeated range */
		s->foff[nf - 1] = s->foff[0];
		total = total - s->flen[nf - 1] + s->flen[0];
		s->flen[nf - 1] = s->flen[0];
	}
	nm = make_mem_list(s, total, nm);
	memset(s->arena[0], 0xA5, MEMSZ);
	memset(s->arena[1], 0xA5, MEMSZ);
	memset(expect, 0xA5, sizeof(expect));
	n = use_ext(s) ?
		rpfs_read_list_ext(s->f, nm, s->iov, s->alloc, nf, s->foff,
				   s->flen) :
		rpfs_read_list(s->f, nm, s->iov, nf, s->foff, s->flen);
	if (n != (ssize_t)total)
		FAIL("read_list(%d mem, %d file, %llu bytes) = %zd (%s)", nm,
		     nf, (unsigned long long)total, n,
		     n < 0 ? strerror((int)-n) : "short");
	/* expected arenas: the reference walked into a copy of the layout */
	for (int i = 0; i < nm; i++) {
		int a = s->iov[i].iov_base >= (void *)s->arena[1] &&
			(uint8_t *)s->iov[i].iov_base < s->arena[1] + MEMSZ;
		size_t off = (size_t)((uint8_t *)s->iov[i].iov_base -
				      s->arena[a]);

		s->iov[i].iov_base = expect + (size_t)a * MEMSZ + off;
	}
	walk(s, nf, nm, 0);
	if (memcmp(expect, s->arena[0], MEMSZ) ||
	    memcmp(expect + MEMSZ, s->arena[1], MEMSZ))
		FAIL("read_list(%d mem, %d file, %llu bytes): wrong data", nm,
		     nf, (unsigned long long)total);
	return 0;
}

/* Contiguous rpfs_pread of the whole file against the reference. */
static int check_pread(struct st *s)
{
	uint8_t *buf = malloc(FSIZE + 100);
	ssize_t n;
	int rc = 0;

	if (!buf)
		FAIL("out of memory");
	n = rpfs_pread(s->f, buf, FSIZE + 100, 0);
	if (n != (ssize_t)s->ref_len) {
		fprintf(stderr, "listio: pread = %zd, want %llu\n", n,
			(unsigned long long)s->ref_len);
		rc = 1;
	} else if (memcmp(buf, s->ref, s->ref_len)) {
		fprintf(stderr, "listio: pread: wrong data\n");
		rc = 1;
	}
	free(buf);
	return rc;
}

/* Error cases the library must refuse without I/O. */
static int check_errors(struct st *s)
{
	uint64_t off = 0, len = 10;
	struct iovec m = { s->arena[0], 9 };
	struct iovec al = { s->arena[0] + 1, 100 };
	ssize_t n;

	n = rpfs_read_list(s->f, 1, &m, 1, &off, &len);
	if (n != -EINVAL)
		FAIL("totals differ: got %zd, want -EINVAL", n);
	m.iov_len = 10;
	n = rpfs_read_list_ext(s->f, 1, &m, &al, 1, &off, &len);
	if (n != -EINVAL)
		FAIL("segment outside allocation: got %zd, want -EINVAL", n);
	n = rpfs_read_list(s->f, -1, &m, 1, &off, &len);
	if (n != -EINVAL)
		FAIL("negative count: got %zd, want -EINVAL", n);
	n = rpfs_read_list(s->f, 0, NULL, 0, NULL, NULL);
	if (n != 0)
		FAIL("empty lists: got %zd, want 0", n);
	return 0;
}

/* Set up the memory arenas for the MEM mode. */
static int arenas_get(struct st *s)
{
	for (int a = 0; a < 2; a++) {
		int rc = 0;

		if (!strcmp(s->mem, "alloc")) {
			rc = rpfs_mem_alloc(s->fs, MEMSZ, (void **)&s->arena[a]);
		} else {
			s->arena[a] = malloc(MEMSZ);
			if (!s->arena[a])
				rc = -ENOMEM;
			else if (!strcmp(s->mem, "reg"))
				rc = rpfs_mem_register(s->fs, s->arena[a], MEMSZ);
		}
		if (rc)
			FAIL("memory (%s): %s", s->mem, strerror(-rc));
	}
	return 0;
}

/* Release the memory arenas. */
static int arenas_put(struct st *s)
{
	for (int a = 0; a < 2; a++) {
		int rc = 0;

		if (!strcmp(s->mem, "alloc")) {
			rc = rpfs_mem_free(s->fs, s->arena[a]);
		} else {
			if (!strcmp(s->mem, "reg"))
				rc = rpfs_mem_deregister(s->fs, s->arena[a]);
			free(s->arena[a]);
		}
		if (rc)
			FAIL("memory release (%s): %s", s->mem, strerror(-rc));
	}
	return 0;
}

/* Load a local reference file (verify mode). */
static int load_ref(struct st *s, const char *path)
{
	FILE *fp = fopen(path, "rb");

	if (!fp)
		FAIL("%s: %s", path, strerror(errno));
	s->ref_len = fread(s->ref, 1, FSIZE, fp);
	fclose(fp);
	return 0;
}

/* Store the reference image (write mode). */
static int store_ref(struct st *s, const char *path)
{
	FILE *fp = fopen(path, "wb");

	if (!fp)
		FAIL("%s: %s", path, strerror(errno));
	if (fwrite(s->ref, 1, s->ref_len, fp) != s->ref_len || fclose(fp))
		FAIL("%s: write failed", path);
	return 0;
}

/* The checks of one run; returns 0 all passed. */
static int run(struct st *s, int writing, const char *reffile)
{
	int iters = writing ? 14 : 10;

	if (arenas_get(s))
		return 1;
	if (check_errors(s))
		return 1;
	for (int i = 0; i < iters; i++) {
		if (writing && one_write(s))
			return 1;
		if (one_read(s))
			return 1;
	}
	if (check_pread(s))
		return 1;
	if (arenas_put(s))
		return 1;
	return writing ? store_ref(s, reffile) : 0;
}

/* The setid command (see the top): one write or truncate, then fstat. */
static int run_setid(const char *mgr, const char *path, const char *how)
{
	rpfs_fs_t *fs;
	rpfs_file_t *f;
	struct stat sb;
	struct iovec iov = { (void *)"x", 1 };
	uint64_t off = 0, len = 1;
	ssize_t n;
	int rc = rpfs_mount(mgr, NULL, &fs);

	if (rc)
		FAIL("mount %s: %s", mgr, strerror(-rc));
	rc = rpfs_open(fs, path, O_WRONLY, 0, &f);
	if (rc) {
		rpfs_unmount(fs);
		FAIL("open %s: %s", path, strerror(-rc));
	}
	if (!strcmp(how, "pwrite"))
		n = rpfs_pwrite(f, "x", 1, 0);
	else if (!strcmp(how, "list"))
		n = rpfs_write_list(f, 1, &iov, 1, &off, &len);
	else
		n = rpfs_ftruncate(f, 1) ? -1 : 1;
	rc = n == 1 ? rpfs_fstat(f, &sb) : -EIO;
	if (rc == 0)
		printf("mode %04o\n", (unsigned)(sb.st_mode & 07777));
	else
		fprintf(stderr, "listio: setid %s: %zd / %s\n", how, n, strerror(-rc));
	if (rpfs_close(f))
		rc = -EIO;
	if (rpfs_unmount(fs))
		rc = -EIO;
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	static struct st s;
	struct stat sb;
	int writing, rc;

	if (argc == 5 && !strcmp(argv[1], "setid") &&
	    (!strcmp(argv[4], "pwrite") || !strcmp(argv[4], "list") ||
	     !strcmp(argv[4], "truncate")))
		return run_setid(argv[2], argv[3], argv[4]);
	if (argc != 7 || (strcmp(argv[1], "write") && strcmp(argv[1], "verify"))) {
		fprintf(stderr, "usage: %s write|verify MGR PATH SEED "
			"plain|ext|alloc|reg REFFILE\n"
			"       %s setid MGR PATH pwrite|list|truncate\n",
			argv[0], argv[0]);
		return 2;
	}
	writing = !strcmp(argv[1], "write");
	rng_state = strtoull(argv[4], NULL, 10) * 0x9E3779B97F4A7C15ull + 1;
	s.mem = argv[5];
	s.ref = calloc(1, FSIZE);
	if (!s.ref)
		return 1;
	rc = rpfs_mount(argv[2], NULL, &s.fs);
	if (rc) {
		fprintf(stderr, "listio: mount %s: %s\n", argv[2], strerror(-rc));
		return 1;
	}
	if (!writing && load_ref(&s, argv[6]))
		return 1;
	rc = rpfs_open(s.fs, argv[3], writing ? O_RDWR | O_CREAT | O_TRUNC :
		       O_RDONLY, 0644, &s.f);
	if (rc) {
		fprintf(stderr, "listio: open %s: %s\n", argv[3], strerror(-rc));
		return 1;
	}
	rc = run(&s, writing, argv[6]);
	if (rc == 0 && rpfs_fstat(s.f, &sb) == 0 &&
	    (uint64_t)sb.st_size != s.ref_len) {
		fprintf(stderr, "listio: fstat size %lld, want %llu\n",
			(long long)sb.st_size, (unsigned long long)s.ref_len);
		rc = 1;
	}
	if (rpfs_close(s.f)) {
		fprintf(stderr, "listio: close failed\n");
		rc = 1;
	}
	if (rpfs_unmount(s.fs))
		rc = 1;
	free(s.ref);
	if (rc == 0)
		printf("listio: %s %s ok\n", argv[1], s.mem);
	return rc;
}

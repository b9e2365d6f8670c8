/*
 * bench_listio.c - rpfs-bench-listio: the noncontiguous I/O experiments of
 * the list I/O seeds, on librpfs (fuse-client/lib/rpfs.h), without MPI: the
 * processes are forked and meet at a process-shared barrier.
 *
 *   rpfs-bench-listio tile MGR [--elem BYTES] [--nolist] [--memnc] [--iters N]
 *	Tiled I/O as mpi-tile-io: 4 processes, a 2x2 grid of tiles of
 *	1024x768 elements each, the file is the row-major 2048x1536 array.
 *	With list I/O each process writes (then reads) its tile with one
 *	rpfs_write_list (rpfs_read_list); without, with one call per row.
 *	--memnc keeps each tile inside a full 2048x1536 array in memory
 *	(noncontiguous in memory too, seed 1 section 6.8).
 *
 *   rpfs-bench-listio ogr MGR --case subarray|holes --reg ideal|indiv|ogr|ogrq
 *	[--iters N]
 *	Registration experiment (seed 2 section 6.4). subarray: a 2048x2048
 *	int array block-distributed over 4 processes; each writes its block
 *	(1024 rows of 4 KiB, 4 KiB apart) contiguously into the file. holes:
 *	1024 buffers of 2 KiB from 11 arrays separated by 10 unmapped holes.
 *	ideal: the memory is declared (rpfs_mem_register) and registered
 *	before; indiv: each segment registered per call ($RPFS_REG_MODE);
 *	ogr: Optimistic Group Registration; ogrq: OGR told each segment's
 *	allocation (rpfs_write_list_ext).
 *
 * Output: one line "key=value ..." with the aggregate bandwidth (MiB/s,
 * bytes of all processes over the slowest process's time), requests and
 * registrations per process and operation, and registration time, taken
 * from the client counters (rpfs_stats_json); ogr also gives each
 * process's OGR cost model (cost_a_ns, cost_b_ns: a per page, b per call)
 * and the time its calibration took (cal_us), comma-separated. Not a
 * test: it asserts no timing, but it does check the data read back.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rpfs.h"

#define NPROC 4

/* What every process reports back (shared memory). */
struct result {
	double wr_s, rd_s;                 /* seconds of the timed phases */
	uint64_t wr_req, rd_req;           /* requests sent (msgs_tx) */
	uint64_t wr_reg, rd_reg;           /* ibv_reg_mr calls */
	uint64_t wr_reg_ns, rd_reg_ns;     /* time registering */
	uint64_t ogr_groups, ogr_fallbacks;
	uint64_t cost_a, cost_b, cal_ns;   /* OGR model of this process */
	int rc;                            /* 0 or -errno */
	char transport[16];
};

struct shared {
	pthread_barrier_t bar;
	struct result r[NPROC];
};

struct cfg {
	const char *mgr;
	const char *cmd;
	int elem, nolist, memnc, iters;
	const char *ocase, *reg;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One counter from the client's stats JSON (0 when missing). */
static uint64_t stat_of(rpfs_fs_t *fs, const char *name)
{
	char buf[4096], key[64];
	const char *p;

	if (rpfs_stats_json(fs, buf, sizeof(buf)) < 0)
		return 0;
	snprintf(key, sizeof(key), "\"%s\":", name);
	p = strstr(buf, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

struct snap {
	uint64_t req, reg, reg_ns, groups, fallbacks;
};

static void snap_take(rpfs_fs_t *fs, struct snap *s)
{
	s->req = stat_of(fs, "msgs_tx");
	s->reg = stat_of(fs, "reg_count");
	s->reg_ns = stat_of(fs, "reg_ns");
	s->groups = stat_of(fs, "ogr_groups");
	s->fallbacks = stat_of(fs, "ogr_fallbacks");
}

/* Fill a deterministic pattern for process p. */
static void pattern(uint8_t *b, size_t n, int p, uint64_t salt)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)((i * 131 + (size_t)p * 17 + salt) >> 3);
}

/* Connect to every iod before timing (connection buffers are registered
 * at the first call, and that must not count as the I/O's): read one byte
 * from each of the first 16 stripe units. */
static void warm_up(rpfs_file_t *f)
{
	char b;

	for (int i = 0; i < 16; i++)
		(void)rpfs_pread(f, &b, 1, (uint64_t)i * 65536);
}

/* ------------------------------------------------------------- tiled I/O */

#define TW 1024 /* tile width, elements */
#define TH 768  /* tile height, rows */

/* One process of the tiled experiment. */
static int tile_proc(const struct cfg *c, int p, rpfs_fs_t *fs, struct shared *sh)
{
	size_t esz = (size_t)c->elem, rowb = TW * esz, tile = rowb * TH;
	size_t gw = 2 * TW; /* global width, elements */
	int tx = p % 2, ty = p / 2, rc = 0;
	struct result *r = &sh->r[p];
	uint8_t *mem, *base;
	size_t memlen = c->memnc ? gw * 2 * TH * esz : tile;
	struct iovec *mv = calloc(TH, sizeof(*mv));
	uint64_t *fo = calloc(TH, sizeof(*fo)), *fl = calloc(TH, sizeof(*fl));
	rpfs_file_t *f;
	struct snap s0, s1;

	mem = mmap(NULL, memlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED || !mv || !fo || !fl)
		return -ENOMEM;
	rc = rpfs_open(fs, "/tile.dat", O_RDWR, 0644, &f);
	if (rc)
		return rc;
	warm_up(f);
	base = c->memnc ? mem + ((size_t)ty * TH * gw + (size_t)tx * TW) * esz : mem;
	for (int i = 0; i < TH; i++) {
		mv[i].iov_base = c->memnc ? base + (size_t)i * gw * esz : base + (size_t)i * rowb;
		mv[i].iov_len = rowb;
		fo[i] = (((uint64_t)ty * TH + (uint64_t)i) * gw + (uint64_t)tx * TW) * esz;
		fl[i] = rowb;
		pattern(mv[i].iov_base, rowb, p, (uint64_t)i);
	}
	for (int it = 0; it < c->iters && !rc; it++) {
		/* write */
		pthread_barrier_wait(&sh->bar);
		snap_take(fs, &s0);
		double t0 = now_s();
		if (c->nolist) {
			for (int i = 0; i < TH && !rc; i++) {
				ssize_t n = rpfs_pwrite(f, mv[i].iov_base, rowb, fo[i]);
				rc = n < 0 ? (int)n : 0;
			}
		} else {
			ssize_t n = rpfs_write_list(f, TH, mv, TH, fo, fl);
			rc = n < 0 ? (int)n : n == (ssize_t)tile ? 0 : -EIO;
		}
		r->wr_s += now_s() - t0;
		snap_take(fs, &s1);
		r->wr_req += s1.req - s0.req;
		r->wr_reg += s1.reg - s0.reg;
		r->wr_reg_ns += s1.reg_ns - s0.reg_ns;
		if (rc)
			break;
		/* read back into zeroed rows, then check */
		for (int i = 0; i < TH; i++)
			memset(mv[i].iov_base, 0, rowb);
		pthread_barrier_wait(&sh->bar);
		snap_take(fs, &s0);
		t0 = now_s();
		if (c->nolist) {
			for (int i = 0; i < TH && !rc; i++) {
				ssize_t n = rpfs_pread(f, mv[i].iov_base, rowb, fo[i]);
				rc = n < 0 ? (int)n : n == (ssize_t)rowb ? 0 : -EIO;
			}
		} else {
			ssize_t n = rpfs_read_list(f, TH, mv, TH, fo, fl);
			rc = n < 0 ? (int)n : n == (ssize_t)tile ? 0 : -EIO;
		}
		r->rd_s += now_s() - t0;
		snap_take(fs, &s1);
		r->rd_req += s1.req - s0.req;
		r->rd_reg += s1.reg - s0.reg;
		r->rd_reg_ns += s1.reg_ns - s0.reg_ns;
		for (int i = 0; i < TH && !rc; i++) {
			uint8_t *want = malloc(rowb);
			if (!want)
				return -ENOMEM;
			pattern(want, rowb, p, (uint64_t)i);
			if (memcmp(want, mv[i].iov_base, rowb)) {
				fprintf(stderr, "tile: process %d row %d read back wrong\n", p, i);
				rc = -EIO;
			}
			free(want);
		}
	}
	rpfs_close(f);
	munmap(mem, memlen);
	free(mv);
	free(fo);
	free(fl);
	return rc;
}

/* ----------------------------------------------------------- OGR experiment */

#define OGR_N 1024          /* segments per process */
#define HOLE_BUF 2048       /* holes case: buffer size */
#define HOLE_ARRAYS 11      /* mapped arrays; 10 holes between them */

/*
 * Build the memory list of one process. subarray: its block of the
 * 2048x2048 int array (rows of 1024 ints, 4 KiB, one row of the other
 * block between them). holes: 1024 buffers of 2 KiB, one per page, from
 * 11 arrays carved from one mapping by unmapping one page between each.
 * allocs gets each segment's allocation. @return 0, -ENOMEM
 */
static int ogr_mem(const struct cfg *c, int p, struct iovec *mv, struct iovec *al,
		   void **map, size_t *maplen)
{
	long pg = sysconf(_SC_PAGESIZE);

	if (!strcmp(c->ocase, "subarray")) {
		size_t n = 2048, rowb = 1024 * sizeof(int);
		int bx = p % 2, by = p / 2;
		*maplen = n * n * sizeof(int);
		uint8_t *a = mmap(NULL, *maplen, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (a == MAP_FAILED)
			return -ENOMEM;
		memset(a, 1, *maplen);
		*map = a;
		for (int i = 0; i < OGR_N; i++) {
			mv[i].iov_base = a + (((size_t)by * 1024 + (size_t)i) * n +
					      (size_t)bx * 1024) * sizeof(int);
			mv[i].iov_len = rowb;
			al[i] = (struct iovec){ a, *maplen };
		}
		return 0;
	}
	/* holes: pages per array so that 11 arrays hold 1024 buffers */
	int per = (OGR_N + HOLE_ARRAYS - 1) / HOLE_ARRAYS; /* 94 */
	size_t npages = (size_t)HOLE_ARRAYS * (size_t)per + HOLE_ARRAYS - 1;
	*maplen = npages * (size_t)pg;
	uint8_t *a = mmap(NULL, *maplen, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		return -ENOMEM;
	memset(a, 1, *maplen);
	*map = a;
	int k = 0;
	for (int arr = 0; arr < HOLE_ARRAYS; arr++) {
		uint8_t *start = a + (size_t)arr * (size_t)(per + 1) * (size_t)pg;
		if (arr > 0)
			munmap(start - pg, (size_t)pg); /* the hole before it */
		for (int j = 0; j < per && k < OGR_N; j++, k++) {
			/* vary the offset in the page so buffers are unaligned */
			mv[k].iov_base = start + (size_t)j * (size_t)pg + (size_t)(j % 4) * 512;
			mv[k].iov_len = HOLE_BUF;
			al[k] = (struct iovec){ start, (size_t)per * (size_t)pg };
		}
	}
	return 0;
}

/* One process of the OGR experiment. */
static int ogr_proc(const struct cfg *c, int p, rpfs_fs_t *fs, struct shared *sh)
{
	struct iovec *mv = calloc(OGR_N, sizeof(*mv)), *al = calloc(OGR_N, sizeof(*al));
	struct result *r = &sh->r[p];
	void *map = NULL;
	size_t maplen = 0, total = 0;
	uint64_t fo, fl;
	rpfs_file_t *f;
	struct snap s0, s1;
	int rc;

	if (!mv || !al)
		return -ENOMEM;
	rc = ogr_mem(c, p, mv, al, &map, &maplen);
	if (rc)
		return rc;
	for (int i = 0; i < OGR_N; i++) {
		pattern(mv[i].iov_base, mv[i].iov_len, p, (uint64_t)i);
		total += mv[i].iov_len;
	}
	fo = (uint64_t)p * total;
	fl = total;
	if (!strcmp(c->reg, "ideal")) {
		/* declared once and registered before the timed calls */
		if (!strcmp(c->ocase, "subarray")) {
			rc = rpfs_mem_register(fs, map, maplen);
		} else {
			for (int i = 0; i < OGR_N && !rc; i++)
				if (i == 0 || al[i].iov_base != al[i - 1].iov_base)
					rc = rpfs_mem_register(fs, al[i].iov_base, al[i].iov_len);
		}
		if (rc)
			return rc;
	}
	rc = rpfs_open(fs, "/ogr.dat", O_RDWR, 0644, &f);
	if (rc)
		return rc;
	warm_up(f);
	if (!strcmp(c->reg, "ideal")) /* warm the cache: register now */
		rc = (int)rpfs_write_list(f, OGR_N, mv, 1, &fo, &fl) < 0 ? -EIO : 0;
	for (int it = 0; it < c->iters && !rc; it++) {
		ssize_t n;
		pthread_barrier_wait(&sh->bar);
		snap_take(fs, &s0);
		double t0 = now_s();
		if (!strcmp(c->reg, "ogrq"))
			n = rpfs_write_list_ext(f, OGR_N, mv, al, 1, &fo, &fl);
		else
			n = rpfs_write_list(f, OGR_N, mv, 1, &fo, &fl);
		r->wr_s += now_s() - t0;
		snap_take(fs, &s1);
		rc = n < 0 ? (int)n : n == (ssize_t)total ? 0 : -EIO;
		r->wr_req += s1.req - s0.req;
		r->wr_reg += s1.reg - s0.reg;
		r->wr_reg_ns += s1.reg_ns - s0.reg_ns;
		r->ogr_groups += s1.groups - s0.groups;
		r->ogr_fallbacks += s1.fallbacks - s0.fallbacks;
	}
	r->cost_a = stat_of(fs, "ogr_cost_a_ns");
	r->cost_b = stat_of(fs, "ogr_cost_b_ns");
	r->cal_ns = stat_of(fs, "ogr_cal_ns");
	/* check one read back through a plain contiguous read */
	if (!rc) {
		uint8_t *back = malloc(total);
		size_t off = 0;
		if (!back)
			return -ENOMEM;
		ssize_t n = rpfs_pread(f, back, total, fo);
		if (n != (ssize_t)total)
			rc = n < 0 ? (int)n : -EIO;
		for (int i = 0; i < OGR_N && !rc; i++) {
			if (memcmp(back + off, mv[i].iov_base, mv[i].iov_len)) {
				fprintf(stderr, "ogr: process %d segment %d read back wrong\n", p, i);
				rc = -EIO;
			}
			off += mv[i].iov_len;
		}
		free(back);
	}
	rpfs_close(f);
	if (!strcmp(c->reg, "ideal")) {
		for (int i = 0; i < OGR_N; i++)
			if (i == 0 || al[i].iov_base != al[i - 1].iov_base)
				rpfs_mem_deregister(fs, al[i].iov_base);
	}
	munmap(map, maplen);
	free(mv);
	free(al);
	return rc;
}

/* -------------------------------------------------------------------- main */

/* Mount with the library's defaults but notices and worse only: each
 * client's info line on its OGR model would fill the tables (the model
 * is in the result line). @return 0, -errno */
static int bench_mount(const char *mgr, rpfs_fs_t **fs)
{
	struct rpfs_opts o;

	rpfs_opts_default(&o);
	o.log_level = 5; /* LOG_NOTICE */
	return rpfs_mount(mgr, &o, fs);
}

/* A forked process: mount, run its part, report. */
static int child(const struct cfg *c, int p, struct shared *sh)
{
	rpfs_fs_t *fs;
	int rc = bench_mount(c->mgr, &fs);

	if (rc) {
		sh->r[p].rc = rc;
		/* keep the barrier count right for the others */
		for (int i = 0; i < 2 * c->iters; i++)
			pthread_barrier_wait(&sh->bar);
		return 1;
	}
	snprintf(sh->r[p].transport, sizeof(sh->r[p].transport), "%s", rpfs_transport(fs));
	if (!strcmp(c->cmd, "tile"))
		rc = tile_proc(c, p, fs, sh);
	else
		rc = ogr_proc(c, p, fs, sh);
	sh->r[p].rc = rc;
	rpfs_unmount(fs);
	return rc ? 1 : 0;
}

/* The OGR model of every process as "v0,v1,v2,v3" into buf: what 0 cost_a
 * (ns/page), 1 cost_b (ns/call), 2 calibration time (us). @return buf */
static const char *per_proc(const struct shared *sh, int what, char *buf, size_t cap)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int p = 0; p < NPROC && n < cap; p++) {
		const struct result *r = &sh->r[p];
		uint64_t v = what == 0 ? r->cost_a : what == 1 ? r->cost_b : r->cal_ns / 1000;
		int w = snprintf(buf + n, cap - n, "%s%llu", p ? "," : "", (unsigned long long)v);
		if (w < 0)
			break;
		n += (size_t)w;
	}
	return buf;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: rpfs-bench-listio tile MGR [--elem BYTES] [--nolist] [--memnc] [--iters N]\n"
		"       rpfs-bench-listio ogr MGR --case subarray|holes "
		"--reg ideal|indiv|ogr|ogrq [--iters N]\n");
	return 2;
}

/* Create (and size) the shared file once, before the processes start.
 * In a child of its own: the parent must never open a verbs device, which
 * its forked children could not use. @return 0, -errno */
static int make_file(const struct cfg *c, const char *path, uint64_t size)
{
	int *res = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int rc, st;

	if (res == MAP_FAILED)
		return -ENOMEM;
	*res = -EIO;
	pid_t pid = fork();
	if (pid == 0) {
		rpfs_fs_t *fs;
		rpfs_file_t *f;
		rc = bench_mount(c->mgr, &fs);
		if (!rc) {
			rc = rpfs_open(fs, path, O_RDWR | O_CREAT | O_TRUNC, 0644, &f);
			if (!rc) {
				rc = rpfs_ftruncate(f, size);
				rpfs_close(f);
			}
			rpfs_unmount(fs);
		}
		*res = rc;
		_exit(0);
	}
	if (pid < 0)
		return -errno;
	waitpid(pid, &st, 0);
	rc = *res;
	munmap(res, sizeof(int));
	return rc;
}

int main(int argc, char **argv)
{
	struct cfg c = { .elem = 24, .iters = 1, .ocase = "subarray", .reg = "ogr" };
	struct shared *sh;
	pthread_barrierattr_t ba;
	int bad = 0;

	if (argc < 3)
		return usage();
	c.cmd = argv[1];
	c.mgr = argv[2];
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--elem") && i + 1 < argc)
			c.elem = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			c.iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--nolist"))
			c.nolist = 1;
		else if (!strcmp(argv[i], "--memnc"))
			c.memnc = 1;
		else if (!strcmp(argv[i], "--case") && i + 1 < argc)
			c.ocase = argv[++i];
		else if (!strcmp(argv[i], "--reg") && i + 1 < argc)
			c.reg = argv[++i];
		else
			return usage();
	}
	if (c.elem < 1 || c.elem > 4096 || c.iters < 1 ||
	    (strcmp(c.cmd, "tile") && strcmp(c.cmd, "ogr")) ||
	    (strcmp(c.ocase, "subarray") && strcmp(c.ocase, "holes")) ||
	    (strcmp(c.reg, "ideal") && strcmp(c.reg, "indiv") && strcmp(c.reg, "ogr") &&
	     strcmp(c.reg, "ogrq")))
		return usage();
	/* registration mode of the verbs client, read when it starts */
	setenv("RPFS_REG_MODE", !strcmp(c.reg, "indiv") ? "indiv" : "ogr", 1);

	uint64_t fsize = !strcmp(c.cmd, "tile") ? (uint64_t)4 * TW * TH * (uint64_t)c.elem
						: (uint64_t)NPROC * 4 * 1024 * 1024;
	int rc = make_file(&c, !strcmp(c.cmd, "tile") ? "/tile.dat" : "/ogr.dat", fsize);
	if (rc) {
		fprintf(stderr, "rpfs-bench-listio: cannot create the file: %s\n", strerror(-rc));
		return 1;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof(*sh));
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(&sh->bar, &ba, NPROC);
	pid_t pids[NPROC];
	for (int p = 0; p < NPROC; p++) {
		pids[p] = fork();
		if (pids[p] == 0)
			_exit(child(&c, p, sh));
		if (pids[p] < 0)
			return 1;
	}
	for (int p = 0; p < NPROC; p++) {
		int st;
		waitpid(pids[p], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) || sh->r[p].rc) {
			fprintf(stderr, "rpfs-bench-listio: process %d failed: %s\n", p,
				sh->r[p].rc ? strerror(-sh->r[p].rc) : "crashed");
			bad = 1;
		}
	}
	/* aggregate: bytes of all processes over the slowest one's time */
	double wr = 0, rd = 0;
	uint64_t wreq = 0, rreq = 0, wreg = 0, rreg = 0, wns = 0, rns = 0, grp = 0, fb = 0;
	for (int p = 0; p < NPROC; p++) {
		struct result *r = &sh->r[p];
		wr = r->wr_s > wr ? r->wr_s : wr;
		rd = r->rd_s > rd ? r->rd_s : rd;
		wreq += r->wr_req;
		rreq += r->rd_req;
		wreg += r->wr_reg;
		rreg += r->rd_reg;
		wns += r->wr_reg_ns;
		rns += r->rd_reg_ns;
		grp += r->ogr_groups;
		fb += r->ogr_fallbacks;
	}
	char ca[NPROC * 24], cb[NPROC * 24], cc[NPROC * 24];
	double ops = (double)NPROC * c.iters; /* per process and operation */
	double bytes = !strcmp(c.cmd, "tile") ? (double)TW * TH * c.elem * NPROC * c.iters
					       : !strcmp(c.ocase, "subarray")
						 ? 4.0 * 1024 * 1024 * NPROC * c.iters
						 : (double)OGR_N * HOLE_BUF * NPROC * c.iters;
	if (!strcmp(c.cmd, "tile"))
		printf("tile transport=%s elem=%d list=%s memnc=%d write_MiBs=%.1f read_MiBs=%.1f "
		       "wr_req_per_op=%.1f rd_req_per_op=%.1f wr_reg_per_op=%.1f rd_reg_per_op=%.1f "
		       "reg_us_per_op=%.0f ok=%d\n",
		       sh->r[0].transport, c.elem, c.nolist ? "no" : "yes", c.memnc,
		       wr > 0 ? bytes / wr / 1048576.0 : 0, rd > 0 ? bytes / rd / 1048576.0 : 0,
		       (double)wreq / ops, (double)rreq / ops, (double)wreg / ops,
		       (double)rreg / ops, (double)(wns + rns) / ops / 2000.0, !bad);
	else
		printf("ogr transport=%s case=%s reg=%s write_MiBs=%.1f req_per_op=%.1f "
		       "reg_per_op=%.1f reg_us_per_op=%.0f ogr_groups_per_op=%.1f "
		       "fallbacks_per_op=%.1f cost_a_ns=%s cost_b_ns=%s cal_us=%s ok=%d\n",
		       sh->r[0].transport, c.ocase, c.reg, wr > 0 ? bytes / wr / 1048576.0 : 0,
		       (double)wreq / ops, (double)wreg / ops, (double)wns / ops / 1000.0,
		       (double)grp / ops, (double)fb / ops, per_proc(sh, 0, ca, sizeof(ca)),
		       per_proc(sh, 1, cb, sizeof(cb)), per_proc(sh, 2, cc, sizeof(cc)), !bad);
	return bad;
}

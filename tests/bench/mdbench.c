/*
 * mdbench.c - metadata benchmark: create, stat and unlink N files, spread
 * round-robin over D directories, by P processes, and print ops/s per
 * phase as JSON.
 *
 *   bench-md [-D] [-x] [-p NPROCS] [-s] [-H HOOK] DIR NFILES NDIRS
 *
 * DIR must exist and is left as it was found. NFILES is the total over all
 * processes (process k does files k, k+P, ...). With NDIRS 1 the files go
 * straight into the process's directory; otherwise into d0..d{NDIRS-1}
 * below it. The process's directory is DIR, shared by all of them, or with
 * -s DIR/p<k>, one of its own. Directories are made and removed outside the
 * timed phases.
 * -D drops the kernel caches (dentries, inodes, pages:
 * /proc/sys/vm/drop_caches, needs root) before every phase after the
 * first, so they reach the file system instead of the dcache.
 * -x adds a rename phase (each file renamed within its directory, before
 * the unlinks) and mkdir and rmdir phases (NFILES directories made, then
 * removed, in the same places as the files).
 * -H runs the shell command HOOK with the arguments "start PHASE" before
 * each phase's clock starts and "end PHASE" after it stops (scripts/bench.sh
 * reads the mgr's request counters there); a failing hook fails the run.
 * A create is open(O_CREAT|O_EXCL|O_WRONLY) plus close. A phase's time runs
 * from the moment the parent releases the processes until the last one
 * reports done, so a rate is the total of the processes together.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MD_MAXPROCS 64

enum md_phase { MD_CREATE, MD_STAT, MD_RENAME, MD_UNLINK, MD_MKDIR, MD_RMDIR, MD_NPHASES };

static const char *const md_phase_name[MD_NPHASES] = {
	"create", "stat", "rename", "unlink", "mkdir", "rmdir",
};

/* The run's parameters, set once by main before the fork. */
struct md_conf {
	const char *dir;  /* DIR */
	long files;       /* NFILES, over all processes */
	long ndirs;       /* NDIRS per process directory */
	long procs;       /* P */
	int own_dir;      /* -s: DIR/p<k> per process */
	int drop;         /* -D */
	int extended;     /* -x: rename, mkdir, rmdir phases */
	const char *hook; /* -H or NULL */
};

/* md_now: monotonic seconds. */
static double md_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* md_base: the directory process K works in (DIR or DIR/p<K>) into BUF. */
static void md_base(char *buf, size_t len, const struct md_conf *c, long k)
{
	if (c->own_dir)
		snprintf(buf, len, "%s/p%ld", c->dir, k);
	else
		snprintf(buf, len, "%s", c->dir);
}

/* md_path: path of entry I of process K into BUF; TAG tells the names of
 * the phases apart ("f" files, "r" renamed files, "m" directories). */
static void md_path(char *buf, size_t len, const struct md_conf *c, long k,
		    long i, const char *tag)
{
	char base[4096];

	md_base(base, sizeof(base), c, k);
	if (c->ndirs > 1)
		snprintf(buf, len, "%s/d%ld/%s%ld", base, i % c->ndirs, tag, i);
	else
		snprintf(buf, len, "%s/%s%ld", base, tag, i);
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

/* md_parse: long in 1..MAX from S, or -1. */
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

/* md_op: phase P on entry I of process K. Returns 0 or -errno (and says
 * which call on which path failed). */
static int md_op(const struct md_conf *c, enum md_phase p, long k, long i)
{
	char path[4200], to[4200];
	struct stat st;
	int fd, rc = 0;

	md_path(path, sizeof(path), c, k, i, p == MD_UNLINK && c->extended ? "r" :
		p == MD_MKDIR || p == MD_RMDIR ? "m" : "f");
	switch (p) {
	case MD_CREATE:
		fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0)
			rc = -errno;
		else
			close(fd);
		break;
	case MD_STAT:
		rc = stat(path, &st) < 0 ? -errno : 0;
		break;
	case MD_RENAME:
		md_path(to, sizeof(to), c, k, i, "r");
		rc = rename(path, to) < 0 ? -errno : 0;
		break;
	case MD_UNLINK:
		rc = unlink(path) < 0 ? -errno : 0;
		break;
	case MD_MKDIR:
		rc = mkdir(path, 0755) < 0 ? -errno : 0;
		break;
	case MD_RMDIR:
		rc = rmdir(path) < 0 ? -errno : 0;
		break;
	default:
		return -EINVAL;
	}
	if (rc)
		fprintf(stderr, "%s %s: %s\n", md_phase_name[p], path, strerror(-rc));
	return rc;
}

/* md_child: process K's loop: for each phase, wait for a byte on its GO, do
 * its entries, answer one byte on DONE ('+' done, '!' failed; then exit).
 * Returns the exit status. */
static int md_child(const struct md_conf *c, long k, int go, int done)
{
	char b;
	long i;
	int p;

	for (p = 0; p < MD_NPHASES; p++) {
		if (!c->extended && (p == MD_RENAME || p == MD_MKDIR || p == MD_RMDIR))
			continue;
		if (read(go, &b, 1) != 1)
			return 1;
		b = '+';
		for (i = k; i < c->files; i += c->procs)
			if (md_op(c, (enum md_phase)p, k, i) < 0) {
				b = '!';
				break;
			}
		if (write(done, &b, 1) != 1 || b != '+')
			return 1;
	}
	return 0;
}

/* md_hook: run the -H command with WHAT and the phase's name. Returns 0 or
 * -EIO when it failed. */
static int md_hook(const struct md_conf *c, const char *what, int p)
{
	char cmd[8192];
	int rc;

	if (!c->hook)
		return 0;
	snprintf(cmd, sizeof(cmd), "%s %s %s", c->hook, what, md_phase_name[p]);
	fflush(stdout);
	rc = system(cmd);
	if (rc != 0) {
		fprintf(stderr, "bench-md: hook \"%s\" failed (status %d)\n", cmd, rc);
		return -EIO;
	}
	return 0;
}

/* md_phase_run: release every process for phase P, one byte on each
 * one's own GO pipe (a shared pipe would let a process that finished
 * early take a slower one's byte and start the next phase inside this
 * one's window), and wait until all answered on DONE; the seconds it
 * took into *SECS. Returns 0 or -EIO when a process failed. */
static int md_phase_run(const struct md_conf *c, int p, const int *go, int done,
			double *secs)
{
	double t0;
	long k;
	char b;
	int rc = 0;

	if (p > 0 && c->drop && md_drop() < 0)
		fprintf(stderr, "bench-md: cannot drop caches\n");
	if (md_hook(c, "start", p) < 0)
		return -EIO;
	t0 = md_now();
	for (k = 0; k < c->procs; k++)
		if (write(go[k], "g", 1) != 1)
			return -EIO;
	for (k = 0; k < c->procs; k++)
		if (read(done, &b, 1) != 1 || b != '+')
			rc = -EIO;
	*secs = md_now() - t0;
	if (rc == 0)
		rc = md_hook(c, "end", p);
	return rc;
}

/* md_dirs: make (MAKE 1) or remove (0) the process and spread directories.
 * Returns 0 or -errno. */
static int md_dirs(const struct md_conf *c, int make)
{
	char path[4200], base[4096];
	long k, i;

	for (k = 0; k < (c->own_dir ? c->procs : 1); k++) {
		md_base(base, sizeof(base), c, k);
		if (make && c->own_dir && mkdir(base, 0755) < 0)
			goto out_err;
		for (i = 0; c->ndirs > 1 && i < c->ndirs; i++) {
			snprintf(path, sizeof(path), "%s/d%ld", base, i);
			if (make ? mkdir(path, 0755) < 0 : rmdir(path) < 0)
				goto out_err;
		}
		if (!make && c->own_dir && rmdir(base) < 0)
			goto out_err;
	}
	return 0;
out_err:
	fprintf(stderr, "bench-md: %s below %s: %s\n", make ? "mkdir" : "rmdir", c->dir,
		strerror(errno));
	return -errno;
}

/* md_parse_args: the command line into C. Returns 0, or 2 (usage). */
static int md_parse_args(int argc, char **argv, struct md_conf *c)
{
	int o;

	while ((o = getopt(argc, argv, "Dxsp:H:")) != -1) {
		switch (o) {
		case 'D': c->drop = 1; break;
		case 'x': c->extended = 1; break;
		case 's': c->own_dir = 1; break;
		case 'H': c->hook = optarg; break;
		case 'p':
			c->procs = md_parse(optarg, MD_MAXPROCS);
			if (c->procs < 0) {
				fprintf(stderr, "bench-md: -p: expected 1..%d processes, got \"%s\"\n",
					MD_MAXPROCS, optarg);
				return 2;
			}
			break;
		default: return 2;
		}
	}
	if (argc - optind != 3)
		return 2;
	c->dir = argv[optind];
	c->files = md_parse(argv[optind + 1], 100000000);
	c->ndirs = md_parse(argv[optind + 2], 1000000);
	if (c->files < 0 || c->ndirs < 0) {
		fprintf(stderr, "bench-md: NFILES, NDIRS: expected positive integers, got \"%s\" \"%s\"\n",
			argv[optind + 1], argv[optind + 2]);
		return 2;
	}
	return 0;
}

/* md_print: the result line (JSON) from the phases' seconds. */
static void md_print(const struct md_conf *c, const double *secs)
{
	double total = 0;
	int p;

	printf("{\"files\": %ld, \"dirs\": %ld, \"procs\": %ld, \"own_dir\": %d",
	       c->files, c->ndirs, c->procs, c->own_dir);
	for (p = 0; p < MD_NPHASES; p++)
		if (secs[p] > 0) {
			printf(", \"%s\": %.1f", md_phase_name[p], c->files / secs[p]);
			total += secs[p];
		}
	printf(", \"seconds\": %.3f}\n", total);
}

int main(int argc, char **argv)
{
	struct md_conf c = { .procs = 1 };
	double secs[MD_NPHASES] = { 0 };
	int go[MD_MAXPROCS], done[2], rc = 0, st, p;
	pid_t pids[MD_MAXPROCS];
	long k, n = 0;

	if (md_parse_args(argc, argv, &c)) {
		fprintf(stderr, "usage: %s [-D] [-x] [-p NPROCS] [-s] [-H HOOK] DIR NFILES NDIRS\n",
			argv[0]);
		return 2;
	}
	if (md_dirs(&c, 1) < 0)
		return 1;
	if (pipe2(done, O_CLOEXEC) < 0) {
		perror("bench-md: pipe");
		return 1;
	}
	for (k = 0; k < c.procs; k++, n++) {
		int g[2];

		if (pipe2(g, O_CLOEXEC) < 0) {
			perror("bench-md: pipe");
			rc = 1;
			break;
		}
		pids[k] = fork();
		if (pids[k] < 0) {
			perror("bench-md: fork");
			close(g[0]);
			close(g[1]);
			rc = 1;
			break;
		}
		if (pids[k] == 0) {
			/* every write end of a GO pipe closed in the child, so
			 * that EOF reaches it when the parent closes its own */
			for (long j = 0; j < k; j++)
				close(go[j]);
			close(g[1]);
			close(done[0]);
			_exit(md_child(&c, k, g[0], done[1]));
		}
		close(g[0]);
		go[k] = g[1];
	}
	close(done[1]);
	for (p = 0; rc == 0 && p < MD_NPHASES; p++) {
		if (!c.extended && (p == MD_RENAME || p == MD_MKDIR || p == MD_RMDIR))
			continue;
		if (md_phase_run(&c, p, go, done[0], &secs[p]) < 0)
			rc = 1;
	}
	for (k = 0; k < n; k++)
		close(go[k]); /* a child still waiting for a phase reads EOF and exits */
	for (k = 0; k < n; k++)
		if (waitpid(pids[k], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			rc = 1;
	if (rc == 0 && md_dirs(&c, 0) < 0)
		rc = 1;
	if (rc == 0)
		md_print(&c, secs);
	return rc;
}

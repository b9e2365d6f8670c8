/*
 * fio_rpfs.c - an fio external I/O engine on librpfs, so fio drives an rpfs
 * cluster without a FUSE mount:
 *
 *   fio --ioengine=external:/path/librpfs_fio.so --rpfs_mgr=HOST:PORT ...
 *
 * Options (job file or command line), each with an environment fallback:
 *   rpfs_mgr=HOST[:PORT]   ($RPFS_MGR, required)
 *   rpfs_key=FILE          ($RPFS_KEY) cluster key
 *   rpfs_transport=T       ($RPFS_TRANSPORT) tcp, verbs or auto
 *   rpfs_stats=PATH        ($RPFS_FIO_STATS) at the end of each job, append
 *                          one line of JSON to PATH: the job name, the CPU
 *                          time the job process spent from the end of its
 *                          mount to the end of the job (getrusage: fio's
 *                          own and the transport's threads; fio's start-up
 *                          and the mount are left out) and the transport
 *                          counters (rpfs_stats_json), e.g. for
 *                          scripts/vm-bench.sh
 *   rpfs_dir=DIR           the rpfs directory the job's files are in (fio's
 *                          own directory= is checked with lstat(2) on the
 *                          local file system by fio's option parser, so it
 *                          cannot name an rpfs directory)
 * filename= names files relative to the rpfs root, or to rpfs_dir= when
 * given; without filename= fio names them JOB.N.M. Every job process mounts once (init) and
 * unmounts at cleanup. I/O is synchronous (rpfs_pread/rpfs_pwrite);
 * fsync= and end_fsync= map to rpfs_fsync; unlink=1 to rpfs_unlink.
 * fio's I/O buffers come from rpfs_mem_alloc (the iomem_alloc hook), so
 * the transport moves them without a copy and registers them once (verbs);
 * fio's mem=/iomem= options therefore conflict with this engine.
 * Built only with -Dfio_engine=enabled (needs fio's source headers, see
 * scripts/fio-src.sh).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fio.h"
#include "optgroup.h"
#include "verify.h"

#include "rpfs.h"

/* Engine options (td->eo). The first member is padding: fio requires
 * option offsets other than 0. */
struct rpfs_fio_opts {
	void *pad;
	char *mgr;
	char *key;
	char *transport;
	char *stats;
	char *dir;
};

/* Per job: the mounted file system. Used by the job's one thread only. */
struct rpfs_fio_data {
	rpfs_fs_t *fs;
	const char *stats;  /* counters file, or NULL */
	const char *dir;    /* rpfs_dir=, or NULL */
	struct rusage ru0;  /* the process's CPU time when the mount was done */
};

static struct fio_option rpfs_fio_options[] = {
	{
		.name = "rpfs_mgr",
		.lname = "rpfs mgr address",
		.type = FIO_OPT_STR_STORE,
		.off1 = offsetof(struct rpfs_fio_opts, mgr),
		.help = "rpfs mgr HOST[:PORT] (default $RPFS_MGR)",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "rpfs_key",
		.lname = "rpfs cluster key file",
		.type = FIO_OPT_STR_STORE,
		.off1 = offsetof(struct rpfs_fio_opts, key),
		.help = "cluster key file (default $RPFS_KEY)",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "rpfs_transport",
		.lname = "rpfs transport",
		.type = FIO_OPT_STR_STORE,
		.off1 = offsetof(struct rpfs_fio_opts, transport),
		.help = "tcp, verbs or auto (default $RPFS_TRANSPORT or tcp)",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "rpfs_stats",
		.lname = "rpfs counters file",
		.type = FIO_OPT_STR_STORE,
		.off1 = offsetof(struct rpfs_fio_opts, stats),
		.help = "append the job's CPU time and transport counters as "
			"JSON to this file (default $RPFS_FIO_STATS)",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "rpfs_dir",
		.lname = "rpfs directory",
		.type = FIO_OPT_STR_STORE,
		.off1 = offsetof(struct rpfs_fio_opts, dir),
		.help = "rpfs directory of the job's files (fio's directory= "
			"must exist locally)",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = NULL,
	},
};

/* An option's value, else the environment variable, else NULL. */
static const char *opt_or_env(const char *v, const char *env)
{
	if (v && *v)
		return v;
	v = getenv(env);
	return v && *v ? v : NULL;
}

/* Keep files as fio declared them; nothing to size up front (like other
 * network engines, the job's size= bounds the I/O). Runs in the fio
 * main process. */
static int rpfs_fio_setup(struct thread_data *td)
{
	return 0;
}

/* Mount the cluster for this job. Cost: one MOUNT round trip. */
static int rpfs_fio_init(struct thread_data *td)
{
	struct rpfs_fio_opts *eo = td->eo;
	struct rpfs_fio_data *d;
	struct rpfs_opts o;
	const char *mgr = opt_or_env(eo ? eo->mgr : NULL, "RPFS_MGR");
	int rc;

	if (!mgr) {
		log_err("rpfs: no mgr: set rpfs_mgr= or $RPFS_MGR\n");
		return 1;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return 1;
	rpfs_opts_default(&o);
	o.key_file = opt_or_env(eo ? eo->key : NULL, "RPFS_KEY");
	o.transport = opt_or_env(eo ? eo->transport : NULL, "RPFS_TRANSPORT");
	d->stats = opt_or_env(eo ? eo->stats : NULL, "RPFS_FIO_STATS");
	d->dir = eo && eo->dir && *eo->dir ? eo->dir : NULL;
	rc = rpfs_mount(mgr, &o, &d->fs);
	if (rc) {
		log_err("rpfs: mount %s: %s\n", mgr, strerror(-rc));
		free(d);
		return 1;
	}
	if (d->stats && getrusage(RUSAGE_SELF, &d->ru0) != 0) {
		log_err("rpfs: getrusage: %s\n", strerror(errno));
		(void)rpfs_unmount(d->fs);
		free(d);
		return 1;
	}
	td->io_ops_data = d;
	return 0;
}

/* Microseconds from a to b (b later). */
static long long tv_us(const struct timeval *a, const struct timeval *b)
{
	return (b->tv_sec - a->tv_sec) * 1000000LL + (b->tv_usec - a->tv_usec);
}

/*
 * Append the job's line to the counters file: {"job":NAME,"cpu_usr_s":U,
 * "cpu_sys_s":S,"net":{counters}}, U and S the process's CPU time since the
 * mount (d->ru0): fio's start-up (it loads every engine library it links,
 * which under TCG costs more than a short job's I/O) and the mount are not
 * the data path. One write(2) with O_APPEND, so the lines of concurrent
 * job processes do not interleave.
 * @return 0, or an errno value (logged)
 */
static int rpfs_fio_write_stats(struct thread_data *td, struct rpfs_fio_data *d)
{
	char net[4096], line[4608];
	struct rusage ru;
	long long us, ss;
	int n, fd, rc = 0;

	if (rpfs_stats_json(d->fs, net, sizeof(net)) < 0 ||
	    getrusage(RUSAGE_SELF, &ru) != 0)
		return EINVAL;
	us = tv_us(&d->ru0.ru_utime, &ru.ru_utime);
	ss = tv_us(&d->ru0.ru_stime, &ru.ru_stime);
	n = snprintf(line, sizeof(line),
		     "{\"job\":\"%s\",\"cpu_usr_s\":%lld.%06lld,"
		     "\"cpu_sys_s\":%lld.%06lld,\"net\":%s}\n",
		     td->o.name && !strpbrk(td->o.name, "\"\\") ? td->o.name : "job",
		     us / 1000000, us % 1000000, ss / 1000000, ss % 1000000, net);
	if (n < 0 || (size_t)n >= sizeof(line))
		return ERANGE;
	fd = open(d->stats, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = errno;
		log_err("rpfs: rpfs_stats %s: %s\n", d->stats, strerror(rc));
		return rc;
	}
	if (write(fd, line, (size_t)n) != n) {
		rc = errno ? errno : EIO;
		log_err("rpfs: rpfs_stats %s: write: %s\n", d->stats, strerror(rc));
	}
	close(fd);
	return rc;
}

/* Unmount at the end of the job (after fio freed its buffers), writing
 * the counters first when asked. */
static void rpfs_fio_cleanup(struct thread_data *td)
{
	struct rpfs_fio_data *d = td->io_ops_data;

	if (!d)
		return;
	if (d->stats)
		(void)rpfs_fio_write_stats(td, d);
	(void)rpfs_unmount(d->fs);
	free(d);
	td->io_ops_data = NULL;
}

/*
 * fio's I/O buffers (all io_us, total bytes) from registered memory:
 * declared to the transport, so verbs registers them once, at first use,
 * and moves data in and out of them in place (no copy, no registration per
 * I/O). Runs after init (the fs is mounted). @return 0, 1 on failure
 */
static int rpfs_fio_iomem_alloc(struct thread_data *td, size_t total)
{
	struct rpfs_fio_data *d = td->io_ops_data;
	void *p;
	int rc;

	if (!d)
		return 1;
	rc = rpfs_mem_alloc(d->fs, total, &p);
	if (rc) {
		log_err("rpfs: %zu bytes of registered I/O memory: %s\n", total,
			strerror(-rc));
		return 1;
	}
	td->orig_buffer = p;
	return 0;
}

/* Give fio's I/O buffers back (before cleanup unmounts). */
static void rpfs_fio_iomem_free(struct thread_data *td)
{
	struct rpfs_fio_data *d = td->io_ops_data;

	if (d && td->orig_buffer)
		(void)rpfs_mem_free(d->fs, td->orig_buffer);
	td->orig_buffer = NULL;
}

/* The rpfs path of fio's file name: below rpfs_dir= when given.
 * @return 0 or ENAMETOOLONG (logged) */
static int rpfs_fio_path(const struct rpfs_fio_data *d, const char *name,
			 char *buf, size_t cap)
{
	int n;

	if (d->dir)
		n = snprintf(buf, cap, "%s/%s", d->dir, name);
	else
		n = snprintf(buf, cap, "%s", name);
	if (n < 0 || (size_t)n >= cap) {
		log_err("rpfs: %s%s%s: path too long\n", d->dir ? d->dir : "",
			d->dir ? "/" : "", name);
		return ENAMETOOLONG;
	}
	return 0;
}

/* Open (creating it for writers) a file by its rpfs path. */
static int rpfs_fio_open_file(struct thread_data *td, struct fio_file *f)
{
	struct rpfs_fio_data *d = td->io_ops_data;
	char path[PATH_MAX];
	rpfs_file_t *rf;
	int flags, rc;

	if (!d)
		return EINVAL;
	rc = rpfs_fio_path(d, f->file_name, path, sizeof(path));
	if (rc)
		return rc;
	if (td_write(td))
		flags = (td_read(td) || td->o.verify != VERIFY_NONE ? O_RDWR :
			 O_WRONLY) | O_CREAT;
	else
		flags = O_RDONLY;
	rc = rpfs_open(d->fs, path, flags, 0644, &rf);
	if (rc) {
		log_err("rpfs: open %s: %s\n", path, strerror(-rc));
		return -rc;
	}
	FILE_SET_ENG_DATA(f, rf);
	return 0;
}

/* Close: publishes the file size. */
static int rpfs_fio_close_file(struct thread_data *td, struct fio_file *f)
{
	rpfs_file_t *rf = FILE_ENG_DATA(f);
	int rc;

	if (!rf)
		return 0;
	FILE_SET_ENG_DATA(f, NULL);
	rc = rpfs_close(rf);
	return rc ? -rc : 0;
}

/* Unlink a file (unlink=1). */
static int rpfs_fio_unlink_file(struct thread_data *td, struct fio_file *f)
{
	struct rpfs_fio_data *d = td->io_ops_data;
	char path[PATH_MAX];
	int rc;

	if (!d)
		return 0; /* unlink before init: nothing mounted yet */
	rc = rpfs_fio_path(d, f->file_name, path, sizeof(path));
	if (rc)
		return rc;
	rc = rpfs_unlink(d->fs, path);
	return rc && rc != -ENOENT ? -rc : 0;
}

/* Nothing is cached on the client. */
static int rpfs_fio_invalidate(struct thread_data *td, struct fio_file *f)
{
	return 0;
}

/* One synchronous I/O: read, write or sync. */
static enum fio_q_status rpfs_fio_queue(struct thread_data *td,
					struct io_u *io_u)
{
	rpfs_file_t *rf = FILE_ENG_DATA(io_u->file);
	ssize_t n;

	fio_ro_check(td, io_u);
	if (!rf) {
		io_u->error = EBADF;
		return FIO_Q_COMPLETED;
	}
	switch (io_u->ddir) {
	case DDIR_READ:
		n = rpfs_pread(rf, io_u->xfer_buf, io_u->xfer_buflen,
			       io_u->offset);
		break;
	case DDIR_WRITE:
		n = rpfs_pwrite(rf, io_u->xfer_buf, io_u->xfer_buflen,
				io_u->offset);
		break;
	case DDIR_SYNC:
	case DDIR_DATASYNC:
	case DDIR_SYNC_FILE_RANGE:
		n = rpfs_fsync(rf);
		break;
	default:
		io_u->error = EINVAL;
		return FIO_Q_COMPLETED;
	}
	if (n < 0)
		io_u->error = (int)-n;
	else if (ddir_rw(io_u->ddir) && (unsigned long long)n <
		 io_u->xfer_buflen)
		io_u->resid = io_u->xfer_buflen - (unsigned long long)n;
	return FIO_Q_COMPLETED;
}

struct ioengine_ops ioengine = {
	.name = "rpfs",
	.version = FIO_IOOPS_VERSION,
	.flags = FIO_SYNCIO | FIO_DISKLESSIO | FIO_NOEXTEND | FIO_NODISKUTIL,
	.setup = rpfs_fio_setup,
	.init = rpfs_fio_init,
	.cleanup = rpfs_fio_cleanup,
	.open_file = rpfs_fio_open_file,
	.close_file = rpfs_fio_close_file,
	.unlink_file = rpfs_fio_unlink_file,
	.invalidate = rpfs_fio_invalidate,
	.queue = rpfs_fio_queue,
	.iomem_alloc = rpfs_fio_iomem_alloc,
	.iomem_free = rpfs_fio_iomem_free,
	.options = rpfs_fio_options,
	.option_struct_size = sizeof(struct rpfs_fio_opts),
};

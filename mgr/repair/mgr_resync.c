/*
 * mgr_resync.c - repair stale replicas from their buddies (mgr_resync.h).
 *
 * Once a second (or when kicked) the thread walks the stale records in
 * batches. A record (X, ino, gen) whose X and buddy Y are up is repaired:
 * Y's size (IO_CSUM of one byte), Y's object copied to X in 1 MiB pieces
 * (IO_READ from Y without the mirror flag: never fenced; IO_WRITE to X,
 * which takes writes while fenced), X truncated to that size; then up to 4
 * compare passes (IO_CSUM of both over each 4 MiB range, and the sizes)
 * copy again what differs, as client writes go on meanwhile. A pass that
 * finds both equal ends it: X is synced (IO_FSYNC) and the record deleted
 * if its generation did not change (a new STALE_MARK during the copy keeps
 * it). Copied bytes are paced at the configured rate (averaged over a walk
 * of the records). One 1 MiB buffer, reused.
 */
#include "mgr_resync.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "log.h"
#include "mgr_iodpoll.h"

#define RS_PIECE (1u << 20)            /* bytes per IO_READ / IO_WRITE */
#define RS_RANGE PROTO_MAX_CSUM_LEN    /* bytes per IO_CSUM compare */
#define RS_PASSES 4
#define RS_BATCH 64                    /* records per read txn */
#define RS_TIMEOUT_MS 10000
#define RS_IDLE_MS 1000
#define RS_WARNED_MAX 1024

/* What a record was warned about (once per record and generation). */
enum rs_warn { RS_WARN_NO_SOURCE, RS_WARN_NO_CONVERGENCE };

struct rs_warned {
	uint16_t iod;
	uint8_t kind;            /* enum rs_warn */
	uint64_t ino, gen;
};

/* Per iod counters: atomics (written by the thread, read by the loop). */
struct rs_count {
	uint64_t done;
	uint64_t bytes;
};

struct mgr_resync {
	pthread_t thread;
	struct mgr_db *db;
	struct mgr_iodpoll *poll;
	struct net_client *cl;
	struct net_conn **conns;     /* per iod; thread only */
	uint16_t niods;
	uint64_t rate_bps;           /* bytes per second */
	uint8_t *buf;                /* RS_PIECE; thread only */
	struct rs_count *cnt;        /* per iod, atomics */
	pthread_mutex_t lock;
	pthread_cond_t cond;         /* CLOCK_MONOTONIC: stop, kick */
	int stop, kick;              /* lock */
	/* thread only */
	uint64_t t0_ns, paced;       /* rate: start of the walk, bytes since */
	struct mgr_stale_rec batch[RS_BATCH];
	struct rs_warned warned[RS_WARNED_MAX]; /* warnings given */
	uint32_t nwarned;
};

/* One record being repaired. */
struct rs_job {
	uint16_t x, y;               /* stale replica, its buddy (source) */
	uint64_t ino, gen;
	uint64_t bytes;              /* copied to x */
	uint64_t copy_ns;            /* time spent copying (pacing included) */
	unsigned passes;             /* compare passes run */
};

/* CLOCK_MONOTONIC in ns. */
static uint64_t rs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wait until ns (CLOCK_MONOTONIC) or a stop (or a kick, if kick_ok).
 * @return 1 when stopped */
static int rs_sleep_until(struct mgr_resync *rs, uint64_t ns, int kick_ok)
{
	struct timespec ts = { (time_t)(ns / 1000000000u),
			       (long)(ns % 1000000000u) };
	int stop;

	pthread_mutex_lock(&rs->lock);
	while (!rs->stop && !(kick_ok && rs->kick) &&
	       pthread_cond_timedwait(&rs->cond, &rs->lock, &ts) != ETIMEDOUT)
		;
	if (kick_ok)
		rs->kick = 0;
	stop = rs->stop;
	pthread_mutex_unlock(&rs->lock);
	return stop;
}

/* Whether the thread should stop. */
static int rs_stopping(struct mgr_resync *rs)
{
	int stop;

	pthread_mutex_lock(&rs->lock);
	stop = rs->stop;
	pthread_mutex_unlock(&rs->lock);
	return stop;
}

/* Sleep while the bytes paced so far are ahead of the rate, then count n
 * more. @return 1 when stopped */
static int rs_pace(struct mgr_resync *rs, uint64_t n)
{
	uint64_t due = rs->t0_ns +
		       (uint64_t)((unsigned __int128)rs->paced * 1000000000u /
				  rs->rate_bps);

	rs->paced += n;
	if (rs_now_ns() < due)
		return rs_sleep_until(rs, due, 0);
	return 0;
}

/*
 * One exchange with iod: q encoded for op, read data into rd (IO_READ) or
 * write data from wr (IO_WRITE), reply body into rep.
 * @return 0, the iod's status, or the transport's -errno
 */
static int rs_call(struct mgr_resync *rs, uint16_t iod, uint16_t op,
		   const struct proto_ioreq *q, const struct iovec *rd,
		   const struct iovec *wr, void *rep, uint32_t repcap,
		   uint32_t *replen)
{
	uint8_t body[128];
	struct net_call call;
	struct wbuf w;
	int rc;

	wb_init(&w, body, sizeof(body));
	rc = proto_ioreq_encode(&w, op, q);
	if (rc)
		return rc;
	memset(&call, 0, sizeof(call));
	call.op = op;
	call.body = body;
	call.body_len = (uint32_t)w.len;
	call.rd_iov = rd;
	call.rd_cnt = rd ? 1 : 0;
	call.wr_iov = wr;
	call.wr_cnt = wr ? 1 : 0;
	call.rep_buf = rep;
	call.rep_cap = repcap;
	rc = net_call_run(rs->conns[iod], &call);
	if (!rc)
		rc = call.status;
	if (!rc && rd && call.rd_bytes != rd->iov_len)
		rc = -EPROTO;
	if (!rc && replen)
		*replen = call.rep_len;
	return rc;
}

/* IO_CSUM of iod's object over [off, off + len); a missing object counts
 * as absent (exists 0, size 0). @return 0, -errno */
static int rs_csum(struct mgr_resync *rs, uint16_t iod, uint64_t ino,
		   uint64_t off, uint64_t len, struct proto_csum *c,
		   int *exists)
{
	struct proto_ioreq q = { .ino = ino, .off = off, .len = len };
	uint8_t rep[64];
	uint32_t n = 0;
	const char *why;
	int rc = rs_call(rs, iod, PROTO_OP_IO_CSUM, &q, NULL, NULL, rep,
			 sizeof(rep), &n);

	if (rc == -ENOENT) {
		memset(c, 0, sizeof(*c));
		*exists = 0;
		return 0;
	}
	if (!rc)
		rc = proto_csum_decode(rep, n, c, &why) ? -EPROTO : 0;
	*exists = 1;
	return rc;
}

/* Truncate (or create) x's object to size. */
static int rs_truncate(struct mgr_resync *rs, struct rs_job *j, uint64_t size)
{
	struct proto_ioreq q = { .ino = j->ino, .size = size };

	return rs_call(rs, j->x, PROTO_OP_IO_TRUNCATE, &q, NULL, NULL, NULL, 0,
		       NULL);
}

/* Copy [off, end) from y to x in RS_PIECE pieces, paced. @return 0,
 * -errno, -ECANCELED (stopping) */
static int rs_copy(struct mgr_resync *rs, struct rs_job *j, uint64_t off,
		   uint64_t end)
{
	struct proto_seg seg;
	struct proto_ioreq q = { .ino = j->ino, .nsegs = 1, .segs = &seg };
	struct iovec v;
	uint64_t t0 = rs_now_ns();
	int rc = 0;

	for (; off < end && !rc; off += seg.len) {
		seg = (struct proto_seg){ off, end - off < RS_PIECE ?
						end - off : RS_PIECE };
		if (rs_pace(rs, seg.len)) {
			rc = -ECANCELED;
			break;
		}
		v = (struct iovec){ rs->buf, (size_t)seg.len };
		q.flags = 0; /* not PROTO_IO_MIRROR: never fenced */
		rc = rs_call(rs, j->y, PROTO_OP_IO_READ, &q, &v, NULL, NULL, 0,
			     NULL);
		if (!rc)
			rc = rs_call(rs, j->x, PROTO_OP_IO_WRITE, &q, NULL, &v,
				     NULL, 0, NULL);
		if (rc)
			break;
		j->bytes += seg.len;
		__atomic_add_fetch(&rs->cnt[j->x].bytes, seg.len,
				   __ATOMIC_RELAXED);
	}
	j->copy_ns += rs_now_ns() - t0;
	return rc;
}

/* The first copy: y's whole object, then x cut to y's size. */
static int rs_copy_all(struct mgr_resync *rs, struct rs_job *j)
{
	struct proto_csum c;
	int exists, rc = rs_csum(rs, j->y, j->ino, 0, 1, &c, &exists);

	if (!rc)
		rc = rs_copy(rs, j, 0, c.size);
	if (!rc)
		rc = rs_truncate(rs, j, c.size);
	return rc;
}

/*
 * One compare pass: both objects by IO_CSUM over each RS_RANGE range up to
 * the larger size; x is cut to y's size when the sizes differ, and ranges
 * that differ below y's size are copied again.
 * @param[out] diff whether anything differed (and was copied again)
 * @return 0, -errno
 */
static int rs_compare(struct mgr_resync *rs, struct rs_job *j, int *diff)
{
	struct proto_csum cx, cy;
	uint64_t off = 0, end;
	int ex, ey, rc;

	*diff = 0;
	j->passes++;
	for (;;) {
		rc = rs_csum(rs, j->x, j->ino, off, RS_RANGE, &cx, &ex);
		if (!rc)
			rc = rs_csum(rs, j->y, j->ino, off, RS_RANGE, &cy, &ey);
		if (rc)
			return rc;
		if (cx.size != cy.size) {
			rc = rs_truncate(rs, j, cy.size);
			if (rc)
				return rc;
			*diff = 1;
		}
		if (off < cy.size && (cx.crc != cy.crc || ex != ey)) {
			end = cy.size - off < RS_RANGE ? cy.size : off + RS_RANGE;
			rc = rs_copy(rs, j, off, end);
			if (rc)
				return rc;
			*diff = 1;
		}
		off += RS_RANGE;
		if (off >= cx.size && off >= cy.size)
			return 0;
	}
}

/* The buddy of iod in its mirror group. @return 0, -ENOENT (in none) */
static int rs_buddy(const struct mgr_db *db, uint16_t iod, uint16_t *buddy)
{
	for (uint16_t g = 0; g < db->ngroups; g++) {
		if (db->groups[g].iod[0] == iod) {
			*buddy = db->groups[g].iod[1];
			return 0;
		}
		if (db->groups[g].iod[1] == iod) {
			*buddy = db->groups[g].iod[0];
			return 0;
		}
	}
	return -ENOENT;
}

/* Whether the inode exists, and whether y's replica of it is recorded
 * stale too. @return 0, -ENOENT (no inode), -EIO */
static int rs_lookup(struct mgr_resync *rs, const struct rs_job *j,
		     int *y_stale)
{
	struct mgr_inode in;
	struct mgr_txn *txn;
	int rc = mgr_db_begin(rs->db, 1, &txn);

	if (rc)
		return rc;
	rc = mgr_db_inode_get(rs->db, txn, j->ino, &in);
	if (!rc) {
		int s = mgr_db_stale_get(rs->db, txn, j->y, j->ino, NULL);

		*y_stale = s == 0;
		if (s && s != -ENOENT)
			rc = s;
	}
	mgr_db_abort(txn);
	return rc;
}

/* Delete the record if its generation is still j->gen. @return 0,
 * -EAGAIN (marked again), -ENOENT (gone), -errno */
static int rs_clear(struct mgr_resync *rs, const struct rs_job *j)
{
	struct mgr_txn *txn;
	int rc = mgr_db_begin(rs->db, 0, &txn);

	if (rc)
		return rc;
	rc = mgr_db_stale_del_if(rs->db, txn, j->x, j->ino, j->gen);
	if (rc) {
		mgr_db_abort(txn);
		return rc;
	}
	return mgr_db_commit(txn);
}

/* A record of an inode that no longer exists: its objects went with it,
 * so any copy of ours is garbage (best effort) and the record goes. */
static void rs_drop(struct mgr_resync *rs, const struct rs_job *j)
{
	struct proto_ioreq q = { .ino = j->ino };
	int rc;

	if (j->bytes)
		(void)rs_call(rs, j->x, PROTO_OP_IO_REMOVE, &q, NULL, NULL,
			      NULL, 0, NULL);
	rc = rs_clear(rs, j);
	if (rc == 0)
		log_notice("iod %u: stale record of inode %llu dropped: no such "
			   "inode", j->x, (unsigned long long)j->ino);
}

/* Whether this is the first warning of kind about this record (and
 * generation): a record retried every second warns once, then logs at
 * info. Cost: O(warnings given), at most RS_WARNED_MAX. */
static int rs_warn_first(struct mgr_resync *rs, const struct rs_job *j,
			 enum rs_warn kind)
{
	for (uint32_t i = 0; i < rs->nwarned; i++)
		if (rs->warned[i].iod == j->x && rs->warned[i].ino == j->ino &&
		    rs->warned[i].gen == j->gen && rs->warned[i].kind == kind)
			return 0;
	if (rs->nwarned < RS_WARNED_MAX)
		rs->warned[rs->nwarned++] = (struct rs_warned){ j->x, kind,
								j->ino, j->gen };
	return 1;
}

/* Warn once per record that it has no good source. */
static void rs_no_source(struct mgr_resync *rs, const struct rs_job *j)
{
	log_msg(rs_warn_first(rs, j, RS_WARN_NO_SOURCE) ? LOG_WARNING : LOG_INFO,
		"iod %u: inode %llu cannot be resynced: its buddy iod %u's "
		"replica is stale too", j->x, (unsigned long long)j->ino, j->y);
}

/* Repair one record if both iods are up and the buddy is a good source. */
static void rs_record(struct mgr_resync *rs, const struct mgr_stale_rec *r)
{
	struct rs_job j = { .x = r->iod, .ino = r->ino, .gen = r->gen };
	int y_stale = 0, diff = 1, rc;
	uint64_t t0;
	const char *what = "copy";

	if (r->iod >= rs->niods || rs_buddy(rs->db, r->iod, &j.y))
		return;
	if (!mgr_iodpoll_up(rs->poll, j.x) || !mgr_iodpoll_up(rs->poll, j.y))
		return;
	rc = rs_lookup(rs, &j, &y_stale);
	if (rc == -ENOENT) {
		rs_drop(rs, &j);
		return;
	}
	if (rc)
		return;
	if (y_stale) {
		rs_no_source(rs, &j);
		return;
	}
	t0 = rs_now_ns();
	rc = rs_copy_all(rs, &j);
	while (!rc && diff && j.passes < RS_PASSES) {
		what = "compare";
		rc = rs_compare(rs, &j, &diff);
	}
	if (!rc && !diff) {
		struct proto_ioreq q = { .ino = j.ino };

		what = "fsync";
		rc = rs_call(rs, j.x, PROTO_OP_IO_FSYNC, &q, NULL, NULL, NULL,
			     0, NULL);
	}
	if (rc == -ECANCELED)
		return;
	if (rc) {
		if (rs_lookup(rs, &j, &y_stale) == -ENOENT)
			rs_drop(rs, &j);
		else
			log_notice("iod %u: resync of inode %llu from iod %u: %s "
				   "failed: %s; will retry", j.x,
				   (unsigned long long)j.ino, j.y, what,
				   strerror(-rc));
		return;
	}
	if (diff) {
		log_msg(rs_warn_first(rs, &j, RS_WARN_NO_CONVERGENCE) ?
			LOG_WARNING : LOG_INFO,
			"iod %u: resync of inode %llu from iod %u did not "
			"converge in %u compare passes (%llu bytes copied; "
			"written meanwhile?); will retry", j.x,
			(unsigned long long)j.ino, j.y, j.passes,
			(unsigned long long)j.bytes);
		return;
	}
	if (rs_lookup(rs, &j, &y_stale) == -ENOENT) {
		rs_drop(rs, &j);
		return;
	}
	rc = rs_clear(rs, &j);
	if (rc == -EAGAIN) {
		log_info("iod %u: inode %llu was marked stale again during its "
			 "resync; will retry", j.x, (unsigned long long)j.ino);
		return;
	}
	if (rc)
		return;
	__atomic_add_fetch(&rs->cnt[j.x].done, 1, __ATOMIC_RELAXED);
	log_notice("iod %u: inode %llu resynced from iod %u: %llu bytes "
		   "copied, %u compare passes, %.2f s (%.2f s copying)", j.x,
		   (unsigned long long)j.ino, j.y, (unsigned long long)j.bytes,
		   j.passes, (double)(rs_now_ns() - t0) / 1e9,
		   (double)j.copy_ns / 1e9);
}

/* One walk over every stale record, in batches read in their own read
 * transactions. The rate is averaged over the walk. */
static void rs_walk(struct mgr_resync *rs)
{
	uint16_t after_iod = 0;
	uint64_t after_ino = 0;
	uint32_t n;

	rs->t0_ns = rs_now_ns();
	rs->paced = 0;
	do {
		struct mgr_txn *txn;
		int rc = mgr_db_begin(rs->db, 1, &txn);

		if (rc)
			return;
		rc = mgr_db_stale_list_all(rs->db, txn, after_iod, after_ino,
					   RS_BATCH, rs->batch, &n);
		mgr_db_abort(txn);
		if (rc)
			return;
		for (uint32_t i = 0; i < n; i++) {
			if (rs_stopping(rs))
				return;
			rs_record(rs, &rs->batch[i]);
			after_iod = rs->batch[i].iod;
			after_ino = rs->batch[i].ino;
		}
	} while (n == RS_BATCH);
	if (n == 0 && after_iod == 0 && after_ino == 0)
		rs->nwarned = 0; /* no records: forget the warnings */
}

/* Thread body: a walk every second or when kicked, until stopped. */
static void *rs_main(void *arg)
{
	struct mgr_resync *rs = arg;

	for (;;) {
		if (rs_sleep_until(rs, rs_now_ns() + RS_IDLE_MS * 1000000ull, 1))
			break;
		rs_walk(rs);
	}
	return NULL;
}

/* See mgr_resync.h. */
int mgr_resync_start(struct mgr_resync **out, struct mgr_db *db,
		     struct mgr_iodpoll *poll, const struct net_opts *base,
		     uint32_t rate_mbs)
{
	struct net_opts o = *base;
	struct mgr_resync *rs;
	pthread_condattr_t ca;
	int rc;

	if (rate_mbs == 0 || rate_mbs > MGR_RESYNC_MAX_RATE)
		return -EINVAL;
	rs = calloc(1, sizeof(*rs));
	if (!rs)
		return -ENOMEM;
	rs->db = db;
	rs->poll = poll;
	rs->niods = db->niods;
	rs->rate_bps = (uint64_t)rate_mbs * 1000000u;
	rs->conns = calloc(db->niods, sizeof(*rs->conns));
	rs->cnt = calloc(db->niods, sizeof(*rs->cnt));
	if (!rs->conns || !rs->cnt ||
	    posix_memalign((void **)&rs->buf, 4096, RS_PIECE)) {
		rc = -ENOMEM;
		goto out_free;
	}
	o.timeout_ms = RS_TIMEOUT_MS;
	rc = net_client_new(&rs->cl, &o);
	if (rc)
		goto out_free;
	rc = net_client_register_mem(rs->cl, rs->buf, RS_PIECE);
	if (rc)
		goto out_free_client;
	for (uint16_t i = 0; i < db->niods; i++) {
		rc = net_conn_new(rs->cl, db->iods[i].host, db->iods[i].port,
				  &rs->conns[i]);
		if (rc)
			goto out_free_client;
	}
	pthread_mutex_init(&rs->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&rs->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = -pthread_create(&rs->thread, NULL, rs_main, rs);
	if (rc)
		goto out_destroy_lock;
	log_info("resync: at most %u MB/s", rate_mbs);
	*out = rs;
	return 0;

out_destroy_lock:
	pthread_cond_destroy(&rs->cond);
	pthread_mutex_destroy(&rs->lock);
out_free_client:
	net_client_free(rs->cl);
out_free:
	free(rs->buf);
	free(rs->cnt);
	free(rs->conns);
	free(rs);
	return rc;
}

/* See mgr_resync.h. */
void mgr_resync_kick(struct mgr_resync *rs)
{
	pthread_mutex_lock(&rs->lock);
	rs->kick = 1;
	pthread_cond_broadcast(&rs->cond);
	pthread_mutex_unlock(&rs->lock);
}

/* Stop, join, then free the client (no call in flight) and the rest. */
void mgr_resync_stop(struct mgr_resync *rs)
{
	if (!rs)
		return;
	pthread_mutex_lock(&rs->lock);
	rs->stop = 1;
	pthread_cond_broadcast(&rs->cond);
	pthread_mutex_unlock(&rs->lock);
	pthread_join(rs->thread, NULL);
	net_client_unregister_mem(rs->cl, rs->buf);
	net_client_free(rs->cl);
	pthread_cond_destroy(&rs->cond);
	pthread_mutex_destroy(&rs->lock);
	free(rs->buf);
	free(rs->cnt);
	free(rs->conns);
	free(rs);
}

/* See mgr_resync.h. */
void mgr_resync_counts(struct mgr_resync *rs, uint16_t iod, uint64_t *done,
		       uint64_t *bytes)
{
	if (iod >= rs->niods) {
		*done = *bytes = 0;
		return;
	}
	*done = __atomic_load_n(&rs->cnt[iod].done, __ATOMIC_RELAXED);
	*bytes = __atomic_load_n(&rs->cnt[iod].bytes, __ATOMIC_RELAXED);
}

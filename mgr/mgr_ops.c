/*
 * mgr_ops.c - decode, dispatch and answer metadata requests.
 *
 * Every op takes one path: decode -> run in a transaction -> encode ->
 * reply. ops_txn_run is the middle of it for both threads: the loop thread
 * runs an op in a top-level txn of its own (reads; writes when group
 * commit is off), the writer thread in a child of its open batch (writes,
 * mgr_batch.h). The namespace functions (mgr_ns.h, mgr_xattr.h) run in
 * the txn they are given and never end it; ops_txn_run does.
 */
#include "mgr_ops.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "log.h"
#include "mgr_batch.h"
#include "mgr_kv.h"
#include "mgr_leased.h"
#include "mgr_ns.h"
#include "mgr_perm.h"
#include "mgr_xattr.h"

#define OPS_REP_SLACK 64   /* reply bytes around the dirent/xattr blob */
#define OPS_STATFS_WAIT_MS 2500
/* One op on its path: the decoded request in; the status and the encoded
 * reply out. The loop thread keeps it on its stack; a write op under group
 * commit carries it to the writer thread in its ops_wreq. */
struct ops_call {
	uint16_t op;           /* immutable */
	int priv;              /* immutable: the connection holds the
				* servers' key (net_sconn_privileged) */
	struct proto_mreq m;   /* immutable: decoded, root squash applied */
	struct wbuf w;         /* the running thread's: the encoded reply */
	int32_t status;        /* ops_txn_run: the answer (0, -errno,
				* PROTO_RETRY, PROTO_STANDBY) */
	int answer;            /* ops_dispatch: what to answer once the txn
				* commits (PURGE_MANY's skipped inode), else 0 */
	struct mgr_ops *ops;   /* immutable: whose op (ops_wreq_ready) */
	const struct proto_bop *bop; /* immutable: an op of a BATCH (its
				* given inode number and layout), else NULL */
	uint64_t session;      /* immutable: with bop, the BATCH's session */
	uint64_t made;         /* ops_exec: the directory a MKDIR made (its
				* session may be granted a WRITE lease) */
};

/* A BATCH on its way (ops_bat_*): the decoded request, the names it
 * changes, its reply. Owned by its ops_wreq (group commit) or by
 * ops_batch_now (group commit off). */
struct ops_bat {
	struct proto_batch b;        /* immutable once decoded: its ops point
				      * into the request's body */
	struct proto_batchrep rep;   /* the loop thread's until submitted
				      * (flags, evseq: the grants), then the
				      * writer thread's (statuses, range) */
	struct mgr_lease_name names[PROTO_MAX_BATCH]; /* loop thread: the
				      * names its ops change (into the body) */
};

/* A write op on its way through the writer thread (mgr_batch.h): the
 * request's body is copied, so the op does not depend on the transport's
 * buffer while it waits for its batch. */
struct ops_wreq {
	struct mgr_batch_item it;  /* mgr_batch's */
	struct net_sreq *r;        /* loop thread */
	struct ops_call call;      /* the writer thread's once submitted;
				    * the loop's again when answered */
	uint32_t len;              /* writer thread: bytes in reply */
	uint8_t *reply;            /* writer thread: a copy of the encoded
				    * reply (NULL when len is 0) */
	struct mgr_leased_wait lw; /* loop thread: parked until the holders
				    * of leases on its directories acked */
	struct mgr_lease_name names2[2]; /* loop thread: the names an op
				    * alone changes (pointing into body) */
	struct mgr_lease_name *names; /* loop thread: names2, or a BATCH's
				    * (bat->names), for the leases */
	unsigned nnames;           /* loop thread */
	struct ops_bat *bat;       /* BATCH: its state (owned), else NULL;
				    * whose thread's it is: as call's */
	uint8_t body[];            /* the request body */
};

/* Handler state. Every field is loop thread only, except: db (any thread,
 * as mgr_db allows), wrep (the writer thread's), and serving, lost and
 * lead_arg (set before the first request, read-only after). */
struct mgr_ops {
	struct mgr_db *db;
	struct mgr_iodpoll *poll;
	int root_squash;
	uint8_t *rep;     /* encoded reply body, PROTO_MAX_BODY */
	uint8_t *scratch; /* dirents / xattr values / link target */
	size_t scratch_cap;
	struct mgr_batch *batch;   /* group commit on (mgr_ops_group_commit) */
	uint8_t *wrep;             /* writer thread: its reply, PROTO_MAX_BODY */
	int batch_rc;              /* the status of the batch being answered */
	int (*serving)(void *arg); /* mgr_ops_set_lead; NULL: always active */
	void (*lost)(void *arg);
	void *lead_arg;
	struct mgr_leased *leased; /* mgr_ops_set_leases; NULL: no leases */
};

/* Allocate the context and its two reusable buffers. */
int mgr_ops_new(struct mgr_ops **out, struct mgr_db *db,
		struct mgr_iodpoll *poll, int root_squash)
{
	struct mgr_ops *ops = calloc(1, sizeof(*ops));

	if (!ops)
		return -ENOMEM;
	ops->db = db;
	ops->poll = poll;
	ops->root_squash = root_squash;
	ops->rep = malloc(PROTO_MAX_BODY);
	if (!ops->rep)
		goto out_free_ops;
	ops->scratch_cap = PROTO_MAX_BODY;
	ops->scratch = malloc(ops->scratch_cap);
	if (!ops->scratch)
		goto out_free_rep;
	*out = ops;
	return 0;

out_free_rep:
	free(ops->rep);
out_free_ops:
	free(ops);
	return -ENOMEM;
}

/* The status to answer an op with that ended with rc: an -EIO while the
 * store's server was out of reach at some moment since mark (taken before
 * the op ran) becomes PROTO_RETRY, so the client waits out a database
 * failover instead of failing the call. */
static int ops_status(const struct mgr_ops *ops, int rc, uint64_t mark)
{
	if (rc == -EIO && mgr_kv_unreachable_since(ops->db->kv, mark))
		return PROTO_RETRY;
	return rc;
}

/*
 * The status every op of a batch of nops gets when its commit ended with
 * rc (loop thread, once per batch): 0 (each its own answer), PROTO_STANDBY
 * when this mgr may no longer commit as the active one (lost() is called),
 * PROTO_RETRY when the store was out of reach (mgr_batch's -EHOSTUNREACH),
 * else the commit's error.
 */
static int ops_batch_status(struct mgr_ops *ops, uint32_t nops, int rc)
{
	if (rc == -ESTALE && ops->serving) {
		log_warn("group commit of %u ops refused (-ESTALE): this mgr is no "
			 "longer the active one; each is answered as by a standby",
			 nops);
		ops->lost(ops->lead_arg);
		return PROTO_STANDBY;
	}
	if (rc == -EHOSTUNREACH) {
		log_info("group commit of %u ops failed: the store is out of "
			 "reach; each is answered \"retry later\"", nops);
		return PROTO_RETRY;
	}
	if (rc)
		log_err("group commit of %u ops failed: %s; each is answered "
			"with that error", nops, strerror(-rc));
	return rc;
}

/* The last step of every op's path (loop thread): answer r with call's
 * status, and with reply (len bytes, the encoded reply) when it is 0. */
static void ops_reply(struct net_sreq *r, const struct ops_call *call,
		      const uint8_t *reply, uint32_t len)
{
	int rc = call->status;

	log_debug("%s uid %u from %s: %d", proto_op_name(call->op),
		  call->m.cred.uid, net_sconn_peer(r->conn), rc);
	net_sreq_reply(r, rc, rc ? NULL : reply, rc ? 0 : len);
}

/* A MKDIR of a session committed (loop thread): grant the session a WRITE
 * lease on the new directory (mgr_leased_grant_write), appended to its
 * encoded reply (proto_grant: after the fields). None under root squash:
 * the mount could not predict the owner of what it makes there. Without
 * memory for the longer reply, no grant. */
static void ops_mkdir_grant(struct mgr_ops *ops, struct ops_wreq *q)
{
	struct proto_grant g;
	struct wbuf w;
	uint8_t *rep;

	if (ops->root_squash || !q->call.m.cred.session || !q->len ||
	    !mgr_leased_grant_write(ops->leased, q->call.m.cred.session,
				    q->call.made, &g))
		return;
	rep = realloc(q->reply, q->len + 16);
	if (!rep)
		return; /* the lease stays unused: the mount holds none */
	q->reply = rep;
	wb_init(&w, rep + q->len, 16);
	wb_u64(&w, g.ino);
	wb_u64(&w, g.evseq);
	q->len += 16;
}

/* mgr_batch's done (loop thread): answer one op of a batch that ended,
 * in the order the ops came, and free it. An op is answered only after
 * the commit that made it durable. */
static void ops_wreq_done(struct mgr_batch_item *it, void *arg)
{
	struct mgr_ops *ops = arg;
	struct ops_wreq *q = container_of(it, struct ops_wreq, it);

	if (it->batch_n)
		ops->batch_rc = ops_batch_status(ops, it->batch_n, it->commit_rc);
	if (ops->batch_rc)
		q->call.status = ops->batch_rc;
	mgr_leased_done(ops->leased, q->names, q->nnames);
	if (q->call.status == 0 && q->call.made)
		ops_mkdir_grant(ops, q);
	ops_reply(q->r, &q->call, q->reply, q->len);
	free(q->reply);
	free(q->bat);
	free(q);
}

/* mgr_batch's serving (writer thread): may the batch commit? */
static int ops_serving_mt(void *arg)
{
	struct mgr_ops *ops = arg;

	return !ops->serving || ops->serving(ops->lead_arg);
}

static int ops_dispatch(struct mgr_ops *ops, struct mgr_txn *txn,
			struct ops_call *call, struct proto_mrep *p);
static int ops_is_write(uint16_t op);
static int ops_bat_exec(struct mgr_ops *ops, struct mgr_txn *txn,
			struct ops_bat *bat, int priv);
static int ops_bat_encode(struct ops_bat *bat, struct wbuf *w);
static void ops_bat_grant(struct mgr_ops *ops, struct ops_bat *bat);

/* Run call's op (not MOUNT) in txn and encode its reply into call->w:
 * 0 (commit txn), or the op's -errno (abort it; anything out of the errno
 * range becomes -EIO). The reply is encoded inside txn, as it may point
 * into the store's memory. */
static int ops_exec(struct mgr_ops *ops, struct mgr_txn *txn,
		    struct ops_call *call)
{
	struct proto_mrep p;
	int rc;

	memset(&p, 0, sizeof(p));
	call->answer = 0;
	rc = ops_dispatch(ops, txn, call, &p);
	if (rc == 0 && call->op == PROTO_OP_MKDIR && !call->bop)
		call->made = p.attr.ino;
	if (rc == 0 && call->answer == 0) {
		rc = proto_mrep_encode(&call->w, call->op, &p);
		if (rc) /* a bug: replies are sized to fit */
			log_err("%s reply does not encode: %d",
				proto_op_name(call->op), rc);
	}
	if (rc > 0 || rc < -4095)
		rc = -EIO;
	return rc;
}

/*
 * The middle of every op's path: begin its transaction, run it there
 * (ops_exec), and end the transaction: commit when the op succeeded, else
 * abort, so a failed op leaves nothing behind. parent NULL: a top-level
 * txn (the loop thread: a read txn for a read op); else a child of parent,
 * the writer thread's open batch, whose commit makes the op durable later.
 * Sets call->status (ops_status applied). Cost: the op, plus one commit
 * (a sync for a top-level write).
 * @return 0; with a parent, -errno when the child's commit failed (the
 *	batch cannot go on)
 */
static int ops_txn_run(struct mgr_ops *ops, struct mgr_txn *parent,
		       struct ops_call *call)
{
	uint64_t mark = mgr_kv_reach_mark(ops->db->kv);
	struct mgr_txn *txn;
	int rc;

	rc = parent ? mgr_db_begin_child(parent, &txn)
		    : mgr_db_begin(ops->db, !ops_is_write(call->op), &txn);
	if (rc)
		goto out_status;
	rc = ops_exec(ops, txn, call);
	if (rc) {
		mgr_db_abort(txn);
		goto out_status;
	}
	rc = mgr_db_commit(txn);
	if (rc && parent) {
		call->status = rc;
		return rc;
	}
	if (!rc)
		rc = call->answer;
out_status:
	call->status = ops_status(ops, rc, mark);
	return 0;
}

/* mgr_batch's run (writer thread): run one write op in a child of the
 * open batch and keep a copy of its encoded reply. Without memory for the
 * copy the batch is aborted (its ops are answered -ENOMEM, none applied),
 * as the op already ran in it. @return 0, -ENOMEM, or the child's commit
 * error */
static int ops_wreq_run(struct mgr_batch_item *it, struct mgr_txn *batch,
			void *arg)
{
	struct mgr_ops *ops = arg;
	struct ops_wreq *q = container_of(it, struct ops_wreq, it);
	int rc;

	wb_init(&q->call.w, ops->wrep, PROTO_MAX_BODY);
	if (q->bat) {
		rc = ops_bat_exec(ops, batch, q->bat, q->call.priv);
		if (rc)
			return rc;
		q->call.status = ops_bat_encode(q->bat, &q->call.w);
	} else {
		rc = ops_txn_run(ops, batch, &q->call);
		if (rc)
			return rc;
	}
	q->len = q->call.status ? 0 : (uint32_t)q->call.w.len;
	if (q->len) {
		q->reply = malloc(q->len);
		if (!q->reply)
			return -ENOMEM;
		memcpy(q->reply, ops->wrep, q->len);
	}
	it->bytes = q->len;
	return 0;
}

/* See mgr_ops.h. */
int mgr_ops_group_commit(struct mgr_ops *ops, struct ev_loop *loop,
			 uint32_t commit_delay_ms)
{
	const struct mgr_batch_ops bops = {
		.run = ops_wreq_run,
		.done = ops_wreq_done,
		.serving = ops_serving_mt,
		.arg = ops,
	};
	int rc;

	if (commit_delay_ms > MGR_OPS_MAX_COMMIT_DELAY_MS)
		return -EINVAL;
	ops->wrep = malloc(PROTO_MAX_BODY);
	if (!ops->wrep)
		return -ENOMEM;
	rc = mgr_batch_new(&ops->batch, ops->db, loop, &bops, commit_delay_ms);
	if (rc) {
		free(ops->wrep);
		ops->wrep = NULL;
	}
	return rc;
}

/* See mgr_ops.h. */
void mgr_ops_set_lead(struct mgr_ops *ops, int (*serving)(void *arg),
		      void (*lost)(void *arg), void *arg)
{
	ops->serving = serving;
	ops->lost = lost;
	ops->lead_arg = arg;
}

/* See mgr_ops.h. */
void mgr_ops_set_leases(struct mgr_ops *ops, struct mgr_leased *leased)
{
	ops->leased = ops->batch ? leased : NULL;
}

/* See mgr_ops.h. */
void mgr_ops_flush(struct mgr_ops *ops)
{
	if (ops && ops->batch)
		mgr_batch_drain(ops->batch);
}

/* Free the context (its write ops are committed and answered first). */
void mgr_ops_free(struct mgr_ops *ops)
{
	if (!ops)
		return;
	mgr_batch_free(ops->batch);
	free(ops->wrep);
	free(ops->scratch);
	free(ops->rep);
	free(ops);
}

/* Readdir reply under construction. */
struct ops_rd {
	struct wbuf w;
	size_t budget;
	uint32_t n;
};

/* Append one entry if it fits in the budget. */
static int ops_rd_emit(void *arg, uint64_t cookie, const char *name,
		       size_t len, const struct proto_attr *a)
{
	struct ops_rd *rd = arg;

	if (rd->w.len + proto_dirent_size(len) > rd->budget)
		return 1;
	proto_dirent_put(&rd->w, cookie, name, len, a);
	if (rd->w.err)
		return 1;
	rd->n++;
	return 0;
}

/* READDIR: fill as many entries as max (and PROTO_MAX_BODY) allow. */
static int ops_readdir(struct mgr_ops *ops, struct mgr_txn *txn,
		       const struct proto_mreq *m, struct proto_mrep *p)
{
	struct ops_rd rd = { .n = 0 };
	size_t max = m->max ? m->max : PROTO_MAX_BODY;
	int eof = 0, rc;

	if (max > PROTO_MAX_BODY)
		max = PROTO_MAX_BODY;
	if (max <= OPS_REP_SLACK)
		return -EINVAL;
	rd.budget = max - OPS_REP_SLACK;
	if (rd.budget > ops->scratch_cap)
		rd.budget = ops->scratch_cap;
	wb_init(&rd.w, ops->scratch, ops->scratch_cap);
	rc = mgr_ns_readdir(ops->db, txn, &m->cred, m->ino, m->cookie,
			    ops_rd_emit, &rd, &eof);
	if (rc)
		return rc;
	if (rd.n == 0 && !eof)
		return -EINVAL; /* max too small for even one entry */
	p->ndirents = rd.n;
	p->eof = eof;
	p->dirents = (struct proto_str){ (const char *)ops->scratch,
					 (uint32_t)rd.w.len };
	return 0;
}

/* GETXATTR / LISTXATTR: value or size into the reply. */
static int ops_xattr_read(struct mgr_ops *ops, struct mgr_txn *txn,
			  uint16_t op, const struct proto_mreq *m,
			  struct proto_mrep *p)
{
	size_t cap = m->max, size = 0;
	int rc;

	if (cap > PROTO_MAX_BODY - OPS_REP_SLACK)
		cap = PROTO_MAX_BODY - OPS_REP_SLACK;
	if (op == PROTO_OP_GETXATTR)
		rc = mgr_xattr_get(ops->db, txn, &m->cred, m->ino, m->xname.p,
				   m->xname.len, ops->scratch, cap, &size);
	else
		rc = mgr_xattr_list(ops->db, txn, &m->cred, m->ino,
				    ops->scratch, cap, &size);
	if (rc == -ERANGE && m->max > cap)
		rc = -E2BIG; /* larger than a reply can carry */
	if (rc)
		return rc;
	p->xsize = (uint32_t)size;
	if (m->max)
		p->xvalue = (struct proto_str){ (const char *)ops->scratch,
						(uint32_t)size };
	return 0;
}

#define OPS_NOMINAL_INODES (1ull << 32)

/* STATFS from the poller's aggregate plus our inode count. */
static int ops_statfs(struct mgr_ops *ops, struct mgr_txn *txn,
		      struct proto_mrep *p)
{
	unsigned nup = 0;
	uint64_t used;

	memset(&p->st, 0, sizeof(p->st));
	p->st.bsize = 4096;
	if (ops->poll)
		mgr_iodpoll_get(ops->poll, &p->st, OPS_STATFS_WAIT_MS, &nup);
	/* statvfs wants the total in f_files: report a nominal 2^32 inodes
	 * (numbers are never reused, so there is no hard limit) and the
	 * ones in use subtracted from it as free. */
	used = mgr_ns_files(ops->db, txn);
	p->st.files = used > OPS_NOMINAL_INODES ? used : OPS_NOMINAL_INODES;
	p->st.ffree = p->st.files - used;
	p->st.namemax = PROTO_MAX_NAME;
	return 0;
}

/* MOUNT reply: fsid, default layout, iod table, mirror groups. Encodes
 * directly. */
static int ops_mount(struct mgr_ops *ops, struct wbuf *w)
{
	static struct proto_mount mnt; /* large: keep off the stack */
	struct mgr_db *db = ops->db;

	memset(&mnt, 0, sizeof(mnt));
	mnt.fsid = db->fsid;
	mnt.deflayout = db->deflayout;
	mnt.niods = db->niods;
	for (uint16_t i = 0; i < db->niods; i++) {
		mnt.iods[i].id = i;
		mnt.iods[i].host = (struct proto_str){ db->iods[i].host,
			(uint32_t)strlen(db->iods[i].host) };
		mnt.iods[i].port = db->iods[i].port;
	}
	mnt.ngroups = db->ngroups;
	memcpy(mnt.groups, db->groups, db->ngroups * sizeof(*db->groups));
	return proto_mount_encode(w, &mnt);
}

/* Run call's read op in txn (it changes nothing); fills p. @return 0, or
 * the op's -errno */
static int ops_dispatch_read(struct mgr_ops *ops, struct mgr_txn *txn,
			     struct ops_call *call, struct proto_mrep *p)
{
	const struct proto_mreq *m = &call->m;
	const struct proto_cred *c = &m->cred;
	struct mgr_db *db = ops->db;
	size_t len = 0;
	int rc;

	switch (call->op) {
	case PROTO_OP_LOOKUP:
		return mgr_ns_lookup(db, txn, c, m->parent, m->name.p,
				     m->name.len, &p->attr);
	case PROTO_OP_GETATTR:
		return mgr_ns_getattr(db, txn, m->ino, &p->attr);
	case PROTO_OP_READLINK:
		rc = mgr_ns_readlink(db, txn, m->ino, (char *)ops->scratch,
				     ops->scratch_cap, &len);
		if (!rc)
			p->target = (struct proto_str){ (const char *)ops->scratch,
							(uint32_t)len };
		return rc;
	case PROTO_OP_READDIR:
		return ops_readdir(ops, txn, m, p);
	case PROTO_OP_STATFS:
		return ops_statfs(ops, txn, p);
	case PROTO_OP_GETXATTR:
	case PROTO_OP_LISTXATTR:
		return ops_xattr_read(ops, txn, call->op, m, p);
	case PROTO_OP_OPEN:
		return mgr_ns_open(db, txn, c, m->ino, m->flags, &p->attr);
	case PROTO_OP_ACCESS:
		return mgr_ns_access(db, txn, c, m->ino, m->mode);
	default:
		return -EOPNOTSUPP;
	}
}

/* Run call's write op in txn; fills p, or call->answer for an op whose txn
 * commits with a non-zero answer. @return 0 (commit), or the op's -errno
 * (abort) */
static int ops_dispatch_write(struct mgr_ops *ops, struct mgr_txn *txn,
			      struct ops_call *call, struct proto_mrep *p)
{
	const struct proto_mreq *m = &call->m;
	const struct proto_cred *c = &m->cred, *who = call->priv ? NULL : c;
	struct mgr_db *db = ops->db;

	if (call->bop && call->bop->newino) /* a BATCH's CREATE MKDIR SYMLINK */
		return mgr_ns_make_given(db, txn, c, call->session, call->bop,
					 &p->attr);
	switch (call->op) {
	case PROTO_OP_SETATTR:
		return mgr_ns_setattr(db, txn, c, m, &p->attr);
	case PROTO_OP_CREATE:
		return mgr_ns_create(db, txn, c, m->parent, m->name.p,
				     m->name.len, m->mode, m->flags, &p->attr);
	case PROTO_OP_MKDIR:
		return mgr_ns_mkdir(db, txn, c, m->parent, m->name.p,
				    m->name.len, m->mode, &p->attr);
	case PROTO_OP_MKNOD:
		return mgr_ns_mknod(db, txn, c, m->parent, m->name.p,
				    m->name.len, m->mode, m->rdev, &p->attr);
	case PROTO_OP_UNLINK:
		return mgr_ns_unlink(db, txn, c, m->parent, m->name.p,
				     m->name.len, &p->freed);
	case PROTO_OP_RMDIR:
		return mgr_ns_rmdir(db, txn, c, m->parent, m->name.p,
				    m->name.len);
	case PROTO_OP_RENAME:
		return mgr_ns_rename(db, txn, c, m->parent, m->name.p,
				     m->name.len, m->newparent, m->newname.p,
				     m->newname.len, m->flags, &p->freed);
	case PROTO_OP_LINK:
		return mgr_ns_link(db, txn, c, m->ino, m->newparent,
				   m->newname.p, m->newname.len, &p->attr);
	case PROTO_OP_SYMLINK:
		return mgr_ns_symlink(db, txn, c, m->parent, m->name.p,
				      m->name.len, m->target.p, m->target.len,
				      &p->attr);
	case PROTO_OP_SETXATTR:
		return mgr_xattr_set(db, txn, c, m->ino, m->xname.p,
				     m->xname.len, m->xvalue.p, m->xvalue.len,
				     m->flags);
	case PROTO_OP_REMOVEXATTR:
		return mgr_xattr_remove(db, txn, c, m->ino, m->xname.p,
					m->xname.len);
	case PROTO_OP_SETSIZE:
		return mgr_ns_setsize(db, txn, c, m->ino, m->size, &m->mtime,
				      &p->attr);
	case PROTO_OP_PURGE:
		return mgr_ns_purge(db, txn, who, m->ino);
	case PROTO_OP_PURGE_MANY:
		return mgr_ns_purge_many(db, txn, who, &m->inos, &call->answer);
	case PROTO_OP_SETBLOCKS:
		return mgr_ns_setblocks(db, txn, c, m->ino, m->flags, m->size,
					&m->mtime, m->blocks, &p->attr);
	default:
		return -EOPNOTSUPP;
	}
}

/* Run call's decoded request in txn (ops_exec's dispatch). */
static int ops_dispatch(struct mgr_ops *ops, struct mgr_txn *txn,
			struct ops_call *call, struct proto_mrep *p)
{
	if (ops_is_write(call->op))
		return ops_dispatch_write(ops, txn, call, p);
	return ops_dispatch_read(ops, txn, call, p);
}

/* Does op change the namespace (a write op, run in the batch)? Ops that
 * only read (lookup, getattr, readdir, readlink, statfs, getxattr,
 * listxattr, open, access, mount) are answered at once from a read txn. */
static int ops_is_write(uint16_t op)
{
	switch (op) {
	case PROTO_OP_SETATTR:
	case PROTO_OP_CREATE:
	case PROTO_OP_MKDIR:
	case PROTO_OP_MKNOD:
	case PROTO_OP_UNLINK:
	case PROTO_OP_RMDIR:
	case PROTO_OP_RENAME:
	case PROTO_OP_LINK:
	case PROTO_OP_SYMLINK:
	case PROTO_OP_SETXATTR:
	case PROTO_OP_REMOVEXATTR:
	case PROTO_OP_SETSIZE:
	case PROTO_OP_PURGE:
	case PROTO_OP_PURGE_MANY:
	case PROTO_OP_SETBLOCKS:
	case PROTO_OP_BATCH:
		return 1;
	default:
		return 0;
	}
}

/*
 * Decode request r's body (body: r->body or a copy of it) into m and apply
 * root squash. On failure r is answered: -EOPNOTSUPP for a number reserved
 * for ops built elsewhere, else its connection is closed as malformed.
 * @return 0, or -1 when r was answered
 */
static int ops_decode(struct mgr_ops *ops, struct net_sreq *r,
		      const uint8_t *body, uint16_t op, struct proto_mreq *m)
{
	const char *why = "request";
	int rc = proto_mreq_decode(body, r->body_len, op, m, &why);

	if (rc == -EOPNOTSUPP) {
		net_sreq_reply(r, -EOPNOTSUPP, NULL, 0);
		return -1;
	}
	if (rc) {
		net_sreq_reject(r, why ? why : "malformed request");
		return -1;
	}
	if (ops->root_squash)
		mgr_perm_squash(&m->cred);
	return 0;
}

/* The names call's op adds, removes or replaces, as (directory, name)
 * pairs into names (2 at most), or the inode whose attributes it changes
 * (name empty: a directory's are under its lease). @return how many */
static unsigned ops_names(const struct ops_call *call,
			  struct mgr_lease_name names[2])
{
	const struct proto_mreq *m = &call->m;
	unsigned n = 0;

	if (call->op == PROTO_OP_RENAME)
		names[n++] = (struct mgr_lease_name){ m->newparent, m->newname.p,
						      m->newname.len };
	switch (call->op) {
	case PROTO_OP_RENAME: /* and the old name */
	case PROTO_OP_CREATE:
	case PROTO_OP_MKDIR:
	case PROTO_OP_MKNOD:
	case PROTO_OP_SYMLINK:
	case PROTO_OP_UNLINK:
	case PROTO_OP_RMDIR:
		names[n++] = (struct mgr_lease_name){ m->parent, m->name.p,
						      m->name.len };
		break;
	case PROTO_OP_LINK:
		names[n++] = (struct mgr_lease_name){ m->newparent, m->newname.p,
						      m->newname.len };
		break;
	case PROTO_OP_SETATTR:
	case PROTO_OP_SETXATTR:
	case PROTO_OP_REMOVEXATTR:
		names[n++] = (struct mgr_lease_name){ m->ino, NULL, 0 };
		break;
	default:
		break;
	}
	return n;
}

/* mgr_leased_wait's ready: the holders of leases on the op's directories
 * acknowledged; queue it for its batch. */
static void ops_wreq_ready(struct mgr_leased_wait *w)
{
	struct ops_wreq *q = container_of(w, struct ops_wreq, lw);
	struct mgr_ops *ops = q->call.ops;

	mgr_batch_submit(ops->batch, &q->it);
}

/* Queue write op q for its batch (loop thread): at once, or once the
 * holders of leases on the names it changes acknowledged (parked: then
 * ops_wreq_ready queues it). A change the lease table refuses is answered
 * with its error and q freed. */
static void ops_wreq_change(struct mgr_ops *ops, struct ops_wreq *q);

/* The inode that parent/name holds now, or 0 (a read txn of its own;
 * loop thread). */
static uint64_t ops_lookup_now(struct mgr_ops *ops, uint64_t parent,
			       const struct proto_str *name)
{
	struct mgr_txn *txn;
	uint64_t ino = 0;

	if (!name->len || mgr_db_begin(ops->db, 1, &txn))
		return 0;
	if (mgr_db_dirent_get(ops->db, txn, parent, name->p, name->len, &ino))
		ino = 0;
	mgr_db_abort(txn);
	return ino;
}

/* The objects op m uses that another session may hold a WRITE lease on:
 * its inode and directories, and the directory an RMDIR removes or a
 * RENAME replaces (looked up now: a read txn per RMDIR and RENAME while
 * leases are on). @return how many (<= 4) */
static unsigned ops_uses(struct mgr_ops *ops, uint16_t op,
			 const struct proto_mreq *m, uint64_t inos[4])
{
	unsigned n = 0;

	inos[n++] = m->ino;
	inos[n++] = m->parent;
	inos[n++] = m->newparent;
	if (op == PROTO_OP_RMDIR)
		inos[n++] = ops_lookup_now(ops, m->parent, &m->name);
	else if (op == PROTO_OP_RENAME)
		inos[n++] = ops_lookup_now(ops, m->newparent, &m->newname);
	return n;
}

/* mgr_leased_wait's ready: the WRITE holders of what the op uses sent
 * their ops and acknowledged; on to its change. */
static void ops_wreq_accessed(struct mgr_leased_wait *w)
{
	struct ops_wreq *q = container_of(w, struct ops_wreq, lw);

	ops_wreq_change(q->call.ops, q);
}

/* Queue write op q (loop thread): first, what it uses that another
 * session holds a WRITE lease on is recalled (mgr_leased_access: the
 * holder sends its queue first); then its change (ops_wreq_change). A
 * BATCH uses only what its own session holds. */
static void ops_wreq_go(struct mgr_ops *ops, struct ops_wreq *q)
{
	uint64_t inos[4];
	unsigned n;
	int rc = 0;

	if (ops->leased && !q->bat) {
		n = ops_uses(ops, q->call.op, &q->call.m, inos);
		q->lw.ready = ops_wreq_accessed;
		rc = mgr_leased_access(ops->leased, q->call.m.cred.session,
				       inos, n, &q->lw);
	}
	if (rc == 1)
		return; /* parked: ops_wreq_accessed goes on */
	if (rc < 0) {
		net_sreq_reply(q->r, rc, NULL, 0);
		free(q->bat);
		free(q);
		return;
	}
	ops_wreq_change(ops, q);
}

/* Queue write op q for its batch: see above. */
static void ops_wreq_change(struct mgr_ops *ops, struct ops_wreq *q)
{
	int rc;

	q->lw.ready = ops_wreq_ready;
	rc = q->nnames ? mgr_leased_change(ops->leased, q->call.m.cred.session,
					   q->names, q->nnames, &q->lw) : 0;
	if (rc == 1)
		return; /* parked: ops_wreq_ready submits it */
	if (rc < 0) {
		net_sreq_reply(q->r, rc, NULL, 0);
		free(q->bat);
		free(q);
		return;
	}
	ops_wreq_ready(&q->lw);
}

/* ---------------------------------------------------------------- BATCH */

/*
 * Decode a BATCH request (body: r's or a copy of it) into b. On failure r
 * is answered: -EINVAL for a batch without a session (BATCH needs one),
 * else its connection is closed as malformed. @return 0, or -1 answered
 */
static int ops_bat_decode(struct net_sreq *r, const uint8_t *body,
			  struct proto_batch *b)
{
	const char *why = NULL;
	int rc = proto_batch_decode(body, r->body_len, b, &why);

	if (!rc)
		return 0;
	if (why && !strcmp(why, "cred.session")) {
		net_sreq_reply(r, -EINVAL, NULL, 0);
		return -1;
	}
	net_sreq_reject(r, why ? why : "malformed BATCH");
	return -1;
}

/* The names bat's ops change, as ops_names gives them for each op alone
 * (one at most per op of a BATCH), into bat->names. Cost: one walk of the
 * ops. @return how many */
static unsigned ops_bat_names(struct ops_bat *bat)
{
	struct ops_call call = { .op = 0 };
	struct mgr_lease_name two[2];
	struct proto_bop o;
	uint32_t pos = 0;
	unsigned n = 0;

	while (n < PROTO_MAX_BATCH && proto_bop_next(&bat->b, &pos, &o) == 0) {
		call.op = o.op;
		call.m = o.m;
		for (unsigned i = 0, k = ops_names(&call, two);
		     i < k && n < PROTO_MAX_BATCH; i++)
			bat->names[n++] = two[i];
	}
	return n;
}

/* Grant the BATCH's session a WRITE lease on the directory each of its
 * MKDIRs makes (loop thread, as the batch is submitted, before its change
 * is recorded): PROTO_BOP_WRITE in that op's flags and the grant's evseq
 * as the reply's. An op that then fails has its flag cleared
 * (ops_bat_exec). None under root squash (see ops_mkdir_grant). */
static void ops_bat_grant(struct mgr_ops *ops, struct ops_bat *bat)
{
	struct proto_grant g;
	struct proto_bop o;
	uint32_t pos = 0;

	for (uint32_t i = 0; i < bat->b.n && !ops->root_squash; i++) {
		if (proto_bop_next(&bat->b, &pos, &o))
			break; /* never: the batch was decoded */
		if (o.op == PROTO_OP_MKDIR &&
		    mgr_leased_grant_write(ops->leased, bat->b.cred.session,
					   o.newino, &g)) {
			bat->rep.flags[i] = PROTO_BOP_WRITE;
			bat->rep.evseq = g.evseq;
		}
	}
}

/*
 * Run a BATCH's ops in txn, in order, each as the op alone (ops_txn_run:
 * a child txn, committed if it succeeded, else aborted; its own cred, root
 * squash applied), recording each status; then hand the session a new
 * range if it asked (none: range 0, logged). Runs on the writer thread
 * (group commit) or the loop thread. Cost: the ops, one child commit each.
 * @return 0, or a child's commit error (txn cannot go on)
 */
static int ops_bat_exec(struct mgr_ops *ops, struct mgr_txn *txn,
			struct ops_bat *bat, int priv)
{
	uint8_t buf[512]; /* an op's own reply (an attr), not sent */
	struct proto_batchrep *rep = &bat->rep;
	struct proto_bop o;
	uint32_t pos = 0;
	int rc;

	rep->n = bat->b.n;
	for (uint32_t i = 0; i < bat->b.n; i++) {
		struct ops_call call = { .priv = priv, .ops = ops, .bop = &o,
					 .session = bat->b.cred.session };

		if (proto_bop_next(&bat->b, &pos, &o))
			return -EIO; /* never: the batch was decoded */
		call.op = o.op;
		call.m = o.m;
		if (ops->root_squash)
			mgr_perm_squash(&call.m.cred);
		wb_init(&call.w, buf, sizeof(buf));
		rc = ops_txn_run(ops, txn, &call);
		if (rc)
			return rc;
		rep->status[i] = call.status;
		if (call.status)
			rep->flags[i] = 0;
	}
	if (bat->b.want) {
		rc = mgr_db_range_take(ops->db, txn, bat->b.cred.session,
				       &rep->range);
		if (rc) {
			log_warn("BATCH of session %016llx: no range of inode "
				 "numbers: %s", (unsigned long long)
				 bat->b.cred.session, strerror(-rc));
			rep->range = 0;
		}
	}
	return 0;
}

/* Encode bat's reply into w. @return 0, or -EIO (a bug: logged) */
static int ops_bat_encode(struct ops_bat *bat, struct wbuf *w)
{
	int rc = proto_batchrep_encode(w, &bat->rep);

	if (rc) {
		log_err("BATCH reply does not encode: %d", rc);
		return -EIO;
	}
	return 0;
}

/* A BATCH under group commit (loop thread): copy and decode it, collect
 * the names its ops change, and queue it as one write op (ops_wreq_go);
 * its WRITE leases are granted as it is queued (ops_wreq_ready). */
static void ops_submit_batch(struct mgr_ops *ops, struct net_sreq *r)
{
	struct ops_wreq *q = calloc(1, sizeof(*q) + r->body_len);
	struct ops_bat *bat = calloc(1, sizeof(*bat));

	if (!q || !bat) {
		free(q);
		free(bat);
		net_sreq_reply(r, -ENOMEM, NULL, 0);
		return;
	}
	memcpy(q->body, r->body, r->body_len);
	if (ops_bat_decode(r, q->body, &bat->b)) {
		free(bat);
		free(q);
		return;
	}
	q->r = r;
	q->bat = bat;
	q->call.op = PROTO_OP_BATCH;
	q->call.priv = net_sconn_privileged(r->conn);
	q->call.m.cred = bat->b.cred; /* for the log, and the session */
	q->call.ops = ops;
	q->names = bat->names;
	q->nnames = ops->leased ? ops_bat_names(bat) : 0;
	if (ops->leased) /* before the change: a directory it makes and fills
			  * counts as changing once the change is recorded */
		ops_bat_grant(ops, bat);
	ops_wreq_go(ops, q);
}

/*
 * A BATCH with group commit off (loop thread): run it in a write txn of
 * its own (no leases then) and encode the reply into call->w, setting
 * call->status as ops_txn_run does. @return 0, or -1 when r was answered
 * (malformed, no memory)
 */
static int ops_batch_now(struct mgr_ops *ops, struct net_sreq *r,
			 struct ops_call *call)
{
	uint64_t mark = mgr_kv_reach_mark(ops->db->kv);
	struct ops_bat *bat = calloc(1, sizeof(*bat));
	struct mgr_txn *txn;
	int rc;

	if (!bat) {
		net_sreq_reply(r, -ENOMEM, NULL, 0);
		return -1;
	}
	if (ops_bat_decode(r, r->body, &bat->b)) {
		free(bat);
		return -1;
	}
	call->m.cred = bat->b.cred;
	rc = mgr_db_begin(ops->db, 0, &txn);
	if (rc)
		goto out_status;
	rc = ops_bat_exec(ops, txn, bat, call->priv);
	if (!rc)
		rc = ops_bat_encode(bat, &call->w);
	if (rc) {
		mgr_db_abort(txn);
		goto out_status;
	}
	rc = mgr_db_commit(txn);
out_status:
	call->status = ops_status(ops, rc, mark);
	free(bat);
	return 0;
}

/*
 * Submit a write op to the writer thread (group commit): copy the body,
 * decode it there, and queue it; it is answered once its batch commits
 * (ops_wreq_done). An op that changes names in a directory other mounts
 * hold leases on waits first until they acknowledged their invalidations
 * (mgr_leased_change). A malformed request closes its connection, as
 * below. Without memory for the copy the op is answered -ENOMEM, not run.
 */
static void ops_submit(struct mgr_ops *ops, struct net_sreq *r, uint16_t op)
{
	struct ops_wreq *q = calloc(1, sizeof(*q) + r->body_len);

	if (!q) {
		net_sreq_reply(r, -ENOMEM, NULL, 0);
		return;
	}
	memcpy(q->body, r->body, r->body_len);
	if (ops_decode(ops, r, q->body, op, &q->call.m)) {
		free(q);
		return;
	}
	q->r = r;
	q->call.op = op;
	q->call.priv = net_sconn_privileged(r->conn);
	q->call.ops = ops;
	q->names = q->names2;
	q->nnames = ops->leased ? ops_names(&q->call, q->names) : 0;
	ops_wreq_go(ops, q);
}

/* MOUNT (no transaction: the reply is the store's configuration):
 * encode it into call->w and set call->status. */
static void ops_mount_call(struct mgr_ops *ops, struct ops_call *call)
{
	int rc = ops_mount(ops, &call->w);

	if (rc)
		log_err("MOUNT reply does not encode: %d", rc);
	if (rc > 0 || rc < -4095)
		rc = -EIO;
	call->status = rc;
}

/* A LOOKUP in a directory or a READDIR of it, answered from a read txn
 * begun after every change the lease table let run had committed: grant
 * the session a READ lease on the directory (mgr_leased_grant) by adding
 * it to the encoded reply (proto_grant: after the fields). A LOOKUP miss
 * so granted is answered 0 with all-zero attributes, which only a client
 * that sent a session reads (as ENOENT under the lease). */
static void ops_grant(struct mgr_ops *ops, struct ops_call *call)
{
	static const struct proto_mrep miss; /* all zero */
	struct proto_grant g;
	uint64_t dir;

	if (!ops->leased || !call->m.cred.session)
		return; /* leases off, or a mount without them: as before */
	if (call->op == PROTO_OP_LOOKUP)
		dir = call->m.parent;
	else if (call->op == PROTO_OP_READDIR)
		dir = call->m.ino;
	else
		return;
	if (!mgr_leased_grant(ops->leased, call->m.cred.session, dir, &g)) {
		log_debug("%s: no lease on %llu for session %016llx",
			  proto_op_name(call->op), (unsigned long long)dir,
			  (unsigned long long)call->m.cred.session);
		return;
	}
	if (call->status == -ENOENT) {
		call->w.len = 0;
		call->w.err = 0;
		if (proto_mrep_encode(&call->w, call->op, &miss))
			return; /* never: an all-zero reply encodes */
		call->status = 0;
	}
	wb_u64(&call->w, g.ino);
	wb_u64(&call->w, g.evseq);
	if (call->w.err) /* never: replies leave room; then no grant */
		call->w.len -= call->w.len >= 16 ? 16 : call->w.len;
}

/* A read op parked until the WRITE holders of what it uses sent their
 * queues and acknowledged their recall (mgr_leased_access). Loop thread. */
struct ops_rreq {
	struct mgr_leased_wait lw;
	struct net_sreq *r;
	struct mgr_ops *ops;
	uint8_t body[];            /* a copy of the request body */
};

static void ops_answer(struct mgr_ops *ops, struct net_sreq *r,
		       struct ops_call *call);

/* mgr_leased_wait's ready: decode the parked read again (from its copy)
 * and answer it. */
static void ops_rreq_ready(struct mgr_leased_wait *w)
{
	struct ops_rreq *q = container_of(w, struct ops_rreq, lw);
	struct ops_call call = { .op = q->r->hdr.op };

	call.priv = net_sconn_privileged(q->r->conn);
	wb_init(&call.w, q->ops->rep, PROTO_MAX_BODY);
	if (ops_decode(q->ops, q->r, q->body, call.op, &call.m) == 0) {
		ops_txn_run(q->ops, NULL, &call);
		ops_answer(q->ops, q->r, &call);
	}
	free(q);
}

/*
 * A read op of another session (or of none) on an object a session holds
 * a WRITE lease on waits until the holder sent its queue and acknowledged
 * the recall: park a copy of r. Cost: two hash lookups when nothing is
 * held. @return 0 run it now; 1 parked or answered (no memory)
 */
static int ops_read_park(struct mgr_ops *ops, struct net_sreq *r,
			 const struct ops_call *call)
{
	const uint64_t inos[2] = { call->m.ino, call->m.parent };
	uint64_t me = call->m.cred.session, w0, w1;
	struct ops_rreq *q;
	int rc;

	w0 = mgr_leased_writer(ops->leased, inos[0]);
	w1 = mgr_leased_writer(ops->leased, inos[1]);
	if ((!w0 || w0 == me) && (!w1 || w1 == me))
		return 0;
	q = malloc(sizeof(*q) + r->body_len);
	if (!q) {
		net_sreq_reply(r, -ENOMEM, NULL, 0);
		return 1;
	}
	memcpy(q->body, r->body, r->body_len);
	q->r = r;
	q->ops = ops;
	q->lw.ready = ops_rreq_ready;
	rc = mgr_leased_access(ops->leased, me, inos, 2, &q->lw);
	if (rc == 1)
		return 1;
	free(q);
	if (rc < 0) {
		net_sreq_reply(r, rc, NULL, 0);
		return 1;
	}
	return 0;
}

/* Grant what the reply may carry, and answer r (loop thread). */
static void ops_answer(struct mgr_ops *ops, struct net_sreq *r,
		       struct ops_call *call)
{
	uint16_t op = call->op;

	if (call->status == 0 || (call->status == -ENOENT && op == PROTO_OP_LOOKUP))
		ops_grant(ops, call);
	if (call->status == -ESTALE && ops->serving) {
		/* only a fenced commit (group commit off) fails so: the lease
		 * moved on, nothing of the op landed */
		log_warn("%s refused (-ESTALE): this mgr is no longer the active "
			 "one; answered as by a standby", proto_op_name(op));
		ops->lost(ops->lead_arg);
		call->status = PROTO_STANDBY;
	}
	ops_reply(r, call, ops->rep, (uint32_t)call->w.len);
}

/* Entry point from the transport (loop thread): validate, then take the
 * op's path: a write op under group commit goes to the writer thread
 * (ops_submit); any other runs here, in a transaction of its own, and is
 * answered at once. A malformed request closes its connection; an unknown
 * op is answered -EOPNOTSUPP; an operation error is a reply status. */
void mgr_ops_handle(struct net_sreq *r, void *arg)
{
	struct mgr_ops *ops = arg;
	uint16_t op = r->hdr.op;
	struct ops_call call = { .op = op };

	if (op < PROTO_OP_MOUNT || op >= PROTO_OP_MGR_LAST) {
		/* well formed, but not ours (or newer than us): say so, as the
		 * iod does, so that a newer client can fall back */
		log_debug("%s from %s: not a metadata op", proto_op_name(op),
			  net_sconn_peer(r->conn));
		net_sreq_reply(r, -EOPNOTSUPP, NULL, 0);
		return;
	}
	if (r->hdr.bulk_len || r->hdr.aux) {
		net_sreq_reject(r, "metadata request with bulk data");
		return;
	}
	if (ops->batch && op == PROTO_OP_BATCH) {
		ops_submit_batch(ops, r);
		return;
	}
	if (ops->batch && ops_is_write(op)) {
		ops_submit(ops, r, op);
		return;
	}
	call.priv = net_sconn_privileged(r->conn);
	wb_init(&call.w, ops->rep, PROTO_MAX_BODY);
	if (op == PROTO_OP_BATCH) {
		if (ops_batch_now(ops, r, &call))
			return;
	} else if (ops_decode(ops, r, r->body, op, &call.m)) {
		return;
	} else if (op == PROTO_OP_MOUNT) {
		ops_mount_call(ops, &call);
	} else if (ops->leased && ops_read_park(ops, r, &call)) {
		return; /* ops_rreq_ready answers it */
	} else {
		ops_txn_run(ops, NULL, &call);
	}
	ops_answer(ops, r, &call);
}

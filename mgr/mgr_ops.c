/* mgr_ops.c - decode, dispatch and answer metadata requests. */
#include "mgr_ops.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ev.h>

#include "log.h"
#include "mgr_kv.h"
#include "mgr_ns.h"
#include "mgr_perm.h"
#include "mgr_xattr.h"

#define OPS_REP_SLACK 64   /* reply bytes around the dirent/xattr blob */
#define OPS_STATFS_WAIT_MS 2500
#define OPS_BATCH_MAX_OPS 256          /* a batch commits at this many ops */
#define OPS_BATCH_MAX_BYTES (4u << 20) /* or this many reply bytes held */

/* A write op's reply, held until its batch is durable. */
struct ops_pend {
	struct net_sreq *r;
	int32_t status;
	uint32_t len;
	uint8_t *body; /* a copy of the encoded reply (NULL when len is 0) */
};

/* Handler state; every field is loop thread only. */
struct mgr_ops {
	struct mgr_db *db;
	struct mgr_iodpoll *poll;
	int root_squash;
	uint8_t *rep;     /* encoded reply body, PROTO_MAX_BODY */
	uint8_t *scratch; /* dirents / xattr values / link target */
	size_t scratch_cap;
	int group;                 /* group commit on (mgr_ops_group_commit) */
	struct ev_loop *loop;
	ev_prepare prep;           /* commits the batch once per iteration */
	struct ops_pend *pend;     /* OPS_BATCH_MAX_OPS slots */
	uint32_t npend;
	size_t pend_bytes;
	uint32_t commit_delay_ms;  /* testing: sleep before each batch commit */
	int (*serving)(void *arg); /* mgr_ops_set_lead; NULL: always active */
	void (*lost)(void *arg);
	void *lead_arg;
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

/* The status to answer a failed op with: -EIO while the store's server is
 * out of reach becomes PROTO_RETRY, so the client waits out a database
 * failover instead of failing the call. */
static int ops_status(const struct mgr_ops *ops, int rc)
{
	if (rc == -EIO && mgr_kv_unreachable(ops->db->kv))
		return PROTO_RETRY;
	return rc;
}

/*
 * Commit the open batch (one sync) and then send every reply it held, in
 * the order the ops came: an op is answered only after the sync that made
 * it durable. When the commit fails, nothing of the batch is applied and
 * every op in it gets the commit's error. Cost: one commit and one send
 * per held reply.
 */
static int ops_batch_reply(struct mgr_ops *ops)
{
	uint32_t nops = 0;
	int rc;

	if (ops->commit_delay_ms && mgr_db_batch_is_open(ops->db)) {
		struct timespec ts = { ops->commit_delay_ms / 1000,
				       (long)(ops->commit_delay_ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
	}
	if (ops->serving && mgr_db_batch_is_open(ops->db) &&
	    !ops->serving(ops->lead_arg))
		ops->lost(ops->lead_arg); /* the commit below is refused */
	rc = mgr_db_batch_commit(ops->db, &nops);

	if (rc == -ESTALE && ops->serving) {
		log_warn("group commit of %u ops refused (-ESTALE): this mgr is no "
			 "longer the active one; each is answered as by a standby",
			 nops);
		ops->lost(ops->lead_arg);
		rc = PROTO_STANDBY;
	} else if (rc && ops_status(ops, rc) == PROTO_RETRY) {
		log_info("group commit of %u ops failed: the store is out of "
			 "reach; each is answered \"retry later\"", nops);
		rc = PROTO_RETRY;
	} else if (rc) {
		log_err("group commit of %u ops failed: %s; each is answered "
			"with that error", nops, strerror(-rc));
	}
	for (uint32_t i = 0; i < ops->npend; i++) {
		struct ops_pend *p = &ops->pend[i];

		if (rc)
			net_sreq_reply(p->r, rc, NULL, 0);
		else
			net_sreq_reply(p->r, p->status, p->body, p->len);
		free(p->body);
	}
	ops->npend = 0;
	ops->pend_bytes = 0;
	return rc;
}

/* mgr_db's flush callback (and the caps, STATFS, shutdown): commit the
 * batch and answer its ops. */
static void ops_batch_flush(void *arg)
{
	ops_batch_reply(arg);
}

/* ev_prepare: every ready request of this iteration ran; commit their
 * batch before the loop blocks. */
static void ops_on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct mgr_ops *ops = w->data;

	if (ops->npend || mgr_db_batch_is_open(ops->db))
		ops_batch_flush(ops);
}

/* See mgr_ops.h. */
int mgr_ops_group_commit(struct mgr_ops *ops, struct ev_loop *loop,
			 uint32_t commit_delay_ms)
{
	if (commit_delay_ms > MGR_OPS_MAX_COMMIT_DELAY_MS)
		return -EINVAL;
	ops->commit_delay_ms = commit_delay_ms;
	ops->pend = calloc(OPS_BATCH_MAX_OPS, sizeof(*ops->pend));
	if (!ops->pend)
		return -ENOMEM;
	ops->group = 1;
	ops->loop = loop;
	ev_prepare_init(&ops->prep, ops_on_prepare);
	ops->prep.data = ops;
	ev_prepare_start(loop, &ops->prep);
	mgr_db_batch_set_flush(ops->db, ops_batch_flush, ops);
	return 0;
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
void mgr_ops_flush(struct mgr_ops *ops)
{
	if (ops && ops->group)
		ops_batch_flush(ops);
}

/* Free the context (its held replies are flushed first). */
void mgr_ops_free(struct mgr_ops *ops)
{
	if (!ops)
		return;
	if (ops->group) {
		ops_batch_flush(ops);
		ev_prepare_stop(ops->loop, &ops->prep);
		mgr_db_batch_set_flush(ops->db, NULL, NULL);
		free(ops->pend);
	}
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
static int ops_readdir(struct mgr_ops *ops, const struct proto_mreq *m,
		       struct proto_mrep *p)
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
	rc = mgr_ns_readdir(ops->db, &m->cred, m->ino, m->cookie, ops_rd_emit,
			    &rd, &eof);
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
static int ops_xattr_read(struct mgr_ops *ops, uint16_t op,
			  const struct proto_mreq *m, struct proto_mrep *p)
{
	size_t cap = m->max, size = 0;
	int rc;

	if (cap > PROTO_MAX_BODY - OPS_REP_SLACK)
		cap = PROTO_MAX_BODY - OPS_REP_SLACK;
	if (op == PROTO_OP_GETXATTR)
		rc = mgr_xattr_get(ops->db, &m->cred, m->ino, m->xname.p,
				   m->xname.len, ops->scratch, cap, &size);
	else
		rc = mgr_xattr_list(ops->db, &m->cred, m->ino, ops->scratch,
				    cap, &size);
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
static int ops_statfs(struct mgr_ops *ops, struct proto_mrep *p)
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
	used = mgr_ns_files(ops->db);
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

/* Run one decoded request; fills p. priv: the connection proved the
 * servers' key (net_sconn_privileged). @return the reply status */
static int ops_dispatch(struct mgr_ops *ops, uint16_t op, int priv,
			const struct proto_mreq *m, struct proto_mrep *p)
{
	struct mgr_db *db = ops->db;
	const struct proto_cred *c = &m->cred;
	size_t len = 0;
	int rc;

	switch (op) {
	case PROTO_OP_LOOKUP:
		return mgr_ns_lookup(db, c, m->parent, m->name.p, m->name.len, &p->attr);
	case PROTO_OP_GETATTR:
		return mgr_ns_getattr(db, m->ino, &p->attr);
	case PROTO_OP_SETATTR:
		return mgr_ns_setattr(db, c, m, &p->attr);
	case PROTO_OP_CREATE:
		return mgr_ns_create(db, c, m->parent, m->name.p, m->name.len,
				     m->mode, m->flags, &p->attr);
	case PROTO_OP_MKDIR:
		return mgr_ns_mkdir(db, c, m->parent, m->name.p, m->name.len,
				    m->mode, &p->attr);
	case PROTO_OP_MKNOD:
		return mgr_ns_mknod(db, c, m->parent, m->name.p, m->name.len,
				    m->mode, m->rdev, &p->attr);
	case PROTO_OP_UNLINK:
		return mgr_ns_unlink(db, c, m->parent, m->name.p, m->name.len,
				     &p->freed);
	case PROTO_OP_RMDIR:
		return mgr_ns_rmdir(db, c, m->parent, m->name.p, m->name.len);
	case PROTO_OP_RENAME:
		return mgr_ns_rename(db, c, m->parent, m->name.p, m->name.len,
				     m->newparent, m->newname.p, m->newname.len,
				     m->flags, &p->freed);
	case PROTO_OP_LINK:
		return mgr_ns_link(db, c, m->ino, m->newparent, m->newname.p,
				   m->newname.len, &p->attr);
	case PROTO_OP_SYMLINK:
		return mgr_ns_symlink(db, c, m->parent, m->name.p, m->name.len,
				      m->target.p, m->target.len, &p->attr);
	case PROTO_OP_READLINK:
		rc = mgr_ns_readlink(db, m->ino, (char *)ops->scratch,
				     ops->scratch_cap, &len);
		if (!rc)
			p->target = (struct proto_str){ (const char *)ops->scratch,
							(uint32_t)len };
		return rc;
	case PROTO_OP_READDIR:
		return ops_readdir(ops, m, p);
	case PROTO_OP_STATFS:
		return ops_statfs(ops, p);
	case PROTO_OP_GETXATTR:
	case PROTO_OP_LISTXATTR:
		return ops_xattr_read(ops, op, m, p);
	case PROTO_OP_SETXATTR:
		return mgr_xattr_set(db, c, m->ino, m->xname.p, m->xname.len,
				     m->xvalue.p, m->xvalue.len, m->flags);
	case PROTO_OP_REMOVEXATTR:
		return mgr_xattr_remove(db, c, m->ino, m->xname.p, m->xname.len);
	case PROTO_OP_OPEN:
		return mgr_ns_open(db, c, m->ino, m->flags, &p->attr);
	case PROTO_OP_ACCESS:
		return mgr_ns_access(db, c, m->ino, m->mode);
	case PROTO_OP_SETSIZE:
		return mgr_ns_setsize(db, c, m->ino, m->size, &m->mtime,
				      &p->attr);
	case PROTO_OP_PURGE:
		return mgr_ns_purge(db, priv ? NULL : c, m->ino);
	case PROTO_OP_PURGE_MANY:
		return mgr_ns_purge_many(db, priv ? NULL : c, &m->inos);
	case PROTO_OP_SETBLOCKS:
		return mgr_ns_setblocks(db, c, m->ino, m->flags, m->size,
					&m->mtime, m->blocks, &p->attr);
	default:
		return -EOPNOTSUPP;
	}
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
		return 1;
	default:
		return 0;
	}
}

/* Answer one op at once from ops->rep (status rc, len bytes on success). */
static void mgr_ops_reply_now(struct mgr_ops *ops, struct net_sreq *r, int rc,
			      uint32_t len)
{
	rc = ops_status(ops, rc);
	net_sreq_reply(r, rc, rc ? NULL : ops->rep, rc ? 0 : len);
}

/* Hold a batched op's reply until its batch commits (a copy: ops->rep is
 * reused); commit early at the batch caps. Without memory for the copy,
 * the batch (this op included) is committed now and the op answered. */
static void ops_pend_add(struct mgr_ops *ops, struct net_sreq *r, int rc,
			 uint32_t len)
{
	struct ops_pend *p = &ops->pend[ops->npend];

	p->r = r;
	p->status = ops_status(ops, rc);
	p->len = rc ? 0 : len;
	p->body = NULL;
	if (p->len) {
		p->body = malloc(p->len);
		if (!p->body) { /* this op is in the batch: commit it too */
			int crc = ops_batch_reply(ops);

			mgr_ops_reply_now(ops, r, crc ? crc : rc, len);
			return;
		}
		memcpy(p->body, ops->rep, p->len);
	}
	ops->npend++;
	ops->pend_bytes += p->len;
	if (ops->npend >= OPS_BATCH_MAX_OPS ||
	    ops->pend_bytes >= OPS_BATCH_MAX_BYTES)
		ops_batch_flush(ops);
}

/* Run a write op as a child of the loop's batch (opened by the first
 * write op of the iteration) and hold its reply for the batch's commit. */
static void ops_handle_batched(struct mgr_ops *ops, struct net_sreq *r,
			       uint16_t op, const struct proto_mreq *m,
			       struct proto_mrep *p, struct wbuf *w)
{
	int rc = 0;

	if (!mgr_db_batch_is_open(ops->db))
		rc = mgr_db_batch_open(ops->db);
	if (rc) {
		net_sreq_reply(r, ops_status(ops, rc), NULL, 0);
		return;
	}
	mgr_db_batch_enter(ops->db);
	rc = ops_dispatch(ops, op, net_sconn_privileged(r->conn), m, p);
	mgr_db_batch_leave(ops->db);
	if (rc == 0) {
		rc = proto_mrep_encode(w, op, p);
		if (rc) /* a bug: replies are sized to fit */
			log_err("%s reply does not encode: %d",
				proto_op_name(op), rc);
	}
	if (rc > 0 || rc < -4095)
		rc = -EIO;
	log_debug("%s uid %u from %s: %d (batched)", proto_op_name(op),
		  m->cred.uid, net_sconn_peer(r->conn), rc);
	ops_pend_add(ops, r, rc, (uint32_t)w->len);
}

/* Entry point from the transport: validate, run, reply. A malformed
 * request closes its connection; an unknown op is answered -EOPNOTSUPP;
 * an operation error is a reply status. */
void mgr_ops_handle(struct net_sreq *r, void *arg)
{
	struct mgr_ops *ops = arg;
	uint16_t op = r->hdr.op;
	struct proto_mreq m;
	struct proto_mrep p;
	struct wbuf w;
	const char *why = "request";
	int rc;

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
	rc = proto_mreq_decode(r->body, r->body_len, op, &m, &why);
	if (rc == -EOPNOTSUPP) { /* a number reserved for ops built elsewhere */
		net_sreq_reply(r, -EOPNOTSUPP, NULL, 0);
		return;
	}
	if (rc) {
		net_sreq_reject(r, why ? why : "malformed request");
		return;
	}
	if (ops->root_squash)
		mgr_perm_squash(&m.cred);
	memset(&p, 0, sizeof(p));
	wb_init(&w, ops->rep, PROTO_MAX_BODY);
	if (op == PROTO_OP_MOUNT) {
		rc = ops_mount(ops, &w);
		if (rc)
			log_err("MOUNT reply does not encode: %d", rc);
	} else if (ops->group && ops_is_write(op)) {
		ops_handle_batched(ops, r, op, &m, &p, &w);
		return;
	} else {
		if (ops->group && op == PROTO_OP_STATFS)
			ops_batch_flush(ops); /* it may wait for the poller */
		rc = ops_dispatch(ops, op, net_sconn_privileged(r->conn), &m, &p);
		if (rc == 0) {
			rc = proto_mrep_encode(&w, op, &p);
			if (rc) /* a bug: replies are sized to fit */
				log_err("%s reply does not encode: %d",
					proto_op_name(op), rc);
		}
	}
	if (rc > 0 || rc < -4095)
		rc = -EIO;
	if (rc == -ESTALE && ops->serving) {
		/* only a fenced commit (group commit off) fails so: the lease
		 * moved on, nothing of the op landed */
		log_warn("%s refused (-ESTALE): this mgr is no longer the active "
			 "one; answered as by a standby", proto_op_name(op));
		ops->lost(ops->lead_arg);
		rc = PROTO_STANDBY;
	}
	rc = ops_status(ops, rc);
	log_debug("%s uid %u from %s: %d", proto_op_name(op), m.cred.uid,
		  net_sconn_peer(r->conn), rc);
	net_sreq_reply(r, rc, rc ? NULL : ops->rep, rc ? 0 : (uint32_t)w.len);
}

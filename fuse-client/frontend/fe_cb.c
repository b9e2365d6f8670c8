/* fe_cb.c - the mgr's events as the kernel's invalidations; see fe_cb.h. */
#include "fe_cb.h"

#include <errno.h>
#include <string.h>

#include "cli_deleg.h"
#include "cli_inode.h"
#include "cli_lock.h"
#include "log.h"

/* Where the handler sends its invalidations. */
struct fe_cb_ctx {
	struct fe_fuse *cf;       /* read-only */
	struct fuse_session *se;  /* read-only */
};

/* One invalidation's result: ENOENT (the kernel holds no such entry or
 * inode) is the common case, not an error. */
static void cb_note(int rc, const char *what, uint64_t ino)
{
	if (rc && rc != -ENOENT)
		log_debug("callbacks: invalidating %s of %llu: %s", what,
			  (unsigned long long)ino, strerror(-rc));
}

/* cli_lease_each_fn: take back one name the kernel held under a lease,
 * or (name NULL) a leased directory's attributes. */
static void cb_inval_name(uint64_t dir, const char *name, size_t len,
			  void *arg)
{
	struct fe_cb_ctx *x = arg;

	if (!name)
		return cb_note(fuse_lowlevel_notify_inval_inode(x->se, dir, -1, 0),
			       "the attributes", dir);
	cb_note(fuse_lowlevel_notify_inval_entry(x->se, dir, name, len),
		"an entry", dir);
}

/* cli_cb_fn: an event from the mgr (callback thread). INVAL_ENTRY: the
 * record first (a grant made before it is void from now on), then the
 * kernel's entry (which waits for a LOOKUP of that directory in flight,
 * so it lands after that entry). RECALL: the same for every name the
 * kernel holds under the lease on that directory. INVAL_INODE: the
 * inode's attributes (no inode lease yet). RESET: every name the kernel
 * holds under a lease. */
static void fe_cb_event(uint8_t kind, uint64_t seq, uint64_t ino,
			const char *name, size_t len, void *arg)
{
	struct fe_cb_ctx *x = arg;

	switch (kind) {
	case PROTO_CB_INVAL_ENTRY:
		cli_lease_inval(x->cf->lease, ino, name, len, seq);
		cb_inval_name(ino, name, len, x);
		break;
	case PROTO_CB_RECALL:
		if (x->cf->fs->deleg) /* its ops first, then the ack */
			cli_deleg_recall(x->cf->fs->deleg, ino, seq);
		cli_lease_recall(x->cf->lease, ino, seq, cb_inval_name, x);
		break;
	case PROTO_CB_INVAL_INODE:
		cli_itab_attr_changed(x->cf->fs->itab); /* from the mgr again */
		cb_note(fuse_lowlevel_notify_inval_inode(x->se, ino, -1, 0),
			"the inode", ino);
		break;
	case PROTO_CB_RESET:
		log_info("callbacks: dropping %zu names held under leases",
			 cli_lease_names(x->cf->lease));
		if (x->cf->fs->deleg)
			cli_deleg_reset(x->cf->fs->deleg);
		cli_lease_reset(x->cf->lease, cb_inval_name, x);
		break;
	default:
		log_debug("callbacks: event %u for %llu", kind,
			  (unsigned long long)ino);
		break;
	}
}

/* cli_deleg_live_fn: the channel answers. */
static int fe_cb_live(void *arg)
{
	struct fe_fuse *cf = arg;

	return cli_cb_live(cf->cb);
}

/* See fe_cb.h. */
int fe_cb_start(struct fe_fuse *cf, struct fuse_session *se,
		const struct net_opts *no, int deleg)
{
	static struct fe_cb_ctx ctx; /* one mount per process */
	int rc;

	ctx.cf = cf;
	ctx.se = se;
	rc = cli_lease_new(&cf->lease, 0);
	if (rc)
		return rc;
	cf->fs->session = cli_lock_session(cf->lock);
	rc = cli_cb_new(&cf->cb, cf->fs, cf->fs->session, no, fe_cb_event,
			&ctx);
	if (rc)
		goto out_free_lease;
	if (deleg) {
		rc = cli_deleg_new(&cf->fs->deleg, cf->fs, fe_cb_live, cf);
		if (rc)
			goto out_free_cb;
	}
	return 0;
out_free_cb:
	cli_cb_free(cf->cb);
	cf->cb = NULL;
out_free_lease:
	cf->fs->session = 0;
	cli_lease_free(cf->lease);
	cf->lease = NULL;
	return rc;
}

/* See fe_cb.h. */
void fe_cb_stop(struct fe_fuse *cf)
{
	cli_deleg_free(cf->fs->deleg); /* sends what is queued, then stops */
	cf->fs->deleg = NULL;
	cli_cb_free(cf->cb);
	cf->cb = NULL;
	cf->fs->session = 0;
	cli_lease_free(cf->lease);
	cf->lease = NULL;
}

/* See fe_cb.h. */
int fe_cb_dir_attr(struct fe_fuse *cf, uint64_t ino, struct proto_attr *a)
{
	uint64_t since;

	return cf->lease &&
	       cli_lease_dir_held(cf->lease, ino, cli_cb_live(cf->cb), &since) &&
	       cli_inode_leased_attr(cf->fs->itab, ino, since, a) == 0;
}

/* See fe_cb.h. */
int fe_cb_entry_long(struct fe_fuse *cf, uint64_t gen,
		     const struct proto_grant *g, uint64_t dir,
		     const char *name)
{
	if (!cf->lease || !g->ino)
		return 0;
	return cli_lease_take(cf->lease, gen, cli_cb_live(cf->cb), g, dir,
			      name, strlen(name), cli_itab_tick(cf->fs->itab));
}

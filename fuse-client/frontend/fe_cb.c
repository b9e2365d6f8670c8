/* fe_cb.c - the mgr's events as the kernel's invalidations; see fe_cb.h. */
#include "fe_cb.h"

#include <errno.h>
#include <string.h>

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

/* cli_cb_fn: an event from the mgr. INVAL_ENTRY drops the kernel's entry
 * for the name; INVAL_INODE and RECALL (this mount holds no lease yet, so
 * a recall asks only that its caches go) drop the inode's attributes and
 * the cached ones of the inode table. RESET asks to drop everything;
 * without leases granted, nothing is cached beyond the fixed timeouts,
 * which bound it as before. Callback thread. */
static void fe_cb_event(uint8_t kind, uint64_t ino, const char *name,
			size_t len, void *arg)
{
	struct fe_cb_ctx *x = arg;

	switch (kind) {
	case PROTO_CB_INVAL_ENTRY:
		cb_note(fuse_lowlevel_notify_inval_entry(x->se, ino, name, len),
			"an entry", ino);
		break;
	case PROTO_CB_INVAL_INODE:
	case PROTO_CB_RECALL:
		cli_itab_attr_changed(x->cf->fs->itab); /* served from the mgr again */
		cb_note(fuse_lowlevel_notify_inval_inode(x->se, ino, -1, 0),
			"the inode", ino);
		break;
	default:
		log_debug("callbacks: event %u for %llu", kind,
			  (unsigned long long)ino);
		break;
	}
}

/* See fe_cb.h. */
int fe_cb_start(struct cli_cb **out, struct fe_fuse *cf,
		struct fuse_session *se, const struct net_opts *no)
{
	static struct fe_cb_ctx ctx; /* one mount per process */

	ctx.cf = cf;
	ctx.se = se;
	return cli_cb_new(out, cf->fs, cli_lock_session(cf->lock), no,
			  fe_cb_event, &ctx);
}

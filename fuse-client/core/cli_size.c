/*
 * cli_size.c - publish written sizes and truncate (cli_size.h). The inode
 * table's clock is read before each mgr call, so that replies to requests
 * sent before this size event cannot bring an older size back. A truncate
 * shrinks the iods' objects before the mgr publishes the size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_inode.h"
#include "cli_io.h"
#include "cli_meta.h"
#include "cli_size.h"

#include "cli_deleg.h"
#include "cli_space.h"

/* Publish size (mtime t) with the blocks the iods hold: one SETBLOCKS; a
 * SETSIZE when they cannot be counted (an iod down or older) or the mgr
 * predates SETBLOCKS. */
static int size_publish(struct cli_fs *fs, const struct proto_cred *c,
			uint64_t ino, uint64_t size,
			const struct proto_time *t, struct proto_attr *a)
{
	struct proto_layout l;
	uint64_t fsize, blocks;
	int rc = cli_inode_io(fs->itab, ino, &l, &fsize);

	if (rc == 0 && fs->deleg && cli_deleg_pending(fs->deleg, ino)) {
		struct proto_mreq m = { .cred = *c, .ino = ino, .size = size,
					.mtime = *t,
					.flags = PROTO_SB_GROW | PROTO_SB_MTIME };

		if (cli_deleg_setblocks(fs->deleg, c, &m, a) == 0)
			return 0; /* joins its unsent create: no iod asked */
	}
	if (rc == 0)
		rc = cli_space_blocks(fs, ino, &l, &blocks);
	if (rc == 0)
		rc = cli_meta_setblocks(fs, c, ino,
					PROTO_SB_GROW | PROTO_SB_MTIME, size,
					t, blocks, a);
	else
		rc = -EOPNOTSUPP;
	if (rc == -EOPNOTSUPP)
		rc = cli_meta_setsize(fs, c, ino, size, t, a);
	return rc;
}

/* Push: see cli_size.h. */
int cli_size_push(struct cli_fs *fs, const struct proto_cred *c,
		  uint64_t ino)
{
	struct proto_attr a;
	struct proto_time t;
	uint64_t size, since;
	int rc;

	if (!cli_inode_take_dirty(fs->itab, ino, &size, &t))
		return 0;
	since = cli_itab_clock(fs->itab);
	rc = size_publish(fs, c, ino, size, &t, &a);
	if (rc == -ENOENT)
		return 0; /* purged under us: nothing left to grow */
	if (rc) {
		cli_inode_push_failed(fs->itab, ino);
		return rc;
	}
	cli_inode_pushed(fs->itab, &a, size, since);
	return 0;
}

/* The changes a truncate's SETATTR may carry that the mgr judges apart
 * from the size (chown, chmod, explicit times): applied before the iods
 * are touched, so that a refusal leaves the data alone. */
#define TRUNC_EXTRA (PROTO_SA_UID | PROTO_SA_GID | PROTO_SA_MODE | \
		     PROTO_SA_ATIME | PROTO_SA_MTIME)

/* Where the next truncate ends the process (CLI_SIZE_EXIT_*): a test hook,
 * set once at rpfs-fuse start before any request, read by every worker. */
static atomic_int size_exit_at;

/* Test hook: see cli_size.h. */
int cli_size_test_exit(const char *spec)
{
	int at;

	if (!spec)
		return 0;
	if (strcmp(spec, "after-iods") == 0)
		at = CLI_SIZE_EXIT_AFTER_IODS;
	else if (strcmp(spec, "after-mgr") == 0)
		at = CLI_SIZE_EXIT_AFTER_MGR;
	else
		return -EINVAL;
	atomic_store(&size_exit_at, at);
	return 0;
}

/* End the process at once if the test hook names this point: a client
 * dying between the steps of a truncate. _exit, not exit: no atexit
 * handler and no flush may run, as in a crash. */
static void size_test_point(int at)
{
	if (atomic_load_explicit(&size_exit_at, memory_order_relaxed) == at)
		_exit(CLI_SIZE_EXIT_STATUS);
}

/*
 * Check at the mgr, before any iod is touched, that c may truncate ino the
 * way the SETATTR after will judge it (owner, root or write permission,
 * mgr_ns.c ns_setattr_check), and fetch its attributes (mode, layout).
 * OPEN for writing decides for everyone with write permission, root
 * included: one round trip. On EACCES a GETATTR tells an owner, who may
 * truncate without the write bit (a second round trip, only then). uid 0
 * refused by OPEN was root-squashed (root bypasses otherwise), so the mgr
 * judges it as PROTO_NOBODY_ID (mgr_perm_squash).
 * @return 0, -EACCES, -EISDIR, -ENOENT, -EIO
 */
static int trunc_check(struct cli_fs *fs, const struct proto_cred *c,
		       uint64_t ino, struct proto_attr *a)
{
	int rc = cli_meta_open(fs, c, ino, O_WRONLY, a);
	uint32_t uid = c->uid ? c->uid : PROTO_NOBODY_ID;

	if (rc != -EACCES)
		return rc;
	rc = cli_meta_getattr(fs, c, ino, a);
	if (rc)
		return rc;
	return uid == a->uid ? 0 : -EACCES;
}

/* Truncate: see cli_size.h. The iods first, the size after
 * (fuse-client/core/README.md "Truncate"): no state a crash or a down iod leaves holds old bytes past
 * a published size. */
int cli_size_truncate(struct cli_fs *fs, const struct proto_cred *c,
		      uint64_t ino, uint32_t valid, const struct proto_attr *in,
		      const struct proto_attr *checked, struct proto_attr *out)
{
	struct proto_attr cur;
	int rc = 0;

	if (checked)
		cur = *checked;
	else
		rc = trunc_check(fs, c, ino, &cur);
	if (rc == 0 && (valid & TRUNC_EXTRA))
		rc = cli_meta_setattr(fs, c, ino, valid & TRUNC_EXTRA, in, &cur);
	if (rc)
		return rc;
	if (S_ISREG(cur.mode)) {
		/* a grow cuts at the current size: bytes an object holds past
		 * its share of it (a writer that died before publishing, a
		 * shrink of an older client that stopped half way) must not
		 * show between the old and the new size */
		uint64_t cut = in->size < cur.size ? in->size : cur.size;

		rc = cli_io_truncate(fs, ino, &cur.layout, cut);
		if (rc)
			return rc;
		size_test_point(CLI_SIZE_EXIT_AFTER_IODS);
	}
	rc = cli_meta_setattr(fs, c, ino, valid | PROTO_SA_SIZE, in, out);
	if (rc)
		return rc;
	size_test_point(CLI_SIZE_EXIT_AFTER_MGR);
	if (!S_ISREG(out->mode))
		return 0;
	cli_inode_truncated(fs->itab, ino, in->size);
	if (in->size == 0)
		return 0; /* the mgr set the blocks to 0 with the size */
	return cli_space_publish(fs, c, ino, out);
}

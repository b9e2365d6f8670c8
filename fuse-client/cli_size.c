/*
 * cli_size.c - publish written sizes and truncate (cli_size.h). The inode
 * table's clock is read before each mgr call, so that replies to requests
 * sent before this size event cannot bring an older size back.
 */
#include <errno.h>
#include <sys/stat.h>

#include "cli_inode.h"
#include "cli_io.h"
#include "cli_meta.h"
#include "cli_size.h"
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

/* Truncate: see cli_size.h. */
int cli_size_truncate(struct cli_fs *fs, const struct proto_cred *c,
		      uint64_t ino, uint32_t valid, const struct proto_attr *in,
		      struct proto_attr *out)
{
	int rc = cli_meta_setattr(fs, c, ino, valid | PROTO_SA_SIZE, in, out);

	if (rc)
		return rc;
	if (!S_ISREG(out->mode))
		return 0;
	rc = cli_io_truncate(fs, ino, &out->layout, in->size);
	if (rc)
		return rc;
	cli_inode_truncated(fs->itab, ino, in->size);
	if (in->size == 0)
		return 0; /* the mgr set the blocks to 0 with the size */
	return cli_space_publish(fs, c, ino, out);
}

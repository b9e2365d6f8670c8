/* cli_setid.c - drop set-id bits before a write (cli_setid.h). */
#include "cli_setid.h"

#include <sys/stat.h>

#include "cli_inode.h"
#include "cli_meta.h"
#include "setid.h"

/* Maybe: see cli_setid.h. */
int cli_setid_maybe(struct cli_fs *fs, uint64_t ino)
{
	struct proto_attr a;

	if (cli_inode_cached_attr(fs->itab, ino, &a))
		return 0;
	return (a.mode & (S_ISUID | S_ISGID)) != 0;
}

/* Write: see cli_setid.h. The table's clock is read before the call so
 * that an older reply cannot bring the bits back into the cache. */
int cli_setid_write(struct cli_fs *fs, const struct proto_cred *c,
		    uint64_t ino)
{
	struct proto_attr a, in = { 0 };
	uint64_t since;
	int rc;

	if (cli_inode_cached_attr(fs->itab, ino, &a) ||
	    !setid_kill_write(c, a.mode, a.gid))
		return 0;
	since = cli_itab_clock(fs->itab);
	rc = cli_meta_setattr(fs, c, ino, PROTO_SA_KILLPRIV, &in, &a);
	if (rc)
		return rc;
	(void)cli_inode_update(fs->itab, &a, 0, since);
	return 1;
}

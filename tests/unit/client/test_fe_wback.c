/*
 * test_fe_wback.c - unit test of write-behind (fe_wback.c, included) with the
 * request engine stubbed: the test decides when each started write fails,
 * and sees which writes were waited for before the next one started.
 * Checks: overlapping writes wait for each other, disjoint ones do not;
 * at most FE_WBACK_MAX_OPS per inode; a deferred failure is reported once,
 * by the next write or by a drain that takes it; a drain waits for all;
 * a write too big for one round goes synchronous.
 */
#include <assert.h>
#include <stdio.h>

#include "fe_wback.c"

/* ---- stubs of the engine (cli_io.h) ---- */

struct cli_io_pending {
	int id;
	uint64_t off, len;
};

static int started, waited, sync_writes;
static int order[256];          /* ids in the order they were waited for */
static int fail_id = -1;        /* this write fails when waited for */
static int start_rc;            /* next start returns this */

int cli_io_write_start(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		       uint64_t off, size_t len, const void *buf,
		       struct cli_io_pending **out)
{
	(void)fs, (void)ino, (void)l, (void)buf;
	if (start_rc) {
		int rc = start_rc;
		start_rc = 0;
		return rc;
	}
	*out = malloc(sizeof(**out));
	assert(*out);
	**out = (struct cli_io_pending){ .id = started++, .off = off, .len = len };
	return 0;
}

int cli_io_pending_wait(struct cli_fs *fs, struct cli_io_pending *p)
{
	int rc = p->id == fail_id ? -ENOSPC : 0;

	(void)fs;
	order[waited++] = p->id;
	free(p);
	return rc;
}

int cli_io_write(struct cli_fs *fs, uint64_t ino, const struct proto_layout *l,
		 uint64_t off, size_t len, const void *buf)
{
	(void)fs, (void)ino, (void)l, (void)off, (void)len, (void)buf;
	sync_writes++;
	return 0;
}

int main(void)
{
	struct fe_wback *wb;
	struct proto_layout l = { .unit = 65536, .count = 1 };
	char buf[8192] = { 0 };

	assert(fe_wback_new(&wb, NULL) == 0);

	/* disjoint writes: none waited for */
	for (int i = 0; i < 4; i++)
		assert(fe_wback_write(wb, 7, &l, (uint64_t)i * 4096, 4096, buf) == 0);
	assert(started == 4 && waited == 0);

	/* an overlapping write waits for exactly the writes it overlaps,
	 * oldest first (#1 [4096, 8192) and #2 [8192, 12288)) */
	assert(fe_wback_write(wb, 7, &l, 6000, 4096, buf) == 0);
	assert(waited == 2 && order[0] == 1 && order[1] == 2);

	/* another inode is independent */
	assert(fe_wback_write(wb, 8, &l, 6000, 4096, buf) == 0);
	assert(waited == 2);
	assert(fe_wback_drain(wb, 8, 1) == 0 && waited == 3 && order[2] == 5);

	/* a drain waits for every write of the inode, nothing else */
	assert(fe_wback_drain(wb, 7, 1) == 0);
	assert(waited == 6); /* #0, #3, #4 */
	assert(fe_wback_drain(wb, 7, 1) == 0 && waited == 6);

	/* at most FE_WBACK_MAX_OPS in flight: the next waits for the oldest */
	int first = started;
	for (int i = 0; i < FE_WBACK_MAX_OPS; i++)
		assert(fe_wback_write(wb, 9, &l, (uint64_t)i * 8192, 4096, buf) == 0);
	assert(waited == 6);
	assert(fe_wback_write(wb, 9, &l, 1u << 30, 4096, buf) == 0);
	assert(waited == 7 && order[6] == first);
	assert(fe_wback_drain(wb, 9, 1) == 0);

	/* a failure after the answer: kept, then reported once by the next
	 * write (which is not made), not by a read's drain */
	fail_id = started;
	assert(fe_wback_write(wb, 10, &l, 0, 4096, buf) == 0);
	assert(fe_wback_drain(wb, 10, 0) == 0);          /* read: keeps it */
	int before = started;
	assert(fe_wback_write(wb, 10, &l, 0, 100, buf) == -ENOSPC);
	assert(started == before);                     /* not made */
	assert(fe_wback_write(wb, 10, &l, 0, 100, buf) == 0);
	assert(fe_wback_drain(wb, 10, 1) == 0);

	/* ... or by close/fsync (a drain that takes it), once */
	fail_id = started;
	assert(fe_wback_write(wb, 11, &l, 0, 4096, buf) == 0);
	assert(fe_wback_drain(wb, 11, 1) == -ENOSPC);
	assert(fe_wback_drain(wb, 11, 1) == 0);

	/* too big for one round: written synchronously, in order */
	start_rc = -EAGAIN;
	assert(fe_wback_write(wb, 12, &l, 0, 4096, buf) == 0);
	assert(sync_writes == 1);
	/* failing at once: the error now, nothing in flight */
	start_rc = -EIO;
	assert(fe_wback_write(wb, 12, &l, 0, 4096, buf) == -EIO);
	assert(fe_wback_drain(wb, 12, 1) == 0);

	/* free waits for what is left */
	int w = waited;
	assert(fe_wback_write(wb, 13, &l, 0, 4096, buf) == 0);
	fe_wback_free(wb);
	assert(waited == w + 1);
	printf("fe_wback: ok\n");
	return 0;
}

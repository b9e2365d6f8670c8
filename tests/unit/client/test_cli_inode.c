/* test_cli_inode.c - unit test of the client inode table: lookup counts,
 * size view (max of mgr and written size), dirty pushes, truncate, stale
 * mgr replies (the clock), deferred removal of unlinked open files, and
 * the directory attributes served from the table (cli_inode_fresh_attr). */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli_inode.h"

/* A regular file's attributes with the given size. */
static struct proto_attr file_attr(uint64_t ino, uint64_t size)
{
	struct proto_attr a;

	memset(&a, 0, sizeof(a));
	a.ino = ino;
	a.mode = 0100644;
	a.nlink = 1;
	a.size = size;
	a.layout.unit = 65536;
	a.layout.count = 2;
	return a;
}

/* A directory's attributes: mtime = ctime = sec, nlink links. */
static struct proto_attr dir_attr(uint64_t ino, int64_t sec, uint32_t nlink)
{
	struct proto_attr a;

	memset(&a, 0, sizeof(a));
	a.ino = ino;
	a.mode = 040755;
	a.nlink = nlink;
	a.mtime.sec = a.ctime.sec = sec;
	return a;
}

/* Directory attributes served from the table: off without a TTL, fresh
 * after a mgr reply, moved by this mount's creates, dropped by a change
 * it does not follow and by a reply to a request sent before a create. */
static void test_fresh_dir(void)
{
	struct cli_itab *t;
	struct proto_attr a, c;
	uint64_t before;
	double ttl;

	assert(cli_itab_new(&t) == 0);
	a = dir_attr(10, 1000, 2);
	assert(cli_inode_update(t, &a, 1, cli_itab_clock(t)) == 0);
	assert(cli_inode_fresh_attr(t, 10, &c, &ttl) == -ENOENT); /* TTL 0 */
	cli_itab_set_attr_ttl(t, 60);
	a = dir_attr(10, 1000, 2);
	cli_inode_update(t, &a, 0, cli_itab_clock(t));
	assert(cli_inode_fresh_attr(t, 10, &c, &ttl) == 0);
	assert(c.mtime.sec == 1000 && c.nlink == 2 && ttl > 0 && ttl <= 60);
	assert(cli_inode_fresh_attr(t, 11, &c, &ttl) == -ENOENT); /* unknown */

	/* a file created in it: times move to the file's ctime; a subdir adds
	 * a link; a file's ctime older than the directory's moves nothing */
	before = cli_itab_clock(t);
	c = file_attr(20, 0);
	c.ctime.sec = 1005;
	cli_inode_dir_created(t, 10, &c);
	assert(cli_inode_fresh_attr(t, 10, &c, &ttl) == 0);
	assert(c.mtime.sec == 1005 && c.ctime.sec == 1005 && c.nlink == 2);
	c = dir_attr(21, 1007, 2);
	cli_inode_dir_created(t, 10, &c);
	c = file_attr(22, 0);
	c.ctime.sec = 1006;
	cli_inode_dir_created(t, 10, &c);
	assert(cli_inode_fresh_attr(t, 10, &c, &ttl) == 0);
	assert(c.mtime.sec == 1007 && c.ctime.sec == 1007 && c.nlink == 3);

	/* a reply to a request sent before those creates: not served */
	a = dir_attr(10, 1000, 2);
	cli_inode_update(t, &a, 0, before);
	assert(cli_inode_fresh_attr(t, 10, &c, &ttl) == -ENOENT);
	a = dir_attr(10, 1007, 3);
	cli_inode_update(t, &a, 0, cli_itab_clock(t));
	assert(cli_inode_fresh_attr(t, 10, &c, &ttl) == 0);

	/* an unlink or rename here: nothing served until fetched again */
	cli_itab_attr_changed(t);
	assert(cli_inode_fresh_attr(t, 10, &c, &ttl) == -ENOENT);
	c = file_attr(23, 0);
	c.ctime.sec = 1010;
	cli_inode_dir_created(t, 10, &c); /* not trusted: left alone */
	assert(cli_inode_fresh_attr(t, 10, &c, &ttl) == -ENOENT);
	cli_inode_update(t, &a, 0, cli_itab_clock(t));
	assert(cli_inode_fresh_attr(t, 10, &c, &ttl) == 0 && c.mtime.sec == 1007);

	/* an inode never looked up (the root) keeps replies once pinned */
	a = dir_attr(1, 900, 3);
	cli_inode_update(t, &a, 0, cli_itab_clock(t));
	assert(cli_inode_fresh_attr(t, 1, &c, &ttl) == -ENOENT);
	assert(cli_inode_pin(t, 1) == 0);
	assert(cli_inode_fresh_attr(t, 1, &c, &ttl) == -ENOENT); /* unknown */
	cli_inode_update(t, &a, 0, cli_itab_clock(t));
	assert(cli_inode_fresh_attr(t, 1, &c, &ttl) == 0 && c.nlink == 3);

	/* files are never served from here */
	a = file_attr(24, 0);
	assert(cli_inode_update(t, &a, 1, cli_itab_clock(t)) == 0);
	assert(cli_inode_fresh_attr(t, 24, &c, &ttl) == -ENOENT);
	cli_itab_free(t);
}

int main(void)
{
	struct cli_itab *t;
	struct proto_attr a, c;
	struct proto_layout l;
	uint64_t size, now, before;
	struct proto_time wt = { 1700000000, 123 }, mt;

	assert(cli_itab_new(&t) == 0);

	/* unknown inode: no I/O parameters, update without ref creates nothing */
	assert(cli_inode_io(t, 5, &l, &size) == -ENOENT);
	a = file_attr(5, 100);
	assert(cli_inode_update(t, &a, 0, 0) == 0);
	assert(cli_inode_io(t, 5, &l, &size) == -ENOENT);

	/* lookup, open, write beyond the mgr size */
	now = cli_itab_clock(t);
	assert(cli_inode_update(t, &a, 1, now) == 0 && a.size == 100);
	assert(cli_inode_open(t, &a, now) == 0);
	cli_inode_wrote(t, 5, 5000, &wt);
	assert(cli_inode_io(t, 5, &l, &size) == 0 && size == 5000);
	assert(l.unit == 65536 && l.count == 2);
	a = file_attr(5, 100); /* a stale mgr view: the client still sees 5000 */
	cli_inode_update(t, &a, 0, now);
	assert(a.size == 5000);

	/* dirty push once, with the write's time as mtime, then clean */
	assert(cli_inode_take_dirty(t, 5, &size, &mt) == 1 && size == 5000);
	assert(mt.sec == wt.sec && mt.nsec == wt.nsec);
	assert(cli_inode_take_dirty(t, 5, &size, &mt) == 0);
	cli_inode_push_failed(t, 5);
	assert(cli_inode_take_dirty(t, 5, &size, &mt) == 1);

	/* once the mgr acknowledged the size, the mgr's size rules again: a
	 * truncate by another client (seen as a smaller mgr size) shows */
	before = cli_itab_clock(t); /* a GETATTR sent before the push ... */
	a = file_attr(5, 5000);
	cli_inode_pushed(t, &a, 5000, cli_itab_clock(t));
	assert(cli_itab_clock(t) > before);
	a = file_attr(5, 100);      /* ... answered after it: size ignored */
	cli_inode_update(t, &a, 0, before);
	assert(a.size == 5000);
	assert(cli_inode_io(t, 5, &l, &size) == 0 && size == 5000);
	a = file_attr(5, 1000);
	cli_inode_update(t, &a, 0, cli_itab_clock(t));
	assert(a.size == 1000);
	assert(cli_inode_io(t, 5, &l, &size) == 0 && size == 1000);

	/* a write racing with the push keeps its size until pushed itself */
	cli_inode_wrote(t, 5, 7000, &wt);
	assert(cli_inode_take_dirty(t, 5, &size, &mt) == 1 && size == 7000);
	cli_inode_wrote(t, 5, 8000, &wt);
	a = file_attr(5, 7000);
	cli_inode_pushed(t, &a, 7000, cli_itab_clock(t));
	assert(a.size == 8000);
	a = file_attr(5, 7000);
	cli_inode_update(t, &a, 0, cli_itab_clock(t));
	assert(a.size == 8000);

	/* truncate resets the written size; a reply to a request sent before
	 * it cannot bring the old size back, one sent after it can move it */
	before = cli_itab_clock(t);
	cli_inode_truncated(t, 5, 10);
	assert(cli_inode_io(t, 5, &l, &size) == 0 && size == 10);
	a = file_attr(5, 8000);
	cli_inode_update(t, &a, 0, before);
	assert(a.size == 10);
	assert(cli_inode_io(t, 5, &l, &size) == 0 && size == 10);
	a = file_attr(5, 20);
	cli_inode_update(t, &a, 0, cli_itab_clock(t));
	assert(a.size == 20);

	/* unlink while open: deferred; last release asks for removal */
	assert(cli_inode_unlinked(t, 5, &l) == 0);
	assert(cli_inode_cached_attr(t, 5, &c) == 0 && c.nlink == 0);
	cli_inode_forget(t, 5, 1);               /* still open: entry stays */
	assert(cli_inode_io(t, 5, &l, &size) == 0);
	assert(cli_inode_release(t, 5, &l) == 1 && l.unit == 65536);
	assert(cli_inode_io(t, 5, &l, &size) == -ENOENT); /* gone */

	/* unlink when not open: remove now */
	a = file_attr(6, 0);
	assert(cli_inode_update(t, &a, 2, cli_itab_clock(t)) == 0);
	assert(cli_inode_unlinked(t, 6, &a.layout) == 1);
	assert(cli_inode_unlinked(t, 7, &a.layout) == 1); /* unknown inode */
	cli_inode_forget(t, 6, 1);
	assert(cli_inode_io(t, 6, &l, &size) == 0);
	cli_inode_forget(t, 6, 1);
	assert(cli_inode_io(t, 6, &l, &size) == -ENOENT);

	/* many inodes: the table grows and finds them all */
	for (uint64_t i = 100; i < 20100; i++) {
		a = file_attr(i, i);
		assert(cli_inode_update(t, &a, 1, 0) == 0);
	}
	for (uint64_t i = 100; i < 20100; i++)
		assert(cli_inode_io(t, i, &l, &size) == 0 && size == i);
	for (uint64_t i = 100; i < 20100; i += 2)
		cli_inode_forget(t, i, 1);
	for (uint64_t i = 100; i < 20100; i++)
		assert((cli_inode_io(t, i, &l, &size) == 0) == (i % 2 == 1));

	cli_itab_free(t);
	test_fresh_dir();
	printf("test_cli_inode: ok\n");
	return 0;
}

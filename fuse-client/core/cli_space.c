/*
 * cli_space.c - fallocate, published block counts and SEEK_DATA/SEEK_HOLE
 * over the iods (cli_space.h). A contiguous file range has a contiguous
 * image in each iod's object: [stripe_local_size(off), stripe_local_size(
 * off + len)), the bytes of the file before each end that live there.
 */
#include <errno.h>
#include <stdlib.h>

#include "cli_inode.h"
#include "cli_io.h"
#include "cli_meta.h"
#include "cli_size.h"
#include "cli_space.h"
#include "stripe.h"

#define SPACE_MAX_OFF (1ull << 62) /* largest end of an iod range */

/* The mgr flags of a fallocate mode: see cli_space.h for the times. */
static uint32_t falloc_sb_flags(uint32_t mode)
{
	uint32_t keep = mode & PROTO_FALLOC_KEEP_SIZE;

	if (mode & PROTO_FALLOC_PUNCH_HOLE)
		return PROTO_SB_MTIME;
	if (mode & PROTO_FALLOC_ZERO_RANGE)
		return keep ? PROTO_SB_MTIME : PROTO_SB_GROW | PROTO_SB_MTIME;
	return keep ? PROTO_SB_CTIME : PROTO_SB_GROW | PROTO_SB_CTIME;
}

/* Whether mode is one of the five combinations rpfs serves. */
static int falloc_mode_ok(uint32_t mode)
{
	return mode == 0 || mode == PROTO_FALLOC_KEEP_SIZE ||
	       mode == (PROTO_FALLOC_PUNCH_HOLE | PROTO_FALLOC_KEEP_SIZE) ||
	       mode == PROTO_FALLOC_ZERO_RANGE ||
	       mode == (PROTO_FALLOC_ZERO_RANGE | PROTO_FALLOC_KEEP_SIZE);
}

/* The first failure among count per-iod results, 0 if none. */
static int first_rc(const int *rcs, uint16_t count)
{
	for (uint16_t k = 0; k < count; k++)
		if (rcs[k])
			return rcs[k];
	return 0;
}

/* Blocks: see cli_space.h. */
int cli_space_blocks(struct cli_fs *fs, uint64_t ino,
		     const struct proto_layout *l, uint64_t *blocks)
{
	struct proto_ioreq *qs = calloc(l->count, sizeof(*qs));
	uint64_t *vals = calloc(l->count, sizeof(*vals));
	int *rcs = calloc(l->count, sizeof(*rcs));
	int rc = -ENOMEM;

	if (!qs || !vals || !rcs)
		goto out_free;
	rc = cli_io_each(fs, PROTO_OP_IO_BLOCKS, ino, l, qs, rcs, vals);
	if (rc == 0)
		rc = first_rc(rcs, l->count);
	*blocks = 0;
	for (uint16_t k = 0; rc == 0 && k < l->count; k++)
		*blocks += vals[k]; /* each <= 2^62 / 512, 256 of them */
out_free:
	free(rcs);
	free(vals);
	free(qs);
	return rc;
}

/* Count the blocks and store them with flags (and size, the time now) at
 * the mgr, then merge the reply into the table. */
static int space_setblocks(struct cli_fs *fs, const struct proto_cred *c,
			   uint64_t ino, const struct proto_layout *l,
			   uint32_t flags, uint64_t size, struct proto_attr *out)
{
	struct proto_time now = cli_now_time();
	struct proto_attr a;
	uint64_t blocks, since;
	int rc = cli_space_blocks(fs, ino, l, &blocks);

	if (rc)
		return rc;
	since = cli_itab_clock(fs->itab);
	rc = cli_meta_setblocks(fs, c, ino, flags, size, &now, blocks, &a);
	if (rc)
		return rc;
	cli_inode_update(fs->itab, &a, 0, since);
	if (out)
		*out = a;
	return 0;
}

/* Publish: see cli_space.h. */
int cli_space_publish(struct cli_fs *fs, const struct proto_cred *c,
		      uint64_t ino, struct proto_attr *out)
{
	struct proto_layout l;
	uint64_t size;
	int rc;

	if (cli_inode_io(fs->itab, ino, &l, &size))
		return 0;
	rc = space_setblocks(fs, c, ino, &l, 0, 0, out);
	if (rc == -EOPNOTSUPP || rc == -ENOENT)
		return 0; /* an older server; or purged under us */
	return rc;
}

/* Send IO_FALLOCATE of the local image of [off, end) to each iod it
 * touches. Cost: one parallel round trip. */
static int space_falloc_iods(struct cli_fs *fs, uint64_t ino,
			     const struct proto_layout *l, uint32_t mode,
			     uint64_t off, uint64_t end)
{
	struct proto_ioreq *qs = calloc(l->count, sizeof(*qs));
	int *rcs = calloc(l->count, sizeof(*rcs));
	int rc = -ENOMEM;

	if (!qs || !rcs)
		goto out_free;
	for (uint16_t k = 0; k < l->count; k++) {
		uint64_t lo = stripe_local_size(l, k, off);
		uint64_t hi = stripe_local_size(l, k, end);

		qs[k].mode = mode;
		qs[k].off = lo;
		qs[k].len = hi - lo;
		if (hi == lo)
			rcs[k] = 1; /* untouched: skipped */
	}
	rc = cli_io_each(fs, PROTO_OP_IO_FALLOCATE, ino, l, qs, rcs, NULL);
	for (uint16_t k = 0; rc == 0 && k < l->count; k++)
		if (rcs[k] < 0)
			rc = rcs[k];
out_free:
	free(rcs);
	free(qs);
	return rc;
}

/* Fallocate: see cli_space.h. */
int cli_space_fallocate(struct cli_fs *fs, const struct proto_cred *c,
			uint64_t ino, uint32_t mode, uint64_t off,
			uint64_t len)
{
	struct proto_layout l;
	uint64_t size;
	int rc;

	if (!falloc_mode_ok(mode))
		return -EOPNOTSUPP;
	if (len == 0)
		return -EINVAL;
	if (off > SPACE_MAX_OFF || len > SPACE_MAX_OFF - off)
		return -EFBIG;
	if (cli_inode_io(fs->itab, ino, &l, &size))
		return -EBADF;
	rc = cli_size_push(fs, c, ino);
	if (rc)
		return rc;
	rc = space_falloc_iods(fs, ino, &l, mode, off, off + len);
	if (rc)
		return rc;
	return space_setblocks(fs, c, ino, &l, falloc_sb_flags(mode),
			       off + len, NULL);
}

/* The file offset of local offset v of file iod k; UINT64_MAX when it
 * would not fit. */
static uint64_t space_file_off(const struct proto_layout *l, uint16_t k,
			       uint64_t v)
{
	uint64_t u, f;

	if (__builtin_mul_overflow(v / l->unit, (uint64_t)l->count, &u) ||
	    __builtin_add_overflow(u, (uint64_t)k, &u) ||
	    __builtin_mul_overflow(u, (uint64_t)l->unit, &f) ||
	    __builtin_add_overflow(f, v % l->unit, &f))
		return UINT64_MAX;
	return f;
}

/* Seek: see cli_space.h. Each iod k answers from lo, the local image of
 * off; data found at local v is file byte space_file_off(v). A hole answer
 * of -ENXIO means lo is at or past the object's end: a hole from lo. */
int cli_space_seek(struct cli_fs *fs, uint64_t ino, uint64_t off, int hole,
		   uint64_t *res)
{
	struct proto_layout l;
	struct proto_ioreq *qs;
	uint64_t size, best = UINT64_MAX, *vals;
	int *rcs, rc;

	if (cli_inode_io(fs->itab, ino, &l, &size))
		return -EBADF;
	if (off >= size)
		return -ENXIO;
	qs = calloc(l.count, sizeof(*qs));
	vals = calloc(l.count, sizeof(*vals));
	rcs = calloc(l.count, sizeof(*rcs));
	rc = -ENOMEM;
	if (!qs || !vals || !rcs)
		goto out_free;
	for (uint16_t k = 0; k < l.count; k++) {
		qs[k].size = stripe_local_size(&l, k, off);
		qs[k].flags = hole ? PROTO_SEEK_HOLE : PROTO_SEEK_DATA;
	}
	rc = cli_io_each(fs, PROTO_OP_IO_SEEK, ino, &l, qs, rcs, vals);
	for (uint16_t k = 0; rc == 0 && k < l.count; k++) {
		uint64_t f;

		if (rcs[k] == -ENXIO && !hole)
			continue; /* no data on this iod after off */
		if (rcs[k] && rcs[k] != -ENXIO) {
			rc = rcs[k];
			break;
		}
		f = space_file_off(&l, k, rcs[k] ? qs[k].size : vals[k]);
		if (f < best)
			best = f;
	}
	if (rc)
		goto out_free;
	if (best >= size) /* SEEK_HOLE: the end is a hole */
		best = hole ? size : UINT64_MAX;
	rc = best == UINT64_MAX ? -ENXIO : 0;
	*res = best < off ? off : best;
out_free:
	free(rcs);
	free(vals);
	free(qs);
	return rc;
}

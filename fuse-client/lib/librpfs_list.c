/*
 * librpfs_list.c - list I/O (rpfs_read_list, rpfs_write_list and their
 * extended variants with allocations) and registered memory
 * (rpfs_mem_alloc/free, rpfs_mem_register/deregister). The list calls map
 * straight onto cli_io_list, the engine the contiguous calls and the FUSE
 * client use too.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cli_inode.h"
#include "cli_io.h"
#include "cli_setid.h"
#include "librpfs_int.h"

/*
 * Run one list call: check the handle and counts, hand the lists to the
 * engine, note a write's end for the size push.
 * Cost: O(segments) plus one parallel round trip per round.
 */
static ssize_t list_io(struct rpfs_file *f, int dir, int mem_count,
		       const struct iovec *mem, const struct iovec *allocs,
		       int file_count, const uint64_t *foff,
		       const uint64_t *flen)
{
	struct proto_layout l;
	uint64_t size, total = 0, end = 0;
	int rc;

	if (!f || mem_count < 0 || file_count < 0)
		return -EINVAL;
	if ((mem_count && !mem) || (file_count && (!foff || !flen)))
		return -EINVAL;
	if (f->accmode == (dir == CLI_IO_READ ? O_WRONLY : O_RDONLY))
		return -EBADF;
	for (int i = 0; i < file_count; i++) {
		if (foff[i] + flen[i] < foff[i] || total + flen[i] < total)
			return -EINVAL;
		total += flen[i];
		if (flen[i] && foff[i] + flen[i] > end)
			end = foff[i] + flen[i];
	}
	if (total > (uint64_t)SSIZE_MAX)
		return -EINVAL;
	rc = cli_inode_io(f->fs->cli->itab, f->ino, &l, &size);
	if (rc)
		return -EBADF;
	if (dir == CLI_IO_WRITE && total) {
		rc = cli_setid_write(f->fs->cli, &f->fs->cred, f->ino);
		if (rc < 0)
			return rc;
	}
	rc = cli_io_list(f->fs->cli, f->ino, &l, dir, foff, flen,
			 (size_t)file_count, mem, (size_t)mem_count, allocs);
	if (rc)
		return rc;
	if (dir == CLI_IO_WRITE && total)
		rpfs_int_wrote(f, end);
	return (ssize_t)total;
}

/* List read: see rpfs.h. */
ssize_t rpfs_read_list(rpfs_file_t *f, int mem_count, const struct iovec *mem,
		       int file_count, const uint64_t *file_offsets,
		       const uint64_t *file_lens)
{
	return list_io(f, CLI_IO_READ, mem_count, mem, NULL, file_count,
		       file_offsets, file_lens);
}

/* List write: see rpfs.h. */
ssize_t rpfs_write_list(rpfs_file_t *f, int mem_count, const struct iovec *mem,
			int file_count, const uint64_t *file_offsets,
			const uint64_t *file_lens)
{
	return list_io(f, CLI_IO_WRITE, mem_count, mem, NULL, file_count,
		       file_offsets, file_lens);
}

/* List read with allocations: see rpfs.h. */
ssize_t rpfs_read_list_ext(rpfs_file_t *f, int mem_count,
			   const struct iovec *mem, const struct iovec *allocs,
			   int file_count, const uint64_t *file_offsets,
			   const uint64_t *file_lens)
{
	if (mem_count && !allocs)
		return -EINVAL;
	return list_io(f, CLI_IO_READ, mem_count, mem, allocs, file_count,
		       file_offsets, file_lens);
}

/* List write with allocations: see rpfs.h. */
ssize_t rpfs_write_list_ext(rpfs_file_t *f, int mem_count,
			    const struct iovec *mem, const struct iovec *allocs,
			    int file_count, const uint64_t *file_offsets,
			    const uint64_t *file_lens)
{
	if (mem_count && !allocs)
		return -EINVAL;
	return list_io(f, CLI_IO_WRITE, mem_count, mem, allocs, file_count,
		       file_offsets, file_lens);
}

/*
 * Allocate registered memory: anonymous pages, declared to the transport
 * (registered on first use by the verbs backend, a no-op on tcp), kept on
 * the fs list so unmount can free what is left. Cost: one mmap; pages are
 * faulted on first touch.
 */
int rpfs_mem_alloc(rpfs_fs_t *fs, size_t len, void **out)
{
	struct rpfs_mem *m;
	void *p;
	int rc;

	if (!fs || !out || len == 0 || len > (size_t)SSIZE_MAX)
		return -EINVAL;
	m = malloc(sizeof(*m));
	if (!m)
		return -ENOMEM;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED) {
		rc = -ENOMEM;
		goto out_free_m;
	}
	rc = net_client_register_mem(fs->cli->net, p, len);
	if (rc)
		goto out_unmap;
	m->addr = p;
	m->len = len;
	pthread_mutex_lock(&fs->lock);
	m->next = fs->mems;
	fs->mems = m;
	pthread_mutex_unlock(&fs->lock);
	*out = p;
	return 0;

out_unmap:
	munmap(p, len);
out_free_m:
	free(m);
	return rc;
}

/* Free registered memory: forget the region, unmap. Cost: O(allocations). */
int rpfs_mem_free(rpfs_fs_t *fs, void *p)
{
	struct rpfs_mem **pp, *m = NULL;
	int rc;

	if (!fs || !p)
		return -EINVAL;
	pthread_mutex_lock(&fs->lock);
	for (pp = &fs->mems; *pp; pp = &(*pp)->next)
		if ((*pp)->addr == p) {
			m = *pp;
			break;
		}
	if (!m) {
		pthread_mutex_unlock(&fs->lock);
		return -ENOENT;
	}
	rc = net_client_unregister_mem(fs->cli->net, p);
	if (rc == 0 || rc == -ENOENT)
		*pp = m->next;
	pthread_mutex_unlock(&fs->lock);
	if (rc && rc != -ENOENT)
		return rc; /* -EBUSY: still in use by a transfer */
	munmap(m->addr, m->len);
	free(m);
	return 0;
}

/* Declare application memory long-lived: see rpfs.h. */
int rpfs_mem_register(rpfs_fs_t *fs, void *addr, size_t len)
{
	if (!fs || !addr || len == 0)
		return -EINVAL;
	return net_client_register_mem(fs->cli->net, addr, len);
}

/* Forget a declared region: see rpfs.h. */
int rpfs_mem_deregister(rpfs_fs_t *fs, void *addr)
{
	if (!fs || !addr)
		return -EINVAL;
	return net_client_unregister_mem(fs->cli->net, addr);
}

/*
 * librpfs_int.h - what the librpfs source files share: the handles behind
 * rpfs_fs_t and rpfs_file_t. Not installed.
 */
#ifndef RPFS_LIBRPFS_INT_H
#define RPFS_LIBRPFS_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "cli_core.h"
#include "rpfs.h"

/* One rpfs_mem_alloc allocation (mmap'ed, registered). */
struct rpfs_mem {
	void *addr;
	size_t len;
	struct rpfs_mem *next;
};

/* A mounted file system. cli and cred are immutable after rpfs_mount. */
struct rpfs_fs {
	struct cli_fs *cli;
	struct proto_cred cred;   /* the process's identity at mount */
	atomic_int nopen;         /* open rpfs_file_t handles */
	pthread_mutex_t lock;     /* protects mems */
	struct rpfs_mem *mems;    /* live rpfs_mem_alloc allocations */
	struct cli_lock *locks;   /* rpfs_lock (cli_lock.h); thread-safe */
};

/* An open file. Immutable after rpfs_open. */
struct rpfs_file {
	struct rpfs_fs *fs;
	uint64_t ino;
	int accmode;              /* O_RDONLY, O_WRONLY or O_RDWR */
};

/**
 * Record that f wrote up to end (exclusive) now, so close and fsync
 * publish the grown size.
 */
__attribute__((visibility("hidden")))
void rpfs_int_wrote(struct rpfs_file *f, uint64_t end);

#endif

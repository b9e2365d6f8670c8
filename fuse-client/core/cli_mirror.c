/*
 * cli_mirror.c - replica mapping, the order a read asks the replicas in,
 * STALE_MARK, and the client's hint of the replicas it recorded stale: a
 * growable array of (ino, iod) under a mutex; readers skip the lock while
 * it is empty (the common case: no iod has been down since mount).
 */
#include "cli_mirror.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "log.h"

/* What a STALE_MARK may take beyond the client timeout: the mgr's lease
 * (8 s, mgr/ha/README.md "Fencing") and a poll round's timeout (2 s), with a
 * margin. */
#define CLI_MARK_EXTRA_MS 12000

/* See cli_mirror.h. */
uint16_t cli_mirror_iod(const struct cli_fs *fs, const struct proto_layout *l,
			uint16_t k, int r)
{
	if (l->mirror != 2 || fs->ngroups == 0)
		return (uint16_t)((l->first + k) % fs->niods);
	return fs->groups[(l->first + k) % fs->ngroups].iod[r & 1];
}

/* See cli_mirror.h. */
uint16_t cli_mirror_width(const struct cli_fs *fs, const struct proto_layout *l)
{
	return l->mirror == 2 ? fs->ngroups : fs->niods;
}

/* Whether (ino, iod) is in the record; caller holds stale_lock. */
static int stale_find(const struct cli_fs *fs, uint64_t ino, uint16_t iod)
{
	for (size_t i = 0; i < fs->nstale; i++)
		if (fs->stale[i].ino == ino && fs->stale[i].iod == iod)
			return 1;
	return 0;
}

/* See cli_mirror.h. */
int cli_mirror_is_stale(struct cli_fs *fs, uint64_t ino, uint16_t iod)
{
	int found;

	if (!atomic_load_explicit(&fs->any_stale, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&fs->stale_lock);
	found = stale_find(fs, ino, iod);
	pthread_mutex_unlock(&fs->stale_lock);
	return found;
}

/* See cli_mirror.h. */
void cli_mirror_read_order(struct cli_fs *fs, uint64_t ino,
			   const struct proto_layout *l, uint16_t k,
			   unsigned turn, uint16_t order[2])
{
	int r = (int)((turn + k) & 1);
	uint16_t a = cli_mirror_iod(fs, l, k, r), b = cli_mirror_iod(fs, l, k, !r);
	int a_last = cli_mirror_is_stale(fs, ino, a) || cli_iod_held_down(fs, a);
	int b_last = cli_mirror_is_stale(fs, ino, b) || cli_iod_held_down(fs, b);

	order[0] = a_last && !b_last ? b : a;
	order[1] = order[0] == a ? b : a;
}

/* See cli_mirror.h. */
void cli_mirror_read_done(struct cli_fs *fs, uint64_t ino, uint16_t iod,
			  int rc)
{
	if (rc || !cli_mirror_is_stale(fs, ino, iod))
		return;
	log_notice("inode %llu: iod %u's replica serves reads again (resynced)",
		   (unsigned long long)ino, iod);
	cli_mirror_forget(fs, ino, iod);
}

/* Add (ino, iod) to the record, growing it. @return 0, -ENOMEM */
static int stale_add(struct cli_fs *fs, uint64_t ino, uint16_t iod)
{
	int rc = 0;

	pthread_mutex_lock(&fs->stale_lock);
	if (stale_find(fs, ino, iod))
		goto out_unlock;
	if (fs->nstale == fs->stale_cap) {
		size_t cap = fs->stale_cap ? fs->stale_cap * 2 : 16;
		struct cli_stale *p = realloc(fs->stale, cap * sizeof(*p));

		if (!p) {
			rc = -ENOMEM;
			goto out_unlock;
		}
		fs->stale = p;
		fs->stale_cap = cap;
	}
	fs->stale[fs->nstale++] = (struct cli_stale){ ino, iod };
	atomic_store_explicit(&fs->any_stale, 1, memory_order_release);
out_unlock:
	pthread_mutex_unlock(&fs->stale_lock);
	return rc;
}

/* See cli_mirror.h. */
void cli_mirror_forget(struct cli_fs *fs, uint64_t ino, uint16_t iod)
{
	if (!atomic_load_explicit(&fs->any_stale, memory_order_acquire))
		return;
	pthread_mutex_lock(&fs->stale_lock);
	for (size_t i = 0; i < fs->nstale; i++) {
		if (fs->stale[i].ino != ino || fs->stale[i].iod != iod)
			continue;
		fs->stale[i] = fs->stale[--fs->nstale];
		break;
	}
	if (!fs->nstale)
		atomic_store_explicit(&fs->any_stale, 0, memory_order_release);
	pthread_mutex_unlock(&fs->stale_lock);
}

/* See cli_mirror.h. */
int cli_mirror_mark_stale(struct cli_fs *fs, uint64_t ino, uint16_t iod)
{
	struct proto_stale s = { ino, iod };
	struct net_call call;
	int retried;
	uint8_t body[16];
	struct wbuf w;
	int rc;

	wb_init(&w, body, sizeof(body));
	rc = proto_stale_encode(&w, &s);
	if (rc)
		return rc;
	memset(&call, 0, sizeof(call));
	call.op = PROTO_OP_STALE_MARK;
	/* the mgr answers once the iod is fenced, which for an iod it cannot
	 * reach means once that iod's lease has surely run out */
	call.timeout_ms = (uint32_t)fs->timeout_ms + CLI_MARK_EXTRA_MS;
	call.body = body;
	call.body_len = (uint32_t)w.len;
	rc = cli_mgr_run(fs, &call, &retried); /* STALE_MARK is idempotent */
	if (!rc && call.status)
		rc = call.status < 0 && call.status >= -4095 ? call.status : -EIO;
	if (rc) {
		log_warn("inode %llu: cannot record iod %u's replica stale at the "
			 "mgr: %s", (unsigned long long)ino, iod, strerror(-rc));
		return rc;
	}
	if (!cli_mirror_is_stale(fs, ino, iod))
		log_notice("inode %llu: iod %u's replica recorded stale (iod down)",
			   (unsigned long long)ino, iod);
	return stale_add(fs, ino, iod);
}

/* See cli_mirror.h. getrandom, or the clock if that fails. */
unsigned cli_mirror_seed(void)
{
	unsigned v;
	struct timespec ts;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
		return v;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned)ts.tv_nsec;
}

/* See cli_mirror.h. */
void cli_mirror_free(struct cli_fs *fs)
{
	free(fs->stale);
	fs->stale = NULL;
	fs->nstale = fs->stale_cap = 0;
}

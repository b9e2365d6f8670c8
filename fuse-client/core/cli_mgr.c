/*
 * cli_mgr.c - the connection to the active mgr of a list: run a call there,
 * and on a standby answer, a lost connection or a timeout move to the
 * hinted mgr or the next of the list and send the call again
 * (mgr/ha/README.md "Several mgrs, one active"); on a "retry later"
 * answer wait for the mgr's store and send it again.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli_core.h"
#include "log.h"

#define CLI_MGR_FOLLOW_MS 30000u  /* a call follows the mgrs this long */
#define CLI_MGR_ROUND_PAUSE_MS 200 /* between rounds over the whole list */
#define CLI_MGR_STORE_WAIT_MS 60000u /* a call waits for a mgr's store this long */

/* The monotonic clock in ms. */
static uint64_t mgr_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Where to go after mgr cur failed: the mgr a standby answer names (if it
 * is in the list), else the next one. call: the standby answer, or NULL. */
static int mgr_next(const struct cli_fs *fs, int cur,
		    const struct net_call *call)
{
	struct proto_standby s;

	if (call && !proto_standby_decode(call->rep_buf, call->rep_len, &s, NULL) &&
	    s.host.len)
		for (int i = 0; i < fs->nmgrs; i++)
			if (i != cur && fs->mgr_list[i].port == s.port &&
			    strlen(fs->mgr_list[i].host) == s.host.len &&
			    !memcmp(fs->mgr_list[i].host, s.host.p, s.host.len))
				return i;
	return (cur + 1) % fs->nmgrs;
}

/* "HOST:PORT" of mgr i, for messages (a thread-local buffer). */
static const char *fs_mgr_name(const struct cli_fs *fs, int i)
{
	static __thread char buf[ADDR_STRLEN];

	return addr_format(buf, sizeof(buf), fs->mgr_list[i].host,
			   fs->mgr_list[i].port);
}

/* Move the followed mgr from cur to next, unless another thread moved it
 * already; say so once per search. */
static void mgr_move(struct cli_fs *fs, int cur, int next, int rc)
{
	char b[ADDR_STRLEN];

	if (!atomic_compare_exchange_strong(&fs->mgr_cur, &cur, next))
		return;
	fs->mgr = fs->mgrs[next];
	if (atomic_exchange(&fs->mgr_moving, 1) == 0)
		log_notice("mgr %s: %s; looking for the active mgr, next %s",
			   fs_mgr_name(fs, cur),
			   rc ? strerror(-rc) : "not the active mgr",
			   addr_format(b, sizeof(b), fs->mgr_list[next].host,
				       fs->mgr_list[next].port));
}

/* Sleep ms milliseconds. */
static void mgr_pause(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Mgr cur answered "retry later" (its store is out of reach): say so once
 * per wait, and pause before the call is sent again. */
static void mgr_store_wait(struct cli_fs *fs, int cur)
{
	if (atomic_exchange(&fs->mgr_waiting, 1) == 0)
		log_notice("mgr %s: its metadata store is out of reach; calls "
			   "wait for it (up to %u s)", fs_mgr_name(fs, cur),
			   CLI_MGR_STORE_WAIT_MS / 1000);
	mgr_pause(CLI_MGR_ROUND_PAUSE_MS);
}

/* Mgr cur gave an answer: end the log lines' search and wait, if any. */
static void mgr_answered(struct cli_fs *fs, int cur)
{
	if (atomic_load_explicit(&fs->mgr_moving, memory_order_relaxed) &&
	    atomic_exchange(&fs->mgr_moving, 0))
		log_notice("mgr %s is the active mgr", fs_mgr_name(fs, cur));
	if (atomic_load_explicit(&fs->mgr_waiting, memory_order_relaxed) &&
	    atomic_exchange(&fs->mgr_waiting, 0))
		log_notice("mgr %s: its metadata store answers again",
			   fs_mgr_name(fs, cur));
}

/* See cli_core.h. */
int cli_mgr_run(struct cli_fs *fs, struct net_call *call, int *retried)
{
	uint64_t end = mgr_now_ms() + CLI_MGR_FOLLOW_MS, store_end = 0;
	int tries = 0;

	*retried = 0;
	for (;;) {
		int cur = atomic_load(&fs->mgr_cur);
		int rc = net_call_run(fs->mgrs[cur], call);

		if (rc == 0 && call->status == PROTO_RETRY) {
			*retried = 1; /* its commit's fate may be unknown */
			if (!store_end)
				store_end = mgr_now_ms() + CLI_MGR_STORE_WAIT_MS;
			if (mgr_now_ms() >= store_end)
				return -EIO;
			mgr_store_wait(fs, cur);
			end = mgr_now_ms() + CLI_MGR_FOLLOW_MS; /* it is the active one */
			continue;
		}
		if (rc == 0 && call->status != PROTO_STANDBY) {
			mgr_answered(fs, cur);
			return 0;
		}
		if (rc == -EIO || rc == -ETIMEDOUT || rc == -EPROTO)
			*retried = 1; /* the mgr may have run it */
		if (rc && fs->nmgrs == 1)
			return rc; /* one mgr: its failure is the answer */
		if (mgr_now_ms() >= end)
			return rc ? rc : -EHOSTUNREACH;
		if (fs->nmgrs > 1)
			mgr_move(fs, cur, mgr_next(fs, cur, rc ? NULL : call), rc);
		if (++tries % fs->nmgrs == 0)
			mgr_pause(CLI_MGR_ROUND_PAUSE_MS);
	}
}

/*
 * cli_mgr.c - the connection to the active mgr of a list: run a call there,
 * and on a standby answer, a lost connection or a timeout move to the
 * hinted mgr or the next of the list and send the call again (HACKING
 * "Several mgrs, one active").
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli_core.h"
#include "log.h"

#define CLI_MGR_FOLLOW_MS 30000u  /* a call follows the mgrs this long */
#define CLI_MGR_ROUND_PAUSE_MS 200 /* between rounds over the whole list */

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

/* See cli_core.h. */
int cli_mgr_run(struct cli_fs *fs, struct net_call *call, int *retried)
{
	uint64_t end = mgr_now_ms() + CLI_MGR_FOLLOW_MS;
	int tries = 0;

	*retried = 0;
	for (;;) {
		int cur = atomic_load(&fs->mgr_cur);
		int rc = net_call_run(fs->mgrs[cur], call);

		if (rc == 0 && call->status != PROTO_STANDBY) {
			if (atomic_load_explicit(&fs->mgr_moving, memory_order_relaxed) &&
			    atomic_exchange(&fs->mgr_moving, 0))
				log_notice("mgr %s is the active mgr", fs_mgr_name(fs, cur));
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
		if (++tries % fs->nmgrs == 0) {
			struct timespec ts = { 0, CLI_MGR_ROUND_PAUSE_MS * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
}

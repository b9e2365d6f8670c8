/*
 * cli_lease.h - the mount's record of its READ leases on directories:
 * which names it gave the kernel with a long entry timeout under a lease
 * (so that a RESET can take them all back), and per directory the last
 * invalidation handled (so that a grant made before it is void). No FUSE
 * here: the front end asks it before replying (cli_lease_take) and tells
 * it what the callback thread handled (cli_lease_inval, cli_lease_reset).
 * Thread-safe (one mutex). Design: HACKING.md "Leases and callbacks".
 */
#ifndef RPFS_CLI_LEASE_H
#define RPFS_CLI_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct cli_lease;

#define CLI_LEASE_MAX_NAMES 262144u /* names held under leases at once;
				     * past it, the fixed timeouts */

/**
 * Make an empty record.
 * @param max_names names held at most (0: CLI_LEASE_MAX_NAMES)
 * @return 0, -ENOMEM
 */
int cli_lease_new(struct cli_lease **out, size_t max_names);

/** Free the record. NULL: nothing. */
void cli_lease_free(struct cli_lease *t);

/** The record's generation, to read before a request whose reply may
 * carry a grant: a RESET in between voids that grant. */
uint64_t cli_lease_gen(struct cli_lease *t);

/**
 * May the kernel cache name in dir for long? Yes if g grants a lease on
 * dir that is still good (no RESET since gen, no invalidation of dir
 * handled after the grant was made, the channel live) and there is room
 * to record the name, which is then recorded. The directory's lease is
 * held from then on (cli_lease_dir_held), until a recall or a reset.
 * @param g the reply's grant (ino 0: none)
 * @param live the callback channel answers (cli_cb_live)
 * @param clock the caller's clock now (> 0; cli_itab_clock): what
 *	cli_lease_dir_held reports as the lease's start
 * @return 1 yes, 0 no (use the fixed timeouts)
 * Cost: two hash lookups and, for a new name, an allocation.
 */
int cli_lease_take(struct cli_lease *t, uint64_t gen, int live,
		   const struct proto_grant *g, uint64_t dir,
		   const char *name, size_t len, uint64_t clock);

/**
 * Does this mount hold the READ lease on dir (a take since its last
 * recall or reset, the channel live)? Then the directory's attributes,
 * fetched by a request sent after *since, hold until a recall.
 * @param[out] since the clock the lease began at (cli_lease_take's)
 * @return 1 held, 0 not
 */
int cli_lease_dir_held(struct cli_lease *t, uint64_t dir, int live,
		       uint64_t *since);

/**
 * The callback thread handled an invalidation of name in dir, event seq:
 * forget the name and void grants of dir made before seq. Call before
 * invalidating the kernel's entry.
 */
void cli_lease_inval(struct cli_lease *t, uint64_t dir, const char *name,
		     size_t len, uint64_t seq);

/* One name cli_lease_recall or cli_lease_reset takes back; with name NULL
 * (len 0), the attributes of the directory dir, whose lease was held. */
typedef void (*cli_lease_each_fn)(uint64_t dir, const char *name, size_t len,
				  void *arg);

/**
 * The callback thread handled a RECALL of the lease on dir, event seq:
 * void grants of dir made before seq, forget dir's names and the lease,
 * and call fn outside the lock for each of the names and, if the lease
 * was held, once for dir with no name (its attributes).
 * Cost: dir's names.
 */
void cli_lease_recall(struct cli_lease *t, uint64_t dir, uint64_t seq,
		      cli_lease_each_fn fn, void *arg);

/**
 * Drop everything (a RESET, a lapse of the channel, a mgr restart): a new
 * generation, no name and no directory recorded; then call fn for each
 * name that was recorded and each directory whose lease was held, outside
 * the lock (to invalidate the kernel's entries and attributes). Cost: the
 * names and directories.
 */
void cli_lease_reset(struct cli_lease *t, cli_lease_each_fn fn, void *arg);

/** Names recorded (tests, stats). */
size_t cli_lease_names(struct cli_lease *t);

#endif

/*
 * cli_cb.h - the mount's side of the callback channel: a thread that
 * keeps one CB_WAIT pending at the active mgr, on a connection of its own,
 * acknowledges the events it handled in the next one, and hands each
 * event to the front end's handler. It follows the active mgr as metadata
 * calls do, and tells the handler to drop everything (RESET) when the mgr
 * restarted or forgot the session, and when a wait fails (a wait times out
 * halfway through the lease, so this comes before the mgr forgets the
 * session). No FUSE here. Design: HACKING.md "Leases and callbacks".
 */
#ifndef RPFS_CLI_CB_H
#define RPFS_CLI_CB_H

#include <stdint.h>

#include "cli_core.h"

struct cli_cb;

/* One event for the handler (the callback thread): kind is enum
 * proto_cb_kind, seq its number (0 for a RESET the thread makes itself);
 * name (len bytes, not NUL-terminated) only for PROTO_CB_INVAL_ENTRY. The
 * handler must not block on a FUSE request. */
typedef void (*cli_cb_fn)(uint8_t kind, uint64_t seq, uint64_t ino,
			  const char *name, size_t len, void *arg);

#define CLI_CB_WAIT_MAX_MS 1000u /* the longest one CB_WAIT is held: also
				  * how long a stop may wait for the thread */

/**
 * Start the callback thread of a mounted fs.
 * @param session the mount's session id (the lock service's), != 0
 * @param no the transport options (a client of its own is made, one lane)
 * @param fn the event handler, called on the callback thread
 * @return 0, -EINVAL (session 0), -ENOMEM, or a thread or transport error
 */
int cli_cb_new(struct cli_cb **out, struct cli_fs *fs, uint64_t session,
	       const struct net_opts *no, cli_cb_fn fn, void *arg);

/** Stop the thread (within about 4 s: a wait and its lateness), tell the
 * mgr the session ends (so that no change waits for it), free. The caller
 * has dropped what it keeps under leases, or is about to unmount. NULL:
 * nothing. */
void cli_cb_free(struct cli_cb *cb);

/** Whether the channel is live: a wait was answered, none has failed
 * since (a failure drops every lease: RESET), and the last one answered
 * was sent less than the session's lease (8 s) ago. A mount gives the kernel no long timeout while it is not. Any
 * thread. */
int cli_cb_live(struct cli_cb *cb);

/** Events handled and CB_WAITs answered so far (for tests and stats). */
void cli_cb_counts(struct cli_cb *cb, uint64_t *events, uint64_t *waits);

#endif

/*
 * fe_cb.h - the FUSE side of leases and the callback channel: starts the
 * callback thread (cli_cb.h) and the lease record (cli_lease.h), turns the
 * mgr's events into the kernel's invalidations
 * (fuse_lowlevel_notify_inval_entry / _inval_inode) on that thread, never
 * on a FUSE worker (libfuse: a notification from a request's thread can
 * deadlock against that request), and tells the ops when a name may be
 * cached long. Design: HACKING.md "Leases and callbacks".
 */
#ifndef RPFS_FE_CB_H
#define RPFS_FE_CB_H

#include <fuse_lowlevel.h>

#include "cli_cb.h"
#include "cli_lease.h"
#include "fe_fuse.h"

#define FE_LEASE_ENTRY_TIMEOUT 3600.0 /* s: a name under a READ lease; a
				       * change elsewhere invalidates it */

/**
 * Leases on (-o leases): the lease record in cf->lease, the session on
 * every mgr request (cf->fs->session), and the callback thread in cf->cb.
 * Call after the kernel mount and before the workers start; fe_cb_stop
 * after they ended and before the unmount.
 * @param se the session the invalidations go to
 * @param deleg also WRITE leases and delegated ops (-o deleg): the record
 *	in cf->fs->deleg (cli_deleg.h), stopped by fe_cb_stop first
 * @return 0, or -ENOMEM / cli_cb_new's or cli_deleg_new's error (leases
 *	stay off)
 */
int fe_cb_start(struct fe_fuse *cf, struct fuse_session *se,
		const struct net_opts *no, int deleg);

/** Stop the callback thread and free the record (leases off). */
void fe_cb_stop(struct fe_fuse *cf);

/**
 * A directory's attributes for GETATTR while this mount holds its READ
 * lease (cli_lease_dir_held, cli_inode_leased_attr): the kernel may keep
 * them FE_LEASE_ENTRY_TIMEOUT (a recall invalidates them). Never with
 * leases off.
 * @return 1 (a filled), 0 ask the mgr
 */
int fe_cb_dir_attr(struct fe_fuse *cf, uint64_t ino, struct proto_attr *a);

/**
 * May the kernel cache name in dir for FE_LEASE_ENTRY_TIMEOUT, as the
 * reply's grant g allows (cli_lease_take)? Never with leases off.
 * @param gen cli_lease_gen before the request was sent
 * @return 1 yes (recorded), 0 no
 */
int fe_cb_entry_long(struct fe_fuse *cf, uint64_t gen,
		     const struct proto_grant *g, uint64_t dir,
		     const char *name);

#endif

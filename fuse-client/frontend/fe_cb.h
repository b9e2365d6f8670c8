/*
 * fe_cb.h - the FUSE side of the callback channel: the handler that turns
 * the mgr's events into the kernel's invalidations
 * (fuse_lowlevel_notify_inval_entry / _inval_inode), run on the callback
 * thread of cli_cb.c, never on a FUSE worker (libfuse: a notification
 * from a request's thread can deadlock against that request). Design:
 * HACKING.md "Leases and callbacks".
 */
#ifndef RPFS_FE_CB_H
#define RPFS_FE_CB_H

#include <fuse_lowlevel.h>

#include "cli_cb.h"
#include "fe_fuse.h"

/**
 * Start the callback thread of a mounted session (-o leases). Call after
 * the kernel mount, stop (cli_cb_free) before the unmount.
 * @param se the session the invalidations go to
 * @return 0, or cli_cb_new's error
 */
int fe_cb_start(struct cli_cb **out, struct fe_fuse *cf,
		struct fuse_session *se, const struct net_opts *no);

#endif

/*
 * srv_status.h - the STATUS admin op (PROTO_OP_STATUS), answered the same
 * way by the mgr and every iod: role, version, capacity of the server's
 * directory, uptime and the transport counters as JSON. One server per
 * process; loop thread only.
 */
#ifndef RPFS_SRV_STATUS_H
#define RPFS_SRV_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "net.h"

/**
 * Remember what STATUS reports. Call once the server exists.
 * @param role "mgr" or "iod" (kept)
 * @param id iod index, 0 for the mgr
 * @param dir directory whose file system capacity is reported (kept)
 * @param srv the server whose counters are reported
 */
void srvstat_init(const char *role, uint16_t id, const char *dir,
		  struct net_server *srv);

/**
 * Adds a daemon's own counters to the STATUS JSON: writes
 * "name":value pairs, comma-separated, without braces, into buf.
 * @return the length written, or -ERANGE (cap too small)
 */
typedef int (*srvstat_extra_fn)(char *buf, size_t cap, void *arg);

/**
 * Set (or with NULL clear) the function whose counters STATUS adds to the
 * transport counters, e.g. the mgr's lock service (lock_waiters).
 * @param fn called on the loop thread for each STATUS
 * @param arg passed to fn
 */
void srvstat_extra(srvstat_extra_fn fn, void *arg);

/** Answer a STATUS request (empty body, else rejected). Cost: one statvfs. */
void srvstat_handle(struct net_sreq *r);

#endif

/*
 * srv_status.h - the STATUS admin op (PROTO_OP_STATUS), answered the same
 * way by the mgr and every iod: role, version, capacity of the server's
 * directory, uptime and the transport counters as JSON. One server per
 * process; loop thread only.
 */
#ifndef RPFS_SRV_STATUS_H
#define RPFS_SRV_STATUS_H

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

/** Answer a STATUS request (empty body, else rejected). Cost: one statvfs. */
void srvstat_handle(struct net_sreq *r);

#endif

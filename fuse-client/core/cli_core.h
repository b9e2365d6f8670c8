/*
 * cli_core.h - the rpfs client core: one mounted file system as seen from a
 * client process. Holds the transport client, the connection to the mgr and
 * one (lazily connecting) connection per iod of the table MOUNT returned.
 * Nothing here knows about FUSE: the FUSE front end and the native library
 * both sit on top of cli_core, cli_meta, cli_io and cli_inode.
 */
#ifndef RPFS_CLI_CORE_H
#define RPFS_CLI_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "net.h"
#include "proto.h"

struct cli_itab;
struct cli_deleg;

/* Mount options of the client core. */
struct cli_opts {
	int timeout_ms; /* every server request fails after this, > 0 */
};

/* One iod of the file system. Immutable after mount except "failing". */
struct cli_iod {
	uint16_t id;
	uint16_t port;
	char host[PROTO_MAX_HOST + 1];
	struct net_conn *conn;  /* connects on first use */
	atomic_int failing;     /* 1 after a failure was logged, 0 after a success */
	_Atomic uint64_t down_until_ns; /* after a timeout: fail fast until then
					 * (CLOCK_MONOTONIC), so a hung iod costs
					 * one timeout, not one per queued request */
};

/* A replica of a mirrored file this client recorded stale (cli_mirror.h). */
struct cli_stale {
	uint64_t ino;
	uint16_t iod;
};

/* A mounted file system. All fields are set by cli_fs_mount and read-only
 * afterwards (the connections and the inode table lock themselves), except
 * the stale record (stale_lock) and the read rotation (atomic). */
struct cli_fs {
	struct net_client *net;
	struct net_conn *_Atomic mgr; /* the mgr followed: mgrs[mgr_cur] */
	atomic_int mgr_cur;       /* index of the mgr followed (cli_mgr_run) */
	atomic_int mgr_moving;    /* 1 from a move until an answer: one log
				   * line per search for the active mgr */
	atomic_int mgr_waiting;   /* 1 from a "retry later" answer until
				   * another answer: one log line per wait */
	int nmgrs;                /* the mgr list, 1..ADDR_MAX_LIST; immutable */
	struct addr_hp mgr_list[ADDR_MAX_LIST];
	struct net_conn *mgrs[ADDR_MAX_LIST]; /* one (lazy) connection each */
	char mgr_host[PROTO_MAX_HOST + 1]; /* the first of the list (messages) */
	uint64_t session;         /* leases on: sent as cred.session with every
				   * mgr request (cli_cb.h); 0 off. Set before
				   * serving, read-only after */
	struct cli_deleg *deleg;  /* delegated ops (cli_deleg.h), or NULL;
				   * set before serving, read-only after */
	atomic_uint_fast64_t lease_resets; /* leases dropped whole (cli_cb):
				   * a failed wait, a mgr restart, a RESET */
	uint16_t mgr_port;
	atomic_int mgr_failing;   /* 1 after a mgr failure was logged */
	uint64_t fsid;
	struct proto_layout deflayout;
	uint16_t niods;
	struct cli_iod *iods;     /* niods entries, index = iod id */
	uint16_t ngroups;         /* mirror groups (MOUNT) */
	struct proto_group groups[PROTO_MAX_IODS / 2];
	atomic_uint read_turn;    /* rotates mirror=2 reads over the replicas;
				   * starts at a random per-client seed */
	pthread_mutex_t stale_lock;
	struct cli_stale *stale;  /* stale_lock: replicas recorded stale */
	size_t nstale, stale_cap; /* stale_lock */
	atomic_int any_stale;     /* nstale > 0, readable without the lock */
	int timeout_ms;
	struct cli_itab *itab;    /* inode table (cli_inode.h) */
};

/**
 * Connect to the mgr at host:port, fetch the fs parameters and iod table
 * (MOUNT) and set up a connection handle per iod. The iods are not
 * contacted here: they connect on first I/O.
 * @param[out] out the mounted file system
 * @param[in] host mgr host name or address
 * @param[in] port mgr port
 * @param[in] o options (NULL for defaults)
 * @return 0, or -EINVAL bad argument or a bad iod table from the mgr,
 *	-ENOMEM, -ECONNREFUSED/-EHOSTUNREACH/-ETIMEDOUT/-EIO mgr unreachable,
 *	-EPROTO malformed reply, or the mgr's -errno for MOUNT
 */
int cli_fs_mount(struct cli_fs **out, const char *host, uint16_t port,
		 const struct cli_opts *o);

/**
 * cli_fs_mount() with full transport options (cluster key, transport,
 * timeout in no->timeout_ms): used by rpfs-fuse with a config file.
 * @return as cli_fs_mount(); -EACCES the cluster key was refused
 */
int cli_fs_mount_net(struct cli_fs **out, const char *host, uint16_t port,
		     const struct net_opts *no);

/**
 * cli_fs_mount_net() with a list of mgrs (HOST:PORT each, one of them
 * active): the client follows the active one (cli_mgr_run).
 * @return as cli_fs_mount_net()
 */
int cli_fs_mount_list(struct cli_fs **out, const struct addr_hp *mgrs,
		      int nmgrs, const struct net_opts *no);

/**
 * Run a call on the active mgr: on a standby answer (PROTO_STANDBY), a lost
 * connection or a timeout, move to the mgr the answer names or to the next
 * of the list and send it again, for up to 30 s. With one mgr only a
 * standby answer is retried (a mgr restarting on a shared store), a
 * transport error is returned at once. A "retry later" answer (PROTO_RETRY:
 * the mgr's store is out of reach) is sent again to the same mgr every
 * 200 ms for up to 60 s: a database failover is waited out, not failed.
 * @param[out] retried 1 if an attempt before the last may have run on a
 *	mgr whose answer was lost (a non-idempotent op's retry may then see
 *	its own change: cli_meta.c)
 * @return 0 (call->status is the answer, never PROTO_STANDBY or
 *	PROTO_RETRY), or net_call_run's error, -EHOSTUNREACH no active mgr
 *	answered in time, -EIO the store stayed out of reach for 60 s
 */
int cli_mgr_run(struct cli_fs *fs, struct net_call *call, int *retried);

/** Free everything. No call may be in flight. */
void cli_fs_free(struct cli_fs *fs);

/**
 * Fill a credential. Groups beyond PROTO_MAX_GROUPS are dropped.
 * @param[out] c the credential
 * @param[in] uid, gid caller identity
 * @param[in] groups supplementary groups (may be NULL when n is 0)
 * @param[in] n number of groups
 */
void cli_cred_set(struct proto_cred *c, uint32_t uid, uint32_t gid,
		  const uint32_t *groups, int n);

/** The current wall-clock time in protocol form (a write's mtime). */
struct proto_time cli_now_time(void);

/** CLOCK_MONOTONIC in nanoseconds. */
uint64_t cli_mono_ns(void);

/**
 * Whether iod timed out recently enough that calls to it fail at once
 * (cli_iod.down_until_ns). Cost: one atomic load while the iod is healthy.
 * @param[in] fs the mounted file system
 * @param[in] iod iod table index (< fs->niods)
 * @return 1 while held down, else 0
 */
int cli_iod_held_down(struct cli_fs *fs, uint16_t iod);

/**
 * Per-thread scratch of PROTO_MAX_BODY bytes for request encoding and one for
 * reply bodies, allocated on first use by each thread and freed at thread
 * exit. Used by cli_meta; at most one meta call per thread at a time.
 * @return the buffers, or NULL (out of memory)
 */
uint8_t *cli_tls_reqbuf(void);
uint8_t *cli_tls_repbuf(void);

#endif

/*
 * cfg.h - the cluster config file (/etc/rpfs/rpfs.conf, INI, parsed with
 * inih). One file describes the whole cluster; each program reads the
 * sections it needs and lets its command-line flags override them.
 *
 *   [cluster]  mgr = HOST:PORT, key = PATH (the clients' key), server_key =
 *              PATH (the servers' key; read by the mgr, iods and admin tool
 *              only), transport = tcp|verbs|auto,
 *              insecure = BOOL (serve with no key on a non-loopback address)
 *   [layout]   stripe_unit = SIZE (4K..64M, power of two), stripe_count = N,
 *              mirror = 1|2 (replicas of new files; default 1)
 *   [client]   timeout = SECONDS
 *   [net]      request_timeout = SECONDS (servers: how long a request's
 *              data may take to arrive; also keepalive; default 10),
 *              encrypt = BOOL (keyed TCP: encrypt the sealed streams too;
 *              a connection is encrypted when either side says on)
 *   [mgr]      db = DIR, listen = HOST:PORT, root_squash = BOOL,
 *              resync_rate = MB/s (0..100000, 0 = resync off),
 *              db_size = SIZE (4M..1024G, the namespace map),
 *              xattr_max_count = N (1..65536), xattr_max_bytes = SIZE
 *              (1K..64M; names + values): per-inode xattr caps,
 *              store = lmdb|postgresql (the namespace store; default
 *              lmdb), store_uri = URI (postgresql: a libpq URI)
 *              group_commit = on|off (write ops share one commit)
 *   [iod.N]    host = HOST, port = PORT, data = DIR, listen = HOST (bind
 *              address, default host), credits = N, domain = NAME (failure
 *              domain, 1..63 of [A-Za-z0-9._-]; every iod or none)
 *   [verbs]    poll_mode = busy|adaptive, inline_max, fast_max,
 *              pipeline_unit = SIZE, max_clients = N, device = NAME,
 *              sl_request, sl_reply, sl_control, sl_bulk = 0..15
 *   [metrics]  listen = HOST:PORT: the Prometheus endpoints (metrics.h); the
 *              mgr serves on PORT, iod N on PORT + 1 + N (off when unset)
 *   [log]      level = err|warning|notice|info|debug
 * HOST:PORT and HOST are read by addr_parse (addr.h): IPv6 in brackets.
 *
 * Every error names the file, the line and what was expected, e.g.
 *   rpfs.conf:12: [iod.1] port: expected a number 1..65535, got "70000"
 */
#ifndef RPFS_CFG_H
#define RPFS_CFG_H

#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "net.h"
#include "proto.h"

#define CFG_DEFAULT_PATH "/etc/rpfs/rpfs.conf"
#define CFG_DEFAULT_MGR_PORT 7400
#define CFG_MAX_RESYNC_RATE 100000       /* [mgr] resync_rate, MB/s */
#define CFG_MIN_DB_SIZE (4ull << 20)     /* [mgr] db_size */
#define CFG_MAX_DB_SIZE (1ull << 40)
#define CFG_MAX_XATTR_COUNT 65536        /* [mgr] xattr_max_count */
#define CFG_MIN_XATTR_BYTES 1024u        /* [mgr] xattr_max_bytes */
#define CFG_MAX_XATTR_BYTES (64u << 20)

#define CFG_MAX_MGRS ADDR_MAX_LIST       /* [cluster] mgr = A,B,...: at most */
#define CFG_MIN_LEASE_S 2                /* [mgr] lease, seconds */
#define CFG_MAX_LEASE_S 600

/* One [iod.N] section. */
struct cfg_iod {
	char host[PROTO_MAX_HOST + 1];
	char listen[PROTO_MAX_HOST + 1]; /* bind address; "" = host */
	uint16_t port;
	int credits;     /* 0 = default */
	char domain[64]; /* failure domain; "" = none (STRIPE_MAX_DOMAIN + 1) */
	char *data;      /* data directory (malloc'd), NULL if not given */
	int line;        /* first line of the section, for messages */
};

/* The parsed file. Unset values are 0 / "" / -1 as noted. Immutable after
 * cfg_load; not shared between threads while loading. */
struct cfg {
	char *path;                      /* as given (malloc'd) */
	char mgr_host[PROTO_MAX_HOST + 1]; /* [cluster] mgr (the first of the
					    * list); "" = unset */
	uint16_t mgr_port;
	int nmgrs;                       /* [cluster] mgr = A,B: mgrs[0..n) */
	struct addr_hp mgrs[CFG_MAX_MGRS];
	uint32_t lease_ms;               /* [mgr] lease; 0 = unset */
	char *key_path;                  /* [cluster] key; NULL = none */
	char *srv_key_path;              /* [cluster] server_key; NULL = none */
	int insecure;                    /* [cluster] insecure 0/1, -1 = unset */
	int has_transport;
	enum net_transport transport;
	uint32_t stripe_unit;            /* 0 = unset */
	int stripe_count;                /* -1 = unset */
	uint8_t mirror;                  /* [layout] mirror 1|2; 0 = unset */
	int timeout_ms;                  /* [client] timeout; 0 = unset */
	int tcp_lanes;                   /* [client] connections; 0 = unset */
	int request_timeout_ms;          /* [net] request_timeout; 0 = unset */
	int encrypt;                     /* [net] encrypt */
	char *db;                        /* [mgr] db; NULL = unset */
	char listen_host[PROTO_MAX_HOST + 1]; /* [mgr] listen; "" = unset */
	uint16_t listen_port;
	int root_squash;                 /* 0/1, -1 = unset */
	int group_commit;                /* [mgr] group_commit 0/1, -1 = unset */
	long resync_rate;                /* [mgr] resync_rate MB/s, -1 = unset */
	uint64_t db_size;                /* [mgr] db_size bytes; 0 = unset */
	uint32_t xattr_max_count;        /* [mgr] xattr_max_count; 0 = unset */
	uint32_t xattr_max_bytes;        /* [mgr] xattr_max_bytes; 0 = unset */
	char *store;                     /* [mgr] store: "lmdb" or "postgresql";
					  * NULL = unset */
	char *store_uri;                 /* [mgr] store_uri; NULL = unset */
	int niods;                       /* iods[0..niods-1], ids contiguous */
	struct cfg_iod iods[PROTO_MAX_IODS];
	int has_poll_mode;
	enum net_poll_mode poll_mode;
	uint32_t inline_max, fast_max, pipeline_unit; /* 0 = unset */
	int max_clients;                 /* 0 = unset */
	int sl[NET_CLASS_COUNT];         /* -1 = unset */
	char *rdma_dev;                  /* NULL = unset */
	int log_level;                   /* -1 = unset */
	char metrics_host[PROTO_MAX_HOST + 1]; /* [metrics] listen; "" = unset */
	uint16_t metrics_port;
};

/**
 * Parse a config file.
 * @param[out] out the parsed config, free with cfg_free()
 * @param[in] path the file
 * @param[out] err on failure, "FILE:LINE: what was expected" (or
 *	"FILE: cannot open: ...")
 * @return 0; -ENOENT/-EACCES cannot open; -EINVAL a bad line or value;
 *	-ENOMEM
 */
int cfg_load(struct cfg **out, const char *path, char *err, size_t errcap);

/** Free a config (NULL is fine). */
void cfg_free(struct cfg *c);

/**
 * Apply the transport settings of the file to o: transport, verbs knobs,
 * client timeout, server request timeout, and the cluster key (loaded from key_path).
 * @param[out] err on failure, names the key file and why
 * @return 0, or net_key_load()'s error
 */
int cfg_net_opts(const struct cfg *c, struct net_opts *o, char *err,
		 size_t errcap);

/**
 * Load a key file into o (has_key = 1), with a message naming the file.
 * @return 0, or net_key_load()'s error (-ENOENT, -EACCES, -EPERM, -EINVAL)
 */
int cfg_load_key(const char *path, struct net_opts *o, char *err,
		 size_t errcap);

/**
 * Load the servers' key file into o (has_srv_key = 1): it must be private
 * to its owner (see net_key_load). For the mgr, the iods and the admin
 * tool's server work; never for a mount.
 * @return 0, or net_key_load()'s error (-ENOENT, -EACCES, -EPERM, -EINVAL)
 */
int cfg_load_server_key(const char *path, struct net_opts *o, char *err,
			size_t errcap);

/**
 * Load a server's (mgr, iod) servers' key: from arg (its --server-key) or
 * else the file's server_key; none is fine (a one-key cluster). Call after
 * the clients' key is in o: a servers' key needs one beside it, and the two
 * must differ.
 * @param c the config file, or NULL
 * @param[out] err what is wrong, naming the file
 * @return 0, net_key_load()'s error, or -EINVAL (no clients' key, or the
 *	same key twice)
 */
int cfg_server_keys(const struct cfg *c, const char *arg, struct net_opts *o,
		    char *err, size_t errcap);

/**
 * Parse a size with an optional K, M or G suffix (binary units).
 * @return 0 or -EINVAL
 */
int cfg_parse_size(const char *s, uint64_t *out);


#endif

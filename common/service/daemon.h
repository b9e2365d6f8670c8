/*
 * daemon.h - the start-up scaffolding rpfs-mgr and rpfs-iod share (dmn_):
 * state directories (mkdir -p), the lock file of a directory that holds
 * the daemon's pid, the signals that end the loop, the ready line (log
 * and sd_notify), and, in daemon_metrics.c (built with -Dmetrics), the
 * Prometheus endpoint of a daemon's loop: the HTTP thread, the server's
 * timing by op and a snapshot timer.
 */
#ifndef RPFS_DAEMON_H
#define RPFS_DAEMON_H

#include <ev.h>
#include <pthread.h>
#include <stdint.h>

#include "cfg.h"
#include "metrics.h"
#include "net.h"
#include "opt.h"

/* What every daemon takes from its command line and config file beside
 * its own settings; DMN_OPTS are their entries of its option table. */
struct dmn_args {
	const char *conf;         /* --conf FILE; NULL: none */
	const char *key_path;     /* --key, [cluster] key */
	const char *srv_key_path; /* --server-key ([cluster] server_key is
				   * read by cfg_server_keys) */
	const char *transport;    /* --transport; [cluster] transport comes
				   * through cfg_net_opts */
	int insecure;             /* --insecure, [cluster] insecure */
	int request_timeout_ms;   /* --request-timeout; [net] request_timeout
				   * comes through cfg_net_opts */
	int log_level;            /* --log-level, [log] level */
	struct opt_addr metrics;  /* --metrics, [metrics] listen */
	const char *metrics_what; /* which of the two gave it; NULL: off */
	int listen_warn;          /* dmn_settle: log listen_msg as a warning */
	char listen_msg[PROTO_MAX_HOST + 400];
};

/* The table entries of struct dmn_args member m of struct T (with the
 * default log level), the same in every daemon. */
#define DMN_OPTS(T, m, deflevel)                                              \
	{ .name = "log-level", .kind = OPT_LEVEL, .arg = "LEVEL",             \
	  OPT_AT(T, m.log_level), .def = (deflevel),                          \
	  .what = "err, warning, notice, info, debug or 3..7",                \
	  .key = "[log] level", OPT_CF(log_level, -1),                        \
	  .help = "the least important messages logged (err, warning, "       \
		  "notice, info, debug, or 3..7)" },                          \
	{ .name = "key", .kind = OPT_STRING, .arg = "FILE",                   \
	  OPT_AT(T, m.key_path), .what = "a key file",                        \
	  .key = "[cluster] key", OPT_CF_S(key_path),                         \
	  .help = "the clients' key (rpfs keygen); without one, only a "      \
		  "loopback address is served" },                             \
	{ .name = "server-key", .kind = OPT_STRING, .arg = "FILE",            \
	  OPT_AT(T, m.srv_key_path), .what = "a key file",                    \
	  .key = "[cluster] server_key",                                      \
	  .help = "the servers' key, which alone may do the servers' work: "  \
		  "fence, scrub, purge any orphan (see README)" },            \
	{ .name = "transport", .kind = OPT_STRING, .arg = "tcp|verbs|auto",   \
	  OPT_AT(T, m.transport), .what = "tcp, verbs or auto",               \
	  .check = dmn_transport_check, .defdoc = "tcp ($RPFS_TRANSPORT)",   \
	  .key = "[cluster] transport",                                       \
	  .help = "how clients reach this server" },                          \
	{ .name = "insecure", .kind = OPT_SWITCH, OPT_AT(T, m.insecure),      \
	  .key = "[cluster] insecure", OPT_CF(insecure, -1),                  \
	  .help = "with no cluster key, listen on a non-loopback address "    \
		  "anyway (anyone who can reach it is served)" },             \
	{ .name = "request-timeout", .kind = OPT_MS, .arg = "SECONDS",        \
	  OPT_AT(T, m.request_timeout_ms), .lo = 100, .hi = 86400000,         \
	  .def = NET_DEFAULT_REQUEST_TIMEOUT_MS, .what = "seconds in {lo}..{hi}", \
	  .key = "[net] request_timeout",                                     \
	  .help = "how long a request's data may take to arrive (and the "    \
		  "keepalive)" }

/** An OPT_STRING check: 0 when s is tcp, verbs or auto. */
int dmn_transport_check(const char *s);

/**
 * A daemon's config file and the transport options it gives: o gets the
 * defaults, then, when path is set, the file's (cfg_net_opts: transport,
 * timeouts, verbs knobs, the clients' key).
 * @param[out] conf the file (NULL without path); free with cfg_free
 * @param[out] err on failure, the file's or the key's message
 * @return 0, or cfg_load()'s or cfg_net_opts()'s error
 */
int dmn_load_conf(const char *path, struct cfg **conf, struct net_opts *o,
		  char *err, size_t errcap);

/**
 * The [metrics] listen of f under --metrics: when the flag was not given
 * and f has the key, its host and its port + offset (a port of 0 stays
 * 0), and metrics_what names the key.
 * @return 0; -ERANGE the port + offset is past 65535 (nothing set)
 */
int dmn_metrics_conf(struct dmn_args *d, const struct cfg *f, int given,
		     long offset);

/**
 * Settle a daemon's transport options once its flags and file are merged:
 * the --key file (unless it is the file's, loaded already), the servers'
 * key (cfg_server_keys), --transport, --request-timeout (when given), and
 * the no-key rule for the listen address (addr_listen_check; a warning to
 * log after log_init is left in d->listen_msg, d->listen_warn).
 * @param[out] err on failure, one line ("--key: key file ...: ...")
 * @return 0, a key's error (-ENOENT, -EACCES, -EPERM, -EINVAL), -EPERM
 *	refused listen address
 */
int dmn_settle(struct dmn_args *d, const struct cfg *conf, int rt_given,
	       const struct opt_addr *listen, struct net_opts *o, char *err,
	       size_t errcap);

/**
 * mkdir -p: create dir and its missing parents (parents 0755, dir itself
 * 0700); existing ones are fine.
 * @return 0; -EINVAL dir is ""; -ENAMETOOLONG; mkdir's -errno (EACCES,
 *	ENOTDIR, EROFS, ENOSPC, ...)
 */
int dmn_mkdir_p(const char *dir);

/**
 * Take DIR/.lock (created 0600) exclusively with flock and write this
 * process's pid into it, so that two daemons never share DIR. Keep the fd
 * open for the life of the process.
 * @return the fd; -EWOULDBLOCK another process holds it; -ENAMETOOLONG;
 *	open's -errno
 */
int dmn_lock_dir(const char *dir);

/* The SIGTERM and SIGINT watchers of a daemon's loop. Loop thread. */
struct dmn_signals {
	ev_signal term, intr;
	volatile int stopped; /* a signal asked the daemon to stop */
};

/**
 * Watch SIGTERM and SIGINT in loop: each logs "signal N: shutting down",
 * sets s->stopped and breaks the loop.
 */
void dmn_signals_start(struct dmn_signals *s, struct ev_loop *loop);

/** Stop the watchers of dmn_signals_start. */
void dmn_signals_stop(struct dmn_signals *s, struct ev_loop *loop);

/** Log "ready: STATUS" (notice) and tell systemd READY=1 with STATUS. */
void dmn_ready(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct dmn_metrics;

/* What kind of endpoint a program serves: its metrics struct (struct
 * dmn_metrics first, then its own part) and its callbacks. Each program's
 * metrics file defines one (zeroed when built without metrics). */
struct dmn_metrics_kind {
	size_t size;               /* the program's struct */
	size_t priv_off, priv_size; /* its own part, copied in from priv */
	/* loop thread, once a second and once at start: copy loop-only
	 * numbers into the program's snapshot under d->lock */
	void (*on_tick)(struct dmn_metrics *d);
	metrics_fn write;          /* the families; its argument is the
				    * program's struct (HTTP thread) */
};

/* Where an endpoint serves and what it times. loop and srv must outlive
 * it. */
struct dmn_metrics_src {
	const char *what;          /* "--metrics" or "[metrics] listen" */
	const char *host;
	uint16_t port;             /* 0: a free port */
	struct ev_loop *loop;
	struct net_server *srv;    /* timed by op */
};

/* A daemon's endpoint, first in the program's metrics struct. ops is
 * atomics; lock guards the program's snapshot. */
struct dmn_metrics {
	struct metrics_srv *http;
	struct metrics_ops *ops;   /* the server's latency by op */
	struct ev_loop *loop;
	struct net_server *srv;
	void (*on_tick)(struct dmn_metrics *d);
	ev_timer tick;             /* loop: on_tick every second */
	pthread_mutex_t lock;
};

/**
 * Allocate a program's metrics struct of kind k (priv, k->priv_size bytes,
 * copied into its own part), serve /metrics on src's address from an
 * HTTP thread, time every request of src->srv by op into ops, and run
 * k->on_tick every second. Logs "metrics on http://HOST:PORT/metrics".
 * @param[out] out the program's struct, for dmn_metrics_stop
 * @param[out] err on failure one line naming src->what and why
 * @return 0, or metrics_start()'s error (-EADDRINUSE, -EINVAL, ...),
 *	-ENOMEM, -ENOTSUP (built without libmicrohttpd)
 */
int dmn_metrics_start(struct dmn_metrics **out, const struct dmn_metrics_kind *k,
		      const struct dmn_metrics_src *src, const void *priv,
		      char *err, size_t errcap);

/** Stop the HTTP thread and the timer (the server stops timing) and free
 * the program's struct. NULL is fine. Loop thread. */
void dmn_metrics_stop(struct dmn_metrics *d);

#endif

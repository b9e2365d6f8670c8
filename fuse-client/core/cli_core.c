/*
 * cli_core.c - mounting: the transport client, the mgr connection, the MOUNT
 * exchange and the iod table; plus the per-thread scratch buffers the
 * metadata calls encode into and receive into.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_core.h"
#include "cli_inode.h"
#include "cli_mirror.h"
#include "log.h"

/* Per-thread scratch: request and reply bodies of one metadata call. */
struct cli_tls {
	uint8_t req[PROTO_MAX_BODY];
	uint8_t rep[PROTO_MAX_BODY];
};

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static __thread struct cli_tls *tls_cur;

/* Thread-exit destructor of the scratch buffers. */
static void tls_free(void *p)
{
	free(p);
}

/* Create the key whose destructor frees a thread's scratch at exit. */
static void tls_key_init(void)
{
	(void)pthread_key_create(&tls_key, tls_free);
}

/* The calling thread's scratch, allocated on first use. Cost: one malloc of
 * 256 KiB per thread lifetime (only touched pages are faulted in). */
static struct cli_tls *tls_get(void)
{
	if (tls_cur)
		return tls_cur;
	pthread_once(&tls_once, tls_key_init);
	tls_cur = malloc(sizeof(*tls_cur));
	if (tls_cur)
		(void)pthread_setspecific(tls_key, tls_cur);
	return tls_cur;
}

/* Request scratch of the calling thread (see cli_core.h). */
uint8_t *cli_tls_reqbuf(void)
{
	struct cli_tls *t = tls_get();

	return t ? t->req : NULL;
}

/* Reply scratch of the calling thread (see cli_core.h). */
uint8_t *cli_tls_repbuf(void)
{
	struct cli_tls *t = tls_get();

	return t ? t->rep : NULL;
}

/* The current wall-clock time in protocol form. */
struct proto_time cli_now_time(void)
{
	struct timespec ts;
	struct proto_time t;

	clock_gettime(CLOCK_REALTIME, &ts);
	t.sec = ts.tv_sec;
	t.nsec = (uint32_t)ts.tv_nsec;
	return t;
}

/* See cli_core.h. */
uint64_t cli_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* See cli_core.h. */
int cli_iod_held_down(struct cli_fs *fs, uint16_t iod)
{
	struct cli_iod *d = &fs->iods[iod];

	if (!atomic_load_explicit(&d->failing, memory_order_relaxed))
		return 0;
	return cli_mono_ns() < atomic_load_explicit(&d->down_until_ns,
						    memory_order_relaxed);
}

/* Fill a credential, capping the group list at PROTO_MAX_GROUPS. */
void cli_cred_set(struct proto_cred *c, uint32_t uid, uint32_t gid,
		  const uint32_t *groups, int n)
{
	memset(c, 0, sizeof(*c));
	c->uid = uid;
	c->gid = gid;
	if (n < 0)
		n = 0;
	if (n > PROTO_MAX_GROUPS)
		n = PROTO_MAX_GROUPS;
	for (int i = 0; i < n; i++)
		c->groups[i] = groups[i];
	c->ngroups = (uint16_t)n;
}

/* Run MOUNT against the mgr and copy the iod table into fs. Strings in the
 * decoded reply point into the scratch buffer, so they are copied here. */
static int fs_fetch_table(struct cli_fs *fs)
{
	struct proto_mreq m;
	struct proto_mount *mt;
	struct net_call call;
	struct wbuf w;
	const char *why = "?";
	uint8_t *req = cli_tls_reqbuf(), *rep = cli_tls_repbuf();
	int rc, retried;

	if (!req || !rep)
		return -ENOMEM;
	memset(&m, 0, sizeof(m));
	cli_cred_set(&m.cred, 0, 0, NULL, 0);
	wb_init(&w, req, PROTO_MAX_BODY);
	rc = proto_mreq_encode(&w, PROTO_OP_MOUNT, &m);
	if (rc)
		return rc;
	memset(&call, 0, sizeof(call));
	call.op = PROTO_OP_MOUNT;
	call.body = req;
	call.body_len = (uint32_t)w.len;
	call.rep_buf = rep;
	call.rep_cap = PROTO_MAX_BODY;
	rc = cli_mgr_run(fs, &call, &retried);
	if (rc)
		return rc;
	if (call.status)
		return call.status < 0 ? call.status : -EPROTO;
	mt = malloc(sizeof(*mt)); /* ~8 KiB, once per mount */
	if (!mt)
		return -ENOMEM;
	rc = proto_mount_decode(rep, call.rep_len, mt, &why);
	if (rc) {
		log_err("mgr %s:%u: malformed MOUNT reply (%s)", fs->mgr_host,
			fs->mgr_port, why);
		goto out_free_mt;
	}
	if (mt->niods == 0) {
		log_err("mgr %s:%u: MOUNT reply has no iods", fs->mgr_host,
			fs->mgr_port);
		rc = -EINVAL;
		goto out_free_mt;
	}
	fs->fsid = mt->fsid;
	fs->deflayout = mt->deflayout;
	fs->ngroups = mt->ngroups;
	memcpy(fs->groups, mt->groups, mt->ngroups * sizeof(*mt->groups));
	fs->iods = calloc(mt->niods, sizeof(*fs->iods));
	if (!fs->iods) {
		rc = -ENOMEM;
		goto out_free_mt;
	}
	fs->niods = mt->niods;
	for (uint16_t i = 0; i < mt->niods; i++) {
		struct cli_iod *d = &fs->iods[i];
		const struct proto_iod *s = &mt->iods[i];

		if (s->id != i || s->host.len == 0 ||
		    s->host.len > PROTO_MAX_HOST || s->port == 0) {
			log_err("mgr %s:%u: bad iod entry %u in MOUNT reply",
				fs->mgr_host, fs->mgr_port, i);
			rc = -EINVAL;
			goto out_free_mt;
		}
		d->id = i;
		d->port = s->port;
		memcpy(d->host, s->host.p, s->host.len);
		d->host[s->host.len] = '\0';
		rc = net_conn_new(fs->net, d->host, d->port, &d->conn);
		if (rc)
			goto out_free_mt;
	}
	rc = 0;
out_free_mt:
	free(mt);
	return rc;
}

/* Mount with default transport options: see cli_core.h. */
int cli_fs_mount(struct cli_fs **out, const char *host, uint16_t port,
		 const struct cli_opts *o)
{
	struct net_opts no;

	net_opts_default(&no);
	if (o && o->timeout_ms > 0)
		no.timeout_ms = o->timeout_ms;
	return cli_fs_mount_net(out, host, port, &no);
}

/* Mount one mgr: see cli_core.h. */
int cli_fs_mount_net(struct cli_fs **out, const char *host, uint16_t port,
		     const struct net_opts *nopts)
{
	struct addr_hp m;

	if (!host || !*host || strlen(host) > PROTO_MAX_HOST || port == 0)
		return -EINVAL;
	snprintf(m.host, sizeof(m.host), "%s", host);
	m.port = port;
	return cli_fs_mount_list(out, &m, 1, nopts);
}

/* Mount a list of mgrs: see cli_core.h. */
int cli_fs_mount_list(struct cli_fs **out, const struct addr_hp *mgrs,
		      int nmgrs, const struct net_opts *nopts)
{
	struct net_opts no = *nopts;
	struct cli_fs *fs;
	int rc;

	if (nmgrs < 1 || nmgrs > ADDR_MAX_LIST)
		return -EINVAL;
	for (int i = 0; i < nmgrs; i++)
		if (!mgrs[i].host[0] || mgrs[i].port == 0)
			return -EINVAL;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	fs->nmgrs = nmgrs;
	memcpy(fs->mgr_list, mgrs, nmgrs * sizeof(*mgrs));
	snprintf(fs->mgr_host, sizeof(fs->mgr_host), "%s", mgrs[0].host);
	fs->mgr_port = mgrs[0].port;
	fs->timeout_ms = no.timeout_ms;
	pthread_mutex_init(&fs->stale_lock, NULL);
	atomic_init(&fs->read_turn, cli_mirror_seed());
	rc = cli_itab_new(&fs->itab);
	if (rc)
		goto out_free_fs;
	rc = net_client_new(&fs->net, &no);
	if (rc)
		goto out_free_itab;
	for (int i = 0; i < nmgrs; i++) {
		rc = net_conn_new(fs->net, fs->mgr_list[i].host,
				  fs->mgr_list[i].port, &fs->mgrs[i]);
		if (rc)
			goto out_free_net;
	}
	fs->mgr = fs->mgrs[0];
	rc = fs_fetch_table(fs);
	if (rc)
		goto out_free_net;
	*out = fs;
	return 0;

out_free_net:
	net_client_free(fs->net); /* closes the connections */
	free(fs->iods);
out_free_itab:
	cli_itab_free(fs->itab);
out_free_fs:
	pthread_mutex_destroy(&fs->stale_lock);
	free(fs);
	return rc;
}

/* Unmount: free the transport (with its connections) and the tables. */
void cli_fs_free(struct cli_fs *fs)
{
	if (!fs)
		return;
	net_client_free(fs->net);
	free(fs->iods);
	cli_itab_free(fs->itab);
	cli_mirror_free(fs);
	pthread_mutex_destroy(&fs->stale_lock);
	free(fs);
}

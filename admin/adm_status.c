/*
 * adm_status.c - `rpfs status` and `rpfs stats --server`: ask running
 * servers over the transport (with the cluster key) for their STATUS.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "net.h"
#include "opt.h"
#include "proto.h"
#include "adm.h"

#define ADM_EXTRA_LEN 128 /* ", group G, stale objects: C, resynced: ..." */

/* Command line of status / stats --server. */
struct adm_args {
	const char *conf;
	const char *key;
	struct opt_addr server;             /* stats --server */
	int have_addr;                      /* --mgr or --server given */
	struct addr_hp mgrs[ADDR_MAX_LIST]; /* status --mgr A,B: the list */
	int nmgrs;
	double timeout;
	char host[PROTO_MAX_HOST + 1];      /* status: the active mgr */
	uint16_t port;
};

/* The --mgr parser (opt.h OPT_CUSTOM): HOST:PORT[,HOST:PORT...] into
 * a->mgrs (a later --mgr replaces the list). @return 0, -EINVAL */
static int parse_mgrs(const struct opt *o, const char *name, const char *s,
		      void *args, char *err, size_t errcap)
{
	struct adm_args *a = args;

	(void)o;
	return addr_parse_list(name, s, 0, a->mgrs, &a->nmgrs, err, errcap) ?
	       -EINVAL : 0;
}

/* The options both status and stats --server take: --conf (with the
 * default d and help h), --key and --timeout; each table adds its server
 * flag. */
#define ADM_OPT_CONF(d, h) \
	{ .name = "conf", .kind = OPT_STRING, .flags = OPT_EMPTY, .arg = "FILE", \
	  OPT_AT(struct adm_args, conf), .defdoc = (d), .help = (h) }
#define ADM_OPT_KEY \
	{ .name = "key", .kind = OPT_STRING, .flags = OPT_EMPTY, .arg = "FILE", \
	  OPT_AT(struct adm_args, key), \
	  .help = "the clients' key (wins over the config file's)" }
#define ADM_OPT_TIMEOUT \
	{ .name = "timeout", .kind = OPT_SECONDS, .flags = OPT_ABOVE, .arg = "S", \
	  OPT_AT(struct adm_args, timeout), .lo = 0, .hi = 3600000, \
	  .def = 2000, .what = "seconds above {lo}, at most {hi}", \
	  .help = "how long to wait for a server's answer" }

/* rpfs status's options. */
static const struct opt status_opts[] = {
	ADM_OPT_CONF("$RPFS_CONF or " CFG_DEFAULT_PATH,
		     "the config file: its [cluster] mgr, iods and key (with "
		     "--mgr, read only when given)"),
	{ .name = "mgr", .kind = OPT_CUSTOM, .arg = "HOST:PORT[,HOST:PORT...]",
	  .parse = parse_mgrs,
	  .help = "the mgrs to ask, not the config file's [cluster] mgr" },
	ADM_OPT_KEY,
	ADM_OPT_TIMEOUT,
};

/* See adm.h. */
const struct opt_prog adm_status_prog = {
	.name = "rpfs status",
	.usage = "usage: rpfs " USAGE_STATUS,
	.opts = status_opts,
	.nopts = sizeof(status_opts) / sizeof(status_opts[0]),
};

/* rpfs stats --server's options. */
static const struct opt stats_opts[] = {
	{ .name = "server", .kind = OPT_ADDR, .arg = "HOST:PORT",
	  OPT_AT(struct adm_args, server),
	  .help = "the server to ask (without it: stats PATH)" },
	ADM_OPT_CONF(NULL, "a config file, for its key"),
	ADM_OPT_KEY,
	ADM_OPT_TIMEOUT,
};

/* See adm.h. */
const struct opt_prog adm_stats_prog = {
	.name = "rpfs stats",
	.usage = "usage: rpfs " USAGE_STATS,
	.opts = stats_opts,
	.nopts = sizeof(stats_opts) / sizeof(stats_opts[0]),
};

/* Parse the command line of p (adm_status_prog or adm_stats_prog) into a.
 * @return ADM_OK, ADM_USAGE (reported), OPT_HELP after --help */
static int adm_parse(const struct opt_prog *p, int argc, char **argv,
		     struct adm_args *a)
{
	char err[PROTO_MAX_HOST * 2 + 300];
	uint64_t given;
	int rc;

	memset(a, 0, sizeof(*a));
	opt_defaults(p, a);
	rc = opt_parse(p, argc, argv, a, &given, err, sizeof(err));
	if (rc == OPT_HELP)
		return OPT_HELP;
	if (rc) {
		fprintf(stderr, "rpfs: %s\n", err);
		return ADM_USAGE;
	}
	a->have_addr = opt_given(p, given, p == &adm_status_prog ? "mgr" :
				 "server");
	return ADM_OK;
}

/* One STATUS exchange. @return 0, or -errno (transport or server) */
static int adm_call_status(struct net_conn *c, uint8_t *rep, uint32_t cap,
			   struct proto_status *st)
{
	struct net_call call;
	const char *why = "?";
	int rc;

	memset(&call, 0, sizeof(call));
	call.op = PROTO_OP_STATUS;
	call.rep_buf = rep;
	call.rep_cap = cap;
	rc = net_call_run(c, &call);
	if (rc)
		return rc;
	if (call.status)
		return call.status < 0 ? call.status : -EPROTO;
	return proto_status_decode(rep, call.rep_len, st, &why);
}

/* See rpfs.h: MOUNT against the mgr into a caller-owned table. */
int adm_call_mount(struct net_conn *c, uint8_t *req, uint8_t *rep,
			  struct proto_mount *mt)
{
	struct proto_mreq m;
	struct net_call call;
	struct wbuf w;
	const char *why = "?";
	int rc;

	memset(&m, 0, sizeof(m));
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
	rc = net_call_run(c, &call);
	if (rc)
		return rc;
	if (call.status)
		return call.status < 0 ? call.status : -EPROTO;
	return proto_mount_decode(rep, call.rep_len, mt, &why);
}

/* Human size of n bytes into buf. */
static const char *adm_size(uint64_t n, char *buf, size_t cap)
{
	static const char units[] = "BKMGTPE";
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 6)
		v /= 1024, u++;
	snprintf(buf, cap, u ? "%.1f%c" : "%.0f%c", v, units[u]);
	return buf;
}

/* Print one row of the status table, extra ("" or ", ...") at its end;
 * returns 1 if the server is up, 2 if it is a mgr standing by (several
 * mgrs on one store: its STATUS gets the standby answer), 0 if down. */
static int adm_row(struct net_client *cl, const char *role, int id,
		   const char *host, uint16_t port, uint8_t *rep,
		   const char *extra)
{
	struct proto_status st;
	struct net_conn *c;
	char addr[ADDR_STRLEN], used[16], total[16], idtxt[8];
	int rc;

	addr_format(addr, sizeof(addr), host, port);
	snprintf(idtxt, sizeof(idtxt), id < 0 ? "-" : "%d", id);
	rc = net_conn_new(cl, host, port, &c);
	if (rc == 0)
		rc = adm_call_status(c, rep, PROTO_MAX_BODY, &st);
	if (rc == PROTO_STANDBY) {
		printf("%-4s %-3s %-24s %-5s %-20s %s%s\n", role, idtxt, addr,
		       "standby", "-", "not the active mgr", extra);
		return 2;
	}
	if (rc) {
		printf("%-4s %-3s %-24s %-5s %-20s %s%s\n", role, idtxt, addr, "down",
		       "-", strerror(-rc), extra);
		return 0;
	}
	uint64_t bs = st.st.bsize;
	adm_size(st.st.blocks * bs, total, sizeof(total));
	adm_size((st.st.blocks - st.st.bfree) * bs, used, sizeof(used));
	char cap[40];
	snprintf(cap, sizeof(cap), "%s/%s", used, total);
	printf("%-4s %-3s %-24s %-5s %-20s %.*s (up %llus)%s\n", role, idtxt, addr,
	       "up", cap, (int)st.version.len, st.version.p,
	       (unsigned long long)st.uptime_s, extra);
	return 1;
}

/*
 * The mirror suffix of each iod's row: ", group G, stale objects: C,
 * resynced: D (B bytes)" for the iods in a mirror group (C, the stale
 * records left, and D and B, what the mgr's resync repaired and copied to
 * the iod since the mgr started, from STALE_COUNT; "stale objects: ?" if
 * that failed), "" for the others and when the fs has no group.
 */
static void adm_stale_extra(struct net_conn *mgr, const struct proto_mount *mt,
			    uint8_t *rep, char (*extra)[ADM_EXTRA_LEN])
{
	static struct proto_stalecnt cnt;
	struct net_call call;
	const char *why = "?";
	int rc;

	for (uint16_t i = 0; i < mt->niods; i++)
		extra[i][0] = '\0';
	if (mt->ngroups == 0)
		return;
	memset(&call, 0, sizeof(call));
	call.op = PROTO_OP_STALE_COUNT;
	call.rep_buf = rep;
	call.rep_cap = PROTO_MAX_BODY;
	rc = net_call_run(mgr, &call);
	if (!rc && call.status)
		rc = call.status < 0 ? call.status : -EPROTO;
	if (!rc)
		rc = proto_stalecnt_decode(rep, call.rep_len, &cnt, &why);
	for (uint16_t g = 0; g < mt->ngroups; g++) {
		for (int r = 0; r < 2; r++) {
			uint16_t i = mt->groups[g].iod[r];

			if (rc || i >= cnt.n)
				snprintf(extra[i], sizeof(extra[i]),
					 ", group %u, stale objects: ?", g);
			else
				snprintf(extra[i], sizeof(extra[i]),
					 ", group %u, stale objects: %llu, "
					 "resynced: %llu (%llu bytes)", g,
					 (unsigned long long)cnt.count[i],
					 (unsigned long long)cnt.done[i],
					 (unsigned long long)cnt.bytes[i]);
		}
	}
}

/*
 * The mgr rows: every mgr of the list, the active one, the standbys and
 * the down ones; the first that is up (active) into a->host, a->port.
 * @param[out] down the servers down, counted on
 * @return 0 an active mgr answered, -EHOSTUNREACH none did
 */
static int status_mgrs(struct net_client *cl, struct adm_args *a,
		       uint8_t *rep, int *down)
{
	int rc = -EHOSTUNREACH;

	for (int i = 0; i < a->nmgrs; i++) {
		int up = adm_row(cl, "mgr", a->nmgrs > 1 ? i : -1, a->mgrs[i].host,
				 a->mgrs[i].port, rep, "");

		*down += !up;
		if (up == 1 && rc) {
			snprintf(a->host, sizeof(a->host), "%s", a->mgrs[i].host);
			a->port = a->mgrs[i].port;
			rc = 0;
		}
	}
	if (a->nmgrs > 1 && rc)
		printf("no active mgr among the %d\n", a->nmgrs);
	return rc;
}

/*
 * The iod rows: the iod table from the active mgr at a->host (mgr_rc 0),
 * with each mirrored iod's stale counts, else from the config file.
 * @return the iods down
 */
static int status_iods(struct net_client *cl, const struct adm_args *a,
		       const struct cfg *conf, int mgr_rc)
{
	static uint8_t req[PROTO_MAX_BODY], rep[PROTO_MAX_BODY];
	static char hosts[PROTO_MAX_IODS][PROTO_MAX_HOST + 1];
	static char extra[PROTO_MAX_IODS][ADM_EXTRA_LEN];
	static struct proto_mount mt;
	struct net_conn *mgr;
	int down = 0;

	if (mgr_rc == 0)
		mgr_rc = net_conn_new(cl, a->host, a->port, &mgr);
	if (mgr_rc == 0)
		mgr_rc = adm_call_mount(mgr, req, rep, &mt);
	if (mgr_rc == 0) {
		for (uint16_t i = 0; i < mt.niods; i++)
			snprintf(hosts[i], sizeof(hosts[i]), "%.*s",
				 (int)mt.iods[i].host.len, mt.iods[i].host.p);
		adm_stale_extra(mgr, &mt, rep, extra);
		for (uint16_t i = 0; i < mt.niods; i++)
			down += !adm_row(cl, "iod", i, hosts[i], mt.iods[i].port, rep,
					 extra[i]);
	} else if (conf) {
		for (int i = 0; i < conf->niods; i++)
			down += !adm_row(cl, "iod", i, conf->iods[i].host,
					 conf->iods[i].port, rep, "");
	} else {
		fprintf(stderr, "rpfs status: cannot get the iod table from the mgr "
			"(%s); give --conf to check the iods\n", strerror(-mgr_rc));
	}
	return down;
}

/* See rpfs.h. */
int adm_status(int argc, char **argv)
{
	static uint8_t rep[PROTO_MAX_BODY];
	struct adm_args a;
	struct cfg *conf = NULL;
	struct net_client *cl;
	struct net_opts no;
	int rc, down = 0, mgr_rc;

	rc = adm_parse(&adm_status_prog, argc, argv, &a);
	if (rc)
		return rc == OPT_HELP ? ADM_OK : rc;
	if (!a.have_addr && !a.conf)
		a.conf = getenv("RPFS_CONF") && *getenv("RPFS_CONF") ?
			 getenv("RPFS_CONF") : CFG_DEFAULT_PATH;
	rc = adm_load(a.conf, a.key, NULL, 0, &conf, &no);
	if (rc)
		return rc;
	if (!a.have_addr && !conf->nmgrs) {
		fprintf(stderr, "rpfs status: %s: no [cluster] mgr (or use --mgr "
			"HOST:PORT[,HOST:PORT...])\n", conf->path);
		cfg_free(conf);
		return ADM_CONFIG;
	}
	if (!a.have_addr) {
		memcpy(a.mgrs, conf->mgrs, sizeof(a.mgrs));
		a.nmgrs = conf->nmgrs;
	}
	no.timeout_ms = (int)(a.timeout * 1000);
	rc = net_client_new(&cl, &no);
	if (rc) {
		fprintf(stderr, "rpfs status: %s\n", strerror(-rc));
		cfg_free(conf);
		return ADM_FAIL;
	}
	printf("%-4s %-3s %-24s %-5s %-20s %s\n", "ROLE", "ID", "ADDRESS", "STATE",
	       "USED/TOTAL", "VERSION");
	mgr_rc = status_mgrs(cl, &a, rep, &down);
	down += status_iods(cl, &a, conf, mgr_rc);
	net_client_free(cl);
	cfg_free(conf);
	if (down)
		printf("%d server%s down\n", down, down > 1 ? "s" : "");
	return down ? ADM_FAIL : ADM_OK;
}

/* See rpfs.h. */
int adm_stats_server(int argc, char **argv)
{
	static uint8_t rep[PROTO_MAX_BODY];
	struct proto_status st;
	struct adm_args a;
	struct cfg *conf = NULL;
	struct net_client *cl;
	struct net_conn *c;
	struct net_opts no;
	int rc;

	rc = adm_parse(&adm_stats_prog, argc, argv, &a);
	if (rc)
		return rc == OPT_HELP ? ADM_OK : rc;
	if (!a.have_addr) {
		fprintf(stderr, "rpfs stats: --server HOST:PORT required\n");
		return ADM_USAGE;
	}
	rc = adm_load(a.conf, a.key, NULL, 0, &conf, &no);
	if (rc)
		return rc;
	no.timeout_ms = (int)(a.timeout * 1000);
	rc = net_client_new(&cl, &no);
	if (rc == 0) {
		rc = net_conn_new(cl, a.server.host, a.server.port, &c);
		if (rc == 0)
			rc = adm_call_status(c, rep, sizeof(rep), &st);
		if (rc == 0)
			printf("%.*s\n", (int)st.stats.len, st.stats.p);
		net_client_free(cl);
	}
	cfg_free(conf);
	if (rc) {
		char addr[ADDR_STRLEN];

		fprintf(stderr, "rpfs stats: %s: %s\n",
			addr_format(addr, sizeof(addr), a.server.host, a.server.port),
			strerror(-rc));
		return ADM_FAIL;
	}
	return ADM_OK;
}

/* srv_status.c - answer PROTO_OP_STATUS; see srv_status.h. */
#include "srv_status.h"
#include "log.h"

#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

/* What STATUS reports (loop thread only). */
static const char *srvstat_role = "?";
static const char *srvstat_dir = "/";
static uint16_t srvstat_id;
static struct net_server *srvstat_srv;
static time_t srvstat_start;
static uint8_t srvstat_rep[PROTO_MAX_STATUS_JSON + 1024]; /* reply body */
static char srvstat_json[PROTO_MAX_STATUS_JSON];
static srvstat_extra_fn srvstat_extra_cb; /* the daemon's own counters */
static void *srvstat_extra_arg;

/* See srv_status.h. */
void srvstat_init(const char *role, uint16_t id, const char *dir,
		  struct net_server *srv)
{
	struct timespec ts;

	srvstat_role = role;
	srvstat_id = id;
	srvstat_dir = dir;
	srvstat_srv = srv;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	srvstat_start = ts.tv_sec;
}

/* See srv_status.h. */
void srvstat_extra(srvstat_extra_fn fn, void *arg)
{
	srvstat_extra_cb = fn;
	srvstat_extra_arg = arg;
}

/* Put the extra counters into the JSON object of n bytes in json (ending
 * in '}'), before its brace. @return the new length; n as it was when
 * they do not fit (logged) */
static int srvstat_add_extra(char *json, int n, size_t cap)
{
	int k;

	if (!srvstat_extra_cb || n < 2 || json[n - 1] != '}')
		return n;
	json[n - 1] = ',';
	k = srvstat_extra_cb(json + n, cap - (size_t)n - 1, srvstat_extra_arg);
	if (k <= 0 || (size_t)k >= cap - (size_t)n - 1) {
		if (k != 0)
			log_err("STATUS: the daemon's counters do not fit");
		json[n - 1] = '}';
		json[n] = '\0';
		return n;
	}
	json[n + k] = '}';
	json[n + k + 1] = '\0';
	return n + k + 1;
}

/* See srv_status.h. */
void srvstat_handle(struct net_sreq *r)
{
	struct proto_status st;
	struct net_stats ns;
	struct statvfs sv;
	struct timespec ts;
	struct wbuf w;
	int n, rc;

	if (r->body_len || r->hdr.bulk_len || r->hdr.aux) {
		net_sreq_reject(r, "STATUS request with a body");
		return;
	}
	memset(&st, 0, sizeof(st));
	st.role = (struct proto_str){ srvstat_role, (uint32_t)strlen(srvstat_role) };
	st.version = (struct proto_str){ RPFS_VERSION, sizeof(RPFS_VERSION) - 1 };
	st.id = srvstat_id;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	st.uptime_s = (uint64_t)(ts.tv_sec - srvstat_start);
	if (statvfs(srvstat_dir, &sv) == 0) {
		st.st.bsize = sv.f_frsize;
		st.st.blocks = sv.f_blocks;
		st.st.bfree = sv.f_bfree;
		st.st.bavail = sv.f_bavail;
		st.st.files = sv.f_files;
		st.st.ffree = sv.f_ffree;
		st.st.namemax = (uint32_t)sv.f_namemax;
	}
	memset(&ns, 0, sizeof(ns));
	if (srvstat_srv)
		net_server_stats(srvstat_srv, &ns);
	n = net_stats_json(&ns, srvstat_srv ? net_server_transport(srvstat_srv) : "?",
			   srvstat_json, sizeof(srvstat_json));
	if (n < 0)
		n = 0;
	n = srvstat_add_extra(srvstat_json, n, sizeof(srvstat_json));
	st.stats = (struct proto_str){ srvstat_json, (uint32_t)n };
	wb_init(&w, srvstat_rep, sizeof(srvstat_rep));
	rc = proto_status_encode(&w, &st);
	if (rc) {
		log_err("STATUS reply does not encode: %d", rc);
		net_sreq_reply(r, -EIO, NULL, 0);
		return;
	}
	net_sreq_reply(r, 0, srvstat_rep, (uint32_t)w.len);
}

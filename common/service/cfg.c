/* cfg.c - parse the cluster config file with inih; see cfg.h. */
#include "cfg.h"
#include "log.h"
#include "net_auth.h"
#include "stripe.h"

#include <errno.h>
#include <ini.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Parser state: inih calls the handler once per key; the line number comes
 * from counting the reader's calls (the packaged inih has no line argument). */
struct cfg_parse {
	struct cfg *c;
	FILE *f;
	int line;             /* line last handed to inih */
	char *err;
	size_t errcap;
	int failed;           /* an error was recorded */
	char last_sec[64];    /* section of the previous key */
	uint8_t iod_seen[PROTO_MAX_IODS]; /* 1 once [iod.N] had a key */
};

/* Record the first error as "FILE:LINE: msg". */
static int cfg_fail(struct cfg_parse *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (p->failed)
		return 0;
	p->failed = 1;
	n = snprintf(p->err, p->errcap, "%s:%d: ", p->c->path, p->line);
	if (n < 0 || (size_t)n >= p->errcap)
		return 0;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errcap - n, fmt, ap);
	va_end(ap);
	return 0;
}

/* inih reader: one line per call, counted for messages. A line longer
 * than inih's buffer (num - 1 bytes) is an error, not a silent cut (a cut
 * HOST:PORT would read as another address): parsing stops there. */
static char *cfg_reader(char *str, int num, void *stream)
{
	struct cfg_parse *p = stream;
	char *r = fgets(str, num, p->f);

	if (!r)
		return NULL;
	p->line++;
	if (!strchr(r, '\n') && !feof(p->f)) {
		cfg_fail(p, "line longer than %d bytes", num - 2);
		return NULL;
	}
	return r;
}

/* An address key through addr_parse, its message prefixed with the line.
 * @return 1 ok, 0 an error recorded (inih's convention) */
static int cfg_addr(struct cfg_parse *p, const char *what, const char *v,
		    unsigned flags, char *host, size_t cap, uint16_t *port)
{
	char msg[PROTO_MAX_HOST * 2 + 200];

	if (addr_parse(what, v, flags, host, cap, port, msg, sizeof(msg)))
		return cfg_fail(p, "%s", msg);
	return 1;
}

/* Parse a size with K/M/G suffix; see cfg.h. */
int cfg_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	if (*end == 'k' || *end == 'K')
		shift = 10, end++;
	else if (*end == 'm' || *end == 'M')
		shift = 20, end++;
	else if (*end == 'g' || *end == 'G')
		shift = 30, end++;
	if (*end || v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

/* Parse an integer in [lo, hi]. @return 0 or -EINVAL */
static int cfg_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Parse a boolean. @return 0/1 or -EINVAL */
static int cfg_bool(const char *s)
{
	if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") ||
	    !strcasecmp(s, "on") || !strcmp(s, "1"))
		return 1;
	if (!strcasecmp(s, "false") || !strcasecmp(s, "no") ||
	    !strcasecmp(s, "off") || !strcmp(s, "0"))
		return 0;
	return -EINVAL;
}

/* Copy a path value. @return 0 or an error recorded */
static int cfg_path(struct cfg_parse *p, const char *sec, const char *key,
		    const char *v, char **dst)
{
	if (!v[0])
		return cfg_fail(p, "[%s] %s: expected a path, got \"\"", sec, key);
	free(*dst);
	*dst = strdup(v);
	if (!*dst)
		return cfg_fail(p, "out of memory");
	return 1;
}

/* A size key in [lo, hi], optionally a power of two, as 64 bits.
 * @return 1 ok, 0 an error recorded (inih's convention) */
static int cfg_size64(struct cfg_parse *p, const char *sec, const char *key,
		      const char *v, uint64_t lo, uint64_t hi, int pow2,
		      uint64_t *dst)
{
	uint64_t x;

	if (cfg_parse_size(v, &x) || x < lo || x > hi || (pow2 && (x & (x - 1))))
		return cfg_fail(p, "[%s] %s: expected a size%s from %llu to %llu "
				"(suffix K, M or G allowed), got \"%s\"", sec, key,
				pow2 ? " (power of two)" : "",
				(unsigned long long)lo, (unsigned long long)hi, v);
	*dst = x;
	return 1;
}

/* A size key in [lo, hi] (hi < 4 GiB), optionally a power of two. */
static int cfg_size(struct cfg_parse *p, const char *sec, const char *key,
		    const char *v, uint64_t lo, uint64_t hi, int pow2,
		    uint32_t *dst)
{
	uint64_t x = 0; /* set when rc is 1; gcc -O3 cannot tell */
	int rc = cfg_size64(p, sec, key, v, lo, hi, pow2, &x);

	if (rc == 1)
		*dst = (uint32_t)x;
	return rc;
}

/* [cluster] */
static int cfg_cluster(struct cfg_parse *p, const char *key, const char *v)
{
	struct cfg *c = p->c;

	if (!strcmp(key, "mgr")) {
		char msg[PROTO_MAX_HOST * 2 + 200];

		if (addr_parse_list("[cluster] mgr", v, 0, c->mgrs, &c->nmgrs, msg,
				   sizeof(msg)))
			return cfg_fail(p, "%s", msg);
		snprintf(c->mgr_host, sizeof(c->mgr_host), "%.*s",
			 (int)sizeof(c->mgr_host) - 1, c->mgrs[0].host);
		c->mgr_port = c->mgrs[0].port;
		return 1;
	}
	if (!strcmp(key, "insecure")) {
		int b = cfg_bool(v);

		if (b < 0)
			return cfg_fail(p, "[cluster] insecure: expected true or false, "
					"got \"%s\"", v);
		c->insecure = b;
		return 1;
	}
	if (!strcmp(key, "key"))
		return cfg_path(p, "cluster", key, v, &c->key_path);
	if (!strcmp(key, "server_key"))
		return cfg_path(p, "cluster", key, v, &c->srv_key_path);
	if (!strcmp(key, "transport")) {
		if (net_transport_parse(v, &c->transport))
			return cfg_fail(p, "[cluster] transport: expected tcp, verbs "
					"or auto, got \"%s\"", v);
		c->has_transport = 1;
		return 1;
	}
	return cfg_fail(p, "[cluster]: unknown key \"%s\" (expected mgr, key, "
			"server_key, transport, insecure)", key);
}

/* [layout] and [client] */
static int cfg_layout_client(struct cfg_parse *p, const char *sec,
			     const char *key, const char *v)
{
	struct cfg *c = p->c;
	long n;

	if (!strcmp(sec, "layout") && !strcmp(key, "stripe_unit"))
		return cfg_size(p, sec, key, v, 4096, 64u << 20, 1, &c->stripe_unit);
	if (!strcmp(sec, "layout") && !strcmp(key, "mirror")) {
		if (strcmp(v, "1") && strcmp(v, "2"))
			return cfg_fail(p, "[layout] mirror: expected 1 or 2, got \"%s\"", v);
		c->mirror = (uint8_t)(v[0] - '0');
		return 1;
	}
	if (!strcmp(sec, "layout") && !strcmp(key, "stripe_count")) {
		if (cfg_int(v, 0, PROTO_MAX_IODS, &n))
			return cfg_fail(p, "[layout] stripe_count: expected a number "
					"0..%d (0 = all iods), got \"%s\"", PROTO_MAX_IODS, v);
		c->stripe_count = (int)n;
		return 1;
	}
	if (!strcmp(sec, "client") && !strcmp(key, "timeout")) {
		char *end;
		double d;

		errno = 0;
		d = strtod(v, &end);
		if (errno || end == v || *end || !(d > 0) || d > 86400)
			return cfg_fail(p, "[client] timeout: expected seconds > 0, got \"%s\"", v);
		c->timeout_ms = (int)(d * 1000 + 0.5);
		if (c->timeout_ms < 1)
			c->timeout_ms = 1;
		return 1;
	}
	if (!strcmp(sec, "client") && !strcmp(key, "connections")) {
		if (cfg_int(v, 1, NET_MAX_TCP_LANES, &n))
			return cfg_fail(p, "[client] connections: expected a number 1..%d "
					"(tcp sockets per server), got \"%s\"",
					NET_MAX_TCP_LANES, v);
		c->tcp_lanes = (int)n;
		return 1;
	}
	if (!strcmp(sec, "layout"))
		return cfg_fail(p, "[layout]: unknown key \"%s\" (expected stripe_unit, "
				"stripe_count, mirror)", key);
	return cfg_fail(p, "[client]: unknown key \"%s\" (expected timeout, "
			"connections)", key);
}

/* [net]: request_timeout = SECONDS (0.1 .. 86400), encrypt = BOOL */
static int cfg_net(struct cfg_parse *p, const char *key, const char *v)
{
	char *end;
	double d;
	int b;

	if (!strcmp(key, "encrypt")) {
		b = cfg_bool(v);
		if (b < 0)
			return cfg_fail(p, "[net] encrypt: expected on or off, got \"%s\"", v);
		p->c->encrypt = b;
		return 1;
	}
	if (strcmp(key, "request_timeout"))
		return cfg_fail(p, "[net]: unknown key \"%s\" (expected request_timeout, "
				"encrypt)", key);
	errno = 0;
	d = strtod(v, &end);
	if (errno || end == v || *end || !(d >= 0.1) || d > 86400)
		return cfg_fail(p, "[net] request_timeout: expected seconds in "
				"0.1..86400, got \"%s\"", v);
	p->c->request_timeout_ms = (int)(d * 1000 + 0.5);
	return 1;
}

/* [metrics]: listen = HOST:PORT, the base address of the daemons'
 * Prometheus endpoints (cfg.h). */
static int cfg_metrics(struct cfg_parse *p, const char *key, const char *v)
{
	struct cfg *c = p->c;

	if (strcmp(key, "listen"))
		return cfg_fail(p, "[metrics]: unknown key \"%s\" (expected listen)", key);
	return cfg_addr(p, "[metrics] listen", v, ADDR_PORT0, c->metrics_host,
			sizeof(c->metrics_host), &c->metrics_port);
}

/* [mgr] */
static int cfg_mgr(struct cfg_parse *p, const char *key, const char *v)
{
	struct cfg *c = p->c;
	long n;
	int b;

	if (!strcmp(key, "db"))
		return cfg_path(p, "mgr", key, v, &c->db);
	if (!strcmp(key, "listen"))
		return cfg_addr(p, "[mgr] listen", v, ADDR_PORT0, c->listen_host,
				sizeof(c->listen_host), &c->listen_port);
	if (!strcmp(key, "root_squash")) {
		b = cfg_bool(v);
		if (b < 0)
			return cfg_fail(p, "[mgr] root_squash: expected true or false, got \"%s\"", v);
		c->root_squash = b;
		return 1;
	}
	if (!strcmp(key, "resync_rate")) {
		if (cfg_int(v, 0, CFG_MAX_RESYNC_RATE, &n))
			return cfg_fail(p, "[mgr] resync_rate: expected MB/s 0..%d "
					"(0 = resync off), got \"%s\"",
					CFG_MAX_RESYNC_RATE, v);
		c->resync_rate = n;
		return 1;
	}
	if (!strcmp(key, "lease")) {
		if (cfg_int(v, CFG_MIN_LEASE_S, CFG_MAX_LEASE_S, &n))
			return cfg_fail(p, "[mgr] lease: expected seconds %d..%d, "
					"got \"%s\"", CFG_MIN_LEASE_S,
					CFG_MAX_LEASE_S, v);
		c->lease_ms = (uint32_t)n * 1000;
		return 1;
	}
	if (!strcmp(key, "group_commit")) {
		b = cfg_bool(v);
		if (b < 0)
			return cfg_fail(p, "[mgr] group_commit: expected on or off, got \"%s\"", v);
		c->group_commit = b;
		return 1;
	}
	if (!strcmp(key, "db_size"))
		return cfg_size64(p, "mgr", key, v, CFG_MIN_DB_SIZE,
				  CFG_MAX_DB_SIZE, 0, &c->db_size);
	if (!strcmp(key, "xattr_max_count")) {
		if (cfg_int(v, 1, CFG_MAX_XATTR_COUNT, &n))
			return cfg_fail(p, "[mgr] xattr_max_count: expected a number "
					"1..%d (xattrs per inode), got \"%s\"",
					CFG_MAX_XATTR_COUNT, v);
		c->xattr_max_count = (uint32_t)n;
		return 1;
	}
	if (!strcmp(key, "xattr_max_bytes"))
		return cfg_size(p, "mgr", key, v, CFG_MIN_XATTR_BYTES,
				CFG_MAX_XATTR_BYTES, 0, &c->xattr_max_bytes);
	if (!strcmp(key, "store")) {
		if (strcmp(v, "lmdb") && strcmp(v, "postgresql"))
			return cfg_fail(p, "[mgr] store: expected lmdb or postgresql, "
					"got \"%s\"", v);
		return cfg_path(p, "mgr", key, v, &c->store);
	}
	if (!strcmp(key, "store_uri")) {
		if (!v[0])
			return cfg_fail(p, "[mgr] store_uri: expected a PostgreSQL URI, "
					"got \"\"");
		return cfg_path(p, "mgr", key, v, &c->store_uri);
	}
	return cfg_fail(p, "[mgr]: unknown key \"%s\" (expected db, listen, "
			"root_squash, resync_rate, db_size, xattr_max_count, "
			"xattr_max_bytes, store, store_uri, group_commit, lease)", key);
}

/* [iod.N] */
static int cfg_iod_key(struct cfg_parse *p, const char *sec, const char *key,
		       const char *v)
{
	struct cfg *c = p->c;
	char *end;
	long id, n;

	errno = 0;
	id = strtol(sec + 4, &end, 10);
	if (errno || end == sec + 4 || *end || id < 0 || id >= PROTO_MAX_IODS ||
	    (sec[4] == '0' && sec[5]))
		return cfg_fail(p, "[%s]: expected a section [iod.N] with N 0..%d",
				sec, PROTO_MAX_IODS - 1);
	struct cfg_iod *d = &c->iods[id];
	if (strcmp(p->last_sec, sec)) {
		if (p->iod_seen[id])
			return cfg_fail(p, "[%s]: duplicate iod id %ld (first at line %d)",
					sec, id, d->line);
		p->iod_seen[id] = 1;
		d->line = p->line;
		if (id + 1 > c->niods)
			c->niods = (int)id + 1;
	}
	if (!strcmp(key, "host") || !strcmp(key, "listen")) {
		char what[64];
		uint16_t unused = 0;

		snprintf(what, sizeof(what), "[%s] %s", sec, key);
		return cfg_addr(p, what, v, ADDR_HOST, key[0] == 'h' ? d->host :
				d->listen, sizeof(d->host), &unused);
	}
	if (!strcmp(key, "port")) {
		if (cfg_int(v, 1, 65535, &n))
			return cfg_fail(p, "[%s] port: expected a number 1..65535, got \"%s\"",
					sec, v);
		d->port = (uint16_t)n;
		return 1;
	}
	if (!strcmp(key, "credits")) {
		if (cfg_int(v, 1, 65535, &n))
			return cfg_fail(p, "[%s] credits: expected a number 1..65535, got \"%s\"",
					sec, v);
		d->credits = (int)n;
		return 1;
	}
	if (!strcmp(key, "data"))
		return cfg_path(p, sec, key, v, &d->data);
	if (!strcmp(key, "domain")) {
		if (!stripe_domain_ok(v))
			return cfg_fail(p, "[%s] domain: expected 1..%d characters "
					"[A-Za-z0-9._-], got \"%s\"", sec,
					STRIPE_MAX_DOMAIN, v);
		snprintf(d->domain, sizeof(d->domain), "%s", v);
		return 1;
	}
	return cfg_fail(p, "[%s]: unknown key \"%s\" (expected host, port, data, "
			"listen, credits, domain)", sec, key);
}

/* [verbs] */
static int cfg_verbs(struct cfg_parse *p, const char *key, const char *v)
{
	static const char *const sl_keys[NET_CLASS_COUNT] = {
		"sl_request", "sl_reply", "sl_control", "sl_bulk" };
	struct cfg *c = p->c;
	long n;

	if (!strcmp(key, "poll_mode")) {
		if (!strcmp(v, "busy"))
			c->poll_mode = NET_POLL_BUSY;
		else if (!strcmp(v, "adaptive"))
			c->poll_mode = NET_POLL_ADAPTIVE;
		else
			return cfg_fail(p, "[verbs] poll_mode: expected busy or adaptive, "
					"got \"%s\"", v);
		c->has_poll_mode = 1;
		return 1;
	}
	if (!strcmp(key, "inline_max"))
		return cfg_size(p, "verbs", key, v, 0, 64u << 10, 0, &c->inline_max);
	if (!strcmp(key, "fast_max"))
		return cfg_size(p, "verbs", key, v, 0, 64u << 20, 0, &c->fast_max);
	if (!strcmp(key, "pipeline_unit"))
		return cfg_size(p, "verbs", key, v, 4096, 256u << 20, 0, &c->pipeline_unit);
	if (!strcmp(key, "max_clients")) {
		if (cfg_int(v, 1, 65536, &n))
			return cfg_fail(p, "[verbs] max_clients: expected a number 1..65536, "
					"got \"%s\"", v);
		c->max_clients = (int)n;
		return 1;
	}
	if (!strcmp(key, "device"))
		return cfg_path(p, "verbs", key, v, &c->rdma_dev);
	for (int i = 0; i < NET_CLASS_COUNT; i++) {
		if (strcmp(key, sl_keys[i]))
			continue;
		if (cfg_int(v, 0, 15, &n))
			return cfg_fail(p, "[verbs] %s: expected a service level 0..15, "
					"got \"%s\"", key, v);
		c->sl[i] = (int)n;
		return 1;
	}
	return cfg_fail(p, "[verbs]: unknown key \"%s\" (expected poll_mode, inline_max, "
			"fast_max, pipeline_unit, max_clients, device, sl_request, "
			"sl_reply, sl_control, sl_bulk)", key);
}

/* inih handler: dispatch one key by section. @return 1 ok, 0 error */
static int cfg_handler(void *user, const char *sec, const char *key,
		       const char *v)
{
	struct cfg_parse *p = user;
	int rc;

	if (p->failed)
		return 0;
	if (!strcmp(sec, "cluster"))
		rc = cfg_cluster(p, key, v);
	else if (!strcmp(sec, "layout") || !strcmp(sec, "client"))
		rc = cfg_layout_client(p, sec, key, v);
	else if (!strcmp(sec, "mgr"))
		rc = cfg_mgr(p, key, v);
	else if (!strncmp(sec, "iod.", 4))
		rc = cfg_iod_key(p, sec, key, v);
	else if (!strcmp(sec, "verbs"))
		rc = cfg_verbs(p, key, v);
	else if (!strcmp(sec, "net"))
		rc = cfg_net(p, key, v);
	else if (!strcmp(sec, "metrics"))
		rc = cfg_metrics(p, key, v);
	else if (!strcmp(sec, "log") && !strcmp(key, "level")) {
		p->c->log_level = log_level_parse(v);
		rc = p->c->log_level >= LOG_ERR ? 1 :
			cfg_fail(p, "[log] level: expected err, warning, notice, info, "
				 "debug or 3..7, got \"%s\"", v);
	} else if (!strcmp(sec, "log"))
		rc = cfg_fail(p, "[log]: unknown key \"%s\" (expected level)", key);
	else if (!sec[0])
		rc = cfg_fail(p, "key \"%s\" outside any section", key);
	else
		rc = cfg_fail(p, "unknown section [%s] (expected cluster, layout, client, "
			      "mgr, iod.N, net, verbs, metrics, log)", sec);
	snprintf(p->last_sec, sizeof(p->last_sec), "%s", sec);
	return rc;
}

/* After parsing: every iod id 0..niods-1 present and complete. */
static int cfg_check(struct cfg_parse *p)
{
	struct cfg *c = p->c;

	for (int i = 0; i < c->niods; i++) {
		struct cfg_iod *d = &c->iods[i];
		const char *miss = NULL;

		if (!p->iod_seen[i]) {
			snprintf(p->err, p->errcap, "%s: [iod.%d] missing: iod ids must be "
				 "0..%d without gaps", c->path, i, c->niods - 1);
			return -EINVAL;
		}
		if (!d->host[0])
			miss = "host";
		else if (!d->port)
			miss = "port";
		if (miss) {
			snprintf(p->err, p->errcap, "%s:%d: [iod.%d]: missing key \"%s\"",
				 c->path, d->line, i, miss);
			return -EINVAL;
		}
	}
	for (int i = 1; i < c->niods; i++) {
		int with = c->iods[i].domain[0] ? i : 0, without = with ? 0 : i;

		if (!c->iods[i].domain[0] == !c->iods[0].domain[0])
			continue;
		snprintf(p->err, p->errcap, "%s:%d: [iod.%d] domain: [iod.%d] names a "
			 "failure domain but [iod.%d] does not (every iod or none)",
			 c->path, c->iods[without].line, without, with, without);
		return -EINVAL;
	}
	if (c->stripe_count > 0 && c->niods && c->stripe_count > c->niods) {
		snprintf(p->err, p->errcap, "%s: [layout] stripe_count: %d is more than "
			 "the %d iods", c->path, c->stripe_count, c->niods);
		return -EINVAL;
	}
	return 0;
}

/* Load and validate a config file; see cfg.h. Cost: one pass over the file. */
int cfg_load(struct cfg **out, const char *path, char *err, size_t errcap)
{
	struct cfg_parse p;
	struct cfg *c;
	int rc;

	memset(&p, 0, sizeof(p));
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->stripe_count = -1;
	c->root_squash = -1;
	c->group_commit = -1;
	c->resync_rate = -1;
	c->log_level = -1;
	c->insecure = -1;
	for (int i = 0; i < NET_CLASS_COUNT; i++)
		c->sl[i] = -1;
	c->path = strdup(path);
	if (!c->path) {
		rc = -ENOMEM;
		goto out_free_cfg;
	}
	p.c = c;
	p.err = err;
	p.errcap = errcap;
	p.f = fopen(path, "re");
	if (!p.f) {
		rc = errno == ENOENT ? -ENOENT : -EACCES;
		snprintf(err, errcap, "%s: cannot open: %s", path, strerror(errno));
		goto out_free_cfg;
	}
	rc = ini_parse_stream(cfg_reader, &p, cfg_handler, &p);
	fclose(p.f);
	if (rc != 0 || p.failed) {
		if (!p.failed)
			snprintf(err, errcap, "%s:%d: expected [section] or key = value",
				 path, rc > 0 ? rc : p.line);
		rc = -EINVAL;
		goto out_free_cfg;
	}
	rc = cfg_check(&p);
	if (rc)
		goto out_free_cfg;
	*out = c;
	return 0;

out_free_cfg:
	cfg_free(c);
	return rc;
}

/* Free a config and its strings. */
void cfg_free(struct cfg *c)
{
	if (!c)
		return;
	for (int i = 0; i < PROTO_MAX_IODS; i++)
		free(c->iods[i].data);
	free(c->rdma_dev);
	free(c->db);
	free(c->store);
	free(c->store_uri);
	free(c->key_path);
	free(c->srv_key_path);
	free(c->path);
	free(c);
}

/* Initialise libsodium and load one key file into key (shared: the
 * clients' key, see net_key_load), with a message naming what (the file's
 * role) and path. @return 0 or net_key_load()'s error, -EIO */
static int cfg_key_file(const char *path, int shared, const char *what,
			uint8_t key[NET_KEY_LEN], char *err, size_t errcap)
{
	const char *why = "";
	int rc = net_auth_init();

	if (rc) {
		snprintf(err, errcap, "cannot initialise libsodium");
		return rc;
	}
	rc = net_key_load(path, shared, key, &why);
	if (rc)
		snprintf(err, errcap, "%s %s: %s", what, path, why);
	return rc;
}

/* Load a key file into o; see cfg.h. */
int cfg_load_key(const char *path, struct net_opts *o, char *err, size_t errcap)
{
	int rc = cfg_key_file(path, 1, "key file", o->key, err, errcap);

	if (rc == 0)
		o->has_key = 1;
	return rc;
}

/* Load the servers' key into o; see cfg.h. */
int cfg_load_server_key(const char *path, struct net_opts *o, char *err,
			size_t errcap)
{
	int rc = cfg_key_file(path, 0, "servers' key file", o->srv_key, err, errcap);

	if (rc == 0)
		o->has_srv_key = 1;
	return rc;
}

/* A server's servers' key, from its option or its file, checked against
 * the clients' key; see cfg.h. */
int cfg_server_keys(const struct cfg *c, const char *arg, struct net_opts *o,
		    char *err, size_t errcap)
{
	const char *path = arg ? arg : c ? c->srv_key_path : NULL;
	int rc;

	if (!path)
		return 0;
	rc = cfg_load_server_key(path, o, err, errcap);
	if (rc)
		return rc;
	if (!o->has_key) {
		snprintf(err, errcap, "a servers' key (server_key, %s) needs the "
			 "clients' key (key) too", path);
		return -EINVAL;
	}
	if (!sodium_memcmp(o->key, o->srv_key, NET_KEY_LEN)) {
		snprintf(err, errcap, "the servers' key (server_key, %s) and the "
			 "clients' key (key) are the same key; generate two", path);
		return -EINVAL;
	}
	return 0;
}

/* Copy the transport settings of the file into o; see cfg.h. */
int cfg_net_opts(const struct cfg *c, struct net_opts *o, char *err,
		 size_t errcap)
{
	if (c->has_transport)
		o->transport = c->transport;
	if (c->timeout_ms)
		o->timeout_ms = c->timeout_ms;
	if (c->tcp_lanes)
		o->tcp_lanes = c->tcp_lanes;
	if (c->request_timeout_ms)
		o->request_timeout_ms = c->request_timeout_ms;
	if (c->encrypt)
		o->encrypt = 1;
	if (c->has_poll_mode)
		o->poll_mode = c->poll_mode;
	if (c->inline_max)
		o->inline_max = c->inline_max;
	if (c->fast_max)
		o->fast_max = c->fast_max;
	if (c->pipeline_unit)
		o->pipeline_unit = c->pipeline_unit;
	if (c->max_clients)
		o->max_clients = c->max_clients;
	for (int i = 0; i < NET_CLASS_COUNT; i++)
		if (c->sl[i] >= 0)
			o->sl[i] = (uint8_t)c->sl[i];
	if (c->rdma_dev)
		o->rdma_dev = c->rdma_dev;
	if (c->key_path)
		return cfg_load_key(c->key_path, o, err, errcap);
	return 0;
}

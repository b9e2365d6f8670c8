/* mgr_lead.c - the lease of the active mgr among several on one PostgreSQL
 * store: a state machine on the monotonic clock, and the lease row's SQL.
 * See mgr_lead.h and mgr/ha/README.md "Several mgrs, one active". */
#include "mgr_lead.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"
#include "log.h"

#define LEAD_MARGIN_MIN_MS 200u
#define LEAD_HOLDER_MAX (ADDR_STRLEN + 24)

/* ------------------------------------------------------------------ */
/* The state machine                                                   */

/* See mgr_lead.h. */
int mgr_lead_sm_init(struct mgr_lead_sm *sm, uint32_t lease_ms)
{
	if (lease_ms < MGR_LEAD_MIN_MS || lease_ms > MGR_LEAD_MAX_MS)
		return -EINVAL;
	memset(sm, 0, sizeof(*sm));
	sm->lease_ms = lease_ms;
	sm->margin_ms = lease_ms / 10;
	if (sm->margin_ms < LEAD_MARGIN_MIN_MS)
		sm->margin_ms = LEAD_MARGIN_MIN_MS;
	return 0;
}

/* See mgr_lead.h. The deadline counts from the SEND time: the database's
 * now() for the new expiry is later than that, so ours ends first. */
int mgr_lead_sm_answer(struct mgr_lead_sm *sm, uint64_t sent_ns, int64_t got)
{
	if (sm->lost)
		return 0;
	if (got <= 0 || (sm->token && got != sm->token)) {
		if (sm->token)
			__atomic_store_n(&sm->lost, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&sm->deadline_ns, 0, __ATOMIC_RELEASE);
		return 0;
	}
	sm->token = got; /* set once, before any other thread asks */
	__atomic_store_n(&sm->deadline_ns, sent_ns +
		(uint64_t)(sm->lease_ms - sm->margin_ms) * 1000000ull,
		__ATOMIC_RELEASE);
	return 1;
}

/* See mgr_lead.h. */
int mgr_lead_sm_serving(const struct mgr_lead_sm *sm, uint64_t now_ns)
{
	return !__atomic_load_n(&sm->lost, __ATOMIC_ACQUIRE) && sm->token &&
	       now_ns < __atomic_load_n(&sm->deadline_ns, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------ */
/* The database side                                                   */

#ifdef RPFS_HAVE_PG
#include <libpq-fe.h>

/* The lease of one process; loop thread only. */
struct mgr_lead {
	struct mgr_lead_sm sm;
	char *uri;
	PGconn *pc;                     /* NULL: connect at the next tick */
	char me[LEAD_HOLDER_MAX];       /* HOST:PORT#NONCE */
	char hint_host[PROTO_MAX_HOST + 1]; /* the holder last seen ("" none) */
	uint16_t hint_port;
	int64_t hint_token;
	int unreachable;                /* the last tick failed (logged once) */
};

/* Acquire: the row is free (expired, or never held) or ours already. */
static const char lead_acquire_sql[] =
	"UPDATE rpfs_lease SET token = token + 1, holder = $1, "
	"expires = now() + $2::bigint * interval '1 millisecond' "
	"WHERE id = 1 AND (expires IS NULL OR expires < now() OR holder = $1) "
	"RETURNING token";
/* Renew: only while the token is still ours. */
static const char lead_renew_sql[] =
	"UPDATE rpfs_lease SET expires = now() + $2::bigint * "
	"interval '1 millisecond' WHERE id = 1 AND holder = $1 AND token = $3 "
	"RETURNING token";
/* Who holds it (a standby's hint). */
static const char lead_holder_sql[] =
	"SELECT holder, token FROM rpfs_lease WHERE id = 1 AND expires >= now()";

/* The monotonic clock in ns. */
static uint64_t lead_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* (Re)connect, with timeouts well inside one lease so a tick never holds
 * the loop long. @return 0, -EHOSTUNREACH (why set) */
static int lead_connect(struct mgr_lead *l, char *why, size_t cap)
{
	char tmo[16], uto[16];
	const char *kw[] = { "connect_timeout", "tcp_user_timeout",
			     "target_session_attrs", "application_name",
			     "dbname", NULL };
	const char *vals[] = { tmo, uto, "read-write", "rpfs-lease", l->uri,
			       NULL };

	snprintf(tmo, sizeof(tmo), "%u", l->sm.lease_ms / 3000 ? l->sm.lease_ms / 3000 : 1);
	snprintf(uto, sizeof(uto), "%u", l->sm.lease_ms / 3);
	if (l->pc && PQstatus(l->pc) == CONNECTION_OK)
		return 0;
	PQfinish(l->pc);
	l->pc = PQconnectdbParams(kw, vals, 1);
	if (l->pc && PQstatus(l->pc) == CONNECTION_OK)
		return 0;
	snprintf(why, cap, "%s", l->pc ? PQerrorMessage(l->pc) : "out of memory");
	why[strcspn(why, "\n")] = '\0';
	PQfinish(l->pc);
	l->pc = NULL;
	return -EHOSTUNREACH;
}

/* See mgr_lead.h. */
int mgr_lead_new(struct mgr_lead **out, const char *uri, const char *host,
		 uint16_t port, uint32_t lease_ms, char *msg, size_t msgcap)
{
	struct mgr_lead *l;
	char addr[ADDR_STRLEN], why[300];
	uint64_t nonce = 0;
	int rc;

	if (!uri || !host || !host[0] || !port) {
		snprintf(msg, msgcap, "lease: no store_uri or no address");
		return -EINVAL;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(msg, msgcap, "lease: out of memory");
		return -ENOMEM;
	}
	rc = mgr_lead_sm_init(&l->sm, lease_ms);
	if (rc) {
		snprintf(msg, msgcap, "lease: %u ms is out of %u..%u", lease_ms,
			 MGR_LEAD_MIN_MS, MGR_LEAD_MAX_MS);
		goto out_free;
	}
	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
		nonce = (uint64_t)getpid() << 32 ^ lead_now_ns();
	snprintf(l->me, sizeof(l->me), "%s#%016" PRIx64,
		 addr_format(addr, sizeof(addr), host, port), nonce);
	l->uri = strdup(uri);
	if (!l->uri) {
		snprintf(msg, msgcap, "lease: out of memory");
		rc = -ENOMEM;
		goto out_free;
	}
	rc = lead_connect(l, why, sizeof(why));
	if (rc) {
		snprintf(msg, msgcap, "store_uri: the lease cannot reach the "
			 "database: %s", why);
		goto out_free_uri;
	}
	*out = l;
	return 0;

out_free_uri:
	free(l->uri);
out_free:
	free(l);
	return rc;
}

/* See mgr_lead.h. */
void mgr_lead_free(struct mgr_lead *l)
{
	if (!l)
		return;
	PQfinish(l->pc);
	free(l->uri);
	free(l);
}

/* Remember the holder "HOST:PORT#NONCE" as the hint (not ourselves). */
static void lead_note_holder(struct mgr_lead *l, const char *holder,
			     int64_t token)
{
	char a[LEAD_HOLDER_MAX], msg[PROTO_MAX_HOST * 2 + 200];
	char *hash;

	l->hint_host[0] = '\0';
	l->hint_port = 0;
	if (!holder || !strcmp(holder, l->me) || token <= 0)
		return;
	snprintf(a, sizeof(a), "%s", holder);
	hash = strrchr(a, '#');
	if (hash)
		*hash = '\0';
	if (addr_parse("holder", a, 0, l->hint_host, sizeof(l->hint_host),
		       &l->hint_port, msg, sizeof(msg))) {
		l->hint_host[0] = '\0';
		l->hint_port = 0;
		return;
	}
	l->hint_token = token;
}

/* Read the holder of a live lease into the hint. One round trip. */
static void lead_read_holder(struct mgr_lead *l)
{
	PGresult *r = PQexec(l->pc, lead_holder_sql);

	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
	    !PQgetisnull(r, 0, 0))
		lead_note_holder(l, PQgetvalue(r, 0, 0),
				 strtoll(PQgetvalue(r, 0, 1), NULL, 10));
	else
		lead_note_holder(l, NULL, 0);
	PQclear(r);
}

/* Send one acquire or renew; *got = the token returned (0: refused).
 * @return 0, -EIO (why set) */
static int lead_exec(struct mgr_lead *l, int renew, int64_t *got, char *why,
		     size_t cap)
{
	char lease[24], tok[24];
	const char *p[3] = { l->me, lease, tok };
	PGresult *r;
	int rc = 0;

	snprintf(lease, sizeof(lease), "%u", l->sm.lease_ms);
	snprintf(tok, sizeof(tok), "%" PRId64, l->sm.token);
	r = PQexecParams(l->pc, renew ? lead_renew_sql : lead_acquire_sql,
			 renew ? 3 : 2, NULL, p, NULL, NULL, 0);
	*got = 0;
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		snprintf(why, cap, "%s", PQresultErrorMessage(r));
		why[strcspn(why, "\n")] = '\0';
		rc = -EIO;
	} else if (PQntuples(r) == 1) {
		*got = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	}
	PQclear(r);
	return rc;
}

/* See mgr_lead.h. */
int mgr_lead_tick(struct mgr_lead *l)
{
	int was = l->sm.token != 0 && !l->sm.lost;
	uint64_t sent;
	int64_t got;
	char why[300];
	int rc;

	if (l->sm.lost)
		return -ESTALE;
	if (was && !mgr_lead_serving(l)) {
		l->sm.lost = 1;
		return -ESTALE;
	}
	rc = lead_connect(l, why, sizeof(why));
	sent = lead_now_ns();
	if (!rc)
		rc = lead_exec(l, was, &got, why, sizeof(why));
	if (rc) {
		if (!l->unreachable)
			log_warn("lease: cannot reach the database: %s", why);
		l->unreachable = 1;
		if (PQstatus(l->pc) != CONNECTION_OK) {
			PQfinish(l->pc);
			l->pc = NULL;
		}
		return mgr_lead_serving(l); /* the deadline runs out on its own */
	}
	if (l->unreachable)
		log_notice("lease: the database answers again");
	l->unreachable = 0;
	if (mgr_lead_sm_answer(&l->sm, sent, got)) {
		if (!was) {
			lead_note_holder(l, NULL, 0); /* no hint of another */
			log_notice("lease: active, token %" PRId64 " (holder %s)",
				   got, l->me);
		}
		return 1;
	}
	if (was) {
		log_warn("lease: lost: token %" PRId64 " is no longer the "
			 "database's", l->sm.token);
		return -ESTALE;
	}
	lead_read_holder(l);
	return 0;
}

/* See mgr_lead.h. */
void mgr_lead_release(struct mgr_lead *l)
{
	char tok[24];
	const char *p[2] = { l->me, tok };

	if (!l->pc || !l->sm.token)
		return;
	snprintf(tok, sizeof(tok), "%" PRId64, l->sm.token);
	PQclear(PQexecParams(l->pc, "UPDATE rpfs_lease SET expires = now() - "
			     "interval '1 second' WHERE id = 1 AND holder = $1 "
			     "AND token = $2", 2, NULL, p, NULL, NULL, 0));
	__atomic_store_n(&l->sm.deadline_ns, 0, __ATOMIC_RELEASE);
}

/* See mgr_lead.h. */
int mgr_lead_serving(struct mgr_lead *l)
{
	return mgr_lead_sm_serving(&l->sm, lead_now_ns());
}

/* See mgr_lead.h. */
void mgr_lead_lose(struct mgr_lead *l)
{
	if (l->sm.token)
		__atomic_store_n(&l->sm.lost, 1, __ATOMIC_RELEASE);
}

/* See mgr_lead.h. */
int64_t mgr_lead_token(const struct mgr_lead *l)
{
	return l->sm.token;
}

/* See mgr_lead.h. */
uint32_t mgr_lead_lease_ms(const struct mgr_lead *l)
{
	return l->sm.lease_ms;
}

/* See mgr_lead.h. */
uint32_t mgr_lead_hint(const struct mgr_lead *l, void *buf, size_t cap)
{
	struct proto_standby s;
	struct wbuf w;

	if (!l->hint_host[0] || !l->hint_port)
		return 0;
	s.host = (struct proto_str){ l->hint_host, (uint32_t)strlen(l->hint_host) };
	s.port = l->hint_port;
	s.token = (uint64_t)l->hint_token;
	wb_init(&w, buf, cap);
	if (proto_standby_encode(&w, &s))
		return 0;
	return (uint32_t)w.len;
}
#else /* !RPFS_HAVE_PG: mgr_kv_open refuses store = postgresql already */

struct mgr_lead {
	struct mgr_lead_sm sm;
};

int mgr_lead_new(struct mgr_lead **out, const char *uri, const char *host,
		 uint16_t port, uint32_t lease_ms, char *msg, size_t msgcap)
{
	snprintf(msg, msgcap, "lease: this rpfs-mgr was built without "
		 "PostgreSQL support");
	return -EOPNOTSUPP;
}

void mgr_lead_free(struct mgr_lead *l)
{
}

int mgr_lead_tick(struct mgr_lead *l)
{
	return -ESTALE;
}

void mgr_lead_release(struct mgr_lead *l)
{
}

int mgr_lead_serving(struct mgr_lead *l)
{
	return 0;
}

void mgr_lead_lose(struct mgr_lead *l)
{
}

int64_t mgr_lead_token(const struct mgr_lead *l)
{
	return 0;
}

uint32_t mgr_lead_lease_ms(const struct mgr_lead *l)
{
	return MGR_LEAD_DEFAULT_MS;
}

uint32_t mgr_lead_hint(const struct mgr_lead *l, void *buf, size_t cap)
{
	return 0;
}
#endif /* RPFS_HAVE_PG */

/*
 * adm_scrub.h - the state `rpfs scrub` shares between its two files:
 * adm_scrub.c (command line, pacing, the walk of one iod's objects,
 * orphans, report) and adm_scrub_mirror.c (the walk of a mirror group's
 * two iods side by side and the compare and repair of their replicas).
 * Internal to the scrub; mgr/repair/README.md "Scrub".
 */
#ifndef RPFS_ADM_SCRUB_H
#define RPFS_ADM_SCRUB_H

#include <stdint.h>
#include <time.h>

#include "net.h"
#include "opt.h"
#include "proto.h"

#define SCRUB_BATCH PROTO_MAX_INOS     /* objects per IO_LIST / SCRUB_INOS */

/* Command line. */
struct scrub_args {
	const char *conf, *key, *srv_key; /* --conf, --key, --server-key */
	struct opt_addr mgr; /* --mgr, else [cluster] mgr */
	int have_addr;      /* --mgr given */
	double timeout;
	double rate_objs;   /* objects per second, 0 = not limited by count */
	double rate_bytes;  /* object bytes per second, 0 = not by bytes */
	long grace;         /* seconds */
	int dry_run;
};

/* Counters of the report. */
struct scrub_report {
	uint64_t checked, orphans_checked;
	uint64_t iod_found, iod_bytes, iod_young;
	uint64_t mgr_found, mgr_bytes, mgr_young;
	uint64_t compared;       /* (group, inode) pairs compared */
	uint64_t compared_bytes; /* bytes checksummed, both replicas */
	uint64_t mismatches, repaired;
	uint64_t resync_left;    /* pairs not compared: a replica is stale */
	int failed;         /* a server was down or an operation failed */
};

/* The pacing clock: work done so far against the allowed rate. */
struct scrub_pace {
	struct timespec start;
	double objs, bytes;
	const struct scrub_args *a;
};

/*
 * One iod's listing in progress: the current IO_LIST batch, the mgr's
 * state of each of its inodes (SCRUB_INOS), and the next object to take.
 * The batch's orphans are dealt with when it is fetched.
 */
struct scrub_walk {
	uint16_t iod;
	int paired;         /* 1: walked beside its buddy (mirrored objects
			     * are paced by their compare, not their size) */
	int done;           /* no object left (end, or failed) */
	int failed;         /* the iod failed (reported): no compares */
	uint32_t pos;       /* next object of list */
	uint64_t last;      /* last inode listed (order check), 0 at start */
	struct proto_cursor cur;
	uint8_t st[SCRUB_BATCH];   /* enum proto_ino_state of list.objs[k] */
	struct proto_iolist list;
};

/* A connection to every server, and shared message buffers. */
struct scrub_ctx {
	struct scrub_args a;
	struct scrub_report report;
	struct scrub_pace pace;
	struct net_opts no;        /* transport options (key, timeout) */
	struct net_client *cl;
	struct net_conn *mgr;
	struct net_conn *iod[PROTO_MAX_IODS];
	struct net_client *mark_cl; /* STALE_MARK only: a longer timeout */
	struct net_conn *mark_mgr;
	char mgr_addr[PROTO_MAX_HOST + 24];   /* "mgr HOST:PORT" */
	char iod_addr[PROTO_MAX_IODS][PROTO_MAX_HOST + 24]; /* "iod N (HOST:PORT)" */
	uint16_t niods;
	time_t now;         /* when the scrub started: the grace counts from it */
	uint8_t req[PROTO_MAX_BODY], rep[PROTO_MAX_BODY];
	struct proto_mount mt;     /* iod table and mirror groups */
	struct scrub_walk walk[2]; /* a group's two iods, or one iod */
	struct proto_orphans orphans;
	struct proto_inostate states;
	uint64_t inos[SCRUB_BATCH];
};

/** Count objs objects of bytes against the rate and sleep while ahead. */
void scrub_pace_add(struct scrub_pace *p, double objs, uint64_t bytes);

/** Report a failed op (NULL: connecting) at server on stderr and
 * remember that the scrub failed. */
void scrub_fail(struct scrub_ctx *x, const char *server, const char *op,
		int rc);

/** Start walking iod's objects from the beginning (a missing connection,
 * already reported, makes an empty, failed walk). */
void scrub_walk_start(struct scrub_ctx *x, struct scrub_walk *w, uint16_t iod,
		      int paired);

/**
 * The next object of the walk, fetching (and scrubbing the orphans of) the
 * next batch when the current one is used up; the caller takes it with
 * w->pos++. NULL at the end or after a failure (reported, w->failed).
 */
const struct proto_obj *scrub_walk_head(struct scrub_ctx *x,
					struct scrub_walk *w);

/** IO_LIST order of two inodes: (ino & 0xffff, ino). @return <0, 0, >0 */
int scrub_key_cmp(uint64_t a, uint64_t b);

/**
 * Pass 1 over mirror group g: both iods' objects in one merged walk, so
 * each (group, inode) pair is met once; pairs of MIRRORED inodes are
 * compared (IO_CSUM) and a mismatch is recorded stale on the group's
 * second iod (not with --dry-run). Failures are reported.
 */
void scrub_mirror_group(struct scrub_ctx *x, uint16_t g);

/** Close what the mirror pass opened (the STALE_MARK client). */
void scrub_mirror_close(struct scrub_ctx *x);

#endif

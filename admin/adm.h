/*
 * adm.h - the admin CLI `rpfs`: shared exit codes and the subcommands,
 * each in its own file (adm_main.c: dispatch, keygen, mkfs;
 * adm_layout.c: getlayout, setlayout, client stats; adm_status.c: status and server stats over the network;
 * adm_scrub.c and adm_scrub_mirror.c: scrub; adm_scrub_ns.c: scrub
 * --namespace).
 */
#ifndef RPFS_ADMIN_H
#define RPFS_ADMIN_H

#include "cfg.h"
#include "net.h"

/* Each subcommand's usage lines: the synopsis of its --help (before its
 * option table's help) and a part of adm_main.c's usage(). */
#define USAGE_KEYGEN \
"keygen [-f] FILE                 write a new cluster key (mode 0600); -f overwrites\n"
#define USAGE_MKFS \
"mkfs [--conf FILE] [--all]       create the mgr database (with the iod table) and\n" \
"                                   the data directories of the iods on this host\n" \
"                                   (--all: of every iod)\n" \
"  mkfs --db DIR --iod HOST:PORT... [--data DIR...] [--stripe-unit SIZE] [--stripe-count N]\n" \
"  mkfs --store-uri URI [--data DIR...]\n" \
"                                   create the schema of a postgresql store (its\n" \
"                                   iod table is recorded by rpfs-mgr's first start);\n" \
"                                   --conf: with [mgr] store = postgresql, store_uri\n"
#define USAGE_STATUS \
"status [--conf FILE | --mgr HOST:PORT[,HOST:PORT...]] [--key FILE] [--timeout S]\n" \
"                                   every server: up or down, capacity, version\n"
#define USAGE_GETLAYOUT \
"getlayout PATH                   the layout of a file or directory on a mount\n"
#define USAGE_SETLAYOUT \
"setlayout PATH FIELD=VALUE[,...] set it (directory: new files below it); fields\n" \
"                                   unit=SIZE (4K..64M, suffix K or M), count=N,\n" \
"                                   mirror=1|2, first=I (a file); fields not given\n" \
"                                   keep their current (or inherited) value\n"
#define USAGE_STATS \
"stats --server HOST:PORT [--conf FILE] [--key FILE]\n" \
"                                   transport counters of a running server (JSON)\n" \
"  stats PATH                       the client's counters of the mount holding PATH\n"
#define USAGE_SCRUB \
"scrub [--conf FILE | --mgr HOST:PORT] [--key FILE] [--rate N | --rate NMB/s]\n" \
"        [--dry-run] [--grace SECONDS]\n" \
"                                   reclaim orphaned objects and inodes and compare\n" \
"                                   the replicas of mirrored files online, at most\n" \
"                                   N objects (or N MB) per second (default 1000);\n" \
"                                   a mismatch is recorded stale on the group's\n" \
"                                   second iod (not with --dry-run)\n" \
"  " USAGE_SCRUB_NS
/* The --namespace form of scrub (the usage line of its own --help). */
#define USAGE_SCRUB_NS \
"scrub --namespace [--conf FILE | --db DIR | --store-uri URI] [--json]\n" \
"                                   check the namespace in the store itself,\n" \
"                                   read-only: entries, link counts, leaks;\n" \
"                                   exit 1 when a problem is found\n"

/* Exit codes, documented in the usage text. */
#define ADM_OK 0        /* success; status: every server is up */
#define ADM_FAIL 1      /* the operation failed; status: a server is down */
#define ADM_USAGE 2     /* bad command line */
#define ADM_CONFIG 3    /* the config file or key file is unusable */

struct opt_prog;

/* The option tables the dispatcher's --help prints (opt.h), besides
 * keygen's and mkfs's in adm_main.c: status and stats --server
 * (adm_status.c), scrub (adm_scrub.c), scrub --namespace (adm_scrub_ns.c). */
extern const struct opt_prog adm_status_prog, adm_stats_prog, scrub_prog,
	scrub_ns_prog;

/**
 * `rpfs status [--conf FILE | --mgr HOST:PORT[,HOST:PORT...]] [--key FILE]
 * [--timeout S]`
 * @return an ADM_* exit code
 */
int adm_status(int argc, char **argv);

/**
 * `rpfs stats --server HOST:PORT [--conf FILE] [--key FILE] [--timeout S]`:
 * the STATUS op's counters as JSON on stdout.
 * @return an ADM_* exit code
 */
int adm_stats_server(int argc, char **argv);

/**
 * `rpfs scrub [--conf FILE | --mgr HOST:PORT] [--key FILE] [--timeout S]
 * [--rate N | --rate NMB/s] [--dry-run] [--grace SECONDS]`: reclaim
 * orphans and compare (and repair) the replicas of mirrored files online
 * (adm_scrub.c, adm_scrub_mirror.c, mgr/repair/README.md "Scrub").
 * @return an ADM_* exit code
 */
int adm_scrub(int argc, char **argv);

/**
 * Whether argv[1..] ask for scrub --namespace (it comes before any "--").
 */
int adm_scrub_is_namespace(int argc, char **argv);

/**
 * `rpfs scrub --namespace [--conf FILE | --db DIR | --store-uri URI]
 * [--json]`: check the namespace's consistency in the store itself,
 * read-only (adm_scrub_ns.c, mgr/mgr_nscheck.c).
 * @return ADM_OK consistent; ADM_FAIL problems found (printed); ADM_USAGE;
 *         ADM_CONFIG the config file, or the store cannot be opened or read
 */
int adm_scrub_namespace(int argc, char **argv);

/**
 * `rpfs getlayout PATH`: the layout of a file or directory on an rpfs mount.
 * @return ADM_OK; ADM_FAIL (PATH not on an rpfs mount, or the mount's
 *         error); ADM_USAGE
 */
int adm_getlayout(int argc, char **argv);

/**
 * `rpfs setlayout PATH FIELD=VALUE[,...]`: set unit (SIZE, K/M suffix),
 * count, first and mirror; fields not given keep the current (or
 * inherited) layout's value. A mirror change without count keeps the
 * count if the mirror groups allow it, else takes the most they allow.
 * @return ADM_OK; ADM_USAGE (a bad field, named); ADM_FAIL (PATH not on an
 *         rpfs mount, or the mgr refused: EBUSY a file with data, EINVAL
 *         count above the iods or mirror groups, EPERM not a dir or file)
 */
int adm_setlayout(int argc, char **argv);

/**
 * `rpfs stats PATH`: the client counters (JSON) of the rpfs mount holding
 * PATH, read from the mount's root.
 * @return ADM_OK; ADM_FAIL (not on an rpfs mount, or the mount's error);
 *         ADM_USAGE
 */
int adm_stats_path(int argc, char **argv);

/**
 * MOUNT against the mgr: the iod table.
 * @param[in] req, rep PROTO_MAX_BODY bytes each
 * @param[out] mt the table (hosts point into rep)
 * @return 0, or -errno of the transport or the mgr
 */
int adm_call_mount(struct net_conn *c, uint8_t *req, uint8_t *rep,
		   struct proto_mount *mt);

/**
 * Load the config file (if path) and transport options: the clients' key
 * from --key (wins) or the file; with servers, the servers' key from
 * --server-key or the file's server_key, for the work only that key may do
 * (scrub). Prints the error.
 * @param srv_key --server-key, or NULL
 * @param servers 1 to load the servers' key (when one is named)
 * @param[out] conf the config or NULL
 * @return 0 or ADM_CONFIG
 */
int adm_load(const char *path, const char *key, const char *srv_key,
	     int servers, struct cfg **conf, struct net_opts *no);

#endif

/*
 * proto.h - the rpfs wire protocol.
 *
 * Every frame starts with a fixed 48-byte header. All integers on the wire are
 * fixed-width little-endian; byte order is converted only in proto.c, at the
 * wire boundary. In memory, the structs below are in host order.
 *
 *   off size field
 *     0    4 magic     PROTO_MAGIC
 *     4    2 version   PROTO_VERSION
 *     6    2 op        enum proto_op
 *     8    8 tag       matches a reply (and its data frames) to its request
 *    16    4 status    replies: 0 or -errno; requests: 0
 *    20    2 credits   replies/ctrl: request credits returned to the client
 *    22    2 flags     PROTO_F_*
 *    24    4 body_len  bytes of encoded body that follow the header
 *    28    4 reserved  must be 0
 *    32    8 bulk_len  request: bytes of write data that follow the body
 *                      (the server pulls them); data frame: bytes that follow
 *    40    8 aux       request: bytes of client memory offered for read data
 *                      (the server pushes into it); data frame: the offset in
 *                      that memory where the frame's bytes belong
 *
 * Bodies are sequences of fixed-width little-endian fields; strings are a u16
 * length followed by that many bytes (no NUL on the wire); byte blobs are a
 * u32 length followed by the bytes. Which fields a body carries is fixed per
 * op (see proto.c). A decoder validates every length, count and offset
 * before use and rejects trailing bytes.
 */
#ifndef RPFS_PROTO_H
#define RPFS_PROTO_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_MAGIC 0x53465052u /* "RPFS" as little-endian bytes */
#define PROTO_VERSION 1
#define PROTO_HDR_LEN 48

#define PROTO_MAX_BODY (128u * 1024)           /* largest encoded body */
#define PROTO_MAX_BULK (256ull * 1024 * 1024)  /* largest bulk per request */
#define PROTO_MAX_NAME 255                     /* one path component */
#define PROTO_MAX_PATH 4095                    /* symlink target */
#define PROTO_MAX_XATTR_NAME 255
#define PROTO_MAX_XATTR_VALUE 65536
#define PROTO_MAX_GROUPS 32                    /* supplementary gids sent */
#define PROTO_MAX_SEGS 1024                    /* file-list entries per I/O request */
#define PROTO_MAX_IODS 256
#define PROTO_MAX_INOS 256                     /* inodes per PURGE_MANY / IO_REMOVE_MANY */
#define PROTO_MAX_HOST 255
#define PROTO_MAX_LIST 1024                    /* objects per IO_LIST reply */
#define PROTO_MAX_CSUM_LEN (4u * 1024 * 1024)  /* bytes per IO_CSUM */

/* Header flags. */
#define PROTO_F_REPLY 0x1u /* a reply to the request with the same tag */
#define PROTO_F_DATA 0x2u  /* a data frame carrying read data for tag */
#define PROTO_F_CTRL 0x4u  /* transport control (credits, handshake) */
#define PROTO_F_ALL (PROTO_F_REPLY | PROTO_F_DATA | PROTO_F_CTRL)

enum proto_op {
	/* transport control, handled inside common/transport/net */
	PROTO_OP_NET_HELLO = 1, /* handshake: reply carries the credit limit */
	PROTO_OP_NET_CREDIT = 2, /* credits returned without a reply */
	PROTO_OP_NET_AUTH = 3,  /* handshake: the client's proof of the cluster
				 * key (body: MAC); reply status 0 or -EACCES */

	/* admin, served by every server (mgr and iod) */
	PROTO_OP_STATUS = 4,    /* -> proto_status: role, version, capacity,
				 * uptime, transport counters */

	/* metadata manager */
	PROTO_OP_MOUNT = 10,  /* fs parameters and iod table */
	PROTO_OP_LOOKUP,      /* parent, name -> attr */
	PROTO_OP_GETATTR,     /* ino -> attr */
	PROTO_OP_SETATTR,     /* ino, valid, mode/uid/gid/size/atime/mtime -> attr */
	PROTO_OP_CREATE,      /* parent, name, mode, flags -> attr */
	PROTO_OP_MKDIR,       /* parent, name, mode -> attr */
	PROTO_OP_MKNOD,       /* parent, name, mode, rdev -> attr */
	PROTO_OP_UNLINK,      /* parent, name -> freed */
	PROTO_OP_RMDIR,       /* parent, name */
	PROTO_OP_RENAME,      /* parent, name, newparent, newname, flags -> freed */
	PROTO_OP_LINK,        /* ino, newparent, newname -> attr */
	PROTO_OP_SYMLINK,     /* parent, name, target -> attr */
	PROTO_OP_READLINK,    /* ino -> target */
	PROTO_OP_READDIR,     /* ino, cookie, max -> dirents */
	PROTO_OP_STATFS,      /* -> statfs (aggregated over the iods) */
	PROTO_OP_GETXATTR,    /* ino, xname, max -> xvalue (or size if max 0) */
	PROTO_OP_SETXATTR,    /* ino, xname, xvalue, flags */
	PROTO_OP_LISTXATTR,   /* ino, max -> xvalue (NUL-separated names) */
	PROTO_OP_REMOVEXATTR, /* ino, xname */
	PROTO_OP_OPEN,        /* ino, flags -> attr; permission check */
	PROTO_OP_ACCESS,      /* ino, mode(mask) */
	PROTO_OP_SETSIZE,     /* ino, size: grow size to at least size, set mtime */
	PROTO_OP_PURGE,       /* ino: drop an inode whose last link is gone */
	PROTO_OP_PURGE_MANY,  /* inos: PURGE each, in one transaction */
	/* 34: CB_WAIT, the callback channel; 35..37: the lock ops, below */
	PROTO_OP_SETBLOCKS = 38, /* ino, flags (PROTO_SB_*), size, mtime, blocks:
				  * store the blocks the iods hold, maybe grow
				  * the size and set times -> attr */
	PROTO_OP_BATCH = 39,  /* proto_batch: a session's delegated ops under
			       * its WRITE leases, run in order in one
			       * transaction -> proto_batchrep (their
			       * statuses, a range of inode numbers) */
	PROTO_OP_MGR_LAST,

	/* callback channel of the mgr (mgr/lease/): bodies are struct
	 * proto_cbwait / struct proto_cbrep (proto_cbwait_encode/decode) */
	PROTO_OP_CB_WAIT = 34, /* wait for the session's events, acknowledging
				* those up to acked; the mgr holds it until it
				* has events or wait_ms has passed */

	/* lock service of the mgr (mgr_lockd.c): bodies are struct proto_lock /
	 * struct proto_lockrep (proto_lock_encode/decode), not proto_mreq */
	PROTO_OP_LOCK = 35,           /* GET / SET / WAIT / DROP a lock */
	PROTO_OP_LOCK_CANCEL = 36,    /* end the session's wait with that id */
	PROTO_OP_LOCK_KEEPALIVE = 37, /* renew the session's lease; the reply's
				       * boot id shows a restarted mgr */

	/* I/O daemon */
	PROTO_OP_IO_READ = 40, /* ino, segs; data pushed into aux bytes */
	PROTO_OP_IO_WRITE,     /* ino, segs; data pulled from bulk_len bytes */
	PROTO_OP_IO_TRUNCATE,  /* ino, size (local object size) */
	PROTO_OP_IO_REMOVE,    /* ino */
	PROTO_OP_IO_FSYNC,     /* ino, flags (1 = datasync) */
	PROTO_OP_IO_STATFS,    /* -> statfs of the data directory */
	PROTO_OP_IO_REMOVE_MANY, /* inos: IO_REMOVE each */
	PROTO_OP_IO_FALLOCATE = 47, /* ino, off, len, mode (PROTO_FALLOC_*):
				     * fallocate(2) of a local range */
	PROTO_OP_IO_SEEK = 48, /* ino, size (local offset), flags
				* (PROTO_SEEK_HOLE or 0 = data) -> u64 local
				* offset; -ENXIO no data / offset past the end */
	PROTO_OP_IO_BLOCKS = 49, /* ino -> u64 512-byte blocks the object holds */
	PROTO_OP_IO_LIST = 50, /* cursor, max -> proto_iolist: the objects of
				* the data directory from the cursor (scrub) */
	PROTO_OP_IO_CSUM = 51, /* ino, off, len (<= PROTO_MAX_CSUM_LEN) ->
				* proto_csum: crc32c of the local range */
	PROTO_OP_IO_FENCE = 52, /* proto_fence (from the mgr): the lease and
				 * the fenced (stale) inodes of this iod ->
				 * proto_fencestate */
	PROTO_OP_IO_LAST,

	/* scrub service of the mgr (mgr/mgr_scrub.c): bodies are struct
	 * proto_scrubq / proto_inostate / proto_orphans, not proto_mreq */
	PROTO_OP_SCRUB_INOS = 60,    /* inos -> proto_inostate: which exist */
	PROTO_OP_SCRUB_ORPHANS = 61, /* cookie, max -> proto_orphans: the
				      * orphan inodes after cookie */
	/* mirror service of the mgr (mgr/mgr_stale.c) */
	PROTO_OP_STALE_MARK = 62,    /* proto_stale: record iod's replica of
				      * a mirrored file stale (durably) */
	PROTO_OP_STALE_COUNT = 63,   /* (empty) -> proto_stalecnt */
	PROTO_OP_SCRUB_LAST,
};

/* A decoded frame header, in host order. */
struct proto_hdr {
	uint16_t version;
	uint16_t op;
	uint64_t tag;
	int32_t status;
	uint16_t credits;
	uint16_t flags;
	uint32_t body_len;
	uint64_t bulk_len;
	uint64_t aux;
};

/* Write cursor over a caller-owned buffer. Overflow sets err and stops. */
struct wbuf {
	uint8_t *p;
	size_t len; /* bytes written */
	size_t cap;
	int err;    /* 0 or -EMSGSIZE once a put did not fit */
};

/* Read cursor over received bytes. Underflow sets err and yields zeros. */
struct rbuf {
	const uint8_t *p;
	size_t len;
	size_t off;
	int err;    /* 0 or -EBADMSG once a get ran past the end or was invalid */
};

/* A string or blob that points into a received message (not NUL-terminated). */
struct proto_str {
	const char *p;
	uint32_t len;
};

/*
 * A list of 1..PROTO_MAX_INOS inode numbers (PURGE_MANY, IO_REMOVE_MANY).
 * To encode, point host at n numbers; a decoded list points wire at its n
 * encoded numbers inside the message. Read entries with proto_inos_at().
 */
struct proto_inos {
	uint32_t n;
	const uint64_t *host;     /* encoder input */
	const uint8_t *wire;      /* decoder output: n x u64 */
};

/** Entry i (< l->n) of an inode list, encoded or decoded. */
uint64_t proto_inos_at(const struct proto_inos *l, uint32_t i);

struct proto_time {
	int64_t sec;
	uint32_t nsec;
};

/*
 * A file's striping. mirror 1: iod k of the file (k < count) is
 * (first + k) % niods. mirror 2: count and first index mirror groups
 * instead; group (first + k) % ngroups holds unit k on both its iods.
 */
struct proto_layout {
	uint32_t unit;  /* stripe unit in bytes, 4096..64 MiB, power of two */
	uint16_t count; /* iods (mirror 1) or groups (mirror 2), >= 1 */
	uint16_t first; /* index of the first iod (group) of the table */
	uint8_t mirror; /* replicas: 1 or 2; 0 only in an all-zero layout */
};

/* A mirror group: two distinct iods holding the same objects. */
struct proto_group {
	uint16_t iod[2];
};

struct proto_attr {
	uint64_t ino;
	uint32_t mode;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint32_t rdev;
	uint64_t size;
	uint64_t blocks; /* 512-byte blocks */
	struct proto_time atime, mtime, ctime;
	struct proto_layout layout; /* all zero for non-regular files */
};

/* The uid and gid root squash gives root (mgr_perm_squash), which the
 * client must know too to predict the mgr's checks (cli_size.c). */
#define PROTO_NOBODY_ID 65534u

/* Caller identity, carried by every mgr request. */
struct proto_cred {
	uint32_t uid;
	uint32_t gid;
	uint16_t ngroups;
	uint32_t groups[PROTO_MAX_GROUPS];
	uint64_t session;  /* the mount's session with a callback channel, or
			    * 0; on the wire only when != 0: ngroups carries
			    * PROTO_CRED_SESSION and the u64 follows the
			    * groups (an older mgr refuses such a request:
			    * cred.ngroups) */
};

#define PROTO_CRED_SESSION 0x8000u /* in the wire's ngroups: a session follows */

/* SETATTR valid bits. */
#define PROTO_SA_MODE 0x01u
#define PROTO_SA_UID 0x02u
#define PROTO_SA_GID 0x04u
#define PROTO_SA_SIZE 0x08u
#define PROTO_SA_ATIME 0x10u
#define PROTO_SA_MTIME 0x20u
#define PROTO_SA_ATIME_NOW 0x40u
#define PROTO_SA_MTIME_NOW 0x80u
#define PROTO_SA_CTIME 0x100u
/* The caller writes to the file: drop its set-id bits as such a write
 * would (setid_kill_write; needs owner or write permission when it drops
 * any, a no-op otherwise). Ignored when PROTO_SA_MODE is set. */
#define PROTO_SA_KILLPRIV 0x200u
#define PROTO_SA_ALL 0x3ffu

/* RENAME flags (same values as Linux RENAME_*). */
#define PROTO_RENAME_NOREPLACE 0x1u
#define PROTO_RENAME_EXCHANGE 0x2u

/* SETBLOCKS flags. */
#define PROTO_SB_GROW 0x1u  /* grow the size to at least size; a growth
			     * sets mtime and ctime to the request's mtime */
#define PROTO_SB_MTIME 0x2u /* set mtime and ctime to the request's mtime */
#define PROTO_SB_CTIME 0x4u /* set ctime to the request's mtime */
#define PROTO_SB_ALL 0x7u
#define PROTO_MAX_BLOCKS (1ull << 55) /* 512-byte blocks of 2^64 bytes */

/* IO_FALLOCATE modes (same values as Linux FALLOC_FL_*). The valid ones:
 * 0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE, ZERO_RANGE|KEEP_SIZE. */
#define PROTO_FALLOC_KEEP_SIZE 0x01u
#define PROTO_FALLOC_PUNCH_HOLE 0x02u
#define PROTO_FALLOC_ZERO_RANGE 0x10u

/* IO_SEEK flags: what to look for from the offset. */
#define PROTO_SEEK_DATA 0x0u
#define PROTO_SEEK_HOLE 0x1u

/* IO_READ / IO_SEEK flag: the request reads one replica of a mirrored
 * file. The iod serves it only while it holds the mgr's lease, knows its
 * whole fence set, and the inode is not fenced; else -ESTALE (the client
 * asks the buddy). Other reads are never fenced. */
#define PROTO_IO_MIRROR 0x100u

/* IO_FENCE flags. */
#define PROTO_FENCE_RESET 0x1u    /* start loading a new fence set: add/del
				   * of this and later messages go to it */
#define PROTO_FENCE_COMPLETE 0x2u /* the set being loaded is complete: it
				   * replaces the one in force */
#define PROTO_FENCE_ALL 0x3u
#define PROTO_MAX_LEASE_MS 600000u

/* CREATE flags. */
#define PROTO_CREATE_EXCL 0x1u

/* SETXATTR flags (same values as XATTR_CREATE / XATTR_REPLACE). */
#define PROTO_XATTR_CREATE 0x1u
#define PROTO_XATTR_REPLACE 0x2u

/*
 * A metadata request. Which fields an op carries is fixed in proto.c's table;
 * the others are ignored by the encoder and zeroed by the decoder. Strings
 * point into the decoded message and live as long as it does.
 */
struct proto_mreq {
	struct proto_cred cred;
	uint64_t ino;            /* GETATTR SETATTR LINK READLINK READDIR *XATTR OPEN ACCESS SETSIZE PURGE */
	uint64_t parent;         /* LOOKUP CREATE MKDIR MKNOD UNLINK RMDIR RENAME SYMLINK */
	struct proto_str name;   /* same ops as parent */
	uint64_t newparent;      /* RENAME LINK */
	struct proto_str newname;/* RENAME LINK */
	uint32_t mode;           /* SETATTR CREATE MKDIR MKNOD; ACCESS: R_OK|W_OK|X_OK mask */
	uint32_t rdev;           /* MKNOD */
	uint32_t flags;          /* CREATE RENAME SETXATTR OPEN(O_* accmode bits) FSYNC */
	uint32_t valid;          /* SETATTR: PROTO_SA_* */
	uint32_t uid, gid;       /* SETATTR */
	uint64_t size;           /* SETATTR SETSIZE */
	struct proto_time atime, mtime; /* SETATTR; SETSIZE SETBLOCKS mtime */
	struct proto_str target; /* SYMLINK */
	struct proto_str xname;  /* GETXATTR SETXATTR REMOVEXATTR */
	struct proto_str xvalue; /* SETXATTR */
	uint64_t cookie;         /* READDIR: resume after this cookie, 0 = start */
	uint32_t max;            /* READDIR: max reply body bytes; GET/LISTXATTR: buffer size */
	struct proto_inos inos;  /* PURGE_MANY */
	uint64_t blocks;         /* SETBLOCKS: 512-byte blocks, <= PROTO_MAX_BLOCKS */
};

/* An inode freed by UNLINK or RENAME: the client removes its stripe objects. */
struct proto_freed {
	uint64_t ino;            /* 0 = nothing freed */
	struct proto_layout layout;
};

struct proto_statfs {
	uint64_t bsize;          /* block size the counts are in */
	uint64_t blocks, bfree, bavail;
	uint64_t files, ffree;
	uint32_t namemax;
};

/*
 * A READ lease granted on a directory with a LOOKUP in it or a READDIR of
 * it (HACKING.md "Leases and callbacks"): the holder may give the kernel
 * long entry timeouts for its names until the mgr's INVAL_ENTRY (acked
 * before the change runs) says otherwise. evseq is the session's last
 * callback event when the reply was made: an invalidation of the directory
 * the mount handled with a higher seq makes this grant void.
 * On a MKDIR reply the grant is a WRITE lease on the new directory (ino:
 * the new directory): the session may answer ops in it itself and send
 * them in a BATCH, until a RECALL of it.
 */
struct proto_grant {
	uint64_t ino;
	uint64_t evseq;
};

/*
 * A metadata reply. As with requests, the op decides which fields travel.
 * dirents points at the encoded entry list; walk it with proto_dirent_next().
 */
struct proto_mrep {
	struct proto_attr attr;    /* LOOKUP GETATTR SETATTR CREATE MKDIR MKNOD LINK SYMLINK OPEN SETSIZE */
	struct proto_freed freed;  /* UNLINK RENAME */
	struct proto_str target;   /* READLINK */
	struct proto_str xvalue;   /* GETXATTR LISTXATTR (empty when size query) */
	uint32_t xsize;            /* GETXATTR LISTXATTR: full size of the value */
	struct proto_statfs st;    /* STATFS */
	uint32_t ndirents;         /* READDIR */
	int eof;                   /* READDIR: no entries after these */
	struct proto_str dirents;  /* READDIR: encoded entries */
	struct proto_grant grant;  /* LOOKUP READDIR MKDIR, only to a request with a
				    * session: ino 0 none; on the wire after
				    * the fields, only when ino != 0 */
};

struct proto_dirent {
	uint64_t cookie;           /* pass back in READDIR to resume after this */
	struct proto_str name;
	struct proto_attr attr;
};

/* One iod of the file system, as the mgr hands it to clients. */
struct proto_iod {
	uint16_t id;               /* index in the iod table */
	struct proto_str host;
	uint16_t port;
};

/* MOUNT reply: everything a client needs to start doing I/O. */
struct proto_mount {
	uint64_t fsid;
	struct proto_layout deflayout; /* first is ignored */
	uint16_t niods;
	struct proto_iod iods[PROTO_MAX_IODS];
	uint16_t ngroups;          /* mirror groups, <= niods / 2 */
	struct proto_group groups[PROTO_MAX_IODS / 2];
};

/* A file-list entry: a range of the iod's local object. */
struct proto_seg {
	uint64_t off;
	uint64_t len;
};

/*
 * IO_LIST cursor. The objects of a data directory are walked in the order
 * (ino & 0xffff, ino): bucket is the low 16 bits (the object's directory,
 * see iod/iod_store.h), after the last inode listed in that bucket (0:
 * none yet). {PROTO_LIST_END, 0} is the end; {0, 0} the start.
 */
#define PROTO_LIST_END 65536u
struct proto_cursor {
	uint32_t bucket;           /* 0..PROTO_LIST_END */
	uint64_t after;
};

/*
 * An I/O request to an iod. For IO_READ the segment lengths must add up to
 * the header's aux (read memory); for IO_WRITE, to its bulk_len.
 * segs points at caller storage filled by the decoder (nsegs entries).
 */
struct proto_ioreq {
	uint64_t ino;
	uint64_t size;             /* IO_TRUNCATE: new local object size;
				    * IO_SEEK: local offset to look from */
	uint32_t flags;            /* IO_FSYNC: 1 = datasync; IO_SEEK:
				    * PROTO_SEEK_HOLE or PROTO_SEEK_DATA, and
				    * PROTO_IO_MIRROR; IO_READ: 0 or
				    * PROTO_IO_MIRROR */
	uint64_t off, len;         /* IO_FALLOCATE: local range, len > 0,
				    * off + len <= 2^62 */
	uint32_t mode;             /* IO_FALLOCATE: PROTO_FALLOC_* */
	uint32_t nsegs;            /* IO_READ IO_WRITE: 1..PROTO_MAX_SEGS */
	struct proto_seg *segs;
	struct proto_inos inos;    /* IO_REMOVE_MANY */
	struct proto_cursor cursor;/* IO_LIST: where to resume */
	uint32_t max;              /* IO_LIST: 1..PROTO_MAX_LIST objects */
};

/* One object of an IO_LIST reply: the local file's stat. */
struct proto_obj {
	uint64_t ino;              /* != 0 */
	uint64_t size;             /* bytes, <= 2^62 */
	uint64_t blocks;           /* 512-byte blocks, <= PROTO_MAX_BLOCKS */
	int64_t mtime;             /* seconds since the epoch */
};

/* IO_LIST reply: n objects in cursor order, and where to go on. */
struct proto_iolist {
	uint32_t n;                /* 0..PROTO_MAX_LIST */
	uint8_t eof;               /* 1: no objects after these (next is the end) */
	struct proto_cursor next;  /* pass back in the next IO_LIST */
	struct proto_obj objs[PROTO_MAX_LIST];
};

/*
 * IO_FENCE request (mgr -> iod). The lease: the mgr numbers its messages
 * (seq) and later confirms one whose reply it received (confirm); the iod
 * remembers when it received each recent message, and a confirm extends
 * its lease to (that receive time + that message's lease_ms). A message
 * delayed in the network (or read late by a stopped iod) is never
 * confirmed, so it never extends the lease past what the mgr counts on:
 * the mgr takes the lease to end lease_ms after it received the reply.
 * The fence set: the inodes whose replica here is stale; see the
 * PROTO_FENCE_* flags. add and del lists are applied in that order.
 */
struct proto_fence {
	uint64_t seq;              /* != 0 */
	uint64_t confirm;          /* 0, or the seq of an earlier message */
	uint32_t lease_ms;         /* granted by this message, if confirmed;
				    * <= PROTO_MAX_LEASE_MS */
	uint32_t flags;            /* PROTO_FENCE_* */
	struct proto_inos add;     /* 0..PROTO_MAX_INOS inodes to fence */
	struct proto_inos del;     /* 0..PROTO_MAX_INOS inodes to unfence */
	uint64_t token;            /* the sending mgr's leadership token (0:
				    * none, a mgr that does not share its
				    * store); an iod refuses a message whose
				    * token is below the highest it has seen
				    * (mgr/ha/README.md "Several mgrs,
				    * one active") */
};

/* IO_FENCE reply: the iod's state after the message. */
struct proto_fencestate {
	uint8_t leased;            /* 1: the lease is in force now */
	uint8_t complete;          /* 1: a whole fence set is in force */
	uint8_t loading;           /* 1: a set is being loaded (after RESET) */
	uint32_t nfenced;          /* inodes in the set in force */
	uint32_t lease_left_ms;    /* 0 when not leased */
};

/* IO_CSUM reply. */
struct proto_csum {
	uint32_t crc;              /* crc32c (Castagnoli) of the range, bytes
				    * past the object's end counting as zeros */
	uint64_t size;             /* the object's size, <= 2^62 */
};

/* STATUS reply: what `rpfs status` and `rpfs stats --server` show. */
#define PROTO_MAX_STATUS_JSON 8192
struct proto_status {
	struct proto_str role;     /* "mgr" or "iod" */
	struct proto_str version;  /* e.g. "0.1.0" */
	uint16_t id;               /* iod index (0 for the mgr) */
	uint64_t uptime_s;         /* seconds since the server started */
	struct proto_statfs st;    /* capacity of its data directory / database */
	struct proto_str stats;    /* transport counters, net_stats_json() */
};

/*
 * Cluster-wide locks (mgr/lock/README.md "Locks"). A lock owner is
 * (session, owner): session is the client's random id (non-zero), owner the
 * kernel's lock_owner. Ranges are inclusive [start, end]; end PROTO_LK_EOF
 * means "to the end of the file, however far it grows". flock locks always
 * cover [0, PROTO_LK_EOF] and never conflict with POSIX locks.
 */
#define PROTO_LK_EOF UINT64_MAX
#define PROTO_LK_MAX_WAIT_MS 600000u   /* WAIT: longest hold of one request */
#define PROTO_LK_MIN_LEASE_MS 1000u
#define PROTO_LK_MAX_LEASE_MS 3600000u

enum proto_lk_type { PROTO_LK_UNLCK = 0, PROTO_LK_RDLCK = 1, PROTO_LK_WRLCK = 2 };
enum proto_lk_kind { PROTO_LK_POSIX = 0, PROTO_LK_FLOCK = 1 };
enum proto_lk_cmd {
	PROTO_LK_GET = 0,  /* -> the first conflicting lock, or type UNLCK */
	PROTO_LK_SET = 1,  /* take / change / release now, or -EAGAIN */
	PROTO_LK_WAIT = 2, /* as SET, but wait up to wait_ms for the conflict to go */
	PROTO_LK_DROP = 3, /* release every lock of the owner on ino, of kind */
};
#define PROTO_LKF_RECLAIM 0x1u   /* SET after a mgr restart, within its grace */
#define PROTO_LKF_ALL 0x1u
#define PROTO_LKR_NEWSESSION 0x1u /* reply: the mgr did not know the session */
#define PROTO_LKR_ALL 0x1u

/*
 * A lock request (LOCK, LOCK_CANCEL, LOCK_KEEPALIVE all carry the whole
 * struct; fields an op does not use must be zero). Statuses besides -errno
 * of the operation: -EAGAIN conflict (SET), -EDEADLK the wait would close a
 * cycle (WAIT, POSIX kind), -ETIME wait_ms passed, ask again (WAIT),
 * -EINPROGRESS the mgr is in its grace period, ask again later (GET, SET,
 * WAIT), -EINTR the wait was cancelled, -ENOLCK reclaim refused (grace
 * over) or the lock table is full.
 */
struct proto_lock {
	uint64_t session;  /* client session id, != 0 */
	uint64_t owner;    /* lock owner within the session */
	uint64_t ino;      /* LOCK: the file; others: 0 */
	uint64_t start, end; /* LOCK: inclusive range, start <= end */
	uint64_t id;       /* WAIT: the wait's id; CANCEL: the wait to end */
	uint64_t boot;     /* KEEPALIVE: the mgr boot id last seen (0 = none) */
	uint32_t pid;      /* LOCK: pid of the locking process, as the client saw it */
	uint32_t wait_ms;  /* WAIT: 1..PROTO_LK_MAX_WAIT_MS */
	uint32_t lease_ms; /* PROTO_LK_MIN_LEASE_MS..PROTO_LK_MAX_LEASE_MS */
	uint8_t type;      /* enum proto_lk_type */
	uint8_t kind;      /* enum proto_lk_kind */
	uint8_t cmd;       /* LOCK: enum proto_lk_cmd */
	uint8_t flags;     /* PROTO_LKF_* */
};

/*
 * The callback channel (HACKING.md "Leases and callbacks"): a mount keeps
 * one CB_WAIT pending at the mgr, which answers it with the session's
 * events. Events are numbered per session from 1; a wait acknowledges
 * every event up to acked, and the mgr sends again those after it (so a
 * mount that lost a reply gets them again, and handles each at least
 * once).
 */
#define PROTO_CB_MAX_EVENTS 256u    /* events in one reply */
#define PROTO_CB_MAX_WAIT_MS 600000u

enum proto_cb_kind {
	PROTO_CB_RECALL = 1,      /* give back the lease on ino (flush, drop) */
	PROTO_CB_INVAL_ENTRY = 2, /* the name in directory ino changed */
	PROTO_CB_INVAL_INODE = 3, /* ino's attributes changed */
	PROTO_CB_RESET = 4,       /* events were lost: drop every lease and
				   * every cached name and attribute */
};

#define PROTO_CBW_BYE 0x1u /* the mount stops: forget the session now (it
			    * dropped its leases); answered at once */
#define PROTO_CBW_ALL 0x1u

struct proto_cbwait {
	uint64_t session;  /* client session id, != 0 */
	uint64_t boot;     /* the mgr boot id last seen (0 = none) */
	uint64_t acked;    /* every event up to this one is done */
	uint32_t wait_ms;  /* hold at most this long: 1..PROTO_CB_MAX_WAIT_MS */
	uint32_t lease_ms; /* forget the session after this long without a
			    * wait: PROTO_LK_MIN_LEASE_MS..PROTO_LK_MAX_LEASE_MS
			    * (the mount drops its leases sooner: when a wait
			    * is not answered in time) */
	uint32_t flags;    /* PROTO_CBW_* */
};

struct proto_cbev {
	uint64_t seq;           /* the session's event number, > 0 */
	uint64_t ino;           /* the object (a directory for INVAL_ENTRY) */
	uint8_t kind;           /* enum proto_cb_kind */
	struct proto_str name;  /* INVAL_ENTRY: the name; others: empty */
};

/* A CB_WAIT reply (status 0): events in increasing seq order. */
struct proto_cbrep {
	uint64_t boot;          /* the mgr's boot id */
	uint16_t nev;
	struct proto_cbev ev[PROTO_CB_MAX_EVENTS];
};

/*
 * BATCH (HACKING.md "Leases and callbacks", Delegated ops): a mount sends
 * the ops it answered itself under WRITE leases, in the order it answered
 * them, each with its caller's credentials. The mgr runs them in one
 * transaction and one commit, each checked as if it came alone (in a child
 * transaction: a refused op changes nothing and does not stop the ones
 * after it). The request needs a session (cred.session of the batch).
 *
 * Body: cred (the batch's: the session), u32 want, u32 n, then n ops, each
 * u16 op and the op's proto_mreq fields as proto_mreq_encode writes them
 * (its own cred first), then for CREATE, MKDIR and SYMLINK u64 newino, and
 * for CREATE the layout. Ops allowed: CREATE (PROTO_CREATE_EXCL always
 * implied: the name must be free), MKDIR, SYMLINK, SETATTR, SETBLOCKS,
 * UNLINK and RMDIR (what they free, the mount knows: it made it).
 *
 * newino must come from a range this session was handed (proto_batchrep)
 * and be above every number of that range it used before; a CREATE,
 * MKDIR or SYMLINK whose name already holds newino is a repeat (the mount
 * sent the batch again after a lost reply) and succeeds without change.
 * A CREATE's layout must be the one the directory gives its files (unit,
 * mirror, count clamped to the width), with any first below the width.
 */
#define PROTO_MAX_BATCH 256u          /* ops per BATCH */
#define PROTO_INO_RANGE 1024u         /* inode numbers per range, aligned */

struct proto_bop {
	uint16_t op;                  /* CREATE MKDIR SYMLINK SETATTR SETBLOCKS
				       * UNLINK RMDIR */
	struct proto_mreq m;          /* as the op alone */
	uint64_t newino;              /* CREATE MKDIR SYMLINK */
	struct proto_layout layout;   /* CREATE */
};

struct proto_batch {
	struct proto_cred cred;       /* the session's (session != 0) */
	uint32_t want;                /* 0, or PROTO_INO_RANGE: hand a new
				       * range after the ops */
	uint32_t n;                   /* ops, <= PROTO_MAX_BATCH */
	const struct proto_bop *host; /* encoder input: n ops */
	const uint8_t *wire;          /* decoder output: the first op; walk
				       * with proto_bop_next */
	uint32_t wire_len;            /* bytes from wire to the body's end */
};

#define PROTO_BOP_WRITE 0x1u /* MKDIR: the session holds a WRITE lease on
			      * the new directory */

/* A BATCH reply (status 0: the batch ran; each op has its status). */
struct proto_batchrep {
	uint64_t evseq;               /* the session's last event at submit:
				       * as proto_grant's */
	uint64_t range;               /* first number of a new range
				       * (PROTO_INO_RANGE of them, aligned), 0:
				       * none asked or none given */
	uint32_t n;                   /* = the request's n */
	int32_t status[PROTO_MAX_BATCH];  /* 0 or -errno, per op */
	uint8_t flags[PROTO_MAX_BATCH];   /* PROTO_BOP_* per op */
};

/* A lock reply (status 0). GET: the conflicting lock (type UNLCK = none). */
struct proto_lockrep {
	uint64_t boot;     /* the mgr's boot id (random per start) */
	uint64_t start, end;
	uint32_t pid;      /* pid the holder's client reported */
	uint8_t type;      /* enum proto_lk_type */
	uint8_t flags;     /* PROTO_LKR_* */
};

/*
 * Scrub service of the mgr (mgr/repair/README.md "Scrub"). SCRUB_INOS asks
 * which of 1..PROTO_MAX_INOS inodes exist; SCRUB_ORPHANS lists the orphan
 * inodes (nlink 0, objects not yet removed and purged) with numbers above
 * cookie, at most max (1..PROTO_MAX_INOS) of them.
 */
struct proto_scrubq {
	struct proto_inos inos;    /* SCRUB_INOS */
	uint64_t cookie;           /* SCRUB_ORPHANS: list inodes > cookie */
	uint32_t max;              /* SCRUB_ORPHANS */
};

enum proto_ino_state {
	PROTO_INO_NONE = 0,        /* no such inode (never, or purged) */
	PROTO_INO_LIVE = 1,        /* linked somewhere */
	PROTO_INO_ORPHAN = 2,      /* last link gone, not purged yet */
	PROTO_INO_MIRRORED = 3,    /* linked, a mirror=2 regular file, no
				    * replica recorded stale */
	PROTO_INO_MIRROR_STALE = 4,/* linked, mirror=2, a replica recorded
				    * stale (the resync will repair it) */
};

/* STALE_MARK request: iod's replica of mirrored file ino missed a write. */
struct proto_stale {
	uint64_t ino;              /* != 0 */
	uint16_t iod;              /* < PROTO_MAX_IODS */
};

/* STALE_COUNT reply: stale records per iod of the table, and what the
 * mgr's resync did for each since the mgr started. */
struct proto_stalecnt {
	uint16_t n;                /* the iods, 1..PROTO_MAX_IODS */
	uint64_t count[PROTO_MAX_IODS];  /* stale records left */
	uint64_t done[PROTO_MAX_IODS];   /* records resynced and cleared */
	uint64_t bytes[PROTO_MAX_IODS];  /* bytes copied to it by resync */
};

/* SCRUB_INOS reply: one enum proto_ino_state per asked inode, in order. */
struct proto_inostate {
	uint32_t n;                /* 1..PROTO_MAX_INOS */
	uint8_t st[PROTO_MAX_INOS];
};

/* One orphan inode of a SCRUB_ORPHANS reply. */
struct proto_orphan {
	uint64_t ino;              /* != 0 */
	uint64_t size;
	uint64_t blocks;           /* <= PROTO_MAX_BLOCKS */
	int64_t ctime_ns;          /* ns since the epoch: when its last link
				    * went (or a later change of the open file) */
};

/* SCRUB_ORPHANS reply. */
struct proto_orphans {
	int64_t boot_ns;           /* when the mgr started (ns since the epoch,
				    * its clock) */
	uint32_t n;                /* 0..PROTO_MAX_INOS */
	uint8_t eof;               /* 1: no orphans after these */
	struct proto_orphan o[PROTO_MAX_INOS]; /* ascending ino */
};

/* ---- header ---- */

/**
 * Encode a frame header into exactly PROTO_HDR_LEN bytes.
 * @param[out] out PROTO_HDR_LEN bytes
 * @param[in] h the header; version and magic are filled in
 */
void proto_hdr_encode(uint8_t *out, const struct proto_hdr *h);

/**
 * Decode and validate a frame header.
 * @param[in] in PROTO_HDR_LEN bytes
 * @param[out] h the decoded header
 * @param[out] why on error, a static string naming the bad field
 * @return 0 on success, or
 *	-EPROTO bad magic or unknown flags or nonzero reserved field;
 *	-EPROTONOSUPPORT version mismatch;
 *	-EMSGSIZE body_len > PROTO_MAX_BODY or bulk_len/aux > PROTO_MAX_BULK
 *	 (aux is checked only when it is a length, i.e. not on data frames).
 */
int proto_hdr_decode(const uint8_t *in, struct proto_hdr *h, const char **why);

/* ---- cursors ---- */
void wb_init(struct wbuf *w, void *buf, size_t cap);
void wb_u8(struct wbuf *w, uint8_t v);
void wb_u16(struct wbuf *w, uint16_t v);
void wb_u32(struct wbuf *w, uint32_t v);
void wb_u64(struct wbuf *w, uint64_t v);
void wb_str(struct wbuf *w, const char *s, size_t len);  /* u16 length + bytes */
void wb_blob(struct wbuf *w, const void *p, size_t len); /* u32 length + bytes */

void rb_init(struct rbuf *r, const void *buf, size_t len);
uint8_t rb_u8(struct rbuf *r);
uint16_t rb_u16(struct rbuf *r);
uint32_t rb_u32(struct rbuf *r);
uint64_t rb_u64(struct rbuf *r);
/* Strings are checked against max and for embedded NULs. */
struct proto_str rb_str(struct rbuf *r, uint32_t max);
struct proto_str rb_blob(struct rbuf *r, uint32_t max);

/* ---- bodies ---- */

/**
 * Encode a metadata request body for op.
 * @param[out] w destination cursor
 * @return 0, or -EINVAL unknown op or a field out of range, -EMSGSIZE no room
 */
int proto_mreq_encode(struct wbuf *w, uint16_t op, const struct proto_mreq *m);

/**
 * Decode and validate a metadata request body.
 * Names must be 1..PROTO_MAX_NAME bytes, contain no '/' or NUL and not be
 * "." or ".."; ngroups <= PROTO_MAX_GROUPS; SETATTR valid within
 * PROTO_SA_ALL; flags within the op's known bits; nsec < 1e9.
 * @return 0, or -EBADMSG (truncated, trailing bytes or invalid field),
 *	-EOPNOTSUPP unknown op. *why names the field.
 */
int proto_mreq_decode(const void *buf, size_t len, uint16_t op,
		      struct proto_mreq *m, const char **why);

/** Encode a metadata reply body for op. @return 0, -EINVAL, -EMSGSIZE */
int proto_mrep_encode(struct wbuf *w, uint16_t op, const struct proto_mrep *m);

/**
 * Decode a metadata reply body for op (only called when status is 0).
 * @return 0, -EBADMSG, -EOPNOTSUPP
 */
int proto_mrep_decode(const void *buf, size_t len, uint16_t op,
		      struct proto_mrep *m, const char **why);

/** Append one directory entry to a READDIR reply being built. */
void proto_dirent_put(struct wbuf *w, uint64_t cookie, const char *name,
		      size_t namelen, const struct proto_attr *a);

/** Bytes proto_dirent_put() will use for a name of namelen bytes. */
size_t proto_dirent_size(size_t namelen);

/**
 * Take the next entry from a READDIR reply's entry list.
 * @param[in,out] r cursor over mrep.dirents (init with rb_init)
 * @return 1 an entry was read, 0 end of list, -EBADMSG malformed
 */
int proto_dirent_next(struct rbuf *r, struct proto_dirent *d);

/**
 * Check a mirror group table: ngroups <= niods / 2, every iod < niods and
 * in at most one group (so a group's two iods differ).
 * @return NULL, or the name of the bad field ("ngroups", "group.iod")
 */
const char *proto_groups_check(const struct proto_group *g, uint16_t ngroups,
			       uint16_t niods);

/** MOUNT reply body (the group table follows the iods; deflayout.count
 * counts groups when deflayout.mirror is 2).
 * @return 0, -EINVAL, -EMSGSIZE / -EBADMSG */
int proto_mount_encode(struct wbuf *w, const struct proto_mount *m);
int proto_mount_decode(const void *buf, size_t len, struct proto_mount *m,
		       const char **why);

/**
 * Encode an iod request body for op (IO_*).
 * @return 0, -EINVAL (nsegs 0 or > PROTO_MAX_SEGS for READ/WRITE; an inode
 *	list empty or longer than PROTO_MAX_INOS for REMOVE_MANY), -EMSGSIZE
 */
int proto_ioreq_encode(struct wbuf *w, uint16_t op, const struct proto_ioreq *q);

/**
 * Decode an iod request body. segs must have room for PROTO_MAX_SEGS.
 * For IO_READ/IO_WRITE checks: 1 <= nsegs <= PROTO_MAX_SEGS, each len > 0,
 * off + len does not overflow and is <= 2^62, and the lengths add up to
 * expect_bytes (the header's aux for READ, bulk_len for WRITE).
 * IO_FALLOCATE: len > 0, off + len <= 2^62, mode one of the five valid
 * PROTO_FALLOC_* combinations; IO_SEEK: size <= 2^62, flags 0 or 1,
 * optionally | PROTO_IO_MIRROR; IO_READ: flags 0 or PROTO_IO_MIRROR;
 * IO_FSYNC: flags 0 or 1;
 * IO_LIST: cursor.bucket <= PROTO_LIST_END, max 1..PROTO_MAX_LIST;
 * IO_CSUM: a range as IO_FALLOCATE's with len <= PROTO_MAX_CSUM_LEN.
 * @return 0, -EBADMSG, -EOPNOTSUPP
 */
int proto_ioreq_decode(const void *buf, size_t len, uint16_t op,
		       uint64_t expect_bytes, struct proto_ioreq *q,
		       struct proto_seg *segs, const char **why);

/**
 * IO_SEEK / IO_BLOCKS reply body: one u64 (a local offset, a block count).
 * @return 0, -EMSGSIZE (encode) / -EBADMSG (decode: truncated or trailing
 *	bytes, or a value above 2^62)
 */
int proto_ioval_encode(struct wbuf *w, uint64_t v);
int proto_ioval_decode(const void *buf, size_t len, uint64_t *v,
		       const char **why);

/** IO_STATFS reply body. */
int proto_statfs_encode(struct wbuf *w, const struct proto_statfs *s);
int proto_statfs_decode(const void *buf, size_t len, struct proto_statfs *s,
			const char **why);

/**
 * STATUS reply body (the request body is empty).
 * @return 0, -EMSGSIZE (encode) / -EBADMSG (decode: truncated, trailing
 *	bytes, role or version longer than 32 bytes, stats longer than
 *	PROTO_MAX_STATUS_JSON)
 */
int proto_status_encode(struct wbuf *w, const struct proto_status *s);
int proto_status_decode(const void *buf, size_t len, struct proto_status *s,
			const char **why);

/*
 * The standby answer (mgr/ha/README.md "Several mgrs, one active"). A mgr
 * that is not the active one of its cluster answers every request (but
 * STATUS) with status PROTO_STANDBY, and an op it held when it lost the
 * leadership gets it too: nothing of that op was committed, so a client
 * sends it again to the active mgr. The body is either empty (the active
 * mgr is not known) or a proto_standby naming the active mgr as clients
 * reach it. This is the only error status that carries a body.
 */
#define PROTO_STANDBY (-EREMCHG)
struct proto_standby {
	struct proto_str host;     /* 1..PROTO_MAX_HOST bytes, no NUL */
	uint16_t port;             /* != 0 */
	uint64_t token;            /* the leadership token it holds (> 0) */
};

/*
 * The "retry later" answer: the active mgr could not reach its store (a
 * database failover, a cut link), so the op did not run, or its commit's
 * fate is unknown (the connection died with the commit in flight). A client
 * sends the op again to the same mgr after a pause, for a bounded time,
 * and takes EEXIST/ENOENT on a resend as the first send's success, as
 * after a takeover. No body.
 */
#define PROTO_RETRY (-ENOLINK)

/**
 * The body of a PROTO_STANDBY answer. Decode takes an empty body as "no
 * hint" (host.len 0, port 0, token 0).
 * @return 0, -EINVAL (encode: empty or long host, port 0, token 0),
 *	-EMSGSIZE (encode), -EBADMSG (decode: truncated, trailing bytes, a
 *	host of 0 or more than PROTO_MAX_HOST bytes or holding a NUL, port 0,
 *	token 0)
 */
int proto_standby_encode(struct wbuf *w, const struct proto_standby *s);
int proto_standby_decode(const void *buf, size_t len, struct proto_standby *s,
			 const char **why);

/**
 * Lock request body of op (LOCK, LOCK_CANCEL, LOCK_KEEPALIVE).
 * Checks: session != 0; lease_ms in range; LOCK: type/kind/cmd known,
 * start <= end, start <= INT64_MAX, end <= INT64_MAX or PROTO_LK_EOF, flags within PROTO_LKF_ALL, GET and WAIT with a type other
 * than UNLCK, WAIT with wait_ms 1..PROTO_LK_MAX_WAIT_MS and an id, flock
 * kind over [0, PROTO_LK_EOF], RECLAIM only on SET; CANCEL: an id; fields
 * an op does not use are zero.
 * @return 0, -EINVAL (encode: a check failed), -EMSGSIZE, -EBADMSG (decode:
 *	truncated, trailing bytes or a failed check; *why names the field),
 *	-EOPNOTSUPP not a lock op
 */
int proto_lock_encode(struct wbuf *w, uint16_t op, const struct proto_lock *l);
int proto_lock_decode(const void *buf, size_t len, uint16_t op,
		      struct proto_lock *l, const char **why);

/**
 * Lock reply body: type known, start <= end, flags within PROTO_LKR_ALL.
 * @return 0, -EINVAL / -EMSGSIZE (encode), -EBADMSG (decode)
 */
int proto_lockrep_encode(struct wbuf *w, const struct proto_lockrep *r);
int proto_lockrep_decode(const void *buf, size_t len, struct proto_lockrep *r,
			 const char **why);

/**
 * CB_WAIT request body: session != 0, wait_ms 1..PROTO_CB_MAX_WAIT_MS,
 * lease_ms within the lock service's bounds.
 * @param[out] why (decode) on error, a static string naming the bad field
 * @return 0, -EINVAL (encode: a failed check), -EMSGSIZE (encode: no
 *	room), -EBADMSG (decode: truncated, trailing bytes or a failed check)
 */
int proto_cbwait_encode(struct wbuf *w, const struct proto_cbwait *q);
int proto_cbwait_decode(const void *buf, size_t len, struct proto_cbwait *q,
			const char **why);

/**
 * CB_WAIT reply body: boot != 0, nev <= PROTO_CB_MAX_EVENTS, events with
 * seq increasing from one to the next, a known kind and ino != 0; a name
 * (valid, as for LOOKUP) with INVAL_ENTRY and none with the others. The
 * decoded names point into buf.
 * @param[out] why (decode) on error, a static string naming the bad field
 * @return 0, -EINVAL / -EMSGSIZE (encode), -EBADMSG (decode)
 */
int proto_cbrep_encode(struct wbuf *w, const struct proto_cbrep *r);
int proto_cbrep_decode(const void *buf, size_t len, struct proto_cbrep *r,
		       const char **why);

/**
 * BATCH request body (see struct proto_batch). Encode takes b->host; decode
 * checks the header and that n ops follow, each valid as proto_mreq_decode
 * checks its op (and newino != 0, a valid layout for CREATE), leaving them
 * to proto_bop_next. The decoded ops point into buf.
 * @param[out] why (decode) on error, a static string naming the bad field
 * @return 0, -EINVAL / -EMSGSIZE (encode), -EBADMSG (decode)
 */
int proto_batch_encode(struct wbuf *w, const struct proto_batch *b);
int proto_batch_decode(const void *buf, size_t len, struct proto_batch *b,
		       const char **why);

/**
 * The next op of a decoded batch: *pos starts at 0 and moves past the op.
 * @return 0, -ENOENT (no more: *pos at the end), -EBADMSG
 */
int proto_bop_next(const struct proto_batch *b, uint32_t *pos,
		   struct proto_bop *op);

/**
 * BATCH reply body: u64 evseq, u64 range, u32 n, n x (i32 status, u8
 * flags). Checks: n <= PROTO_MAX_BATCH, range aligned to PROTO_INO_RANGE,
 * each status 0 or -1..-4095, flags only PROTO_BOP_*.
 * @return 0, -EINVAL / -EMSGSIZE (encode), -EBADMSG (decode)
 */
int proto_batchrep_encode(struct wbuf *w, const struct proto_batchrep *r);
int proto_batchrep_decode(const void *buf, size_t len,
			  struct proto_batchrep *r, const char **why);

/**
 * IO_LIST reply body: u32 n, u8 eof, u32 next.bucket, u64 next.after,
 * n x (u64 ino, u64 size, u64 blocks, i64 mtime). Checks: n <=
 * PROTO_MAX_LIST, eof 0/1 and set exactly when next is {PROTO_LIST_END, 0},
 * next.bucket <= PROTO_LIST_END, each ino != 0, size <= 2^62, blocks <=
 * PROTO_MAX_BLOCKS.
 * @return 0, -EINVAL (encode: a check failed), -EMSGSIZE, -EBADMSG (decode)
 */
int proto_iolist_encode(struct wbuf *w, const struct proto_iolist *l);
int proto_iolist_decode(const void *buf, size_t len, struct proto_iolist *l,
			const char **why);

/**
 * IO_CSUM reply body: u32 crc, u64 size (<= 2^62).
 * @return 0, -EINVAL / -EMSGSIZE (encode), -EBADMSG (decode)
 */
int proto_csum_encode(struct wbuf *w, const struct proto_csum *c);
int proto_csum_decode(const void *buf, size_t len, struct proto_csum *c,
		      const char **why);

/**
 * Scrub request body of op: SCRUB_INOS is an inode list (u32 n, n x u64,
 * 1..PROTO_MAX_INOS); SCRUB_ORPHANS is u64 cookie, u32 max (1..
 * PROTO_MAX_INOS).
 * @return 0, -EINVAL (encode), -EMSGSIZE, -EBADMSG (decode; *why names the
 *	field), -EOPNOTSUPP not a scrub op
 */
int proto_scrubq_encode(struct wbuf *w, uint16_t op,
			const struct proto_scrubq *q);
int proto_scrubq_decode(const void *buf, size_t len, uint16_t op,
			struct proto_scrubq *q, const char **why);

/**
 * SCRUB_INOS reply body: u32 n (1..PROTO_MAX_INOS), n x u8 state (<= 2).
 * @return 0, -EINVAL / -EMSGSIZE (encode), -EBADMSG (decode)
 */
int proto_inostate_encode(struct wbuf *w, const struct proto_inostate *s);
int proto_inostate_decode(const void *buf, size_t len,
			  struct proto_inostate *s, const char **why);

/**
 * SCRUB_ORPHANS reply body: i64 boot_ns, u32 n (<= PROTO_MAX_INOS), u8 eof
 * (0/1), n x (u64 ino, u64 size, u64 blocks, i64 ctime_ns); inos != 0 and
 * strictly ascending, blocks <= PROTO_MAX_BLOCKS.
 * @return 0, -EINVAL / -EMSGSIZE (encode), -EBADMSG (decode)
 */
int proto_orphans_encode(struct wbuf *w, const struct proto_orphans *o);
int proto_orphans_decode(const void *buf, size_t len, struct proto_orphans *o,
			 const char **why);

/**
 * STALE_MARK body: u64 ino (!= 0), u16 iod (< PROTO_MAX_IODS).
 * @return 0, -EINVAL / -EMSGSIZE (encode), -EBADMSG (decode)
 */
int proto_stale_encode(struct wbuf *w, const struct proto_stale *s);
int proto_stale_decode(const void *buf, size_t len, struct proto_stale *s,
		       const char **why);

/**
 * IO_FENCE body: u64 seq (!= 0), u64 confirm, u32 lease_ms (<=
 * PROTO_MAX_LEASE_MS), u32 flags (PROTO_FENCE_*), u32 nadd, nadd x u64,
 * [then, only when the token is not 0: u64 token]
 * u32 ndel, ndel x u64 (each list 0..PROTO_MAX_INOS, no inode 0).
 * Decoded lists point into buf.
 * @return 0, -EINVAL / -EMSGSIZE (encode), -EBADMSG (decode)
 */
int proto_fence_encode(struct wbuf *w, const struct proto_fence *f);
int proto_fence_decode(const void *buf, size_t len, struct proto_fence *f,
		       const char **why);

/**
 * IO_FENCE reply body: u8 leased, u8 complete, u8 loading (each 0/1), u32
 * nfenced, u32 lease_left_ms (<= PROTO_MAX_LEASE_MS).
 * @return 0, -EINVAL / -EMSGSIZE (encode), -EBADMSG (decode)
 */
int proto_fencestate_encode(struct wbuf *w, const struct proto_fencestate *s);
int proto_fencestate_decode(const void *buf, size_t len,
			    struct proto_fencestate *s, const char **why);

/**
 * STALE_COUNT reply body: u16 n (1..PROTO_MAX_IODS), n x (u64 count, u64
 * done, u64 bytes).
 * @return 0, -EINVAL / -EMSGSIZE (encode), -EBADMSG (decode)
 */
int proto_stalecnt_encode(struct wbuf *w, const struct proto_stalecnt *c);
int proto_stalecnt_decode(const void *buf, size_t len,
			  struct proto_stalecnt *c, const char **why);

/** Layout as text, "unit=65536,count=4,first=0" plus ",mirror=2" when
 * mirrored (first and mirror optional on parse). */
int proto_layout_format(char *buf, size_t cap, const struct proto_layout *l);
/**
 * Parse a layout string. Accepts keys unit, count, first, mirror in any
 * order; mirror defaults to 1.
 * @return 0, or -EINVAL (unknown key, bad number, unit not a power of two in
 *	[4096, 64 MiB], count 0 or > PROTO_MAX_IODS, mirror not 1 or 2)
 */
int proto_layout_parse(const char *s, size_t len, struct proto_layout *l);

/** Name of an op for log lines ("LOOKUP", "IO_READ", "op#77"). Thread-safe. */
const char *proto_op_name(uint16_t op);

#endif

/* test_mgr_wire.c - end-to-end test of rpfs-mgr over TCP: spawns the
 * binary (argv[1]) on an ephemeral port and drives it with encoded requests. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "net.h"
#include "proto.h"

#include "check_cond.h"

#define STR(s) ((struct proto_str){ s, (uint32_t)strlen(s) })

static struct net_conn *conn;
static uint8_t reqbuf[PROTO_MAX_BODY], repbuf[PROTO_MAX_BODY];
static uint32_t rep_len;
static const struct proto_cred root_c = { 0, 0, 0, { 0 } };
static const struct proto_cred user_c = { 1000, 1000, 0, { 0 } };
static const struct proto_cred other_c = { 2000, 2000, 0, { 0 } };

/* The current time (CLOCK_REALTIME), as the mgr stamps inodes. */
static void mgr_now_ns(struct proto_time *t)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	t->sec = ts.tv_sec;
	t->nsec = (uint32_t)ts.tv_nsec;
}

/* Encode m for op, run it, decode the reply. @return status or -errno */
static int call(uint16_t op, struct proto_mreq *m, struct proto_mrep *p)
{
	struct net_call c = { 0 };
	struct wbuf w;
	const char *why;
	int rc;

	wb_init(&w, reqbuf, sizeof(reqbuf));
	rc = proto_mreq_encode(&w, op, m);
	if (rc)
		return rc;
	c.op = op;
	c.body = reqbuf;
	c.body_len = (uint32_t)w.len;
	c.rep_buf = repbuf;
	c.rep_cap = sizeof(repbuf);
	rc = net_call_run(conn, &c);
	if (rc)
		return rc;
	rep_len = c.rep_len;
	if (c.status)
		return c.status;
	if (p && op != PROTO_OP_MOUNT) {
		rc = proto_mrep_decode(repbuf, c.rep_len, op, p, &why);
		if (rc)
			fprintf(stderr, "decode %s: %s\n", proto_op_name(op), why);
	}
	return rc;
}

/* Spawn argv[0] with stderr on a pipe; return its port from its ready line
 * ("listening on 127.0.0.1:PORT"), read line by line (a mgr with many iods
 * logs a lot before it). A child that does not get ready is killed. */
static pid_t spawn(char *const argv[], int *errfd, int *port)
{
	int pfd[2];
	char buf[4096];
	size_t got = 0, total = 0;
	pid_t pid;

	if (pipe(pfd))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(pfd[1], 2);
		close(pfd[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	*errfd = pfd[0];
	while (got < sizeof(buf) - 1 && total < (1u << 20)) {
		ssize_t n = read(pfd[0], buf + got, 1);
		if (n <= 0)
			break;
		got++;
		total++;
		buf[got] = '\0';
		if (buf[got - 1] != '\n')
			continue;
		char *p = strstr(buf, "listening on 127.0.0.1:");
		if (p) {
			*port = atoi(p + strlen("listening on 127.0.0.1:"));
			return pid;
		}
		got = 0; /* next line */
	}
	fprintf(stderr, "%s did not get ready: %s\n", argv[0], buf);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(pfd[0]);
	return -1;
}

/* Spawn the mgr over two iods that refuse connections, with the fence
 * lease lease (ms, as text). */
static pid_t spawn_mgr_iods(const char *bin, const char *db, const char *lease,
			    const char *iod0, const char *iod1, int *errfd,
			    int *port)
{
	char *argv[] = { (char *)bin, "--listen", "127.0.0.1:0", "--db",
			 (char *)db, "--iod", (char *)iod0, "--iod",
			 (char *)iod1, "--lease-ms", (char *)lease, NULL };

	return spawn(argv, errfd, port);
}

/* A mgr whose two iods are at ports 1 and 2, where nothing listens: its
 * connections are refused. */
static pid_t spawn_mgr(const char *bin, const char *db, const char *lease,
		       int *errfd, int *port)
{
	return spawn_mgr_iods(bin, db, lease, "127.0.0.1:1", "127.0.0.1:2",
			      errfd, port);
}

/* A socket listening on a free loopback port that is never accepted
 * from: connections to it complete, and then nothing answers (a hung
 * iod). Its "127.0.0.1:PORT" goes to addr. @return the fd, or -1 */
static int hung_listener(char *addr, size_t cap)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(fd, 16) || getsockname(fd, (struct sockaddr *)&sa, &len)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	snprintf(addr, cap, "127.0.0.1:%u", ntohs(sa.sin_port));
	return fd;
}

/* Connect a raw socket and send garbage: the mgr must drop just that one. */
static void raw_garbage(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	uint8_t junk[PROTO_HDR_LEN];
	char b[64];
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	memset(junk, 0xa5, sizeof(junk));
	CHECK(write(fd, junk, sizeof(junk)) == sizeof(junk));
	struct timeval tv = { 5, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ssize_t n = read(fd, b, sizeof(b));
	CHECK(n <= 0 && !(n < 0 && errno == EAGAIN)); /* closed, not hung */
	close(fd);
}

/* The namespace through the wire. */
static void run_ops(void)
{
	struct proto_mreq m;
	struct proto_mrep p;
	uint64_t d, f;
	char name[32];

	memset(&m, 0, sizeof(m));
	m.cred = root_c;
	CHECK_RC(call(PROTO_OP_MOUNT, &m, NULL), 0);
	struct proto_mount *mnt = calloc(1, sizeof(*mnt));
	const char *why;
	/* repbuf still holds the MOUNT reply */
	CHECK_RC(proto_mount_decode(repbuf, rep_len, mnt, &why), 0);
	CHECK(mnt->niods == 2 && mnt->iods[1].port == 2 && mnt->fsid != 0 &&
	      mnt->deflayout.unit == 65536 && mnt->deflayout.count == 2);
	free(mnt);

	m = (struct proto_mreq){ .cred = user_c, .parent = 1, .name = STR("d"), .mode = 0777 };
	CHECK_RC(call(PROTO_OP_MKDIR, &m, &p), -EACCES);
	m.cred = root_c;
	CHECK_RC(call(PROTO_OP_MKDIR, &m, &p), 0);
	d = p.attr.ino;
	CHECK(S_ISDIR(p.attr.mode) && p.attr.nlink == 2);
	m = (struct proto_mreq){ .cred = user_c, .parent = d, .name = STR("f"),
				 .mode = 0640, .flags = PROTO_CREATE_EXCL };
	CHECK_RC(call(PROTO_OP_CREATE, &m, &p), 0);
	f = p.attr.ino;
	CHECK(p.attr.layout.count == 2 && p.attr.layout.unit == 65536);
	CHECK_RC(call(PROTO_OP_CREATE, &m, &p), -EEXIST);
	m = (struct proto_mreq){ .cred = other_c, .parent = d, .name = STR("f") };
	CHECK_RC(call(PROTO_OP_LOOKUP, &m, &p), 0);
	CHECK(p.attr.ino == f && p.attr.uid == 1000);
	m = (struct proto_mreq){ .cred = other_c, .ino = f, .flags = O_RDONLY };
	CHECK_RC(call(PROTO_OP_OPEN, &m, &p), -EACCES);
	m.cred = user_c;
	m.flags = O_RDWR;
	CHECK_RC(call(PROTO_OP_OPEN, &m, &p), 0);
	/* setsize, getattr */
	m = (struct proto_mreq){ .cred = user_c, .ino = f, .size = 100000, .mtime = { 77, 0 } };
	CHECK_RC(call(PROTO_OP_SETSIZE, &m, &p), 0);
	m = (struct proto_mreq){ .cred = other_c, .ino = f };
	CHECK_RC(call(PROTO_OP_GETATTR, &m, &p), 0);
	CHECK(p.attr.size == 100000 && p.attr.blocks == 0 && p.attr.mtime.sec == 77);
	/* setblocks: the published blocks come back in attrs */
	m = (struct proto_mreq){ .cred = user_c, .ino = f, .blocks = 64,
				 .flags = PROTO_SB_GROW, .size = 200000,
				 .mtime = { 88, 5 } };
	CHECK_RC(call(PROTO_OP_SETBLOCKS, &m, &p), 0);
	CHECK(p.attr.size == 200000 && p.attr.blocks == 64 && p.attr.mtime.sec == 88 &&
	      p.attr.mtime.nsec == 5);
	m = (struct proto_mreq){ .cred = other_c, .ino = f };
	CHECK_RC(call(PROTO_OP_GETATTR, &m, &p), 0);
	CHECK(p.attr.size == 200000 && p.attr.blocks == 64);
	m = (struct proto_mreq){ .cred = user_c, .ino = d, .blocks = 1 };
	CHECK_RC(call(PROTO_OP_SETBLOCKS, &m, &p), -EISDIR);
	/* many entries, read in small pages */
	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "entry-%03d", i);
		m = (struct proto_mreq){ .cred = user_c, .parent = d,
					 .name = STR(name), .mode = 0644 };
		CHECK_RC(call(PROTO_OP_CREATE, &m, &p), 0);
	}
	uint64_t cookie = 0;
	int total = 0, pages = 0, eof = 0;
	while (!eof && pages < 100) {
		m = (struct proto_mreq){ .cred = user_c, .ino = d, .cookie = cookie, .max = 1024 };
		int rc = call(PROTO_OP_READDIR, &m, &p);
		CHECK_RC(rc, 0);
		if (rc)
			break;
		struct rbuf r;
		struct proto_dirent de;
		rb_init(&r, p.dirents.p, p.dirents.len);
		uint32_t n = 0;
		while (proto_dirent_next(&r, &de) == 1) {
			n++;
			cookie = de.cookie;
		}
		CHECK(n == p.ndirents);
		total += n;
		eof = p.eof;
		pages++;
	}
	CHECK(total == 53 && pages > 2);
	/* rename */
	m = (struct proto_mreq){ .cred = user_c, .parent = d, .name = STR("f"),
				 .newparent = d, .newname = STR("entry-000"),
				 .flags = PROTO_RENAME_NOREPLACE };
	CHECK_RC(call(PROTO_OP_RENAME, &m, &p), -EEXIST);
	m.flags = 0;
	CHECK_RC(call(PROTO_OP_RENAME, &m, &p), 0);
	CHECK(p.freed.ino != 0 && p.freed.ino != f && p.freed.layout.count == 2);
	uint64_t victim = p.freed.ino;
	m = (struct proto_mreq){ .cred = user_c, .ino = victim };
	CHECK_RC(call(PROTO_OP_PURGE, &m, &p), 0);
	/* an op the mgr does not know is answered, the connection stays */
	{
		struct net_call u = { 0 };

		u.op = PROTO_OP_IO_REMOVE_MANY;
		u.rep_buf = repbuf;
		u.rep_cap = sizeof(repbuf);
		CHECK_RC(net_call_run(conn, &u), 0);
		CHECK(u.status == -EOPNOTSUPP);
		m = (struct proto_mreq){ .cred = user_c, .ino = f };
		CHECK_RC(call(PROTO_OP_GETATTR, &m, &p), 0);
	}
	/* PURGE_MANY: orphans go; a linked inode and an unknown one are
	 * skipped (the first skip is the status) and stay as they were */
	{
		uint64_t list[4];

		for (int i = 0; i < 2; i++) {
			char nm[8] = "pm-0";

			nm[3] = (char)('0' + i);
			m = (struct proto_mreq){ .cred = user_c, .parent = d,
						 .name = STR(nm), .mode = 0100644 };
			CHECK_RC(call(PROTO_OP_CREATE, &m, &p), 0);
			list[i] = p.attr.ino;
			m = (struct proto_mreq){ .cred = user_c, .parent = d,
						 .name = STR(nm) };
			CHECK_RC(call(PROTO_OP_UNLINK, &m, &p), 0);
			CHECK(p.freed.ino == list[i]);
		}
		list[2] = f;          /* still linked */
		list[3] = victim;     /* purged above */
		m = (struct proto_mreq){ .cred = user_c,
					 .inos = { 4, list, NULL } };
		CHECK_RC(call(PROTO_OP_PURGE_MANY, &m, &p), -EBUSY);
		for (int i = 0; i < 2; i++) {
			m = (struct proto_mreq){ .cred = user_c, .ino = list[i] };
			CHECK_RC(call(PROTO_OP_GETATTR, &m, &p), -ENOENT);
		}
		m = (struct proto_mreq){ .cred = user_c, .ino = f };
		CHECK_RC(call(PROTO_OP_GETATTR, &m, &p), 0);
		m = (struct proto_mreq){ .cred = user_c,
					 .inos = { 2, list, NULL } };
		CHECK_RC(call(PROTO_OP_PURGE_MANY, &m, &p), -ENOENT);
	}
	/* xattrs */
	m = (struct proto_mreq){ .cred = user_c, .ino = f, .xname = STR("user.color"),
				 .xvalue = STR("blue") };
	CHECK_RC(call(PROTO_OP_SETXATTR, &m, &p), 0);
	m = (struct proto_mreq){ .cred = user_c, .ino = f, .xname = STR("user.color"), .max = 0 };
	CHECK_RC(call(PROTO_OP_GETXATTR, &m, &p), 0);
	CHECK(p.xsize == 4);
	m.max = 2;
	CHECK_RC(call(PROTO_OP_GETXATTR, &m, &p), -ERANGE);
	m.max = 100;
	CHECK_RC(call(PROTO_OP_GETXATTR, &m, &p), 0);
	CHECK(p.xvalue.len == 4 && memcmp(p.xvalue.p, "blue", 4) == 0);
	m.xname = STR("user.rpfs.layout");
	CHECK_RC(call(PROTO_OP_GETXATTR, &m, &p), 0);
	CHECK(p.xvalue.len > 10 && memcmp(p.xvalue.p, "unit=65536", 10) == 0);
	m = (struct proto_mreq){ .cred = user_c, .ino = f, .max = 100 };
	CHECK_RC(call(PROTO_OP_LISTXATTR, &m, &p), 0);
	CHECK(p.xsize == 11);
	/* statfs */
	m = (struct proto_mreq){ .cred = user_c };
	CHECK_RC(call(PROTO_OP_STATFS, &m, &p), 0);
	CHECK(p.st.bsize == 4096 && p.st.files == (1ull << 32) &&
	      p.st.ffree == p.st.files - 52 && p.st.namemax == 255);
	if (p.st.ffree != p.st.files - 52)
		fprintf(stderr, "statfs: bsize %llu files %llu namemax %u\n",
			(unsigned long long)p.st.bsize,
			(unsigned long long)p.st.files, p.st.namemax);
	/* unlink: the file becomes an orphan */
	m = (struct proto_mreq){ .cred = user_c, .parent = d, .name = STR("entry-000") };
	CHECK_RC(call(PROTO_OP_UNLINK, &m, &p), 0);
	CHECK(p.freed.ino == f);
	m = (struct proto_mreq){ .cred = root_c, .parent = 1, .name = STR("d") };
	CHECK_RC(call(PROTO_OP_RMDIR, &m, &p), -ENOTEMPTY);
	CHECK_RC(call(PROTO_OP_UNLINK, &m, &p), -EISDIR);
}

/* One scrub service exchange: body q for op, reply into repbuf.
 * @return status or -errno */
static int scrub_call(uint16_t op, const struct proto_scrubq *q)
{
	struct net_call c = { 0 };
	struct wbuf w;
	int rc;

	wb_init(&w, reqbuf, sizeof(reqbuf));
	rc = proto_scrubq_encode(&w, op, q);
	if (rc)
		return rc;
	c.op = op;
	c.body = reqbuf;
	c.body_len = (uint32_t)w.len;
	c.rep_buf = repbuf;
	c.rep_cap = sizeof(repbuf);
	rc = net_call_run(conn, &c);
	rep_len = c.rep_len;
	return rc ? rc : c.status;
}

/* One mirror service exchange (STALE_MARK of ino/iod, or STALE_COUNT
 * when ino is 0), reply into repbuf. @return status or -errno */
static int stale_call(uint64_t ino, uint16_t iod)
{
	struct proto_stale st = { ino, iod };
	struct net_call c = { 0 };
	struct wbuf w;
	int rc;

	wb_init(&w, reqbuf, sizeof(reqbuf));
	c.op = ino ? PROTO_OP_STALE_MARK : PROTO_OP_STALE_COUNT;
	if (ino) {
		rc = proto_stale_encode(&w, &st);
		if (rc)
			return rc;
	}
	c.body = reqbuf;
	c.body_len = (uint32_t)w.len;
	c.rep_buf = repbuf;
	c.rep_cap = sizeof(repbuf);
	rc = net_call_run(conn, &c);
	rep_len = c.rep_len;
	return rc ? rc : c.status;
}

/* Mirrored layouts over the mgr's one group {0,1}: set on a file, shown in
 * its attr; STALE_MARK checked against the file and counted per iod. */
static void stale_ops(void)
{
	static struct proto_stalecnt cnt;
	struct proto_mreq m;
	struct proto_mrep p;
	const char *why;
	uint64_t f;

	m = (struct proto_mreq){ .cred = root_c, .parent = 1,
				 .name = STR("mirrored"), .mode = 0100644 };
	CHECK_RC(call(PROTO_OP_CREATE, &m, &p), 0);
	f = p.attr.ino;
	CHECK(p.attr.layout.mirror == 1);
	CHECK_RC(stale_call(f, 1), -EINVAL); /* not mirrored */
	m = (struct proto_mreq){ .cred = root_c, .ino = f, .xname = STR("user.rpfs.layout"),
				 .xvalue = STR("unit=65536,count=2,mirror=2") };
	CHECK_RC(call(PROTO_OP_SETXATTR, &m, &p), -EINVAL); /* one group only */
	m.xvalue = STR("unit=65536,count=1,mirror=2");
	CHECK_RC(call(PROTO_OP_SETXATTR, &m, &p), 0);
	m = (struct proto_mreq){ .cred = root_c, .ino = f };
	CHECK_RC(call(PROTO_OP_GETATTR, &m, &p), 0);
	CHECK(p.attr.layout.mirror == 2 && p.attr.layout.count == 1 &&
	      p.attr.layout.first == 0);
	CHECK_RC(stale_call(f, 1), 0);
	CHECK_RC(stale_call(f, 1), 0);   /* idempotent */
	CHECK_RC(stale_call(f, 2), -EINVAL); /* not one of its replicas */
	CHECK_RC(stale_call(f + 1000000, 1), -ENOENT);
	CHECK_RC(stale_call(0, 0), 0);
	CHECK(rep_len == 2 + 2 * 24); /* count, done, bytes per iod */
	CHECK_RC(proto_stalecnt_decode(repbuf, rep_len, &cnt, &why), 0);
	CHECK(cnt.n == 2 && cnt.count[0] == 0 && cnt.count[1] == 1);
	CHECK(cnt.done[0] == 0 && cnt.done[1] == 0 && cnt.bytes[1] == 0);
}

/* Milliseconds of CLOCK_MONOTONIC. */
static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ll + ts.tv_nsec / 1000000;
}

/* Create root file name, mirrored over the one group {0,1}. @return ino */
static uint64_t mirrored_file(const char *name)
{
	struct proto_mreq m;
	struct proto_mrep p;
	uint64_t f;

	m = (struct proto_mreq){ .cred = root_c, .parent = 1,
				 .name = STR(name), .mode = 0100644 };
	CHECK_RC(call(PROTO_OP_CREATE, &m, &p), 0);
	f = p.attr.ino;
	m = (struct proto_mreq){ .cred = root_c, .ino = f, .xname = STR("user.rpfs.layout"),
				 .xvalue = STR("unit=65536,count=1,mirror=2") };
	CHECK_RC(call(PROTO_OP_SETXATTR, &m, &p), 0);
	return f;
}

/* Wait for the mgr to exit; echo its log. @return its exit status */
static int reap_mgr(pid_t pid, int errfd)
{
	char buf[4096];
	ssize_t n;
	int st = 0;

	waitpid(pid, &st, 0);
	while ((n = read(errfd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, n, stderr);
	close(errfd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * STALE_MARK waits until the iod is fenced. No iod answers here (both
 * addresses refuse), so a mark is answered once the iod's lease has surely
 * run out: a fresh mgr counts on its predecessor's lease, one lease after
 * its start. A client that gives up meanwhile (its connection closes) is
 * fine; at a SIGTERM a pending mark is answered -EIO and the mgr exits 0
 * (under ASan: no leak, no use after free).
 */
static void fence_waits(const char *bin)
{
	char dir[] = "/tmp/test_mgr_wire.XXXXXX", cmd[128];
	struct net_client *cl, *quick;
	struct net_conn *qc, *saved = conn;
	struct net_opts o;
	struct net_call c = { 0 };
	uint8_t body[16];
	struct proto_stale st;
	struct wbuf w;
	static struct proto_stalecnt cnt;
	const char *why;
	long long t0, t;
	int errfd = -1, port = 0, h0, h1;
	char a0[32], a1[32];
	uint64_t f;
	pid_t pid;

	if (!mkdtemp(dir))
		return;
	h0 = hung_listener(a0, sizeof(a0));
	h1 = hung_listener(a1, sizeof(a1));
	CHECK(h0 >= 0 && h1 >= 0);
	t0 = mono_ms();
	pid = spawn_mgr_iods(bin, dir, "2000", a0, a1, &errfd, &port);
	CHECK(pid > 0);
	if (pid <= 0)
		return;
	net_opts_default(&o);
	o.timeout_ms = 8000;
	CHECK_RC(net_client_new(&cl, &o), 0);
	CHECK_RC(net_conn_new(cl, "127.0.0.1", port, &conn), 0);
	f = mirrored_file("fenced");
	/* a client that gives up before the answer */
	o.timeout_ms = 300;
	CHECK_RC(net_client_new(&quick, &o), 0);
	CHECK_RC(net_conn_new(quick, "127.0.0.1", port, &qc), 0);
	st = (struct proto_stale){ f, 0 };
	wb_init(&w, body, sizeof(body));
	CHECK_RC(proto_stale_encode(&w, &st), 0);
	c.op = PROTO_OP_STALE_MARK;
	c.body = body;
	c.body_len = (uint32_t)w.len;
	CHECK_RC(net_call_run(qc, &c), -ETIMEDOUT);
	net_client_free(quick);
	/* answered only after the lease bound (start + 2 s) */
	CHECK_RC(stale_call(f, 1), 0);
	t = mono_ms() - t0;
	CHECK(t >= 2000 && t < 6000);
	if (t < 2000 || t >= 6000)
		fprintf(stderr, "STALE_MARK answered after %lld ms\n", t);
	t0 = mono_ms();
	CHECK_RC(stale_call(f, 1), 0); /* past the bound: at once */
	CHECK(mono_ms() - t0 < 1500);
	CHECK_RC(stale_call(0, 0), 0);
	CHECK_RC(proto_stalecnt_decode(repbuf, rep_len, &cnt, &why), 0);
	CHECK(cnt.n == 2 && cnt.count[0] == 1 && cnt.count[1] == 1);
	net_client_free(cl);
	kill(pid, SIGTERM);
	CHECK(reap_mgr(pid, errfd) == 0);

	/* a mark pending at SIGTERM: answered -EIO, clean exit */
	pid = spawn_mgr_iods(bin, dir, "60000", a0, a1, &errfd, &port);
	CHECK(pid > 0);
	if (pid <= 0)
		return;
	o.timeout_ms = 8000;
	CHECK_RC(net_client_new(&cl, &o), 0);
	CHECK_RC(net_conn_new(cl, "127.0.0.1", port, &conn), 0);
	memset(&c, 0, sizeof(c));
	c.op = PROTO_OP_STALE_MARK;
	c.body = body;
	c.body_len = (uint32_t)w.len;
	CHECK_RC(net_call_submit(conn, &c), 0);
	usleep(300 * 1000);
	kill(pid, SIGTERM);
	CHECK_RC(net_call_wait(&c), 0);
	CHECK(c.status == -EIO);
	net_client_free(cl);
	CHECK(reap_mgr(pid, errfd) == 0);
	close(h0);
	close(h1);

	/* iods whose connections are refused (nothing listens): their lease
	 * died with them, and a mark is answered at once, not a lease on */
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0 || !mkdtemp(strcpy(dir, "/tmp/test_mgr_wire.XXXXXX")))
		failures++;
	pid = spawn_mgr(bin, dir, "60000", &errfd, &port);
	CHECK(pid > 0);
	if (pid <= 0)
		return;
	CHECK_RC(net_client_new(&cl, &o), 0);
	CHECK_RC(net_conn_new(cl, "127.0.0.1", port, &conn), 0);
	f = mirrored_file("refused");
	usleep(2500 * 1000); /* a poll round (2 s) tried the iods */
	t0 = mono_ms();
	CHECK_RC(stale_call(f, 1), 0);
	CHECK(mono_ms() - t0 < 5000);
	net_client_free(cl);
	kill(pid, SIGTERM);
	CHECK(reap_mgr(pid, errfd) == 0);
	conn = saved;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		failures++;
}

/*
 * With both iods up (real rpfs-iods), a STALE_MARK is answered as soon as
 * the iod took the inode into its fence set (or, an iod without fencing,
 * answered at all): well before the lease (10 s) could have run out.
 */
static void fence_up(const char *mgr_bin, const char *iod_bin)
{
	char dir[] = "/tmp/test_mgr_wire.XXXXXX", cmd[160], data[2][128];
	char db[128], ports[2][32];
	int errfd[3], port[3];
	pid_t pid[3];
	struct net_client *cl;
	struct net_conn *saved = conn;
	struct net_opts o;
	long long t0;
	uint64_t f;

	if (!mkdtemp(dir))
		return;
	for (int i = 0; i < 2; i++) {
		snprintf(data[i], sizeof(data[i]), "%s/iod%d", dir, i);
		char *argv[] = { (char *)iod_bin, "--listen", "127.0.0.1:0",
				 "--data", data[i], NULL };
		pid[i] = spawn(argv, &errfd[i], &port[i]);
		CHECK(pid[i] > 0);
		if (pid[i] <= 0)
			return;
		snprintf(ports[i], sizeof(ports[i]), "127.0.0.1:%d", port[i]);
	}
	snprintf(db, sizeof(db), "%s/db", dir);
	{
		char *argv[] = { (char *)mgr_bin, "--listen", "127.0.0.1:0", "--db",
				 db, "--iod", ports[0], "--iod", ports[1],
				 "--lease-ms", "10000", "--resync-rate", "0",
				 "--log-level", "info", NULL };
		pid[2] = spawn(argv, &errfd[2], &port[2]);
	}
	CHECK(pid[2] > 0);
	if (pid[2] > 0) {
		net_opts_default(&o);
		o.timeout_ms = 8000;
		CHECK_RC(net_client_new(&cl, &o), 0);
		CHECK_RC(net_conn_new(cl, "127.0.0.1", port[2], &conn), 0);
		f = mirrored_file("up");
		for (int k = 0; k < 3; k++) {
			t0 = mono_ms();
			CHECK_RC(stale_call(f, (uint16_t)(k & 1)), 0);
			t0 = mono_ms() - t0;
			fprintf(stderr, "STALE_MARK with the iod up: answered "
				"after %lld ms\n", t0);
			CHECK(t0 < 2000);
		}
		net_client_free(cl);
		kill(pid[2], SIGTERM);
		CHECK(reap_mgr(pid[2], errfd[2]) == 0);
	}
	for (int i = 0; i < 2; i++) {
		kill(pid[i], SIGTERM);
		CHECK(reap_mgr(pid[i], errfd[i]) == 0);
	}
	conn = saved;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		failures++;
}

/* STALE_COUNT of a full table (PROTO_MAX_IODS iods, 24 bytes each: more
 * than the 8 of before) fits the reply. */
static void stalecount_wide(const char *bin)
{
	char dir[] = "/tmp/test_mgr_wire.XXXXXX", cmd[128];
	static char addrs[PROTO_MAX_IODS][24];
	static char *argv[8 + 2 * PROTO_MAX_IODS];
	static struct proto_stalecnt cnt;
	struct net_conn *saved = conn;
	struct net_client *cl;
	struct net_opts o;
	const char *why;
	int errfd = -1, port = 0, n = 0;
	pid_t pid;

	if (!mkdtemp(dir))
		return;
	argv[n++] = (char *)bin;
	argv[n++] = "--listen";
	argv[n++] = "127.0.0.1:0";
	argv[n++] = "--db";
	argv[n++] = dir;
	for (int i = 0; i < PROTO_MAX_IODS; i++) {
		snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%d", i + 1);
		argv[n++] = "--iod";
		argv[n++] = addrs[i];
	}
	argv[n] = NULL;
	pid = spawn(argv, &errfd, &port);
	CHECK(pid > 0);
	if (pid <= 0)
		return;
	net_opts_default(&o);
	o.timeout_ms = 5000;
	CHECK_RC(net_client_new(&cl, &o), 0);
	CHECK_RC(net_conn_new(cl, "127.0.0.1", port, &conn), 0);
	CHECK_RC(stale_call(0, 0), 0);
	CHECK(rep_len == 2 + 24 * PROTO_MAX_IODS);
	CHECK_RC(proto_stalecnt_decode(repbuf, rep_len, &cnt, &why), 0);
	CHECK(cnt.n == PROTO_MAX_IODS && cnt.count[255] == 0 && cnt.done[255] == 0);
	net_client_free(cl);
	kill(pid, SIGTERM);
	CHECK(reap_mgr(pid, errfd) == 0);
	conn = saved;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		failures++;
}

/* Run the mgr with one bad option value: exit 2 and a message naming it. */
static void bad_option(const char *bin, const char *opt, const char *val,
		       const char *want)
{
	char cmd[512];
	FILE *pf;
	char out[1024] = "";
	size_t n;
	int st;

	snprintf(cmd, sizeof(cmd), "%s --listen 127.0.0.1:0 --db /nonexistent "
		 "--iod 127.0.0.1:1 %s %s 2>&1", bin, opt, val);
	pf = popen(cmd, "r");
	if (!pf) {
		failures++;
		return;
	}
	n = fread(out, 1, sizeof(out) - 1, pf);
	out[n] = '\0';
	st = pclose(pf);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
	CHECK(strstr(out, want) != NULL);
	if (!strstr(out, want))
		fprintf(stderr, "%s %s: %s", opt, val, out);
}

/* CREATE name in the root, as root, with layout lay (NULL: the default);
 * @return the inode, or 0 after a failed CHECK */
static uint64_t create_with(const char *name, uint32_t mode, const char *lay)
{
	struct proto_mreq m = { .cred = root_c, .parent = 1, .name = STR(name),
				.mode = mode };
	struct proto_mrep p;
	uint64_t ino;

	CHECK_RC(call(S_ISDIR(mode) ? PROTO_OP_MKDIR : PROTO_OP_CREATE, &m, &p), 0);
	ino = p.attr.ino;
	if (lay) {
		m = (struct proto_mreq){ .cred = root_c, .ino = ino,
					 .xname = STR("user.rpfs.layout"),
					 .xvalue = STR(lay) };
		CHECK_RC(call(PROTO_OP_SETXATTR, &m, &p), 0);
	}
	return ino;
}

/* SCRUB_INOS of mirrored files: MIRRORED without a stale record,
 * MIRROR_STALE with one for either replica (first or second iod of the
 * group), ORPHAN once unlinked; a mirror=1 file and a directory with a
 * mirrored default layout stay LIVE. Runs after stale_ops, whose file
 * "mirrored" has iod 1 (the group's second) recorded stale. */
static void scrub_mirror_ops(void)
{
	const char *mir = "unit=65536,count=1,mirror=2";
	struct proto_inostate s;
	struct proto_mreq m;
	struct proto_mrep p;
	uint64_t inos[6];
	const char *why;

	m = (struct proto_mreq){ .cred = root_c, .parent = 1, .name = STR("mirrored") };
	CHECK_RC(call(PROTO_OP_LOOKUP, &m, &p), 0);
	inos[0] = p.attr.ino;                             /* iod 1 stale */
	inos[1] = create_with("sm-clean", 0100644, mir);
	inos[2] = create_with("sm-first", 0100644, mir);
	CHECK_RC(stale_call(inos[2], 0), 0);              /* iod 0 stale */
	inos[3] = create_with("sm-plain", 0100644, NULL);
	inos[4] = create_with("sm-dir", 040755, mir);
	inos[5] = create_with("sm-gone", 0100644, mir);
	m = (struct proto_mreq){ .cred = root_c, .parent = 1, .name = STR("sm-gone") };
	CHECK_RC(call(PROTO_OP_UNLINK, &m, &p), 0);
	CHECK_RC(scrub_call(PROTO_OP_SCRUB_INOS,
			    &(struct proto_scrubq){ .inos = { 6, inos, NULL } }), 0);
	CHECK_RC(proto_inostate_decode(repbuf, rep_len, &s, &why), 0);
	CHECK(s.n == 6 && s.st[0] == PROTO_INO_MIRROR_STALE &&
	      s.st[1] == PROTO_INO_MIRRORED && s.st[2] == PROTO_INO_MIRROR_STALE &&
	      s.st[3] == PROTO_INO_LIVE && s.st[4] == PROTO_INO_LIVE &&
	      s.st[5] == PROTO_INO_ORPHAN);
	/* purged: its record goes with it, the state is none */
	m = (struct proto_mreq){ .cred = root_c, .inos = { 1, &inos[5], NULL } };
	CHECK_RC(call(PROTO_OP_PURGE_MANY, &m, &p), 0);
	CHECK_RC(scrub_call(PROTO_OP_SCRUB_INOS,
			    &(struct proto_scrubq){ .inos = { 2, &inos[4], NULL } }), 0);
	CHECK_RC(proto_inostate_decode(repbuf, rep_len, &s, &why), 0);
	CHECK(s.n == 2 && s.st[0] == PROTO_INO_LIVE && s.st[1] == PROTO_INO_NONE);
}

/* SCRUB_INOS tells live, orphan and unknown inodes apart; SCRUB_ORPHANS
 * walks the orphan table in pages; a malformed body closes the connection. */
static void scrub_ops(void)
{
	static struct proto_orphans o;
	struct proto_inostate s;
	struct proto_mreq m;
	struct proto_mrep p;
	struct proto_time now;
	uint64_t live, gone, inos[3], seen = 0, cookie = 0;
	const char *why;
	int pages = 0, found = 0;

	m = (struct proto_mreq){ .cred = root_c, .parent = 1,
				 .name = STR("scrub-live"), .mode = 0100644 };
	CHECK_RC(call(PROTO_OP_CREATE, &m, &p), 0);
	live = p.attr.ino;
	m.name = STR("scrub-gone");
	CHECK_RC(call(PROTO_OP_CREATE, &m, &p), 0);
	gone = p.attr.ino;
	m = (struct proto_mreq){ .cred = root_c, .parent = 1, .name = STR("scrub-gone") };
	CHECK_RC(call(PROTO_OP_UNLINK, &m, &p), 0);
	inos[0] = live;
	inos[1] = gone;
	inos[2] = gone + 1000000;
	CHECK_RC(scrub_call(PROTO_OP_SCRUB_INOS,
			    &(struct proto_scrubq){ .inos = { 3, inos, NULL } }), 0);
	CHECK_RC(proto_inostate_decode(repbuf, rep_len, &s, &why), 0);
	CHECK(s.n == 3 && s.st[0] == PROTO_INO_LIVE && s.st[1] == PROTO_INO_ORPHAN &&
	      s.st[2] == PROTO_INO_NONE);
	/* pages of one orphan: ascending, gone among them, then eof */
	mgr_now_ns(&now);
	do {
		CHECK_RC(scrub_call(PROTO_OP_SCRUB_ORPHANS,
				    &(struct proto_scrubq){ .cookie = cookie,
							    .max = 1 }), 0);
		CHECK_RC(proto_orphans_decode(repbuf, rep_len, &o, &why), 0);
		CHECK(o.n <= 1 && o.boot_ns > 0 &&
		      o.boot_ns <= now.sec * 1000000000ll + now.nsec);
		for (uint32_t i = 0; i < o.n; i++) {
			CHECK(o.o[i].ino > seen);
			seen = cookie = o.o[i].ino;
			found += o.o[i].ino == gone;
			if (o.o[i].ino == gone)
				CHECK(o.o[i].ctime_ns >= o.boot_ns && o.o[i].size == 0);
		}
		pages++;
	} while (!o.eof && pages < 100);
	CHECK(o.eof && found == 1 && pages >= 2);
	/* purged: gone is no inode any more, and no orphan */
	m = (struct proto_mreq){ .cred = root_c, .inos = { 1, &gone, NULL } };
	CHECK_RC(call(PROTO_OP_PURGE_MANY, &m, &p), 0);
	CHECK_RC(scrub_call(PROTO_OP_SCRUB_INOS,
			    &(struct proto_scrubq){ .inos = { 1, &gone, NULL } }), 0);
	CHECK_RC(proto_inostate_decode(repbuf, rep_len, &s, &why), 0);
	CHECK(s.n == 1 && s.st[0] == PROTO_INO_NONE);
	/* max 0 is malformed: the connection closes; the next call reconnects */
	{
		struct net_call c = { 0 };
		uint8_t bad[12] = { 0 };

		c.op = PROTO_OP_SCRUB_ORPHANS;
		c.body = bad;
		c.body_len = sizeof(bad);
		c.rep_buf = repbuf;
		c.rep_cap = sizeof(repbuf);
		CHECK(net_call_run(conn, &c) != 0);
		CHECK_RC(scrub_call(PROTO_OP_SCRUB_ORPHANS,
				    &(struct proto_scrubq){ .max = 256 }), 0);
	}
}

/* Send a BATCH body of len bytes in reqbuf; decode the reply into r.
 * @return the reply status or -errno */
static int batch_raw(size_t len, struct proto_batchrep *r)
{
	struct net_call c = { 0 };
	const char *why = NULL;
	int rc;

	c.op = PROTO_OP_BATCH;
	c.body = reqbuf;
	c.body_len = (uint32_t)len;
	c.rep_buf = repbuf;
	c.rep_cap = sizeof(repbuf);
	rc = net_call_run(conn, &c);
	if (rc)
		return rc;
	if (c.status)
		return c.status;
	rc = proto_batchrep_decode(repbuf, c.rep_len, r, &why);
	if (rc)
		fprintf(stderr, "decode BATCH reply: %s\n", why);
	return rc;
}

/* Encode and send a BATCH of session with n ops. */
static int batch_call(uint64_t session, uint32_t want,
		      const struct proto_bop *o, uint32_t n,
		      struct proto_batchrep *r)
{
	struct proto_batch b = { .cred = root_c, .want = want, .n = n,
				 .host = o };
	struct wbuf w;
	int rc;

	b.cred.session = session;
	wb_init(&w, reqbuf, sizeof(reqbuf));
	rc = proto_batch_encode(&w, &b);
	return rc ? rc : batch_raw(w.len, r);
}

/* A BATCH op (root's cred unless changed). */
static struct proto_bop wop(uint16_t op, uint64_t parent, const char *name,
			    uint64_t newino)
{
	struct proto_bop o = { .op = op, .newino = newino };

	o.m.cred = root_c;
	o.m.parent = parent;
	o.m.name = STR(name);
	o.m.mode = op == PROTO_OP_MKDIR ? 0755 : 0644;
	o.m.target = STR("dest");
	o.layout = (struct proto_layout){ 65536, 2, 1, 1 };
	return o;
}

/* BATCH through the wire: a range, ops that succeed and fail in one
 * batch, the repeat of it, another session's numbers, no session. */
static void batch_ops(void)
{
	static struct proto_batchrep r;
	struct proto_bop o[8];
	struct proto_mreq m;
	struct proto_mrep p;
	const uint64_t s1 = 0xba7c1, s2 = 0xba7c2;
	uint64_t R;
	struct wbuf w;
	int rc;

	/* no session: -EINVAL, the connection stays */
	wb_init(&w, reqbuf, sizeof(reqbuf));
	wb_u32(&w, 0); wb_u32(&w, 0); wb_u16(&w, 0); wb_u32(&w, 0); wb_u32(&w, 0);
	CHECK_RC(batch_raw(w.len, &r), -EINVAL);
	/* a range alone */
	CHECK_RC(batch_call(s1, PROTO_INO_RANGE, NULL, 0, &r), 0);
	R = r.range;
	CHECK(r.n == 0 && R != 0 && R % PROTO_INO_RANGE == 0);
	/* ops in order, each on its own: a failure stops none of the others */
	o[0] = wop(PROTO_OP_MKDIR, 1, "bd", R + 1);
	o[1] = wop(PROTO_OP_CREATE, R + 1, "f", R + 2);
	o[2] = wop(PROTO_OP_SYMLINK, R + 1, "l", R + 3);
	o[3] = wop(PROTO_OP_SETATTR, 0, "x", 0);
	o[3].m.ino = R + 2;
	o[3].m.valid = PROTO_SA_MODE;
	o[3].m.mode = 0600;
	o[4] = wop(PROTO_OP_CREATE, 999999, "f", R + 4);   /* no parent */
	o[5] = wop(PROTO_OP_CREATE, R + 1, "g", R + 2);    /* used */
	o[6] = wop(PROTO_OP_CREATE, R + 1, "h", R + 6);
	o[6].m.cred = user_c;                               /* no permission */
	o[7] = wop(PROTO_OP_CREATE, R + 1, "i", R + 7);
	CHECK_RC(batch_call(s1, 0, o, 8, &r), 0);
	CHECK(r.n == 8 && r.range == 0);
	CHECK(r.status[0] == 0 && r.status[1] == 0 && r.status[2] == 0 &&
	      r.status[3] == 0 && r.status[4] == -ENOENT &&
	      r.status[5] == -EINVAL && r.status[6] == -EACCES &&
	      r.status[7] == 0);
	m = (struct proto_mreq){ .cred = root_c, .parent = R + 1, .name = STR("f") };
	CHECK_RC(call(PROTO_OP_LOOKUP, &m, &p), 0);
	CHECK(p.attr.ino == R + 2 && (p.attr.mode & 07777) == 0600 &&
	      p.attr.layout.first == 1 && p.attr.layout.count == 2);
	m.name = STR("i");
	CHECK_RC(call(PROTO_OP_LOOKUP, &m, &p), 0);
	CHECK(p.attr.ino == R + 7);
	m.name = STR("h");
	CHECK_RC(call(PROTO_OP_LOOKUP, &m, &p), -ENOENT);
	/* sent again (a lost reply): the creates are repeats, and a range */
	rc = batch_call(s1, PROTO_INO_RANGE, o, 8, &r);
	CHECK_RC(rc, 0);
	CHECK(r.status[0] == 0 && r.status[1] == 0 && r.status[2] == 0 &&
	      r.status[3] == 0 && r.status[7] == 0);
	CHECK(r.range > R && r.range % PROTO_INO_RANGE == 0);
	/* another session may not use these numbers */
	o[0] = wop(PROTO_OP_MKDIR, 1, "bd2", R + 8);
	CHECK_RC(batch_call(s2, 0, o, 1, &r), 0);
	CHECK(r.n == 1 && r.status[0] == -EINVAL);
	/* a malformed BATCH closes the connection (then it reconnects) */
	wb_init(&w, reqbuf, sizeof(reqbuf));
	wb_u32(&w, 0); wb_u32(&w, 0); wb_u16(&w, PROTO_CRED_SESSION);
	wb_u64(&w, s1); wb_u32(&w, 0); wb_u32(&w, 1);
	CHECK(batch_raw(w.len, &r) < 0 && batch_raw(w.len, &r) != -EINVAL);
	m = (struct proto_mreq){ .cred = root_c, .ino = 1 };
	CHECK_RC(call(PROTO_OP_GETATTR, &m, &p), 0);
}

/* BATCH on a mgr with group commit off (run on the loop thread in a txn
 * of its own) and root squash: each op's cred is squashed. */
static void batch_alone(const char *bin)
{
	char dir[] = "/tmp/test_mgr_wire.XXXXXX", cmd[128];
	char *argv[] = { (char *)bin, "--listen", "127.0.0.1:0", "--db", dir,
			 "--iod", "127.0.0.1:1", "--group-commit", "off",
			 "--root-squash", NULL };
	static struct proto_batchrep r;
	struct net_conn *saved = conn;
	struct proto_bop o[2];
	struct net_client *cl;
	struct net_opts opt;
	struct wbuf w;
	uint64_t first;
	int errfd = -1, port = 0;
	pid_t pid;

	if (!mkdtemp(dir))
		return;
	pid = spawn(argv, &errfd, &port);
	CHECK(pid > 0);
	if (pid <= 0)
		return;
	net_opts_default(&opt);
	opt.timeout_ms = 5000;
	CHECK_RC(net_client_new(&cl, &opt), 0);
	CHECK_RC(net_conn_new(cl, "127.0.0.1", port, &conn), 0);
	wb_init(&w, reqbuf, sizeof(reqbuf));
	wb_u32(&w, 0); wb_u32(&w, 0); wb_u16(&w, 0); wb_u32(&w, 0); wb_u32(&w, 0);
	CHECK_RC(batch_raw(w.len, &r), -EINVAL);
	CHECK_RC(batch_call(0x5a, PROTO_INO_RANGE, NULL, 0, &r), 0);
	CHECK(r.range != 0 && r.range % PROTO_INO_RANGE == 0);
	o[0] = wop(PROTO_OP_MKDIR, 1, "sq", r.range);   /* root: squashed */
	o[1] = wop(PROTO_OP_SETATTR, 0, "x", 0);
	o[1].m.ino = 1;
	CHECK_RC(batch_call(0x5a, 0, o, 2, &r), 0);
	CHECK(r.n == 2 && r.status[0] == -EACCES && r.status[1] == 0 &&
	      r.range == 0);
	/* the range was committed: the next one follows it */
	first = o[0].newino;
	CHECK_RC(batch_call(0x5a, PROTO_INO_RANGE, NULL, 0, &r), 0);
	CHECK(r.range == first + PROTO_INO_RANGE);
	net_client_free(cl);
	kill(pid, SIGTERM);
	CHECK(reap_mgr(pid, errfd) == 0);
	conn = saved;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		failures++;
}

/* A request whose body fails validation closes only that connection. */
static void bad_body(void)
{
	struct net_call c = { 0 };
	uint8_t junk[5] = { 1, 2, 3, 4, 5 };
	struct proto_mreq m = { .cred = user_c, .ino = 1 };
	struct proto_mrep p;

	c.op = PROTO_OP_LOOKUP;
	c.body = junk;
	c.body_len = sizeof(junk);
	c.rep_buf = repbuf;
	c.rep_cap = sizeof(repbuf);
	CHECK(net_call_run(conn, &c) != 0);
	CHECK_RC(call(PROTO_OP_GETATTR, &m, &p), 0); /* reconnects */
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/test_mgr_wire.XXXXXX", cmd[128];
	struct net_client *cl;
	struct net_opts o;
	int errfd = -1, port = 0, st = 0;
	pid_t pid;

	if (argc < 3) {
		fprintf(stderr, "usage: test_mgr_wire PATH-TO-rpfs-mgr "
			"PATH-TO-rpfs-iod\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	log_init("test_mgr_wire", LOG_ERR);
	if (!mkdtemp(dir))
		return 1;
	bad_option(argv[1], "--lease-ms", "999",
		   "--lease-ms: expected milliseconds 1000..60000, got \"999\"");
	bad_option(argv[1], "--resync-rate", "100001",
		   "--resync-rate: expected MB/s 0..100000 (0 = resync off), "
		   "got \"100001\"");
	bad_option(argv[1], "--resync-rate", "-1", "--resync-rate: expected");
	fence_waits(argv[1]);
	fence_up(argv[1], argv[2]);
	stalecount_wide(argv[1]);
	batch_alone(argv[1]);
	pid = spawn_mgr(argv[1], dir, "1000", &errfd, &port);
	if (pid < 0)
		return 1;
	net_opts_default(&o);
	o.timeout_ms = 5000;
	if (net_client_new(&cl, &o) || net_conn_new(cl, "127.0.0.1", port, &conn)) {
		kill(pid, SIGTERM);
		return 1;
	}
	run_ops();
	batch_ops();
	scrub_ops();
	stale_ops();
	scrub_mirror_ops();
	raw_garbage(port);
	bad_body();
	net_client_free(cl);
	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* echo the daemon's log for the test record */
	char buf[4096];
	ssize_t n;
	while ((n = read(errfd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, n, stderr);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		failures++;
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("test_mgr_wire: ok\n");
	return 0;
}

/*
 * bench_hop.c - one loopback TCP round trip per data request, for the
 * passthrough's "hop" mode (bench-passthrough -o hop).
 *
 * rpfs cannot beat the plain passthrough: every read and write it serves
 * crosses a TCP connection to an iod, and the iod does the pread/pwrite.
 * The hop mode measures what that crossing alone costs on this machine: the
 * same passthrough, except that its reads and writes are carried out at the
 * far end of a TCP connection on 127.0.0.1. Each FUSE worker thread holds
 * one blocking connection, sends a request and waits for the reply, as an
 * rpfs-fuse worker does, and each connection has a server thread of its
 * own that does nothing but wait in recv for that connection's next
 * request: no request ever queues at the server behind another worker's
 * (with servers shared round robin, a 1 MiB write or a page-cache miss held
 * up every small read behind it), and no epoll or progress thread is
 * passed on either side. Large reads come back by sendfile and are spliced
 * socket -> pipe -> /dev/fuse, as rpfs-fuse splices them.
 *
 * The servers are threads, not processes, so a switch to them is no dearer
 * than an iod switch. For a small request whose caller waits for the
 * server's answer (a 4 KiB random read, or a write that does not go
 * behind) what is left is the least any client with a server hop pays:
 * the round trip and the switches. The figure is therefore an upper bound
 * for such a client on this machine, which is why scripts/bench.sh reports
 * it beside the passthrough. It is no bound for writes answered before the
 * server has them (rpfs's write-behind), nor for large requests: the hop
 * sends a whole 1 MiB to one server, where a striped client spreads it over
 * several servers at once.
 *
 * Wire (host byte order; both ends are this process):
 *   request  struct hop_req, then len bytes of data for a write
 *   reply    struct hop_rep, then res bytes of data for a read
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bench_hop.h"

enum { HOP_READ = 1, HOP_WRITE = 2 };

struct hop_req {
	uint32_t op;             /* HOP_READ or HOP_WRITE */
	uint32_t len;            /* bytes to read or write, <= HOP_MAX_IO */
	int32_t fd;              /* file descriptor in this process */
	uint32_t splice;         /* read: reply data by sendfile (else copied) */
	uint64_t off;            /* file offset */
};

struct hop_rep {
	int64_t res;             /* bytes done, or -errno */
};

static struct {
	uint16_t port;           /* the listener's; immutable after hop_start */
	pthread_key_t key;       /* closes a worker's connection at its exit */
} hop;

static __thread int hop_sock = -1;       /* this worker's connection */

/* hop_full: send or receive exactly LEN bytes on a blocking socket.
 * Returns 0, or -errno (-ECONNRESET when the peer closed). */
static int hop_full(int s, void *buf, size_t len, int rx)
{
	char *p = buf;

	while (len) {
		ssize_t r = rx ? recv(s, p, len, MSG_WAITALL) :
				 send(s, p, len, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ECONNRESET;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

/* hop_send2: send a header of HLEN bytes and LEN bytes of DATA in one
 * sendmsg (one segment for a small message, as rpfs sends its frames),
 * finishing a short send (a full socket buffer) with plain sends.
 * Returns 0 or -errno. */
static int hop_send2(int s, const void *hdr, size_t hlen, const void *data,
		     size_t len)
{
	struct iovec iov[2] = { { (void *)hdr, hlen }, { (void *)data, len } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	ssize_t r = sendmsg(s, &m, MSG_NOSIGNAL);

	if (r < 0)
		return -errno;
	if ((size_t)r < hlen)
		return -EIO;
	r -= (ssize_t)hlen;
	return (size_t)r < len ? hop_full(s, (char *)data + r, len - (size_t)r, 0) : 0;
}

/* hop_serve_one: read one request from connection C and answer it, using
 * BUF (HOP_MAX_IO bytes). Returns 0, or -errno when C must be closed. */
static int hop_serve_one(int c, char *buf)
{
	struct hop_req q;
	struct hop_rep p = { 0 };
	int rc = hop_full(c, &q, sizeof(q), 1);

	if (rc)
		return rc;
	if (q.len > HOP_MAX_IO || (q.op != HOP_READ && q.op != HOP_WRITE))
		return -EPROTO;
	if (q.op == HOP_WRITE) {
		rc = hop_full(c, buf, q.len, 1);
		if (rc)
			return rc;
		p.res = pwrite(q.fd, buf, q.len, (off_t)q.off);
		if (p.res < 0)
			p.res = -errno;
		return hop_full(c, &p, sizeof(p), 0);
	}
	if (q.splice) {
		/* Header first, so the size must be known before sendfile. */
		struct stat st;
		off_t off = (off_t)q.off;

		if (fstat(q.fd, &st) < 0)
			p.res = -errno;
		else
			p.res = st.st_size > off ? st.st_size - off : 0;
		if (p.res > (int64_t)q.len)
			p.res = q.len;
		/* MSG_MORE: the header leaves with the first data segment. */
		if (send(c, &p, sizeof(p), MSG_NOSIGNAL | (p.res > 0 ? MSG_MORE : 0)) !=
		    sizeof(p))
			return -EIO;
		while (p.res > 0) {
			ssize_t r = sendfile(c, q.fd, &off, (size_t)p.res);

			if (r <= 0)
				return r < 0 ? -errno : -EIO;
			p.res -= r;
		}
		return 0;
	}
	p.res = pread(q.fd, buf, q.len, (off_t)q.off);
	if (p.res < 0)
		p.res = -errno;
	return hop_send2(c, &p, sizeof(p), buf, p.res > 0 ? (size_t)p.res : 0);
}

/* hop_server: the server thread of one connection (ARG: the socket):
 * answer its requests one after the other until it closes or breaks, then
 * close it. Its buffer is its own, so no other thread ever waits for it. */
static void *hop_server(void *arg)
{
	int c = (int)(intptr_t)arg, rc = 0;
	char *buf = malloc(HOP_MAX_IO);

	if (!buf)
		rc = -ENOMEM;
	while (rc == 0)
		rc = hop_serve_one(c, buf);
	if (rc != -ECONNRESET)
		fprintf(stderr, "bench-passthrough: hop server: connection dropped: %s\n",
			strerror(-rc));
	free(buf);
	close(c);
	return NULL;
}

/* hop_acceptor: accept connections on the listener (ARG) forever and give
 * each a server thread of its own (hop_server); a connection that cannot
 * have one is closed, and its worker's call fails with an error. */
static void *hop_acceptor(void *arg)
{
	int ls = (int)(intptr_t)arg;

	for (;;) {
		int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC), one = 1, rc;
		pthread_t t;

		if (c < 0) {
			if (errno != EINTR && errno != ECONNABORTED) {
				/* e.g. EMFILE: say so, and do not spin on it */
				fprintf(stderr, "bench-passthrough: hop: accept: %s\n",
					strerror(errno));
				usleep(100000);
			}
			continue;
		}
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		rc = pthread_create(&t, NULL, hop_server, (void *)(intptr_t)c);
		if (rc) {
			fprintf(stderr, "bench-passthrough: hop: no server thread: %s\n",
				strerror(rc));
			close(c);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

/* hop_conn_close: thread-exit destructor of a worker's connection, so its
 * server thread ends too. */
static void hop_conn_close(void *p)
{
	(void)p;
	if (hop_sock >= 0)
		close(hop_sock);
	hop_sock = -1;
}

int hop_start(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int ls, rc;
	pthread_t t;

	rc = -pthread_key_create(&hop.key, hop_conn_close);
	if (rc)
		return rc;
	ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls < 0) {
		rc = -errno;
		goto out_delete_key;
	}
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 128) < 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &alen) < 0) {
		rc = -errno;
		goto out_close_listener;
	}
	hop.port = ntohs(a.sin_port);
	rc = -pthread_create(&t, NULL, hop_acceptor, (void *)(intptr_t)ls);
	if (rc)
		goto out_close_listener;
	pthread_detach(t);
	return 0;
out_close_listener:
	close(ls);
out_delete_key:
	pthread_key_delete(hop.key);
	return rc;
}

/* hop_conn: this thread's connection, made on first use (the acceptor
 * gives it a server thread of its own) and closed when the thread exits.
 * Returns the socket or -errno. */
static int hop_conn(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons(hop.port) };
	int s, one = 1;

	if (hop_sock >= 0)
		return hop_sock;
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int rc = -errno;

		close(s);
		return rc;
	}
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* any non-NULL value: the destructor closes hop_sock */
	(void)pthread_setspecific(hop.key, &hop);
	return hop_sock = s;
}

/* hop_fail: drop this thread's connection after an error that may have
 * left it mid-message; the next call connects again. Returns RC. */
static int hop_fail(int rc)
{
	close(hop_sock);
	hop_sock = -1;
	return rc;
}

/* hop_send: send request Q (and its LEN bytes of DATA for a write) in one
 * sendmsg. Returns the socket, or -errno. */
static int hop_send(struct hop_req *q, const void *data)
{
	int s = hop_conn(), rc;

	if (s < 0)
		return s;
	rc = hop_send2(s, q, sizeof(*q), data, data ? q->len : 0);
	return rc ? hop_fail(rc) : s;
}

/* hop_call: hop_send, then read the reply header. Returns the socket with
 * the reply's data next in it, or -errno; *RES gets the reply's result. */
static int hop_call(struct hop_req *q, const void *data, int64_t *res)
{
	struct hop_rep p;
	int s = hop_send(q, data), rc;

	if (s < 0)
		return s;
	rc = hop_full(s, &p, sizeof(p), 1);
	if (rc)
		return hop_fail(rc);
	*res = p.res;
	return s;
}

ssize_t hop_pread(int fd, void *buf, size_t len, off_t off)
{
	struct hop_req q = { .op = HOP_READ, .len = (uint32_t)len, .fd = fd,
			     .off = (uint64_t)off };
	struct hop_rep p;
	struct iovec iov[2] = { { &p, sizeof(p) }, { buf, len } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
	size_t got;
	ssize_t r;
	int s = hop_send(&q, NULL);

	if (s < 0)
		return s;
	/* Header and data in one recvmsg as a rule; finish what is short. */
	r = recvmsg(s, &m, 0);
	if (r <= 0)
		return hop_fail(r < 0 ? -errno : -ECONNRESET);
	got = (size_t)r;
	if (got < sizeof(p) &&
	    hop_full(s, (char *)&p + got, sizeof(p) - got, 1))
		return hop_fail(-EIO);
	got = got > sizeof(p) ? got - sizeof(p) : 0;
	if (p.res > (int64_t)len || (p.res <= 0 && got))
		return hop_fail(-EPROTO);
	if (p.res > 0 && (size_t)p.res > got &&
	    hop_full(s, (char *)buf + got, (size_t)p.res - got, 1))
		return hop_fail(-EIO);
	return p.res;
}

int hop_read_sock(int fd, size_t len, off_t off, int64_t *res)
{
	struct hop_req q = { .op = HOP_READ, .len = (uint32_t)len, .fd = fd,
			     .splice = 1, .off = (uint64_t)off };

	return hop_call(&q, NULL, res);
}

void hop_read_sock_failed(void)
{
	hop_fail(0);
}

ssize_t hop_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	struct hop_req q = { .op = HOP_WRITE, .len = (uint32_t)len, .fd = fd,
			     .off = (uint64_t)off };
	int64_t res = -EIO;
	int s = hop_call(&q, buf, &res);

	return s < 0 ? s : res;
}

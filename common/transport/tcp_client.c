/*
 * tcp_client.c - the client half of the TCP backend.
 *
 * Threads: any number of callers submit and wait; one progress thread per
 * client watches every socket (epoll, one-shot, plus an eventfd for
 * control). A connection's receive side has one owner at a time (rx_owner):
 * nobody, the progress thread, or a waiting caller (leader/follower): a
 * caller whose reply is due and finds nobody reading the connection reads
 * it itself, so its reply wakes it directly instead of waking the progress
 * thread, which then wakes the caller (a wake-up across CPUs costs tens of
 * microseconds here). Only the owner reads the socket, completes calls
 * and tears the connection down, so once it has torn a connection down
 * nothing can write into a failed call's memory any more. Callers that
 * need a teardown (timeout, send failure) ask for it (kill) and wait for
 * it.
 *
 * Epoll (EPOLLONESHOT, enum tcp_arm): a socket wakes the progress thread
 * on a reply only while some call is in flight that no caller reads
 * (ARM_IN); otherwise it wakes it only when the peer closes or fails
 * (ARM_HUP). A lone caller's call therefore changes no epoll state: it is
 * sent while the socket is at ARM_HUP, its submitter reads the reply, and
 * the socket stays at ARM_HUP. Whoever gives up ownership sets the mode
 * from what is still in flight; a submitter whose reply nobody will read
 * at once (write-behind, the second and later iods of a round) sets
 * ARM_IN.
 *
 * Waiters sleep on a futex on their own call's state word: a completion
 * wakes exactly the one caller it concerns (no thundering herd).
 *
 * Lanes: a net_conn to a server is net_opts.tcp_lanes sockets (tcp_conn
 * each, connected on first use); every call goes to the least busy one, so
 * concurrent callers mostly lead their own socket instead of sleeping
 * while another caller reads their reply, and they do not contend on one
 * socket's locks.
 *
 * Pipe destination (net_call rd_pipe): a read call's data frames are
 * spliced from the socket into the caller's pipe, in order, instead of
 * read into its memory: on loopback the pipe then holds references to the
 * pages the iod sent with sendfile, and the FUSE front end splices them on
 * to /dev/fuse (fe_splice.c) - one copy in all instead of two.
 *
 * Sealed streams (a keyed client, net_seal.h): every frame goes out in
 * records tagged under send_lock, and comes in through the staging buffer,
 * where records are opened before the parser sees a byte. So neither
 * direct reads into the caller's memory nor splicing into its pipe: data
 * that is tagged must be read. A pipe gets the opened bytes by write(2).
 *
 * Locks, in order: connect_lock -> send_lock -> lock. The progress thread
 * takes lock, releases it, and only then send_lock (to close a fd).
 */
#include "net_int.h"
#include "log.h"
#include "net_auth.h"
#include "net_seal.h"

#include <errno.h>
#include <fcntl.h> /* splice */
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define TCP_STG_SIZE 16384    /* receive staging per connection */
#define TCP_DIRECT_MIN 2048   /* payload left above which we readv directly */
#define TCP_RX_BUDGET 64      /* reads per connection per wakeup (fairness) */
#define TCP_LEAD_SLICE_MS 10  /* a reading caller checks for kill requests */
#define TCP_SEAL_BATCH 32     /* sealed records per sendmsg (256 KiB) */
#define TCP_AEAD_BATCH 8      /* encrypted ones: copied, so fewer (64 KiB) */

/* A refill starts with less than a header left, and must fit a record. */
_Static_assert(TCP_STG_SIZE >= PROTO_HDR_LEN + NET_SEAL_MAX + NET_SEAL_OVER,
	       "the staging buffer holds a whole sealed record");

/* How a connection's socket is armed in the progress thread's epoll
 * (tcp_conn.arm); every mode is one-shot. */
enum tcp_arm {
	ARM_OFF = 0,  /* fired, or not in epoll: no event until set again */
	ARM_HUP,      /* peer close and errors only: no call in flight that
		       * nobody reads (replies wake no one) */
	ARM_IN,       /* readable too: calls in flight whose replies the
		       * progress thread must read */
};

/* Who reads a connection's socket (tcp_conn.rx_owner). */
enum tcp_rx_owner { RXO_NONE = 0, RXO_PROGRESS, RXO_CALLER };

enum tcp_rx_phase { RX_HDR, RX_BODY, RX_DATA, RX_SKIP };

struct tcp_client;

struct tcp_conn {
	struct net_conn base;
	struct tcp_client *tc;
	char host[PROTO_MAX_HOST + 1];   /* immutable */
	uint16_t port;                   /* immutable */
	struct tcp_conn *next_conn;      /* tc->lock */
	struct tcp_conn *lanes[NET_MAX_TCP_LANES]; /* immutable; first lane
					  * only (it is the net_conn) */
	int nlanes;                      /* immutable; first lane only */
	int busy;                        /* atomic; calls submitted, not waited */

	pthread_mutex_t connect_lock;    /* serialises connection setup */
	pthread_mutex_t send_lock;       /* one frame at a time; close(fd) */
	/* "lock" below is base.lock: it also covers calls' private parts;
	 * base.up, base.gen, base.kill and base.cv are the core's */
	int fd;                          /* lock; -1 when down */
	int ever_up;                     /* lock */
	int credits, credit_max;         /* lock */
	uint64_t next_tag;               /* lock */
	struct net_call **tab;           /* lock; pending calls by tag */
	unsigned tab_mask;               /* lock */
	int rx_owner;                    /* lock; enum tcp_rx_owner */
	int arm;                         /* lock; enum tcp_arm */
	int inflight;                    /* lock; calls in tab */
	int credit_waiters;              /* lock; submitters waiting for a credit */
	struct net_seal tx_seal;         /* send_lock; the sealed stream out */
	uint8_t *seal_buf;               /* send_lock; encrypted records being
					  * sent (NET_SEAL_AEAD), made at first use */
	struct net_seal rx_seal0;        /* lock; rx_seal as of the connect */

	/* receive side owner only (rx_owner, handed over under lock) */
	uint64_t rx_gen;
	enum tcp_rx_phase phase;
	struct proto_hdr h;
	struct net_call *rx_call;
	uint64_t rx_left, rx_pos;
	uint32_t stg_off, stg_len;       /* stg_len: end of opened bytes */
	uint32_t raw_len;                /* sealed bytes after stg_len, not
					  * yet a whole record */
	struct net_seal rx_seal;         /* the sealed stream in */
	struct iovec scratch[IOV_MAX];   /* readv slices of rd_iov */
	uint8_t stg[TCP_STG_SIZE];
};

struct tcp_client {
	struct net_client base;          /* base.pg: the progress thread,
					  * its epoll set keyed by connection
					  * (NULL: the kick) */
	int sealed;                      /* immutable; keyed: every stream
					  * is sealed after AUTH (net_seal.h) */
	pthread_mutex_t lock;            /* conns list */
	struct tcp_conn *conns;
};

static int tcp_rx_take(struct tcp_conn *c, int who);
static int tcp_rx_owned(struct tcp_conn *c, struct net_call *stop_call);
static void tcp_rx_release(struct tcp_conn *c);

/* ----------------------------------------------------------- pending table */

/* Calls this thread submitted with wait_now and has not begun to wait for
 * (net_call.lead marks them). The first one's socket the thread will read
 * itself; the others (further iods of a round) are armed for the progress
 * thread, which reads them meanwhile. */
static __thread int tcp_tls_unwaited;

/* Register call in c's pending table. Caller holds c->base.lock. */
static void tcp_tab_insert(struct tcp_conn *c, struct net_call *call)
{
	struct net_call **b = &c->tab[call->tag & c->tab_mask];

	call->next = *b;
	*b = call;
	c->inflight++;
}

/* Find a pending call by tag. Caller holds c->base.lock. O(chain). */
static struct net_call *tcp_tab_find(struct tcp_conn *c, uint64_t tag)
{
	for (struct net_call *p = c->tab[tag & c->tab_mask]; p; p = p->next)
		if (p->tag == tag)
			return p;
	return NULL;
}

/* Unlink call from c's pending table (a no-op when it is not there) and
 * count it out of flight. Caller holds c->base.lock. O(chain). */
static void tcp_tab_remove(struct tcp_conn *c, struct net_call *call)
{
	struct net_call **pp = &c->tab[call->tag & c->tab_mask];

	for (; *pp; pp = &(*pp)->next)
		if (*pp == call) {
			*pp = call->next;
			call->next = NULL;
			c->inflight--;
			return;
		}
}

/*
 * Set the epoll mode of c's socket to mode (enum tcp_arm) unless it is
 * there already. Caller holds c->base.lock; c is up. Cost: one epoll_ctl when
 * the mode changes, nothing otherwise.
 */
static void tcp_arm_set(struct tcp_conn *c, int mode)
{
	struct epoll_event ev = { .events = EPOLLRDHUP | EPOLLONESHOT,
				  .data.ptr = c };

	if (c->arm == mode)
		return;
	if (mode == ARM_IN)
		ev.events |= EPOLLIN;
	if (epoll_ctl(c->tc->base.pg.epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->arm = mode;
	else
		log_err("net: epoll_ctl: %s", strerror(errno));
}

/* The mode c's socket needs while nobody owns its receive side: replies
 * due (calls in flight, or credits awaited) need a reader. Caller holds
 * c->base.lock. */
static int tcp_arm_wanted(const struct tcp_conn *c)
{
	return c->inflight > 0 || c->credit_waiters > 0 ? ARM_IN : ARM_HUP;
}

/* --------------------------------------------------------------- teardown */

/*
 * Tear a connection down; the caller owns its receive side (rx_owner), so
 * nobody else is reading into a call's memory. Stop reading it, fail
 * every pending call (culprit gets culprit_err, calls already marked by
 * their waiter keep that error, the rest get -EIO), then close the socket
 * once no sender is using it. Safe to call when already down.
 */
static void tcp_conn_down(struct tcp_conn *c, struct net_call *culprit,
			  int culprit_err)
{
	struct tcp_client *tc = c->tc;
	int fd;

	pthread_mutex_lock(&c->base.lock);
	c->base.kill = 0;
	if (!c->base.up) {
		pthread_mutex_unlock(&c->base.lock);
		return;
	}
	fd = c->fd;
	c->base.up = 0;
	c->fd = -1;
	c->credits = 0;
	epoll_ctl(tc->base.pg.epfd, EPOLL_CTL_DEL, fd, NULL);
	/* close with a reset: what the kernel still holds to send belongs to
	 * calls failed here, and must never reach the server later, behind
	 * newer requests on a new connection (a timed-out write, resent once
	 * a cut link is back, would overwrite acknowledged data) */
	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &(struct linger){ 1, 0 },
			 sizeof(struct linger));
	shutdown(fd, SHUT_RDWR); /* unblocks a sender in poll/sendmsg */
	for (unsigned i = 0; i <= c->tab_mask; i++) {
		struct net_call *p = c->tab[i];
		c->tab[i] = NULL;
		while (p) {
			struct net_call *nx = p->next;
			p->next = NULL;
			c->inflight--;
			net_call_fail(p, culprit, culprit_err);
			p = nx;
		}
	}
	pthread_cond_broadcast(&c->base.cv);
	pthread_mutex_unlock(&c->base.lock);

	pthread_mutex_lock(&c->send_lock);
	close(fd);
	pthread_mutex_unlock(&c->send_lock);
	NET_STAT_ADD(&tc->base.st, conn_errors, 1);
	log_debug("net: connection to %s:%u closed", c->host, c->port);
}

/* ----------------------------------------------------------- connect side */

/* Poll one fd for ev until deadline. @return 0, -ETIMEDOUT, -errno */
static int tcp_poll(int fd, short ev, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = ev };
		int ms = net_ms_left(deadline);
		if (ms == 0)
			return -ETIMEDOUT;
		int n = poll(&p, 1, ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n > 0)
			return 0;
	}
}

/*
 * Write all of iov (any count) to fd by sendmsg(MSG_NOSIGNAL), polling when
 * the socket is full, until deadline. Modifies iov. @return 0, -ETIMEDOUT,
 * -EIO (peer gone or socket shut down)
 */
static int tcp_send_all(int fd, struct iovec *iov, int cnt, uint64_t deadline,
			uint64_t *sent)
{
	int i = 0;

	while (i < cnt) {
		if (iov[i].iov_len == 0) {
			i++;
			continue;
		}
		struct msghdr m = { .msg_iov = iov + i,
				    .msg_iovlen = (size_t)(cnt - i > IOV_MAX ? IOV_MAX : cnt - i) };
		ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -EIO;
			int rc = tcp_poll(fd, POLLOUT, deadline);
			if (rc)
				return rc == -ETIMEDOUT ? rc : -EIO;
			continue;
		}
		*sent += (uint64_t)n;
		while (n > 0 && i < cnt) {
			if ((size_t)n >= iov[i].iov_len) {
				n -= (ssize_t)iov[i].iov_len;
				iov[i].iov_len = 0;
				i++;
			} else {
				iov[i].iov_base = (uint8_t *)iov[i].iov_base + n;
				iov[i].iov_len -= (size_t)n;
				n = 0;
			}
		}
	}
	return 0;
}

/* Read exactly len bytes from a non-blocking fd until deadline.
 * @return 0, -ETIMEDOUT, -ECONNRESET (EOF), -errno */
static int tcp_recv_all(int fd, void *buf, size_t len, uint64_t deadline)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = recv(fd, p, len, 0);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int rc = tcp_poll(fd, POLLIN, deadline);
		if (rc)
			return rc;
	}
	return 0;
}

/* Non-blocking connect to one address, waiting until deadline.
 * @return fd, or -errno */
static int tcp_dial_one(const struct addrinfo *ai, uint64_t deadline)
{
	int fd, rc, one = 1, err = 0;
	socklen_t el = sizeof(err);

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS) {
			rc = -errno;
			goto out_close_fd;
		}
		rc = tcp_poll(fd, POLLOUT, deadline);
		if (rc)
			goto out_close_fd;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) {
			rc = -errno;
			goto out_close_fd;
		}
		if (err) {
			rc = -err;
			goto out_close_fd;
		}
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;

out_close_fd:
	close(fd);
	return rc;
}

/* Resolve host:port and connect to the first address that answers.
 * @return fd, or -ECONNREFUSED/-EHOSTUNREACH/-ETIMEDOUT/-ENOTCONN */
static int tcp_dial(const char *host, uint16_t port, uint64_t deadline)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	char ps[8];
	int rc = -ENOTCONN;

	snprintf(ps, sizeof(ps), "%u", port);
	if (getaddrinfo(host, ps, &hints, &res) != 0)
		return -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		rc = tcp_dial_one(ai, deadline);
		if (rc >= 0 || rc == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	if (rc == -ENETUNREACH)
		rc = -EHOSTUNREACH;
	else if (rc < 0 && rc != -ECONNREFUSED && rc != -EHOSTUNREACH &&
		 rc != -ETIMEDOUT)
		rc = -ENOTCONN;
	return rc;
}

/*
 * One handshake exchange: send a CTRL frame (op, body) and read the CTRL
 * reply header and its body (at most cap bytes) before the deadline.
 * @return 0, -ETIMEDOUT, -ENOTCONN (socket failed), -EPROTO (bad reply)
 */
static int tcp_hs_exchange(struct tcp_client *tc, int fd, uint64_t deadline,
			   uint16_t op, const void *body, uint32_t len,
			   struct proto_hdr *h, uint8_t *rep, uint32_t cap)
{
	uint8_t buf[PROTO_HDR_LEN];
	struct proto_hdr q = { .op = op, .flags = PROTO_F_CTRL, .body_len = len };
	struct iovec iov[2] = { { buf, sizeof(buf) }, { (void *)body, len } };
	const char *why = "?";
	uint64_t sent = 0;
	int rc;

	proto_hdr_encode(buf, &q);
	rc = tcp_send_all(fd, iov, len ? 2 : 1, deadline, &sent);
	if (rc)
		return rc == -ETIMEDOUT ? rc : -ENOTCONN;
	NET_STAT_ADD(&tc->base.st, bytes_tx, sent);
	NET_STAT_ADD(&tc->base.st, msgs_tx, 1);
	rc = tcp_recv_all(fd, buf, sizeof(buf), deadline);
	if (rc)
		return rc == -ETIMEDOUT ? rc : -ENOTCONN;
	rc = proto_hdr_decode(buf, h, &why);
	if (rc == 0 && h->flags != (PROTO_F_CTRL | PROTO_F_REPLY))
		why = "handshake reply flags", rc = -EPROTO;
	else if (rc == 0 && (h->op != op || h->bulk_len || h->body_len > cap))
		why = "handshake reply fields", rc = -EPROTO;
	if (rc == 0 && h->body_len) {
		rc = tcp_recv_all(fd, rep, h->body_len, deadline);
		if (rc)
			return rc == -ETIMEDOUT ? rc : -ENOTCONN;
	}
	if (rc) {
		log_warn("net: handshake failed: %s", why);
		return -EPROTO;
	}
	NET_STAT_ADD(&tc->base.st, bytes_rx, sizeof(buf) + h->body_len);
	NET_STAT_ADD(&tc->base.st, msgs_rx, 1);
	return 0;
}

/*
 * Transport handshake on a fresh socket (see net_auth.h for the key part):
 * HELLO (with our nonce and key class when we have a key) -> the server's
 * credit limit, and with a key its nonce and proof; then AUTH with our
 * proof, which the server answers with status 0 before serving anything.
 * A client with a key refuses a server that cannot prove it (also one
 * that has no key: it could be an impostor), and never sends such a
 * server its own proof. With a key, what follows is sealed: seal gets
 * the two directions' states (net_seal.h), [0] out and [1] in.
 * @return 0, -ETIMEDOUT, -ENOTCONN, -EACCES (key refused / not proved)
 */
static int tcp_client_handshake(struct tcp_client *tc, int fd, uint64_t deadline,
				int *credits, const char *peer, struct net_seal seal[2])
{
	uint8_t cls, hello[NET_AUTH_HELLO_FLAGS_LEN], mac[NET_AUTH_MAC_LEN];
	const uint8_t *key = net_auth_client_key(&tc->base.opts, &cls);
	uint8_t rep[NET_AUTH_NONCE_LEN + NET_AUTH_MAC_LEN + 1];
	const size_t proof = NET_AUTH_NONCE_LEN + NET_AUTH_MAC_LEN;
	struct proto_hdr h;
	int rc, mode;

	if (key) {
		net_auth_nonce(hello);
		hello[NET_AUTH_NONCE_LEN] = cls;
		hello[NET_AUTH_HELLO_LEN] = tc->base.opts.encrypt ? NET_AUTH_F_ENCRYPT : 0;
	}
	rc = tcp_hs_exchange(tc, fd, deadline, PROTO_OP_NET_HELLO,
			     key ? hello : NULL, key ? sizeof(hello) : 0,
			     &h, rep, sizeof(rep));
	if (rc)
		return rc == -EPROTO ? -ENOTCONN : rc;
	if (h.status == -EACCES) {
		if (key)
			log_err("net: %s does not accept %s", peer,
				net_auth_class_name(cls));
		else
			log_err("net: %s requires a cluster key and we have none (%s)",
				peer, log_key_advice());
		NET_STAT_ADD(&tc->base.st, auth_fail, 1);
		return -EACCES;
	}
	if (h.status != 0 || h.credits == 0) {
		log_warn("net: %s: handshake failed: status %d, credits %u", peer,
			 h.status, h.credits);
		return -ENOTCONN;
	}
	*credits = h.credits;
	if (!key) {
		if (h.body_len) {
			log_warn("net: %s: handshake failed: unexpected proof", peer);
			return -ENOTCONN;
		}
		return 0;
	}
	if ((h.body_len != proof && h.body_len != proof + 1) ||
	    net_auth_check(key, NET_AUTH_ROLE_SERVER, hello, rep,
			   rep + NET_AUTH_NONCE_LEN)) {
		log_err("net: %s: the server failed to prove %s (%s); refusing it",
			peer, net_auth_class_name(cls),
			h.body_len ? "its key differs from ours" : "it has no key");
		NET_STAT_ADD(&tc->base.st, auth_fail, 1);
		return -EACCES;
	}
	mode = h.body_len > proof ? rep[proof] : NET_SEAL_MAC;
	if (mode != NET_SEAL_MAC && mode != NET_SEAL_AEAD) {
		log_warn("net: %s: handshake failed: unknown seal mode %d", peer, mode);
		return -ENOTCONN;
	}
	if (tc->base.opts.encrypt && mode != NET_SEAL_AEAD) {
		log_err("net: %s: the server did not agree to encrypt ([net] encrypt); "
			"refusing it", peer);
		return -EACCES;
	}
	net_auth_mac(key, NET_AUTH_ROLE_CLIENT, hello, rep, mac);
	rc = tcp_hs_exchange(tc, fd, deadline, PROTO_OP_NET_AUTH, mac, sizeof(mac),
			     &h, rep, 0);
	if (rc)
		return rc == -EPROTO ? -ENOTCONN : rc;
	if (h.status) {
		log_err("net: %s refused our cluster key", peer);
		NET_STAT_ADD(&tc->base.st, auth_fail, 1);
		return -EACCES;
	}
	NET_STAT_ADD(&tc->base.st, auth_ok, 1);
	net_seal_init(&seal[0], key, NET_AUTH_ROLE_CLIENT, mode, hello, rep);
	net_seal_init(&seal[1], key, NET_AUTH_ROLE_SERVER, mode, hello, rep);
	return 0;
}

/*
 * Install fd, through the handshake, as c's socket: the pending table
 * sized to the credit limit, the credits, the seal states, and the socket
 * in the progress thread's epoll (calls arm it for replies). Takes
 * send_lock (no frame is mid-send while tx_seal changes) and lock.
 * @return 0, -ENOMEM, -errno of epoll_ctl (c stays down; fd is the
 *	caller's to close)
 */
static int tcp_conn_install(struct tcp_conn *c, int fd, int credits,
			    const struct net_seal seal[2])
{
	struct tcp_client *tc = c->tc;
	struct epoll_event ev = { .events = EPOLLRDHUP | EPOLLONESHOT, .data.ptr = c };
	int rc = 0;
	unsigned nb;

	/* Pending table: a power of two around the credit limit. */
	for (nb = 16; nb < (unsigned)credits && nb < 4096; nb <<= 1)
		;
	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->base.lock);
	if (nb - 1 > c->tab_mask) {
		struct net_call **t = calloc(nb, sizeof(*t));
		if (!t) {
			rc = -ENOMEM;
			goto out_unlock;
		}
		free(c->tab); /* empty: the last teardown drained it */
		c->tab = t;
		c->tab_mask = nb - 1;
	}
	/* No call is in flight yet: submit arms ARM_IN if it must. */
	if (epoll_ctl(tc->base.pg.epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		rc = -errno;
		goto out_unlock;
	}
	c->arm = ARM_HUP;
	c->fd = fd;
	c->base.up = 1;
	c->base.gen++;
	c->credits = c->credit_max = credits;
	c->base.kill = 0;
	if (tc->sealed) {
		c->tx_seal = seal[0];
		c->rx_seal0 = seal[1];
	}
	if (c->ever_up)
		net_conn_reconnected(&c->base);
	c->ever_up = 1;
	pthread_cond_broadcast(&c->base.cv);
out_unlock:
	pthread_mutex_unlock(&c->base.lock);
	pthread_mutex_unlock(&c->send_lock);
	return rc;
}

/*
 * Make sure c is connected: one caller at a time dials, handshakes and
 * installs the socket; the others wait on connect_lock and then find it up.
 * @return 0, or the dial/handshake error
 */
static int tcp_conn_connect(struct net_conn *nc, uint64_t deadline)
{
	struct tcp_conn *c = NET_CONTAINER_OF(nc, struct tcp_conn, base);
	struct tcp_client *tc = c->tc;
	char peer[PROTO_MAX_HOST + 16];
	struct net_seal seal[2];
	int fd, rc, credits = 0;

	rc = net_conn_connect_lock(&c->connect_lock, deadline);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->base.lock);
	rc = c->base.up;
	pthread_mutex_unlock(&c->base.lock);
	if (rc) {
		rc = 0;
		goto out_unlock;
	}
	fd = tcp_dial(c->host, c->port, deadline);
	if (fd < 0) {
		rc = fd;
		goto out_unlock;
	}
	snprintf(peer, sizeof(peer), "%s:%u", c->host, c->port);
	rc = tcp_client_handshake(tc, fd, deadline, &credits, peer, seal);
	if (rc == 0)
		rc = tcp_conn_install(c, fd, credits, seal);
	if (rc)
		goto out_close_fd;
	pthread_mutex_unlock(&c->connect_lock);
	return 0;

out_close_fd:
	close(fd);
out_unlock:
	pthread_mutex_unlock(&c->connect_lock);
	if (rc)
		NET_STAT_ADD(&tc->base.st, conn_errors, 1);
	return rc;
}

/* ------------------------------------------------------------ submit/wait */

/*
 * The lane for a new call: the first idle one from a per-thread starting
 * point (so a thread keeps reusing a warm socket), else the least busy.
 * Cost: one relaxed load per lane. The caller then owns one busy count.
 */
static struct tcp_conn *tcp_lane_pick(struct tcp_conn *c0)
{
	static __thread unsigned start;
	static unsigned next_start;
	struct tcp_conn *best = c0->lanes[0];
	int best_busy = INT_MAX;

	if (!start)
		start = __atomic_add_fetch(&next_start, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < c0->nlanes; i++) {
		struct tcp_conn *l = c0->lanes[(start + (unsigned)i) % (unsigned)c0->nlanes];
		int b = __atomic_load_n(&l->busy, __ATOMIC_RELAXED);
		if (b < best_busy) {
			best = l;
			best_busy = b;
			if (b == 0)
				break;
		}
	}
	__atomic_add_fetch(&best->busy, 1, __ATOMIC_RELAXED);
	return best;
}

/* Drop the busy count a call held on its lane. */
static void tcp_lane_put(struct tcp_conn *c)
{
	__atomic_sub_fetch(&c->busy, 1, __ATOMIC_RELAXED);
}

/* The core's credit_take hook: one credit of c (c->base.lock held).
 * @return 0 taken, -1 none left */
static int tcp_credit_take(struct net_conn *nc)
{
	struct tcp_conn *c = NET_CONTAINER_OF(nc, struct tcp_conn, base);

	if (c->credits <= 0)
		return -1;
	c->credits--;
	return 0;
}

/*
 * The core's credit_wait hook: wait on c->base.cv (c->base.lock held) until
 * deadline. Credits come back in frames someone has to read: with
 * nobody on the receive side, the socket is armed for input first, and
 * credit_waiters keeps it so (tcp_arm_wanted).
 * @return 0 look again, -ETIMEDOUT (no credit came)
 */
static int tcp_credit_wait(struct net_conn *nc, uint64_t deadline)
{
	struct tcp_conn *c = NET_CONTAINER_OF(nc, struct tcp_conn, base);
	struct timespec ts = net_ns_to_ts(deadline);
	int rc;

	if (c->rx_owner == RXO_NONE)
		tcp_arm_set(c, ARM_IN);
	c->credit_waiters++;
	rc = pthread_cond_timedwait(&c->base.cv, &c->base.lock, &ts);
	c->credit_waiters--;
	if (rc == ETIMEDOUT && !(c->base.up && c->credits > 0))
		return -ETIMEDOUT;
	return 0;
}

/*
 * Write iov as sealed records on c's stream (send_lock held), a batch of
 * records per sendmsg. Cost: one Poly1305 pass over the bytes, no copy;
 * encrypted, a copy into c->seal_buf and a ChaCha20-Poly1305 pass.
 * @return tcp_send_all's, or -EIO (no memory for the encrypted records)
 */
static int tcp_send_sealed(struct tcp_conn *c, int fd, const struct iovec *iov,
			   int cnt, uint64_t deadline, uint64_t *sent)
{
	struct iovec out[8 * TCP_SEAL_BATCH];
	uint8_t meta_mac[NET_SEAL_OVER * TCP_SEAL_BATCH], *meta = meta_mac;
	int n, rc = 0, batch = TCP_SEAL_BATCH;
	struct net_seal_cur cur;

	if (c->tx_seal.mode == NET_SEAL_AEAD) {
		if (!c->seal_buf)
			c->seal_buf = malloc(NET_SEAL_META(NET_SEAL_AEAD) * TCP_AEAD_BATCH);
		if (!c->seal_buf)
			return -EIO;
		meta = c->seal_buf;
		batch = TCP_AEAD_BATCH;
	}
	net_seal_cur_init(&cur, iov, cnt);
	while (rc == 0 && (n = net_seal_iov(&c->tx_seal, &cur, out,
					    (int)(sizeof(out) / sizeof(out[0])),
					    meta, batch)) > 0)
		rc = tcp_send_all(fd, out, n, deadline, sent);
	return rc;
}

/*
 * Write call's frame (header, body, write data: wr bytes; rd bytes asked
 * back) on c under its send lock, unless c went down since generation
 * gen. Cost: one sendmsg for small calls.
 * @return 0, -ETIMEDOUT, -EIO (the stream may hold part of the frame)
 */
static int tcp_send_frame(struct tcp_conn *c, struct net_call *call, uint64_t wr,
			  uint64_t rd, uint64_t gen, uint64_t deadline)
{
	struct iovec iov_stack[8], *iov = iov_stack;
	uint8_t hb[PROTO_HDR_LEN];
	struct proto_hdr h = { .op = call->op, .tag = call->tag,
			       .body_len = call->body_len, .bulk_len = wr, .aux = rd };
	uint64_t sent = 0;
	int rc, ok, fd, cnt = 2 + call->wr_cnt;

	proto_hdr_encode(hb, &h);
	if (cnt > (int)(sizeof(iov_stack) / sizeof(iov_stack[0]))) {
		iov = malloc((size_t)cnt * sizeof(*iov)); /* small: <= 16 KiB */
		if (!iov)
			return -EIO;
	}
	iov[0] = (struct iovec){ hb, sizeof(hb) };
	iov[1] = (struct iovec){ (void *)call->body, call->body_len };
	for (int i = 0; i < call->wr_cnt; i++)
		iov[2 + i] = call->wr_iov[i];

	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->base.lock);
	ok = c->base.up && c->base.gen == gen;
	fd = c->fd;
	pthread_mutex_unlock(&c->base.lock);
	if (!ok)
		rc = -EIO;
	else if (c->tc->sealed)
		rc = tcp_send_sealed(c, fd, iov, cnt, deadline, &sent);
	else
		rc = tcp_send_all(fd, iov, cnt, deadline, &sent);
	pthread_mutex_unlock(&c->send_lock);
	if (iov != iov_stack)
		free(iov);
	NET_STAT_ADD(&c->tc->base.st, bytes_tx, sent);
	return rc;
}

/*
 * Send a call on the least busy lane: admission through the core
 * (connect if needed, take a credit, waiting up to the deadline),
 * register the call by tag, then write header + body + write data under
 * the send lock. A failed send aborts the call (its connection is torn
 * down: part of the frame may be out). The lane's busy count is held
 * until the wait ends, or given back here on failure. Cost: one sendmsg
 * for small calls.
 * @return 0, -EINVAL (the call), -ETIMEDOUT, -errno of the connect, -EIO
 */
static int tcp_submit(struct net_conn *nc, struct net_call *call)
{
	struct tcp_conn *c = tcp_lane_pick(NET_CONTAINER_OF(nc, struct tcp_conn, base));
	struct tcp_client *tc = c->tc;
	uint64_t wr, rd, deadline, mygen;
	int rc;

	rc = net_call_check(call, 1, &wr, &rd);
	if (rc)
		goto out_lane_put;
	deadline = net_now_ns() + net_call_timeout_ns(call, &tc->base.opts);
	rc = net_conn_admit(&c->base, deadline);
	if (rc < 0)
		goto out_lane_put;
	/* conn is the lane: the wait reads it */
	net_call_start(call, &c->base, ++c->next_tag, deadline, NET_CALL_SENT);
	tcp_tab_insert(c, call);
	/* The reply of this thread's first wait_now call is read by this
	 * thread; any other needs the progress thread (see tcp_tls_unwaited)
	 * unless a caller owns the socket (it sets the mode when it lets go). */
	if ((!call->wait_now || tcp_tls_unwaited > 0) && c->rx_owner == RXO_NONE)
		tcp_arm_set(c, ARM_IN);
	mygen = c->base.gen;
	pthread_mutex_unlock(&c->base.lock);

	rc = tcp_send_frame(c, call, wr, rd, mygen, deadline);
	if (rc) {
		/* Part of a frame may be on the wire: the stream is lost. */
		net_call_abort(call, rc);
		rc = net_call_unsent(call, call->err ? call->err : rc);
		rc = rc == -ETIMEDOUT ? rc : -EIO;
		goto out_lane_put;
	}
	NET_STAT_ADD(&tc->base.st, msgs_tx, 1);
	NET_STAT_ADD(&tc->base.st, bulk_pull_bytes, wr);
	call->lead = call->wait_now;
	tcp_tls_unwaited += call->wait_now;
	return 0;

out_lane_put:
	tcp_lane_put(c);
	return rc;
}

/*
 * Lead: read c's socket ourselves until call completes (we own its receive
 * side). Replies of other calls met on the way complete them as the
 * progress thread would. On the deadline, fail the call with -ETIMEDOUT and
 * tear the connection down (we are the owner, so nobody else can). Cost:
 * a poll per wait plus the receive syscalls the progress thread would make;
 * saves the hand-off of every reply through the progress thread.
 */
static void tcp_lead(struct tcp_conn *c, struct net_call *call)
{
	for (;;) {
		int rc, fd, ms;

		if (__atomic_load_n(&call->state, __ATOMIC_ACQUIRE) == NET_CALL_DONE)
			return;
		rc = tcp_rx_owned(c, call);
		if (rc > 0)
			continue; /* maybe more to read */
		if (rc < 0)
			return; /* torn down: the call is done */
		if (__atomic_load_n(&call->state, __ATOMIC_ACQUIRE) == NET_CALL_DONE)
			return;
		pthread_mutex_lock(&c->base.lock);
		fd = c->base.up ? c->fd : -1;
		if (fd >= 0 && net_now_ns() >= call->deadline_ns &&
		    __atomic_load_n(&call->state, __ATOMIC_ACQUIRE) != NET_CALL_DONE) {
			if (!call->err)
				call->err = -ETIMEDOUT;
			c->base.kill = 1;
		}
		pthread_mutex_unlock(&c->base.lock);
		if (fd < 0)
			return;
		ms = net_ms_left(call->deadline_ns);
		if (ms > TCP_LEAD_SLICE_MS)
			ms = TCP_LEAD_SLICE_MS;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		(void)poll(&p, 1, ms);
	}
}

/*
 * The core's lead hook (net_call_await): when nobody reads the call's
 * lane, read it ourselves (tcp_lead) until the call is done or its
 * deadline passed (tcp_lead then asked for the teardown and served it).
 * @return 1 led, 0 somebody else reads it (the core sleeps)
 */
static int tcp_wait_lead(struct net_call *call, struct net_wait *w)
{
	struct tcp_conn *c = NET_CONTAINER_OF(call->conn, struct tcp_conn, base);

	(void)w;
	if (!tcp_rx_take(c, RXO_CALLER))
		return 0;
	tcp_lead(c, call);
	tcp_rx_release(c);
	return 1;
}

/* The core's wait_end hook: the call no longer counts among this
 * thread's unwaited ones (tcp_tls_unwaited), and gives back the busy
 * count it held on its lane since submit (a call that was not in
 * flight holds none). */
static void tcp_wait_end(struct net_call *call, struct net_wait *w)
{
	if (w->lead)
		tcp_tls_unwaited--;
	if (!w->bad)
		tcp_lane_put(NET_CONTAINER_OF(call->conn, struct tcp_conn, base));
}

/* -------------------------------------------------------- progress thread */

/* Start reading a frame whose header is in c->h. Progress thread.
 * @return 0, or -EPROTO with culprit and cerr set for teardown */
static int tcp_rx_hdr(struct tcp_conn *c, struct net_call **culprit, int *cerr)
{
	struct tcp_client *tc = c->tc;
	struct proto_hdr *h = &c->h;
	struct net_call *call = NULL;
	const char *why = NULL;

	pthread_mutex_lock(&c->base.lock);
	if (h->flags == PROTO_F_CTRL && h->op == PROTO_OP_NET_CREDIT && !h->bulk_len) {
		c->credits += h->credits;
		if (c->credits > c->credit_max)
			c->credits = c->credit_max;
		pthread_cond_broadcast(&c->base.cv);
		NET_STAT_ADD(&tc->base.st, msgs_rx, 1);
		c->phase = RX_SKIP;
		c->rx_left = h->body_len;
	} else if (h->flags == PROTO_F_DATA || h->flags == PROTO_F_REPLY) {
		call = tcp_tab_find(c, h->tag);
		if (!call) {
			why = "reply for unknown tag";
		} else if (h->flags == PROTO_F_DATA) {
			uint64_t rd = net_iov_total(call->rd_iov, call->rd_cnt);
			if (h->body_len || h->aux > rd || h->bulk_len > rd - h->aux) {
				why = "data frame outside read memory";
			} else if (call->rd_pipe && h->aux != call->rd_bytes) {
				why = "data frame out of order for a pipe";
			} else {
				c->phase = RX_DATA;
				c->rx_left = h->bulk_len;
				c->rx_pos = h->aux;
				NET_STAT_ADD(&tc->base.st, data_frames, 1);
				NET_STAT_ADD(&tc->base.st, bulk_push_bytes, h->bulk_len);
			}
		} else if (h->bulk_len || h->body_len > call->rep_cap) {
			why = "reply body larger than reply buffer";
		} else {
			c->phase = RX_BODY;
			c->rx_left = h->body_len;
			c->rx_pos = 0;
		}
	} else {
		why = "unexpected frame flags";
	}
	pthread_mutex_unlock(&c->base.lock);
	if (why) {
		log_warn("net: %s:%u: %s (op %u tag %llu); closing", c->host,
			 c->port, why, h->op, (unsigned long long)h->tag);
		*culprit = call;
		*cerr = -EPROTO;
		return -EPROTO;
	}
	c->rx_call = call;
	return 0;
}

/* A frame's payload is all in: complete a reply. Progress thread. */
static void tcp_rx_finish(struct tcp_conn *c)
{
	struct net_call *call = c->rx_call;

	c->phase = RX_HDR;
	c->rx_call = NULL;
	if (!call)
		return;
	if (c->h.flags == PROTO_F_DATA) {
		call->rd_bytes += c->h.bulk_len;
		return;
	}
	pthread_mutex_lock(&c->base.lock);
	tcp_tab_remove(c, call);
	call->status = c->h.status;
	call->rep_len = c->h.body_len;
	call->err = 0;
	c->credits += c->h.credits;
	if (c->credits > c->credit_max)
		c->credits = c->credit_max;
	if (c->h.credits)
		pthread_cond_signal(&c->base.cv);
	net_call_done(call);
	pthread_mutex_unlock(&c->base.lock);
	NET_STAT_ADD(&c->tc->base.st, msgs_rx, 1);
}

/* Deliver n bytes of payload from src to the current frame's target
 * (a pipe gets them by write(2): only what was staged, at most 8 KiB).
 * @return 0, or -ENOBUFS the pipe took less (full: the caller broke the
 *	rd_pipe contract) */
static int tcp_rx_deliver(struct tcp_conn *c, const uint8_t *src, size_t n)
{
	struct net_call *call = c->rx_call;

	if (c->phase == RX_BODY) {
		memcpy((uint8_t *)call->rep_buf + c->rx_pos, src, n);
	} else if (c->phase == RX_DATA && call->rd_pipe) {
		ssize_t w = write(call->rd_pipe_fd, src, n);

		if (w < 0 || (size_t)w != n)
			return -ENOBUFS;
		NET_STAT_ADD(&c->tc->base.st, pipe_bytes, n);
		NET_STAT_ADD(&c->tc->base.st, pipe_staged_bytes, n);
		NET_STAT_ADD(&c->tc->base.st, client_copy_bytes, n);
	} else if (c->phase == RX_DATA) {
		net_iov_copy_in(call->rd_iov, call->rd_cnt, c->rx_pos, src, n);
		NET_STAT_ADD(&c->tc->base.st, client_copy_bytes, n);
	}
	c->rx_pos += n;
	c->rx_left -= n;
	return 0;
}

/*
 * Splice the rest of the current data frame from the socket into its
 * call's pipe. Cost: one splice(2) per socket buffer's worth, no copy.
 * TCP's splice sometimes refuses (EAGAIN) although bytes are queued (seen
 * on loopback mid-frame); then the step stages them by recv and writes
 * them to the pipe instead (tcp_rx_deliver), which stays correct.
 * @return >0 bytes moved, 0 the socket is closed, -1 with errno EAGAIN
 *	(nothing to read now) or EINPROGRESS (bytes queued: stage them)
 */
static ssize_t tcp_rx_splice(struct tcp_conn *c, int fd)
{
	ssize_t n = splice(fd, NULL, c->rx_call->rd_pipe_fd, NULL,
			   (size_t)c->rx_left, SPLICE_F_NONBLOCK);
	char b;

	if (n >= 0 || errno != EAGAIN)
		return n;
	if (recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1) {
		errno = EINPROGRESS;
	} else {
		errno = EAGAIN;
	}
	return -1;
}

/* A staged header: decode it and start its frame.
 * @return 1, <0 error (teardown; culprit set) */
static int tcp_rx_hdr_step(struct tcp_conn *c, struct net_call **culprit, int *cerr)
{
	const char *why = "?";
	int rc = proto_hdr_decode(c->stg + c->stg_off, &c->h, &why);

	c->stg_off += PROTO_HDR_LEN;
	if (rc) {
		log_warn("net: %s:%u: bad frame header: %s; closing", c->host, c->port, why);
		return -EPROTO;
	}
	rc = tcp_rx_hdr(c, culprit, cerr);
	if (rc)
		return rc;
	if (c->rx_left == 0)
		tcp_rx_finish(c);
	return 1;
}

/* Staged payload (avail bytes) to where the frame's bytes go.
 * @return 1, -ENOBUFS (the read pipe is full; culprit set) */
static int tcp_rx_staged_data(struct tcp_conn *c, uint32_t avail,
			      struct net_call **culprit, int *cerr)
{
	size_t k = avail < c->rx_left ? avail : (size_t)c->rx_left;

	if (tcp_rx_deliver(c, c->stg + c->stg_off, k)) {
		log_warn("net: %s:%u: read pipe full (op %u tag %llu)", c->host, c->port,
			 c->h.op, (unsigned long long)c->h.tag);
		*culprit = c->rx_call;
		*cerr = -ENOBUFS;
		return -ENOBUFS;
	}
	c->stg_off += (uint32_t)k;
	if (c->rx_left == 0)
		tcp_rx_finish(c);
	return 1;
}

/* n > 0 payload bytes went straight to their destination: count them. */
static void tcp_rx_advance(struct tcp_conn *c, ssize_t n)
{
	NET_STAT_ADD(&c->tc->base.st, bytes_rx, n);
	c->rx_pos += (uint64_t)n;
	c->rx_left -= (uint64_t)n;
	if (c->rx_left == 0)
		tcp_rx_finish(c);
}

/* Read the rest of a body or of read data straight into the caller's
 * memory: no copy. @return readv's */
static ssize_t tcp_rx_direct(struct tcp_conn *c, int fd)
{
	struct iovec one, *v = &one;
	int cnt = 1;

	if (c->phase == RX_BODY) {
		one.iov_base = (uint8_t *)c->rx_call->rep_buf + c->rx_pos;
		one.iov_len = c->rx_left;
	} else {
		v = c->scratch;
		cnt = net_iov_slice(c->rx_call->rd_iov, c->rx_call->rd_cnt, c->rx_pos,
				    c->rx_left, v, IOV_MAX);
	}
	return readv(fd, v, cnt);
}

/* Compact the staging buffer (avail bytes left in it, then raw sealed
 * ones) and read into it; when sealed, open the whole records that came.
 * @return recv's, or -1 with errno EBADMSG (a record failed its check) */
static ssize_t tcp_rx_refill(struct tcp_conn *c, int fd, uint32_t avail)
{
	ssize_t n;

	if (c->stg_off > 0) {
		memmove(c->stg, c->stg + c->stg_off, avail + c->raw_len);
		c->stg_off = 0;
		c->stg_len = avail;
	}
	n = recv(fd, c->stg + c->stg_len + c->raw_len,
		 TCP_STG_SIZE - c->stg_len - c->raw_len, 0);
	if (n <= 0)
		return n;
	NET_STAT_ADD(&c->tc->base.st, bytes_rx, n);
	if (!c->tc->sealed) {
		c->stg_len += (uint32_t)n;
		return n;
	}
	c->raw_len += (uint32_t)n;
	if (net_seal_open(&c->rx_seal, c->stg, &c->stg_len, &c->raw_len)) {
		log_warn("net: %s:%u: a sealed record failed its check (not from "
			 "the server that proved the key); closing", c->host, c->port);
		errno = EBADMSG;
		return -1;
	}
	return n;
}

/*
 * One receive step on c: parse a header or move payload, from the staging
 * buffer or straight from the socket into the caller's memory or pipe.
 * @return 1 progress, 0 would block, <0 error (teardown; culprit set)
 */
static int tcp_rx_step(struct tcp_conn *c, int fd, struct net_call **culprit,
		       int *cerr)
{
	uint32_t avail = c->stg_len - c->stg_off;
	int sealed = c->tc->sealed;
	int to_pipe = c->phase == RX_DATA && c->rx_call && c->rx_call->rd_pipe &&
		      !sealed;
	ssize_t n;

	if (c->phase == RX_HDR && avail >= PROTO_HDR_LEN)
		return tcp_rx_hdr_step(c, culprit, cerr);
	if (c->phase != RX_HDR && avail > 0)
		return tcp_rx_staged_data(c, avail, culprit, cerr);
	if (to_pipe && (n = tcp_rx_splice(c, fd), n >= 0 || errno != EINPROGRESS)) {
		/* Socket to the caller's pipe: no copy at all. */
		if (n > 0) {
			NET_STAT_ADD(&c->tc->base.st, pipe_bytes, n);
			tcp_rx_advance(c, n);
			return 1;
		}
	} else if (!to_pipe && !sealed && c->phase != RX_HDR && c->phase != RX_SKIP &&
		   c->rx_left >= TCP_DIRECT_MIN) {
		n = tcp_rx_direct(c, fd);
		if (n > 0) {
			tcp_rx_advance(c, n);
			return 1;
		}
	} else {
		n = tcp_rx_refill(c, fd, avail);
		if (n > 0)
			return 1;
	}
	if (n == 0) {
		if (c->phase != RX_HDR || avail || c->raw_len)
			log_info("net: %s:%u: connection closed mid-frame", c->host, c->port);
		return -ECONNRESET;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return 0;
	return -errno;
}

/* Whether the next receive step can run from staged bytes alone. */
static int tcp_rx_staged(const struct tcp_conn *c)
{
	uint32_t avail = c->stg_len - c->stg_off;

	return c->phase == RX_HDR ? avail >= PROTO_HDR_LEN : avail > 0;
}

/* Reset the parser after a reconnect. Receive side owner, c->base.lock held. */
static void tcp_rx_reset_gen(struct tcp_conn *c)
{
	if (c->base.up && c->rx_gen != c->base.gen) {
		c->rx_gen = c->base.gen;
		c->phase = RX_HDR;
		c->rx_call = NULL;
		c->stg_off = c->stg_len = c->raw_len = 0;
		c->rx_seal = c->rx_seal0;
	}
}

/*
 * Receive on c within a budget, as the owner of its receive side; stop
 * early when stop_call (may be NULL) is complete and nothing is staged.
 * Tears down on error or on a kill request.
 * @return 1 maybe more to read, 0 the socket would block, -1 torn down
 */
static int tcp_rx_owned(struct tcp_conn *c, struct net_call *stop_call)
{
	struct net_call *culprit = NULL;
	int fd, rc = 0, kill, cerr = 0;

	pthread_mutex_lock(&c->base.lock);
	fd = c->fd;
	kill = c->base.kill;
	tcp_rx_reset_gen(c);
	if (!c->base.up) {
		pthread_mutex_unlock(&c->base.lock);
		return -1;
	}
	pthread_mutex_unlock(&c->base.lock);
	if (kill) {
		tcp_conn_down(c, NULL, 0);
		return -1;
	}
	/* After the budget, still drain what is staged: epoll would not bring
	 * us back for bytes already out of the socket. */
	for (int i = 0; i < TCP_RX_BUDGET || tcp_rx_staged(c); i++) {
		rc = tcp_rx_step(c, fd, &culprit, &cerr);
		if (rc <= 0)
			break;
		if (stop_call && !tcp_rx_staged(c) &&
		    __atomic_load_n(&stop_call->state, __ATOMIC_ACQUIRE) ==
			    NET_CALL_DONE)
			break;
	}
	if (rc < 0) {
		tcp_conn_down(c, culprit, cerr);
		return -1;
	}
	return rc;
}

/*
 * Give up ownership of c's receive side: serve a kill request that came
 * meanwhile (nobody else could), then arm the socket for what is still in
 * flight (tcp_arm_wanted): ARM_IN when replies are due that nobody reads,
 * else ARM_HUP. Cost: an epoll_ctl only when the mode changes.
 */
static void tcp_rx_release(struct tcp_conn *c)
{
	for (;;) {
		pthread_mutex_lock(&c->base.lock);
		if (c->base.kill && c->base.up) {
			pthread_mutex_unlock(&c->base.lock);
			tcp_conn_down(c, NULL, 0);
			continue;
		}
		c->base.kill = 0;
		c->rx_owner = RXO_NONE;
		if (c->base.up)
			tcp_arm_set(c, tcp_arm_wanted(c));
		pthread_mutex_unlock(&c->base.lock);
		return;
	}
}

/*
 * Take ownership of c's receive side for the calling thread if nobody has
 * it and c is up. A caller sets the socket to ARM_HUP if it was at ARM_IN,
 * so the progress thread is not woken for what the caller reads (the
 * usual case, a lone caller, finds it at ARM_HUP and changes nothing).
 * @return 1 taken, 0 not
 */
static int tcp_rx_take(struct tcp_conn *c, int who)
{
	int got = 0;

	pthread_mutex_lock(&c->base.lock);
	if (c->base.up && c->rx_owner == RXO_NONE) {
		c->rx_owner = who;
		got = 1;
		if (who == RXO_PROGRESS)
			c->arm = ARM_OFF; /* one-shot: the event disarmed it */
		else if (c->arm == ARM_IN)
			tcp_arm_set(c, ARM_HUP);
	} else if (who == RXO_PROGRESS) {
		c->arm = ARM_OFF; /* the owner re-arms when it lets go */
	}
	pthread_mutex_unlock(&c->base.lock);
	return got;
}

/* The socket of c is readable (progress thread): receive within a budget
 * unless a caller owns the receive side. */
static void tcp_rx(struct tcp_conn *c)
{
	if (!tcp_rx_take(c, RXO_PROGRESS))
		return;
	(void)tcp_rx_owned(c, NULL);
	tcp_rx_release(c);
}

/* Act on teardown requests from waiters/senders. Progress thread. A
 * connection whose receive side a caller owns is torn down by that caller
 * (it checks for kill requests at least every TCP_LEAD_SLICE_MS). */
static void tcp_do_kills(struct tcp_client *tc)
{
	pthread_mutex_lock(&tc->lock);
	for (struct tcp_conn *c = tc->conns; c; c = c->next_conn) {
		pthread_mutex_lock(&c->base.lock);
		int k = c->base.kill && c->base.up && c->rx_owner == RXO_NONE;
		if (k)
			c->rx_owner = RXO_PROGRESS;
		else if (c->base.kill && !c->base.up)
			c->base.kill = 0;
		pthread_mutex_unlock(&c->base.lock);
		if (k) {
			tcp_conn_down(c, NULL, 0);
			tcp_rx_release(c);
		}
	}
	pthread_mutex_unlock(&tc->lock);
}

/* The progress thread: wait on epoll, read replies, serve kill requests. */
static void *tcp_progress(void *arg)
{
	struct tcp_client *tc = arg;
	struct epoll_event ev[64];

	while (!net_progress_stopping(&tc->base.pg)) {
		int n = net_progress_wait(&tc->base.pg, ev, 64);

		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr == NULL)
				tcp_do_kills(tc);
			else
				tcp_rx(ev[i].data.ptr);
		}
	}
	return NULL;
}

/* ------------------------------------------------------------- lifecycle */

/* Create a tcp client: its epoll set, the eventfd that wakes it, and the
 * progress thread. Lanes connect later, on first use. */
static int tcp_client_new(struct net_client **out, const struct net_opts *o)
{
	struct tcp_client *tc;
	int rc;

	tc = calloc(1, sizeof(*tc));
	if (!tc)
		return -ENOMEM;
	tc->base.ops = &tcp_client_ops;
	tc->base.opts = *o;
	tc->sealed = net_auth_keyed(o);
	pthread_mutex_init(&tc->lock, NULL);
	rc = net_progress_init(&tc->base.pg);
	if (rc)
		goto out_free;
	rc = net_progress_start(&tc->base.pg, tcp_progress, tc);
	if (rc)
		goto out_fini_pg;
	*out = &tc->base;
	return 0;

out_fini_pg:
	net_progress_fini(&tc->base.pg);
out_free:
	pthread_mutex_destroy(&tc->lock);
	free(tc);
	return rc;
}

/* Stop and join the progress thread, then close and free every lane
 * (calls must be done). */
static void tcp_client_free(struct net_client *cl)
{
	struct tcp_client *tc = NET_CONTAINER_OF(cl, struct tcp_client, base);
	struct tcp_conn *c, *nx;

	net_progress_fini(&tc->base.pg);
	for (c = tc->conns; c; c = nx) {
		nx = c->next_conn;
		if (c->fd >= 0)
			close(c->fd);
		free(c->tab);
		free(c->seal_buf);
		net_conn_fini(&c->base);
		pthread_mutex_destroy(&c->send_lock);
		pthread_mutex_destroy(&c->connect_lock);
		free(c);
	}
	pthread_mutex_destroy(&tc->lock);
	free(tc);
}

/* One lane: a tcp_conn on tc's list, not connected yet. @return NULL: ENOMEM */
static struct tcp_conn *tcp_lane_new(struct tcp_client *tc, const char *host,
				     uint16_t port)
{
	struct tcp_conn *c;

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->tab = calloc(16, sizeof(*c->tab));
	if (!c->tab) {
		free(c);
		return NULL;
	}
	c->tab_mask = 15;
	net_conn_init(&c->base, &tc->base);
	c->tc = tc;
	snprintf(c->host, sizeof(c->host), "%s", host);
	c->port = port;
	c->fd = -1;
	pthread_mutex_init(&c->connect_lock, NULL);
	pthread_mutex_init(&c->send_lock, NULL);
	pthread_mutex_lock(&tc->lock);
	c->next_conn = tc->conns;
	tc->conns = c;
	pthread_mutex_unlock(&tc->lock);
	return c;
}

/* A connection to host:port: opts.tcp_lanes lanes, the first one standing
 * for all of them. Lanes connect on first use. Lanes made before a failure
 * stay on tc's list and are freed with the client. */
static int tcp_conn_new(struct net_client *cl, const char *host, uint16_t port,
			struct net_conn **out)
{
	struct tcp_client *tc = NET_CONTAINER_OF(cl, struct tcp_client, base);
	struct tcp_conn *c0 = NULL;
	int n = tc->base.opts.tcp_lanes;

	for (int i = 0; i < n; i++) {
		struct tcp_conn *l = tcp_lane_new(tc, host, port);
		if (!l)
			return -ENOMEM;
		if (!c0)
			c0 = l;
		else
			l->base.head = &c0->base;
		c0->lanes[i] = l;
	}
	c0->nlanes = n;
	*out = &c0->base;
	return 0;
}

const struct net_client_ops tcp_client_ops = {
	.name = "tcp",
	.wr_sent_at_submit = 1,
	.rd_to_pipe = 1,
	.client_new = tcp_client_new,
	.client_free = tcp_client_free,
	.conn_new = tcp_conn_new,
	.submit = tcp_submit,
	.wait = net_call_await,
	.connect = tcp_conn_connect,
	.credit_take = tcp_credit_take,
	.credit_wait = tcp_credit_wait,
	.kick = net_conn_kick,
	.lead = tcp_wait_lead,
	.wait_end = tcp_wait_end,
};

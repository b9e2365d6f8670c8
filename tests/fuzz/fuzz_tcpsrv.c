/*
 * fuzz_tcpsrv.c - libFuzzer target for the TCP server's input state
 * machine and handshake (common/transport/tcp_server.c), through a real
 * loopback socket and the server's own libev loop, all in this thread.
 *
 * Two servers: one without a key, one with a clients' key and a servers'
 * key. Their handler pulls a request's write data (up to FZ_MAX), pushes
 * zeros into its read memory, echoes, rejects or refuses by op, so that
 * every input path (header, body, bulk wait, pull, discard, replies, data
 * frames, output bound, close) is reachable.
 * Input: byte 0 picks the server (bit 0) and whether the harness first does
 * a genuine handshake (bit 1; with the key server, bit 2 picks the key
 * class; bit 3 seals the rest as the C client would, net_seal.h, so the
 * frames reach the parser behind the seal - without it, the rest tests
 * the seal's own checks; bit 4 asks to encrypt), byte 1 the size of the writes the rest is sent
 * in (1..256), with the loop run between writes. A genuine handshake the
 * server refuses aborts. Then the connection is reset, and the server must
 * let go of it (conns_open back to 0) within FZ_DRAIN_MS.
 * Memory errors and leaks are caught by ASan/UBSan.
 */
#include "log.h"
#include "net.h"
#include "net_auth.h"
#include "net_seal.h"
#include "proto.h"

#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FZ_MAX (1u << 20)     /* largest bulk or read the handler takes */
#define FZ_DRAIN_MS 2000      /* the server must close a reset connection */

static struct ev_loop *loop;
static struct net_server *srv[2]; /* 0 no key, 1 two keys */
static uint8_t ckey[NET_KEY_LEN], skey[NET_KEY_LEN];

/* A pull or push in flight: its buffer. */
struct fz_xfer {
	uint8_t *buf;
};

/* A pull or push finished (or failed): free the buffer, reply. */
static void fz_xfer_done(struct net_sreq *r, int rc, void *arg)
{
	struct fz_xfer *x = arg;

	free(x->buf);
	free(x);
	net_sreq_reply(r, rc, NULL, 0);
}

/* Start a pull of all write data, or a push of zeros into all read memory. */
static void fz_xfer(struct net_sreq *r, uint64_t len, int pull)
{
	struct fz_xfer *x = calloc(1, sizeof(*x));
	struct iovec v;
	int rc;

	if (!x || !(x->buf = calloc(1, len))) {
		free(x);
		net_sreq_reply(r, -ENOMEM, NULL, 0);
		return;
	}
	v = (struct iovec){ x->buf, len };
	rc = pull ? net_sreq_pull(r, &v, 1, fz_xfer_done, x)
		  : net_sreq_push(r, 0, &v, 1, fz_xfer_done, x);
	if (rc)
		fz_xfer_done(r, rc, x);
}

/* The handler: transfers by the header's byte counts, else by op. */
static void fz_handler(struct net_sreq *r, void *arg)
{
	(void)arg;
	if (r->hdr.bulk_len && r->hdr.bulk_len <= FZ_MAX && (r->hdr.op & 1)) {
		fz_xfer(r, r->hdr.bulk_len, 1);
		return;
	}
	if (r->hdr.aux && r->hdr.aux <= FZ_MAX && !r->hdr.bulk_len) {
		fz_xfer(r, r->hdr.aux, 0);
		return;
	}
	switch (r->hdr.op % 3) {
	case 0:
		net_sreq_reply(r, 0, r->body, r->body_len);
		break;
	case 1:
		net_sreq_reject(r, "fuzz");
		break;
	default:
		net_sreq_reply(r, -EOPNOTSUPP, NULL, 0);
	}
}

/* Run the loop without blocking a few times. */
static void fz_pump(int n)
{
	for (int i = 0; i < n; i++)
		ev_run(loop, EVRUN_NOWAIT);
}

/* Read one frame from fd, running the loop meanwhile. @return 0 or -1 */
static int fz_frame(int fd, struct proto_hdr *h, uint8_t *body, size_t cap)
{
	uint8_t hb[PROTO_HDR_LEN];
	size_t got = 0, want = sizeof(hb);
	const char *why;

	for (int i = 0; i < 1000 && got < want; i++) {
		ssize_t n = recv(fd, got < sizeof(hb) ? hb + got : body + got - sizeof(hb),
				 want - got, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN))
			return -1;
		if (n > 0)
			got += (size_t)n;
		if (got == sizeof(hb) && want == sizeof(hb)) {
			if (proto_hdr_decode(hb, h, &why) || h->body_len > cap)
				return -1;
			want += h->body_len;
		}
		if (got < want)
			fz_pump(1);
	}
	return got == want ? 0 : -1;
}

/* Send one control frame with body. */
static void fz_ctrl(int fd, uint16_t op, const uint8_t *body, uint32_t len)
{
	struct proto_hdr h = { .version = 1, .op = op, .flags = PROTO_F_CTRL,
			       .body_len = len };
	uint8_t b[PROTO_HDR_LEN + 64];

	proto_hdr_encode(b, &h);
	memcpy(b + PROTO_HDR_LEN, body, len);
	(void)!send(fd, b, PROTO_HDR_LEN + len, MSG_NOSIGNAL);
}

/* A genuine handshake on fd: HELLO (with a key of class cls: nonce,
 * class and, when enc, the flag asking to encrypt; then our proof); tx
 * gets the sealed stream out when keyed. @return 0 when the server let us
 * in */
static int fz_handshake(int fd, int keyed, uint8_t cls, int enc, struct net_seal *tx)
{
	uint8_t hello[NET_AUTH_HELLO_FLAGS_LEN], rep[65], mac[NET_AUTH_MAC_LEN];
	const uint8_t *key = cls == NET_AUTH_KEY_SERVERS ? skey : ckey;
	struct proto_hdr h;

	memset(hello, 7, NET_AUTH_NONCE_LEN);
	hello[NET_AUTH_NONCE_LEN] = cls;
	hello[NET_AUTH_HELLO_LEN] = enc ? NET_AUTH_F_ENCRYPT : 0;
	fz_ctrl(fd, PROTO_OP_NET_HELLO, hello,
		!keyed ? 0 : enc ? NET_AUTH_HELLO_FLAGS_LEN : NET_AUTH_HELLO_LEN);
	if (fz_frame(fd, &h, rep, sizeof(rep)))
		return -1;
	if (h.status || !keyed)
		return h.status;
	if (h.body_len != NET_AUTH_NONCE_LEN + NET_AUTH_MAC_LEN + !!enc)
		return -1;
	net_auth_mac(key, NET_AUTH_ROLE_CLIENT, hello, rep, mac);
	net_seal_init(tx, key, NET_AUTH_ROLE_CLIENT,
		      h.body_len > NET_AUTH_NONCE_LEN + NET_AUTH_MAC_LEN ?
		      rep[NET_AUTH_NONCE_LEN + NET_AUTH_MAC_LEN] : NET_SEAL_MAC, hello, rep);
	fz_ctrl(fd, PROTO_OP_NET_AUTH, mac, sizeof(mac));
	return fz_frame(fd, &h, rep, sizeof(rep)) ? -1 : h.status;
}

/* The len bytes at b as sealed records (net_seal_iov), in a new buffer.
 * @return it (*out_len bytes) */
static uint8_t *fz_seal(struct net_seal *tx, const uint8_t *b, size_t len,
			size_t *out_len)
{
	size_t nrec = net_seal_records(len), cap = 3 * nrec + 1, n = 0;
	struct iovec in = { (void *)b, len }, *v = malloc(cap * sizeof(*v));
	uint8_t *meta = malloc(nrec * NET_SEAL_META(tx->mode) + 1), *out;
	struct net_seal_cur cur;
	int cnt;

	out = malloc(len + nrec * NET_SEAL_OVER + 1);
	/* encrypted: one piece per record, each within meta */
	if (!v || !meta || !out)
		abort();
	net_seal_cur_init(&cur, &in, 1);
	cnt = net_seal_iov(tx, &cur, v, (int)cap, meta, (int)nrec);
	for (int i = 0; i < cnt; i++) {
		memcpy(out + n, v[i].iov_base, v[i].iov_len);
		n += v[i].iov_len;
	}
	free(meta);
	free(v);
	*out_len = n;
	return out;
}

/* A connection to server k, reset on close (no TIME_WAIT anywhere). */
static int fz_connect(int k)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(net_server_port(srv[k])),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct linger lg = { 1, 0 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		abort();
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
		abort();
	fz_pump(2);
	return fd;
}

/* Send b in writes of chunk bytes, running the loop between them and
 * draining what the server answers. */
static void fz_send(int fd, const uint8_t *b, size_t len, size_t chunk)
{
	static uint8_t sink[65536];

	while (len) {
		size_t n = len < chunk ? len : chunk;
		ssize_t w = send(fd, b, n, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w < 0 && errno != EAGAIN)
			return; /* the server closed it */
		if (w > 0) {
			b += w;
			len -= (size_t)w;
		}
		fz_pump(2);
		while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
			;
	}
	fz_pump(4);
	while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		fz_pump(1);
}

/* Reset fd and wait until server k has let go of every connection. */
static void fz_close(int fd, int k)
{
	struct timespec t0, t;
	struct net_stats st;

	close(fd);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		fz_pump(1);
		net_server_stats(srv[k], &st);
		if (st.conns_open == 0)
			return;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >
		    FZ_DRAIN_MS)
			abort(); /* a reset connection the server holds on to */
		poll(NULL, 0, 1);
	}
}

/* The loop and both servers, once. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct net_opts o;

	(void)argc;
	(void)argv;
	log_init("fuzz_tcpsrv", LOG_EMERG);
	if (net_auth_init())
		abort();
	memset(ckey, 0x11, sizeof(ckey));
	memset(skey, 0x22, sizeof(skey));
	loop = ev_loop_new(EVFLAG_AUTO);
	for (int k = 0; k < 2; k++) {
		net_opts_default(&o);
		o.transport = NET_TRANSPORT_TCP;
		if (k) {
			o.has_key = o.has_srv_key = 1;
			memcpy(o.key, ckey, NET_KEY_LEN);
			memcpy(o.srv_key, skey, NET_KEY_LEN);
		}
		if (!loop || net_server_new(&srv[k], loop, "127.0.0.1", 0, fz_handler,
					    NULL, &o))
			abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct net_seal tx;
	uint8_t *sealed;
	size_t len;
	int k, fd;

	if (size < 2)
		return 0;
	k = data[0] & 1;
	fd = fz_connect(k);
	/* a genuine handshake is never refused (either server takes it, with
	 * either key): a refusal is a bug, and the input would only reach the
	 * refused connection's close, not the parser it was meant for */
	if ((data[0] & 2) &&
	    fz_handshake(fd, k, (data[0] & 4) ? NET_AUTH_KEY_SERVERS : NET_AUTH_KEY_CLIENTS,
			 data[0] & 16, &tx))
		abort();
	if ((data[0] & 2) && k && (data[0] & 8)) {
		sealed = fz_seal(&tx, data + 2, size - 2, &len);
		fz_send(fd, sealed, len, (size_t)data[1] + 1);
		free(sealed);
	} else {
		fz_send(fd, data + 2, size - 2, (size_t)data[1] + 1);
	}
	fz_close(fd, k);
	return 0;
}

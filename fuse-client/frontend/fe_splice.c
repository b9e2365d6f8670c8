/*
 * fe_splice.c - READ replies by splice on TCP (fe_splice.h).
 *
 * A READ of at least SPL_MIN bytes is read with cli_io_read_pipes: every
 * iod's share goes from its socket into a pipe of this thread (the tcp
 * backend splices it there; on loopback the pipe then references the
 * pages the iod sent with sendfile), and fuse_reply_data names the pipes
 * in file order (pipe0, pipe1, ..., pipe0, ...), so libfuse splices them
 * into its own pipe and on into /dev/fuse. The kernel copies once, into
 * the reader's pages; the buffer path copies twice (socket to buffer,
 * buffer to /dev/fuse) and through user space.
 *
 * Pipes are per thread and per layout-relative iod index, created on
 * first use and sized up to SPL_IOD_PIPE_SZ; a pipe is empty between READs. After a
 * failure, or a reply libfuse could not send, the thread's used pipes may
 * hold data: they are closed and made anew on next use.
 */
#include "fe_splice.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli_io.h"
#include "log.h"

#define SPL_MIN (64u << 10)       /* smaller READs take the buffer path */
#define SPL_PIPE_SZ (2u << 20)    /* libfuse's pipe for a 1 MiB reply */
/* A pipe holds page slots, not bytes, and each piece of a socket's data
 * takes a slot of its own: on a 1500-byte MTU link without GRO a 1 MiB
 * share comes as 725 segments of 1448 bytes, some split over two pages,
 * which overflows a 2 MiB pipe (512 slots). So an iod's pipe is asked for
 * SPL_IOD_PIPE_SZ (2048 slots) and takes a share only if it holds
 * SPL_SLOT_BYTES of pipe per byte of share (pieces of 1 KiB on average;
 * 512 bytes in an 8 MiB pipe for a 1 MiB share); a smaller pipe (the
 * limit is /proc/sys/fs/pipe-max-size without CAP_SYS_RESOURCE) takes
 * smaller shares, and the rest go through the buffer path. */
#define SPL_IOD_PIPE_SZ (8u << 20)
#define SPL_SLOT_BYTES 4
#define SPL_MAX_PIECES 1024       /* buffer vector entries per READ */
#define SPL_MAX_IODS 64           /* wider layouts take the buffer path */

/* This thread's pipes and buffer vector. Thread-private, no lock. */
struct spl_tls {
	int (*pfd)[2];                /* [PROTO_MAX_IODS] pipe fds, -1: none */
	int wfd[PROTO_MAX_IODS];      /* write ends, for cli_io_read_pipes */
	int psz[PROTO_MAX_IODS];      /* their sizes (F_GETPIPE_SZ) */
	struct cli_io_piece pieces[SPL_MAX_PIECES];
	struct fuse_bufvec *bv;       /* SPL_MAX_PIECES entries */
};

static int spl_on;                /* set once at INIT, before any READ */
static pthread_key_t spl_key;
static pthread_once_t spl_once = PTHREAD_ONCE_INIT;
static __thread struct spl_tls *spl_cur;

/* Close the pipes of slot k (if any). */
static void spl_pipe_close(struct spl_tls *t, uint16_t k)
{
	if (t->pfd[k][0] < 0)
		return;
	close(t->pfd[k][0]);
	close(t->pfd[k][1]);
	t->pfd[k][0] = t->pfd[k][1] = t->wfd[k] = -1;
	t->psz[k] = 0;
}

/* Thread-exit destructor: close every pipe, free the state. */
static void spl_tls_free(void *p)
{
	struct spl_tls *t = p;

	for (unsigned k = 0; k < PROTO_MAX_IODS; k++)
		spl_pipe_close(t, (uint16_t)k);
	free(t->pfd);
	free(t->bv);
	free(t);
}

/* Create the key whose destructor closes a thread's pipes. */
static void spl_key_init(void)
{
	(void)pthread_key_create(&spl_key, spl_tls_free);
}

/* The calling thread's state, allocated on first use (about 20 KiB). */
static struct spl_tls *spl_tls_get(void)
{
	struct spl_tls *t;

	if (spl_cur)
		return spl_cur;
	pthread_once(&spl_once, spl_key_init);
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pfd = malloc(PROTO_MAX_IODS * sizeof(*t->pfd));
	t->bv = malloc(sizeof(*t->bv) + SPL_MAX_PIECES * sizeof(struct fuse_buf));
	if (!t->pfd || !t->bv) {
		free(t->pfd);
		free(t->bv);
		free(t);
		return NULL;
	}
	for (unsigned k = 0; k < PROTO_MAX_IODS; k++)
		t->pfd[k][0] = t->pfd[k][1] = t->wfd[k] = -1;
	(void)pthread_setspecific(spl_key, t);
	spl_cur = t;
	return t;
}

/* Make the pipe of slot k unless it exists (non-blocking, as net_call
 * rd_pipe wants), as large as it may grow up to SPL_IOD_PIPE_SZ (8, 4,
 * then 2 MiB: /proc/sys/fs/pipe-max-size bounds it), and say
 * whether it holds a share of `need` bytes (SPL_SLOT_BYTES x need); a pipe
 * too small for a share stays, and that READ takes the buffer path.
 * @return 0, -EAGAIN (no pipe, or too small) */
static int spl_pipe_get(struct spl_tls *t, uint16_t k, uint64_t need)
{
	if (t->pfd[k][0] < 0) {
		if (pipe2(t->pfd[k], O_CLOEXEC | O_NONBLOCK)) {
			t->pfd[k][0] = t->pfd[k][1] = -1;
			return -EAGAIN;
		}
		for (unsigned sz = SPL_IOD_PIPE_SZ; sz >= SPL_PIPE_SZ; sz /= 2)
			if (fcntl(t->pfd[k][0], F_SETPIPE_SZ, sz) >= 0)
				break;
		t->wfd[k] = t->pfd[k][1];
		t->psz[k] = fcntl(t->pfd[k][0], F_GETPIPE_SZ);
	}
	return t->psz[k] > 0 && (uint64_t)t->psz[k] >= SPL_SLOT_BYTES * need ?
	       0 : -EAGAIN;
}

/* Whether libfuse can splice a 1 MiB reply: its pipe must grow to 2 MiB
 * (1 MiB + header + pages, rounded up), else it silently copies. */
static int spl_pipe_probe(void)
{
	int p[2], ok;

	if (pipe2(p, O_CLOEXEC))
		return 0;
	ok = fcntl(p[0], F_SETPIPE_SZ, SPL_PIPE_SZ) >= 0;
	close(p[0]);
	close(p[1]);
	return ok;
}

/* See fe_splice.h. Not FUSE_CAP_SPLICE_MOVE: the pipes may reference the
 * iod's page-cache pages (loopback), which the kernel must never move into
 * the reader's page cache; it copies them (the one copy left). */
int fe_splice_init(struct cli_fs *fs, struct fuse_conn_info *conn)
{
	spl_on = net_client_rd_to_pipe(fs->net) &&
		 (conn->capable & FUSE_CAP_SPLICE_WRITE) && spl_pipe_probe();
	if (spl_on)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	log_info("reads: %s", spl_on ? "spliced from the iods' sockets to "
		 "/dev/fuse" : "through a buffer (no splice: verbs, or a pipe "
		 "cannot grow to 2 MiB)");
	return spl_on;
}

/* Pipes for every iod share of [off, off + size): made, and big enough
 * for the largest possible share (size). @return 0, -EAGAIN */
static int spl_pipes_ready(struct spl_tls *t, const struct proto_layout *l,
			   size_t size)
{
	for (uint16_t k = 0; k < l->count; k++) {
		int rc = spl_pipe_get(t, k, size);

		if (rc)
			return rc;
	}
	return 0;
}

/* See fe_splice.h. Cost: per iod one request and a few splices; then
 * libfuse's splice per piece into its pipe and one into /dev/fuse. */
int fe_splice_read(fuse_req_t req, struct cli_fs *fs, uint64_t ino,
		   const struct proto_layout *l, uint64_t off, size_t size,
		   void *buf)
{
	struct spl_tls *t;
	size_t n = 0;
	int rc;

	if (!spl_on || size < SPL_MIN || l->count > SPL_MAX_IODS)
		return -EAGAIN;
	t = spl_tls_get();
	if (!t || spl_pipes_ready(t, l, size))
		return -EAGAIN;
	rc = cli_io_read_pipes(fs, ino, l, off, size, buf, t->wfd,
			       t->pieces, SPL_MAX_PIECES, &n);
	if (rc == -E2BIG || rc == -EOPNOTSUPP)
		return -EAGAIN; /* nothing was sent */
	if (rc == -EAGAIN) { /* a mirrored replica failed: the pipes may hold
			      * part of it; read again through a buffer */
		for (uint16_t k = 0; k < l->count; k++)
			spl_pipe_close(t, k);
		return -EAGAIN;
	}
	if (rc == 0) {
		t->bv->count = n;
		t->bv->idx = 0;
		t->bv->off = 0;
		for (size_t i = 0; i < n; i++)
			t->bv->buf[i] = (struct fuse_buf){
				.size = t->pieces[i].len, .flags = FUSE_BUF_IS_FD,
				.fd = t->pfd[t->pieces[i].k][0] };
		if (fuse_reply_data(req, t->bv, 0) == 0)
			return 0;
		rc = 0; /* libfuse answered (or could not): data may be left */
	}
	for (uint16_t k = 0; k < l->count; k++)
		spl_pipe_close(t, k);
	return rc;
}

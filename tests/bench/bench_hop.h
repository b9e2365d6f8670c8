/*
 * bench_hop.h - the passthrough's hop mode: reads and writes carried out
 * by server threads across one loopback TCP round trip (bench_hop.c).
 */
#ifndef BENCH_HOP_H
#define BENCH_HOP_H

#include <stdint.h>
#include <sys/types.h>

#define HOP_MAX_IO (1u << 20)    /* largest read or write, bytes */
#define HOP_MAX_SRV 64           /* most server threads */

/**
 * Start NSRV server threads, each listening on its own 127.0.0.1 port.
 * @param[in] nsrv  1..HOP_MAX_SRV
 * @return 0, or -EINVAL (nsrv out of range), -EAGAIN (no thread), or the
 *         -errno of socket, bind or listen.
 */
int hop_start(int nsrv);

/**
 * pread(2) done by a server thread; the data comes back over the socket.
 * @return bytes read, or -errno (the server's pread error, or a connection
 *         error such as -ECONNRESET or -EIO).
 */
ssize_t hop_pread(int fd, void *buf, size_t len, off_t off);

/**
 * Ask a server thread to sendfile LEN bytes of FD at OFF back, and leave
 * them unread in the socket for the caller to splice.
 * @param[out] res  bytes that follow in the socket, or the server's -errno
 * @return the socket, or -errno of the connection. A caller that cannot
 *         consume all *res bytes calls hop_read_sock_failed().
 */
int hop_read_sock(int fd, size_t len, off_t off, int64_t *res);

/** Drop this thread's connection (left mid-message after a failed splice). */
void hop_read_sock_failed(void);

/**
 * pwrite(2) done by a server thread; the data crosses the socket.
 * @return bytes written, or -errno (the server's, or the connection's).
 */
ssize_t hop_pwrite(int fd, const void *buf, size_t len, off_t off);

#endif /* BENCH_HOP_H */

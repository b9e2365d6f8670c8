/*
 * bench_hop.h - the passthrough's hop mode: reads and writes carried out
 * by a server thread per connection across one loopback TCP round trip
 * (bench_hop.c).
 */
#ifndef BENCH_HOP_H
#define BENCH_HOP_H

#include <stdint.h>
#include <sys/types.h>

#define HOP_MAX_IO (1u << 20)    /* largest read or write, bytes */

/**
 * Listen on a 127.0.0.1 port and start the thread that accepts there: each
 * connection (one per thread calling the hop_ functions) is served by a
 * server thread of its own.
 * @return 0, or the -errno of pthread_key_create, socket, bind, listen or
 *         pthread_create (-EAGAIN: no thread).
 */
int hop_start(void);

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

/*
 * addr.h - HOST:PORT, the one way every rpfs program reads and prints a
 * server address (daemon options, config keys, the mount's MGRHOST[:PORT],
 * librpfs, the admin CLI), and the loopback rule for servers without a
 * cluster key.
 *
 *   HOST:PORT      HOST a name or an IPv4 address: [A-Za-z0-9._-]
 *   [ADDR]:PORT    ADDR an IPv6 address, optionally with a %zone
 *
 * A bare IPv6 address with a port ("fe80::1:7400") is refused: it cannot be
 * told from the address fe80::1:7400, so IPv6 always goes in brackets.
 * Printing is the reverse: a host holding a ':' prints in brackets.
 */
#ifndef RPFS_ADDR_H
#define RPFS_ADDR_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define ADDR_PORT0  1u /* PORT 0 is accepted (the server picks a free port) */
#define ADDR_NOPORT 2u /* ":PORT" may be left out: *port keeps its value */
#define ADDR_HOST   4u /* HOST alone: a ":PORT" is refused */

/* Room for "[HOST]:65535" and the NUL. */
#define ADDR_STRLEN (PROTO_MAX_HOST + 9)

/**
 * Parse HOST:PORT (see above).
 * @param[in] what the option or key being parsed, for the message
 *	(e.g. "--listen", "[cluster] mgr")
 * @param[in] s the text
 * @param[in] flags ADDR_PORT0, ADDR_NOPORT, ADDR_HOST
 * @param[out] host the host, without brackets; at most cap - 1 and
 *	PROTO_MAX_HOST bytes
 * @param[in,out] port the port (left as it was if ADDR_NOPORT and none given)
 * @param[out] err on failure: "WHAT: expected HOST:PORT, got "S": WHY"
 * @return 0; -EINVAL s is not a valid address (err says why)
 */
int addr_parse(const char *what, const char *s, unsigned flags, char *host,
	       size_t cap, uint16_t *port, char *err, size_t errcap);

/**
 * Print host and port as addr_parse reads them: "[v6]:port", "host:port".
 * @return buf
 */
const char *addr_format(char *buf, size_t cap, const char *host,
			uint16_t port);

/**
 * Whether a server with no cluster key may listen on host: only on a
 * loopback address (127.0.0.0/8, ::1, or a name all of whose addresses are
 * those) unless insecure. "", 0.0.0.0 and :: are not loopback. A name is
 * resolved (getaddrinfo; it may block on DNS, once at start).
 * @param[in] has_key a cluster key is loaded
 * @param[in] insecure --insecure or [cluster] insecure = true was given
 * @param[out] warn set to 1 when serving is allowed only by insecure: the
 *	caller logs the warning err then holds
 * @param[out] err the refusal (or the warning) in one line naming the
 *	address and the two ways out
 * @return 0 allowed; -EPERM refused
 */
int addr_listen_check(const char *host, uint16_t port, int has_key,
		      int insecure, int *warn, char *err, size_t errcap);

#define ADDR_MAX_LIST 8 /* addr_parse_list: at most (mgrs of a cluster) */

/* One address of a list ([cluster] mgr, a mount's first argument). */
struct addr_hp {
	char host[PROTO_MAX_HOST + 1];
	uint16_t port;
};

/**
 * Parse a list of addresses "HOST:PORT,HOST:PORT,..." (at most
 * ADDR_MAX_LIST, no empty entry, no duplicate), as [cluster] mgr and a
 * mount's first argument take it.
 * @param what the setting, for the message ("[cluster] mgr")
 * @param defport the port of an entry without ":PORT"; 0: PORT required
 * @param[out] out, n the list
 * @param[out] msg on error, names what and the bad entry
 * @return 0, -EINVAL
 */
int addr_parse_list(const char *what, const char *s, uint16_t defport,
		    struct addr_hp *out, int *n, char *msg, size_t msgcap);

#endif

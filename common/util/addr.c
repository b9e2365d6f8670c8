/* addr.c - parse and print HOST:PORT, and the no-key loopback rule; see
 * addr.h. */
#include "addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* Whether c may appear in a host name or IPv4 address. */
static int addr_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

/* Check an unbracketed host of hl bytes. @return NULL ok, else why not */
static const char *addr_check_name(const char *h, size_t hl)
{
	if (memchr(h, ':', hl))
		return "an IPv6 address needs brackets, as in [fe80::1]:7400";
	for (size_t i = 0; i < hl; i++)
		if (!addr_name_char(h[i]))
			return "HOST may hold only letters, digits, '.', '-' and '_' "
			       "(IPv6 goes in brackets)";
	return NULL;
}

/* Check a bracketed IPv6 address (without the brackets), hl bytes, an
 * optional %zone after it. @return NULL ok, else why not */
static const char *addr_check_v6(const char *h, size_t hl)
{
	char a[INET6_ADDRSTRLEN];
	struct in6_addr in6;
	const char *pct = memchr(h, '%', hl);
	size_t al = pct ? (size_t)(pct - h) : hl;

	if (pct) {
		if (pct + 1 == h + hl)
			return "empty %zone after the IPv6 address";
		for (const char *z = pct + 1; z < h + hl; z++)
			if (!addr_name_char(*z))
				return "the %zone may hold only letters, digits, '.', "
				       "'-' and '_'";
	}
	if (al == 0 || al >= sizeof(a))
		return "not an IPv6 address inside [ ]";
	memcpy(a, h, al);
	a[al] = '\0';
	if (inet_pton(AF_INET6, a, &in6) != 1)
		return "not an IPv6 address inside [ ]";
	return NULL;
}

/* Parse the decimal port p (up to the NUL) into *port.
 * @return NULL ok, else why not */
static const char *addr_port(const char *p, unsigned flags, uint16_t *port)
{
	unsigned long v = 0;
	size_t n = 0;

	for (; p[n]; n++) {
		if (p[n] < '0' || p[n] > '9' || n >= 5)
			break;
		v = v * 10 + (unsigned long)(p[n] - '0');
	}
	if (n == 0 || p[n] || v > 65535 || (v == 0 && !(flags & ADDR_PORT0)))
		return flags & ADDR_PORT0 ? "PORT must be a number 0..65535"
					  : "PORT must be a number 1..65535";
	*port = (uint16_t)v;
	return NULL;
}

/* Split s into the host (h, *hl bytes, brackets dropped) and the port text
 * (*pp, NULL if none). @return NULL ok, else why not */
static const char *addr_split(const char *s, const char **h, size_t *hl,
			      const char **pp, int *v6)
{
	const char *colon;

	*v6 = s[0] == '[';
	if (*v6) {
		const char *rb = strchr(s, ']');

		if (!rb)
			return "no ] after [";
		*h = s + 1;
		*hl = (size_t)(rb - *h);
		if (rb[1] && rb[1] != ':')
			return "unexpected text after ]";
		*pp = rb[1] ? rb + 2 : NULL;
		return NULL;
	}
	colon = strchr(s, ':');
	if (colon && strchr(colon + 1, ':'))
		return "an IPv6 address needs brackets, as in [fe80::1]:7400";
	*h = s;
	*hl = colon ? (size_t)(colon - s) : strlen(s);
	*pp = colon ? colon + 1 : NULL;
	return NULL;
}

/* Parse HOST:PORT; see addr.h. Cost: one pass over s. */
int addr_parse(const char *what, const char *s, unsigned flags, char *host,
	       size_t cap, uint16_t *port, char *err, size_t errcap)
{
	const char *h = NULL, *pp = NULL, *why;
	size_t hl = 0, max = cap - 1 < PROTO_MAX_HOST ? cap - 1 : PROTO_MAX_HOST;
	uint16_t pv = *port;
	int v6 = 0;
	char lbuf[64];

	why = addr_split(s, &h, &hl, &pp, &v6);
	if (!why && hl == 0)
		why = "empty HOST";
	if (!why && hl > max) {
		snprintf(lbuf, sizeof(lbuf), "HOST longer than %zu bytes", max);
		why = lbuf;
	}
	if (!why)
		why = v6 ? addr_check_v6(h, hl) : addr_check_name(h, hl);
	if (!why && !pp && !(flags & (ADDR_NOPORT | ADDR_HOST)))
		why = "no :PORT";
	if (!why && pp && (flags & ADDR_HOST))
		why = "a host alone is expected here, without :PORT";
	if (!why && pp)
		why = addr_port(pp, flags, &pv);
	if (why) {
		snprintf(err, errcap, "%s: expected %s, got \"%s\": %s", what,
			 flags & ADDR_HOST ? "HOST" : flags & ADDR_NOPORT ?
			 "HOST[:PORT]" : "HOST:PORT", s, why);
		return -EINVAL;
	}
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port = pv;
	return 0;
}

/* Print HOST:PORT; see addr.h. */
const char *addr_format(char *buf, size_t cap, const char *host,
			uint16_t port)
{
	snprintf(buf, cap, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
	return buf;
}

/* Whether the socket address sa is a loopback one (127/8, ::1, or the
 * IPv4-mapped ::ffff:127.x.y.z). */
static int addr_sa_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		const uint8_t *b = in6->sin6_addr.s6_addr;

		if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return 1;
		return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && b[12] == 127;
	}
	return 0;
}

/* Whether every address host resolves to is a loopback one; "" (the
 * wildcard) and a name that does not resolve are not. */
static int addr_host_loopback(const char *host)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	int all = 1;

	if (!host[0] || getaddrinfo(host, NULL, &hints, &res) != 0)
		return 0;
	for (ai = res; ai; ai = ai->ai_next)
		all = all && addr_sa_loopback(ai->ai_addr);
	freeaddrinfo(res);
	return all;
}

/* The no-key loopback rule; see addr.h. */
int addr_listen_check(const char *host, uint16_t port, int has_key,
		      int insecure, int *warn, char *err, size_t errcap)
{
	char a[ADDR_STRLEN];

	*warn = 0;
	if (has_key || addr_host_loopback(host))
		return 0;
	addr_format(a, sizeof(a), host[0] ? host : "*", port);
	if (insecure) {
		*warn = 1;
		snprintf(err, errcap, "insecure: no cluster key and listening on "
			 "%s, which is not a loopback address: anyone who can "
			 "reach it is served", a);
		return 0;
	}
	snprintf(err, errcap, "refusing to listen on %s without a cluster key: "
		 "it is not a loopback address, so anyone who can reach it would "
		 "be served; give a key (--key FILE or [cluster] key) or allow "
		 "it with --insecure ([cluster] insecure = true)", a);
	return -EPERM;
}

/* Parse a list of addresses; see addr.h. Cost: one addr_parse per entry. */
int addr_parse_list(const char *what, const char *s, uint16_t defport,
		    struct addr_hp *out, int *n, char *msg, size_t msgcap)
{
	char one[ADDR_STRLEN + 2];
	int k = 0;

	for (const char *p = s;; p++) {
		size_t len = strcspn(p, ",");

		if (k == ADDR_MAX_LIST) {
			snprintf(msg, msgcap, "%s: at most %d addresses, got \"%s\"",
				 what, ADDR_MAX_LIST, s);
			return -EINVAL;
		}
		if (len == 0 || len >= sizeof(one)) {
			snprintf(msg, msgcap, "%s: expected HOST:PORT[,HOST:PORT...] "
				 "(an empty or too long entry), got \"%s\"", what, s);
			return -EINVAL;
		}
		memcpy(one, p, len);
		one[len] = '\0';
		out[k].port = defport;
		if (addr_parse(what, one, defport ? ADDR_NOPORT : 0, out[k].host,
			       sizeof(out[k].host), &out[k].port, msg, msgcap))
			return -EINVAL;
		for (int i = 0; i < k; i++)
			if (out[i].port == out[k].port &&
			    !strcmp(out[i].host, out[k].host)) {
				snprintf(msg, msgcap, "%s: \"%s\" is listed twice",
					 what, one);
				return -EINVAL;
			}
		k++;
		p += len;
		if (!*p)
			break;
	}
	*n = k;
	return 0;
}

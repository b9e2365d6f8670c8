/*
 * test_hostport.c - addr_parse, the one HOST:PORT parser of every rpfs
 * program, and addr_format: the accepted forms, each refusal and its
 * reason, the flags, and the print-back of IPv6 in brackets.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "addr.h"
#include "check.h"

/* Parse s with flags into a fresh host/port (port starts at 4242); check
 * the outcome, and for a success the host and port. */
static void accept(const char *s, unsigned flags, const char *host,
		   unsigned port)
{
	char h[PROTO_MAX_HOST + 1], err[1024] = "";
	uint16_t p = 4242;
	int rc = addr_parse("--t", s, flags, h, sizeof(h), &p, err, sizeof(err));

	CHECK(rc == 0, "\"%s\": rc %d (%s)", s, rc, err);
	if (rc == 0) {
		CHECK(!strcmp(h, host), "\"%s\": host \"%s\", want \"%s\"", s, h, host);
		CHECK(p == port, "\"%s\": port %u, want %u", s, p, port);
	}
}

/* Parse s with flags; check it is refused with -EINVAL, the message naming
 * the option and the text, and holding why; host and port untouched. */
static void refuse(const char *s, unsigned flags, const char *why)
{
	char h[PROTO_MAX_HOST + 1] = "untouched", err[1024] = "", head[600];
	uint16_t p = 4242;
	int rc = addr_parse("--t", s, flags, h, sizeof(h), &p, err, sizeof(err));

	snprintf(head, sizeof(head), "--t: expected HOST%s, got \"%s\": ",
		 flags & ADDR_HOST ? "" : flags & ADDR_NOPORT ? "[:PORT]" : ":PORT", s);
	CHECK(rc == -EINVAL, "\"%s\": rc %d, want -EINVAL", s, rc);
	CHECK(!strncmp(err, head, strlen(head)), "\"%s\": message \"%s\"", s, err);
	CHECK(strstr(err, why) != NULL, "\"%s\": \"%s\" lacks \"%s\"", s, err, why);
	CHECK(!strcmp(h, "untouched") && p == 4242, "\"%s\": output changed", s);
}

/* The forms every program accepts. */
static void test_accepted(void)
{
	accept("127.0.0.1:7400", 0, "127.0.0.1", 7400);
	accept("node-1.example_x.org:1", 0, "node-1.example_x.org", 1);
	accept("localhost:65535", 0, "localhost", 65535);
	accept("[::1]:7400", 0, "::1", 7400);
	accept("[fe80::1]:7400", 0, "fe80::1", 7400);
	accept("[fe80::1%eth0]:7400", 0, "fe80::1%eth0", 7400);
	accept("[::ffff:10.0.0.1]:9", 0, "::ffff:10.0.0.1", 9);
	accept("127.0.0.1:0", ADDR_PORT0, "127.0.0.1", 0);
	accept("[::1]:0", ADDR_PORT0, "::1", 0);
	/* ADDR_NOPORT: the port may be left out, the default stays */
	accept("mgr1", ADDR_NOPORT, "mgr1", 4242);
	accept("[fe80::1]", ADDR_NOPORT, "fe80::1", 4242);
	accept("mgr1:7500", ADDR_NOPORT, "mgr1", 7500);
	accept("[::1]:7500", ADDR_NOPORT, "::1", 7500);
	/* ADDR_HOST: a host alone */
	accept("10.0.0.2", ADDR_HOST, "10.0.0.2", 4242);
	accept("[::1]", ADDR_HOST, "::1", 4242);
}

/* The refusals, each with its reason. */
static void test_refused(void)
{
	char long_host[PROTO_MAX_HOST + 16], max_host[PROTO_MAX_HOST + 16];

	refuse("fe80::1:7400", 0, "IPv6 address needs brackets");
	refuse("fe80::1:7400", ADDR_NOPORT, "IPv6 address needs brackets");
	refuse("::1", ADDR_HOST, "IPv6 address needs brackets");
	refuse("127.0.0.1", 0, "no :PORT");
	refuse("[::1]", 0, "no :PORT");
	refuse("127.0.0.1:", 0, "PORT must be a number 1..65535");
	refuse("127.0.0.1:0", 0, "PORT must be a number 1..65535");
	refuse("127.0.0.1:65536", 0, "PORT must be a number 1..65535");
	refuse("127.0.0.1:65536", ADDR_PORT0, "PORT must be a number 0..65535");
	refuse("127.0.0.1:abc", 0, "PORT must be");
	refuse("127.0.0.1:-1", 0, "PORT must be");
	refuse("127.0.0.1:+80", 0, "PORT must be");
	refuse("127.0.0.1:0080000", 0, "PORT must be");
	refuse("127.0.0.1:7400x", 0, "PORT must be");
	refuse("127.0.0.1:7400 ", 0, "PORT must be");
	refuse(":7400", 0, "empty HOST");
	refuse("[]:7400", 0, "empty HOST");
	refuse("", ADDR_NOPORT, "empty HOST");
	refuse("[::1]x:7400", 0, "unexpected text after ]");
	refuse("[::1]:7400]", 0, "PORT must be");
	refuse("[::1:7400", 0, "no ] after [");
	refuse("[host]:7400", 0, "not an IPv6 address");
	refuse("[1.2.3.4]:7400", 0, "not an IPv6 address");
	refuse("[fe80::1%]:7400", 0, "empty %zone");
	refuse("[fe80::1%e/0]:7400", 0, "the %zone may hold only");
	refuse("my host:7400", 0, "HOST may hold only");
	refuse("h\n:7400", 0, "HOST may hold only");
	refuse("mgr1:7400", ADDR_HOST, "without :PORT");
	memset(long_host, 'a', PROTO_MAX_HOST + 1);
	strcpy(long_host + PROTO_MAX_HOST + 1, ":7400");
	refuse(long_host, 0, "HOST longer than 255 bytes");
	memset(max_host, 'a', PROTO_MAX_HOST);
	strcpy(max_host + PROTO_MAX_HOST, ":7400");
	{
		char want[PROTO_MAX_HOST + 1];

		memset(want, 'a', PROTO_MAX_HOST);
		want[PROTO_MAX_HOST] = '\0';
		accept(max_host, 0, want, 7400);
	}
}

/* The host bound is the caller's buffer when that is smaller. */
static void test_small_buffer(void)
{
	char h[8], err[256];
	uint16_t p = 1;

	CHECK(addr_parse("--t", "abcdefg:1", 0, h, sizeof(h), &p, err,
			 sizeof(err)) == 0, "7 bytes in 8: %s", err);
	CHECK(addr_parse("--t", "abcdefgh:1", 0, h, sizeof(h), &p, err,
			 sizeof(err)) == -EINVAL, "8 bytes in 8");
	CHECK(strstr(err, "HOST longer than 7 bytes") != NULL, "%s", err);
}

/* Printing back: IPv6 in brackets, names and IPv4 as they are; what is
 * printed parses to the same host and port. */
static void test_format(void)
{
	static const char *const hosts[] = { "::1", "fe80::1%eth0", "10.0.0.1",
					     "mgr1" };
	char buf[ADDR_STRLEN], h[PROTO_MAX_HOST + 1], err[256];
	uint16_t p = 0;

	CHECK(!strcmp(addr_format(buf, sizeof(buf), "::1", 7400), "[::1]:7400"), "%s", buf);
	CHECK(!strcmp(addr_format(buf, sizeof(buf), "10.0.0.1", 7), "10.0.0.1:7"), "%s", buf);
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		addr_format(buf, sizeof(buf), hosts[i], 65535);
		CHECK(addr_parse("--t", buf, 0, h, sizeof(h), &p, err,
				 sizeof(err)) == 0 && !strcmp(h, hosts[i]) &&
		      p == 65535, "%s: round trip: %s", hosts[i], err);
	}
}

/* The no-key rule: loopback always, others only with a key or insecure. */
static void test_listen_check(void)
{
	char err[1024];
	int warn;

	CHECK(addr_listen_check("127.0.0.1", 1, 0, 0, &warn, err, sizeof(err)) == 0 &&
	      !warn, "127.0.0.1");
	CHECK(addr_listen_check("127.8.9.10", 1, 0, 0, &warn, err, sizeof(err)) == 0 &&
	      !warn, "127.8.9.10");
	CHECK(addr_listen_check("::1", 1, 0, 0, &warn, err, sizeof(err)) == 0 &&
	      !warn, "::1");
	CHECK(addr_listen_check("10.1.2.3", 1, 1, 0, &warn, err, sizeof(err)) == 0 &&
	      !warn, "with a key");
	CHECK(addr_listen_check("0.0.0.0", 7400, 0, 0, &warn, err, sizeof(err)) ==
	      -EPERM, "0.0.0.0 refused");
	CHECK(strstr(err, "refusing to listen on 0.0.0.0:7400 without a cluster key") &&
	      strstr(err, "--key") && strstr(err, "--insecure"), "%s", err);
	CHECK(addr_listen_check("::", 7400, 0, 0, &warn, err, sizeof(err)) ==
	      -EPERM && strstr(err, "[::]:7400"), ":: refused: %s", err);
	CHECK(addr_listen_check("", 7400, 0, 0, &warn, err, sizeof(err)) == -EPERM,
	      "the wildcard refused");
	CHECK(addr_listen_check("10.1.2.3", 7400, 0, 1, &warn, err, sizeof(err)) == 0 &&
	      warn && strstr(err, "10.1.2.3:7400") && strstr(err, "anyone"),
	      "insecure: %s", err);
}

/* addr_parse_list: lists of mgrs, the default port, and each refusal. */
static void test_list(void)
{
	struct addr_hp l[ADDR_MAX_LIST];
	char err[1024] = "";
	int n = -1;

	CHECK(addr_parse_list("--t", "a:1,[::1]:2,b", 7400, l, &n, err,
			      sizeof(err)) == 0 && n == 3, "list of 3: %s", err);
	CHECK(!strcmp(l[0].host, "a") && l[0].port == 1 &&
	      !strcmp(l[1].host, "::1") && l[1].port == 2 &&
	      !strcmp(l[2].host, "b") && l[2].port == 7400, "list fields");
	CHECK(addr_parse_list("--t", "h:9", 0, l, &n, err, sizeof(err)) == 0 &&
	      n == 1, "one");
	CHECK(addr_parse_list("--t", "h", 0, l, &n, err, sizeof(err)) == -EINVAL,
	      "no port without a default");
	CHECK(addr_parse_list("--t", "a:1,", 0, l, &n, err, sizeof(err)) == -EINVAL &&
	      strstr(err, "empty"), "trailing comma: %s", err);
	CHECK(addr_parse_list("--t", "", 0, l, &n, err, sizeof(err)) == -EINVAL,
	      "empty");
	CHECK(addr_parse_list("--t", "a:1,a:1", 0, l, &n, err, sizeof(err)) == -EINVAL &&
	      strstr(err, "twice"), "duplicate: %s", err);
	CHECK(addr_parse_list("--t", "a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8,i:9", 0, l,
			      &n, err, sizeof(err)) == -EINVAL &&
	      strstr(err, "at most 8"), "nine: %s", err);
	CHECK(addr_parse_list("--t", "a:1,b:70000", 0, l, &n, err, sizeof(err)) ==
	      -EINVAL && strstr(err, "70000"), "bad port: %s", err);
}

int main(void)
{
	test_accepted();
	test_refused();
	test_small_buffer();
	test_format();
	test_listen_check();
	test_list();
	return check_summary("hostport");
}

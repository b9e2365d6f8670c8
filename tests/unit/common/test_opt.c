/*
 * test_opt.c - the option tables' engine (common/opt.c): the defaults,
 * each kind's parse and its message naming the flag and the bad value,
 * missing and unknown options, the config file under the flags (a flag
 * given wins over its key, a key not in the file leaves the default),
 * lists, positional arguments, -o names, --help and the Markdown table.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfg.h"
#include "check.h"
#include "log.h"
#include "opt.h"

/* A program's arguments with one field of each kind. */
struct t_args {
	int sw;
	long lease_ms;
	uint8_t small;
	uint64_t size;
	uint32_t unit;
	int rt_ms;
	double secs;
	struct opt_addr at;
	const char *name;
	char *copy;
	int onoff;
	int level;
	struct opt_addr list[2];
	int nlist;
	int custom;
	long testing;
	uint64_t given;
};

/* OPT_CUSTOM: "even" numbers only. */
static int parse_even(const struct opt *o, const char *name, const char *s,
		      void *args, char *err, size_t errcap)
{
	struct t_args *a = args;
	long v = strtol(s, NULL, 10);

	if (v % 2) {
		snprintf(err, errcap, "%s: not even: \"%s\"", name, s);
		return -EINVAL;
	}
	a->custom = (int)v;
	return 0;
}

/* OPT_STRING check: only "lmdb" or "pg". */
static int check_store(const char *s)
{
	return strcmp(s, "lmdb") && strcmp(s, "pg");
}

static const struct opt t_opts[] = {
	{ .name = "sw", .kind = OPT_SWITCH, OPT_AT(struct t_args, sw),
	  .key = "[cluster] insecure", OPT_CF(insecure, -1), .help = "a switch" },
	{ .name = "lease", .kind = OPT_INT, .arg = "SECONDS",
	  OPT_AT(struct t_args, lease_ms), .lo = 2, .hi = 600, .scale = 1000,
	  .def = 10000, .what = "SECONDS {lo}..{hi}", .key = "[mgr] lease",
	  OPT_CF(lease_ms, 0), .help = "the lease" },
	{ .name = "small", .kind = OPT_INT, .arg = "N",
	  OPT_AT(struct t_args, small), .lo = 1, .hi = 2, .what = "1 or 2",
	  .key = "[layout] mirror", OPT_CF(mirror, 0), .help = "small" },
	{ .name = "size", .kind = OPT_SIZE, .arg = "SIZE",
	  OPT_AT(struct t_args, size), .lo = 4 << 20, .hi = 1ll << 40,
	  .def = 4ll << 30, .what = "a size {lo}..{hi}", .key = "[mgr] db_size",
	  OPT_CF(db_size, 0), .help = "a size" },
	{ .name = "unit", .kind = OPT_SIZE, .flags = OPT_POW2 | OPT_BYTES,
	  .arg = "BYTES", OPT_AT(struct t_args, unit), .lo = 4096,
	  .hi = 64 << 20, .defdoc = "", .what = "a power of two from {lo} to {hi}",
	  .help = "a unit" },
	{ .name = "rt", .kind = OPT_MS, .arg = "SECONDS",
	  OPT_AT(struct t_args, rt_ms), .lo = 100, .hi = 86400000,
	  .def = 10000, .what = "seconds in {lo}..{hi}", .help = "ms" },
	{ .name = "secs", .kind = OPT_SECONDS, .flags = OPT_ABOVE, .arg = "S",
	  OPT_AT(struct t_args, secs), .lo = 0, .hi = 3600000, .def = 1500,
	  .what = "seconds {lo}..{hi}", .help = "seconds" },
	{ .name = "at", .kind = OPT_ADDR, .arg = "HOST:PORT",
	  OPT_AT(struct t_args, at), .addr = ADDR_PORT0, .defdoc = "off",
	  .help = "an address" },
	{ .name = "name", .kind = OPT_STRING, .arg = "NAME",
	  OPT_AT(struct t_args, name), .check = check_store, .defstr = "lmdb",
	  .what = "lmdb or pg", .key = "[mgr] store", OPT_CF_S(store),
	  .help = "a name | with a pipe" },
	{ .name = "copy", .kind = OPT_STRING, .flags = OPT_COPY, .arg = "FILE",
	  OPT_AT(struct t_args, copy), .what = "a file", .help = "a copy" },
	{ .name = "onoff", .kind = OPT_ONOFF, .arg = "on|off",
	  OPT_AT(struct t_args, onoff), .def = 1, .what = "on or off",
	  .key = "[mgr] group_commit", OPT_CF(group_commit, -1), .help = "on" },
	{ .name = "level", .kind = OPT_LEVEL, .arg = "LEVEL",
	  OPT_AT(struct t_args, level), .def = LOG_NOTICE,
	  .what = "err, warning, notice, info, debug or 3..7",
	  .key = "[log] level", OPT_CF(log_level, -1), .help = "a level" },
	{ .name = "list", .kind = OPT_ADDR, .flags = OPT_LIST, .arg = "HOST:PORT",
	  OPT_AT_LIST(struct t_args, list, nlist), .many = "at most {hi} hosts",
	  .help = "a list" },
	{ .name = "even", .kind = OPT_CUSTOM, .arg = "N", .parse = parse_even,
	  .help = "custom" },
	{ .name = "testing", .kind = OPT_INT, .flags = OPT_TESTING, .arg = "MS",
	  OPT_AT(struct t_args, testing), .lo = 0, .hi = 5000,
	  .what = "milliseconds {lo}..{hi}", .help = "for tests" },
};

static const struct opt_prog t_prog = {
	.name = "t-prog",
	.usage = "usage: t-prog [OPTION...]\n",
	.intro = "An intro.\n",
	.opts = t_opts,
	.nopts = sizeof(t_opts) / sizeof(t_opts[0]),
};

/* Parse the words of line (space-separated; argv[0] added) into a, after
 * zeroing and the defaults. @return opt_parse's answer, err its message */
static int parse(const char *line, struct t_args *a, char *err, size_t cap)
{
	static char buf[1024];
	char *argv[64] = { "t-prog" }, *save = NULL;
	int argc = 1;

	snprintf(buf, sizeof(buf), "%s", line);
	for (char *w = strtok_r(buf, " ", &save); w && argc < 63;
	     w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	argv[argc] = NULL;
	opt_free(&t_prog, a);
	memset(a, 0, sizeof(*a));
	opt_defaults(&t_prog, a);
	err[0] = '\0';
	return opt_parse(&t_prog, argc, argv, a, &a->given, err, cap);
}

/* Refused: line fails with -EINVAL and the message msg exactly. */
static void refuse(const char *line, const char *msg)
{
	struct t_args a = { 0 };
	char err[512];
	int rc = parse(line, &a, err, sizeof(err));

	CHECK(rc == -EINVAL, "\"%s\": rc %d", line, rc);
	CHECK(!strcmp(err, msg), "\"%s\": message \"%s\", want \"%s\"", line,
	      err, msg);
	opt_free(&t_prog, &a);
}

/* Every default lands in its field; nothing is given. */
static void test_defaults(void)
{
	struct t_args a = { 0 };
	char err[256];

	CHECK(parse("", &a, err, sizeof(err)) == 0, "%s", err);
	CHECK(a.sw == 0 && a.lease_ms == 10000 && a.small == 0, "ints");
	CHECK(a.size == 4ull << 30 && a.unit == 0, "sizes");
	CHECK(a.rt_ms == 10000 && a.secs == 1.5, "times %d %g", a.rt_ms, a.secs);
	CHECK(a.name && !strcmp(a.name, "lmdb") && !a.copy, "strings");
	CHECK(a.onoff == 1 && a.level == LOG_NOTICE, "onoff, level");
	CHECK(a.nlist == 0 && a.at.host[0] == '\0' && a.given == 0, "rest");
}

/* A good command line: each kind parsed, scaled, and marked given. */
static void test_values(void)
{
	struct t_args a = { 0 };
	char err[256];
	int rc;

	rc = parse("--sw --lease 30 --small 2 --size 8M --unit 64K --rt 0.25 "
		   "--secs=2.5 --at [::1]:0 --name pg --copy /k --onoff off "
		   "--level debug --list h1:1 --list h2:2 --even 4 --testing 7",
		   &a, err, sizeof(err));
	CHECK(rc == 0, "rc %d: %s", rc, err);
	CHECK(a.sw == 1 && a.lease_ms == 30000 && a.small == 2, "ints");
	CHECK(a.size == 8u << 20 && a.unit == 65536, "sizes");
	CHECK(a.rt_ms == 250 && a.secs == 2.5, "times %d %g", a.rt_ms, a.secs);
	CHECK(!strcmp(a.at.host, "::1") && a.at.port == 0, "addr %s", a.at.host);
	CHECK(!strcmp(a.name, "pg") && a.copy && !strcmp(a.copy, "/k"), "strings");
	CHECK(a.onoff == 0 && a.level == LOG_DEBUG, "onoff %d", a.onoff);
	CHECK(a.nlist == 2 && !strcmp(a.list[1].host, "h2") && a.list[1].port == 2,
	      "list");
	CHECK(a.custom == 4 && a.testing == 7, "custom, testing");
	CHECK(a.given == (1ull << t_prog.nopts) - 1, "given %llx",
	      (unsigned long long)a.given);
	CHECK(opt_given(&t_prog, a.given, "lease") &&
	      !opt_given(&t_prog, 0, "lease") &&
	      !opt_given(&t_prog, a.given, "nosuch"), "opt_given");
	CHECK(opt_index(&t_prog, "even") == 13 &&
	      opt_index(&t_prog, "nosuch") == -ENOENT, "opt_index");
	opt_free(&t_prog, &a);
	CHECK(a.copy == NULL, "opt_free");
}

/* Each bad value: the flag, what was expected (with the range) and the
 * value; each command line error. */
static void test_errors(void)
{
	refuse("--lease 1", "--lease: expected SECONDS 2..600, got \"1\"");
	refuse("--lease 10s", "--lease: expected SECONDS 2..600, got \"10s\"");
	refuse("--lease +5", "--lease: expected SECONDS 2..600, got \"+5\"");
	refuse("--lease 601", "--lease: expected SECONDS 2..600, got \"601\"");
	refuse("--small 3", "--small: expected 1 or 2, got \"3\"");
	refuse("--size 3M", "--size: expected a size 4M..1024G, got \"3M\"");
	refuse("--size 2T", "--size: expected a size 4M..1024G, got \"2T\"");
	refuse("--unit 12K", "--unit: expected a power of two from 4096 to "
	       "67108864, got \"12K\"");
	refuse("--rt 0.05", "--rt: expected seconds in 0.1..86400, got \"0.05\"");
	refuse("--rt x", "--rt: expected seconds in 0.1..86400, got \"x\"");
	refuse("--secs 0", "--secs: expected seconds 0..3600, got \"0\"");
	refuse("--at nowhere", "--at: expected HOST:PORT, got \"nowhere\": no :PORT");
	refuse("--name sqlite", "--name: expected lmdb or pg, got \"sqlite\"");
	refuse("--copy=", "--copy: expected a file, got \"\"");
	refuse("--onoff ON", "--onoff: expected on or off, got \"ON\"");
	refuse("--level loud", "--level: expected err, warning, notice, info, "
	       "debug or 3..7, got \"loud\"");
	refuse("--level 2", "--level: expected err, warning, notice, info, "
	       "debug or 3..7, got \"2\"");
	refuse("--list a:1 --list b:2 --list c:3", "--list: at most 2 hosts");
	refuse("--even 3", "--even: not even: \"3\"");
	refuse("--lease", "--lease: missing argument");
	refuse("--bogus", "unknown option \"--bogus\"");
	refuse("--sw extra", "unexpected argument \"extra\"");
}

/* opt_parse_args: the positional arguments are left behind the options,
 * in their order, and "--" ends the options. */
static void test_positional(void)
{
	char a0[] = "t-prog", a1[] = "first", a2[] = "--sw", a3[] = "second",
	     a4[] = "--", a5[] = "--lease";
	char *argv[] = { a0, a1, a2, a3, a4, a5, NULL };
	struct t_args a = { 0 };
	char err[256] = "";
	int first = -1, rc;

	opt_defaults(&t_prog, &a);
	rc = opt_parse_args(&t_prog, 6, argv, &a, &a.given, &first, err,
			    sizeof(err));
	CHECK(rc == 0 && a.sw == 1, "rc %d: %s", rc, err);
	CHECK(first == 3 && !strcmp(argv[3], "first") &&
	      !strcmp(argv[4], "second") && !strcmp(argv[5], "--lease"),
	      "first %d", first);
	CHECK(a.lease_ms == 10000 && opt_given(&t_prog, a.given, "sw") &&
	      !opt_given(&t_prog, a.given, "lease"), "after --");
	CHECK(opt_parse_args(&t_prog, 2, (char *[]){ a0, a2, NULL }, &a,
			     &a.given, &first, err, sizeof(err)) == 0 &&
	      first == 2, "none: first %d", first);
}

/* The config file under the flags: a key in the file fills what no flag
 * gave; a flag given wins; a key not in the file leaves the default. */
static void test_conf(void)
{
	struct cfg *f = calloc(1, sizeof(*f));
	struct t_args a = { 0 };
	char err[256], store[] = "pg";

	if (!f)
		return;
	f->insecure = -1;
	f->group_commit = -1;
	f->log_level = -1;
	f->lease_ms = 20000;
	f->mirror = 2;
	f->db_size = 8u << 20;
	f->store = store;
	CHECK(parse("--lease 30 --name lmdb", &a, err, sizeof(err)) == 0, "%s", err);
	opt_merge_conf(&t_prog, f, &a, a.given);
	CHECK(a.lease_ms == 30000, "flag wins: %ld", a.lease_ms);
	CHECK(!strcmp(a.name, "lmdb"), "flag wins: %s", a.name);
	CHECK(a.small == 2 && a.size == 8u << 20, "the file fills");
	CHECK(a.sw == 0 && a.onoff == 1 && a.level == LOG_NOTICE, "unset keys");
	f->insecure = 1;
	f->group_commit = 0;
	f->log_level = LOG_DEBUG;
	CHECK(parse("", &a, err, sizeof(err)) == 0, "%s", err);
	opt_merge_conf(&t_prog, f, &a, a.given);
	CHECK(a.sw == 1 && a.onoff == 0 && a.level == LOG_DEBUG, "signed keys");
	CHECK(a.lease_ms == 20000 && !strcmp(a.name, "pg"), "the file's");
	opt_merge_conf(&t_prog, NULL, &a, 0);
	free(f);
}

/* opt_set for a program of its own loop: the name given, -o style. */
static void test_set(void)
{
	static const struct opt_prog mount = {
		.name = "t-mount", .style = OPT_MOUNT, .usage = "usage\n",
		.opts = t_opts, .nopts = sizeof(t_opts) / sizeof(t_opts[0]),
	};
	struct t_args a = { 0 };
	char err[256];

	CHECK(opt_set(&mount, 1, NULL, "x", &a, err, sizeof(err)) == -EINVAL &&
	      !strcmp(err, "-o lease: expected SECONDS 2..600, got \"x\""), "%s", err);
	CHECK(opt_set(&mount, 1, "-o L", "4", &a, err, sizeof(err)) == 0 &&
	      a.lease_ms == 4000, "%ld", a.lease_ms);
}

/* Run a writer into a string. @return it (malloc'd) */
static char *capture(void (*fn)(const struct opt_prog *, FILE *))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fn(&t_prog, f);
	fclose(f);
	return buf;
}

/* --help: the synopsis, each flag with its range, default and key, the
 * testing options last; the Markdown table: one row each, | escaped. */
static void test_help(void)
{
	static const char head[] = "usage: t-prog [OPTION...]\nAn intro.\n"
		"Options (one given here wins over its rpfs.conf key):\n";
	static const char mdhead[] = "| t-prog | range | default | rpfs.conf | "
		"what |\n|---|---|---|---|---|\n";
	char *h = capture(opt_help), *m = capture(opt_markdown);

	CHECK(h && m, "open_memstream");
	if (!h || !m) {
		free(h);
		free(m);
		return;
	}
	CHECK(!strncmp(h, head, strlen(head)), "head: %.80s", h);
	CHECK(strstr(h, "\n  --lease SECONDS               2..600, default 10, "
		     "[mgr] lease\n      the lease\n"), "lease: %s", h);
	CHECK(strstr(h, "\n  --size SIZE                   4M..1024G, default "
		     "4G, [mgr] db_size\n"), "size");
	CHECK(strstr(h, "\n  --unit BYTES                  4096..67108864\n"),
	      "unit");
	CHECK(strstr(h, "\n  --secs S                      above 0, at most "
		     "3600, default 1.5\n"), "secs");
	CHECK(strstr(h, "\n  --level LEVEL                 default notice, "
		     "[log] level\n"), "level");
	CHECK(strstr(h, "\nFor testing only:\n  --testing MS"), "testing");
	CHECK(!strstr(h, "help-markdown"), "hidden");
	CHECK(!strncmp(m, mdhead, strlen(mdhead)), "md head: %.80s", m);
	CHECK(strstr(m, "\n| `--lease SECONDS` | 2..600 | 10 | `[mgr] lease` "
		     "| the lease |\n"), "md lease");
	CHECK(strstr(m, "| a name \\| with a pipe |"), "md pipe");
	CHECK(strstr(m, "| For testing only: for tests |"), "md testing");
	free(h);
	free(m);
}

/* Run every test. @return 0 all passed, 1 a check failed */
int main(void)
{
	test_defaults();
	test_values();
	test_errors();
	test_positional();
	test_conf();
	test_set();
	test_help();
	return check_summary("opt");
}

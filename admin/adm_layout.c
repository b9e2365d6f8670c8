/*
 * adm_layout.c - the admin CLI's commands on a mounted path: getlayout,
 * setlayout (with SIZE suffixes and partial changes merged into the
 * current layout here, before the mgr sees a full layout string) and the
 * client's counters (stats PATH). Each refuses a path outside an rpfs mount.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "mountinfo.h"
#include "proto.h"
#include "adm.h"

#define LAYOUT_XATTR "user.rpfs.layout"
#define STATS_XATTR "rpfs.stats"

/* Which fields a layout string named (lay_req.given). */
enum { LAY_UNIT = 1, LAY_COUNT = 2, LAY_FIRST = 4, LAY_MIRROR = 8 };

/* A layout string from the command line: the fields given and their values. */
struct lay_req {
	unsigned int given;  /* LAY_* bits */
	struct proto_layout l;
};

/* Check that path is on an rpfs mount; print why not as "rpfs CMD: ...".
 * @param[out] root the mount point (may be NULL). @return 0 or ADM_FAIL */
static int lay_check_mount(const char *cmd, const char *path, char *root,
			   size_t rootcap)
{
	int rc = mnt_on_rpfs(path, root, rootcap);

	if (rc == -EMEDIUMTYPE) {
		fprintf(stderr, "rpfs %s: %s: not on an rpfs mount (its file system "
			"is not %s)\n", cmd, path, MNT_RPFS_FSTYPE);
		return ADM_FAIL;
	}
	if (rc) {
		fprintf(stderr, "rpfs %s: %s: %s\n", cmd, path, strerror(-rc));
		return ADM_FAIL;
	}
	return ADM_OK;
}

/* A decimal number in [lo, hi], digits only. @return 0 or -EINVAL */
static int lay_num(const char *v, unsigned long lo, unsigned long hi,
		   unsigned long *out)
{
	unsigned long long n;
	char *end;

	if (*v < '0' || *v > '9')
		return -EINVAL;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || *end || n < lo || n > hi)
		return -EINVAL;
	*out = (unsigned long)n;
	return 0;
}

/* Check and store the value v of field k (0 unit, 1 count, 2 first,
 * 3 mirror) in r, naming the field in the error it prints.
 * @return 0 or ADM_USAGE */
static int lay_value(unsigned int k, const char *v, struct lay_req *r)
{
	unsigned long n;
	uint64_t size;

	if (k == 0) {
		if (cfg_parse_size(v, &size) || size < 4096 || size > (64u << 20) ||
		    (size & (size - 1))) {
			fprintf(stderr, "rpfs setlayout: unit: expected a power of two "
				"from 4K to 64M (suffix K or M allowed), got \"%s\"\n", v);
			return ADM_USAGE;
		}
		r->l.unit = (uint32_t)size;
	} else if (k == 1) {
		if (lay_num(v, 1, PROTO_MAX_IODS, &n)) {
			fprintf(stderr, "rpfs setlayout: count: expected the number of "
				"iods (mirror groups with mirror=2) to stripe over, 1..%d, "
				"got \"%s\"\n", PROTO_MAX_IODS, v);
			return ADM_USAGE;
		}
		r->l.count = (uint16_t)n;
	} else if (k == 2) {
		if (lay_num(v, 0, PROTO_MAX_IODS - 1, &n)) {
			fprintf(stderr, "rpfs setlayout: first: expected the index of the "
				"first iod, 0..%d, got \"%s\"\n", PROTO_MAX_IODS - 1, v);
			return ADM_USAGE;
		}
		r->l.first = (uint16_t)n;
	} else {
		if (lay_num(v, 1, 2, &n)) {
			fprintf(stderr, "rpfs setlayout: mirror: expected 1 or 2, got "
				"\"%s\"\n", v);
			return ADM_USAGE;
		}
		r->l.mirror = (uint8_t)n;
	}
	return 0;
}

/* Parse one "key=value" field of a layout string into r, naming the field
 * in the error it prints. @return 0 or ADM_USAGE */
static int lay_parse_field(char *tok, struct lay_req *r)
{
	static const char *const keys[] = { "unit", "count", "first", "mirror" };
	char *eq = strchr(tok, '=');
	unsigned int k;

	if (!eq || eq == tok) {
		fprintf(stderr, "rpfs setlayout: \"%s\": expected FIELD=VALUE\n", tok);
		return ADM_USAGE;
	}
	*eq = '\0';
	for (k = 0; k < 4 && strcmp(tok, keys[k]); k++)
		;
	if (k == 4) {
		fprintf(stderr, "rpfs setlayout: unknown field \"%s\" (expected unit, "
			"count, first or mirror)\n", tok);
		return ADM_USAGE;
	}
	if (r->given & (1u << k)) {
		fprintf(stderr, "rpfs setlayout: %s: given twice\n", tok);
		return ADM_USAGE;
	}
	r->given |= 1u << k;
	return lay_value(k, eq + 1, r);
}

/* Parse a layout string "FIELD=VALUE[,...]" (fields unit, count, first,
 * mirror; any subset, any order) into r. @return 0 or ADM_USAGE */
static int lay_parse(const char *s, struct lay_req *r)
{
	char *copy = strdup(s), *save = NULL, *tok;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	if (!copy) {
		fprintf(stderr, "rpfs setlayout: %s\n", strerror(ENOMEM));
		return ADM_FAIL;
	}
	if (!*s || s[strlen(s) - 1] == ',' || *s == ',' || strstr(s, ",,")) {
		fprintf(stderr, "rpfs setlayout: \"%s\": expected FIELD=VALUE[,...] "
			"with fields unit, count, first, mirror\n", s);
		rc = ADM_USAGE;
	}
	for (tok = strtok_r(copy, ",", &save); tok && !rc;
	     tok = strtok_r(NULL, ",", &save))
		rc = lay_parse_field(tok, r);
	free(copy);
	return rc;
}

/* The layout path has (a file) or gives new files (a directory).
 * @return 0 or ADM_FAIL (printed) */
static int lay_current(const char *cmd, const char *path, struct proto_layout *l)
{
	char buf[128];
	ssize_t n = getxattr(path, LAYOUT_XATTR, buf, sizeof(buf) - 1);

	if (n < 0) {
		fprintf(stderr, "rpfs %s: %s: cannot read its layout: %s\n", cmd, path,
			strerror(errno));
		return ADM_FAIL;
	}
	if (proto_layout_parse(buf, (size_t)n, l)) {
		fprintf(stderr, "rpfs %s: %s: unexpected layout \"%.*s\"\n", cmd, path,
			(int)n, buf);
		return ADM_FAIL;
	}
	return ADM_OK;
}

/* Write layout l to path (first only if named). @return 0 or -errno */
static int lay_write(const char *path, const struct proto_layout *l,
		     int with_first)
{
	char s[96];

	if (with_first)
		snprintf(s, sizeof(s), "unit=%u,count=%u,first=%u,mirror=%u",
			 (unsigned)l->unit, (unsigned)l->count, (unsigned)l->first,
			 (unsigned)l->mirror);
	else
		snprintf(s, sizeof(s), "unit=%u,count=%u,mirror=%u",
			 (unsigned)l->unit, (unsigned)l->count, (unsigned)l->mirror);
	return setxattr(path, LAYOUT_XATTR, s, strlen(s), 0) < 0 ? -errno : 0;
}

/* Print why the mgr refused layout l on path, naming the field. */
static void lay_refused(const char *path, const struct proto_layout *l, int rc)
{
	if (rc == -EBUSY)
		fprintf(stderr, "rpfs setlayout: %s: %s (a file that has data keeps "
			"its layout)\n", path, strerror(-rc));
	else if (rc == -EINVAL)
		fprintf(stderr, "rpfs setlayout: %s: count=%u%s: more than the iods, "
			"or than the mirror groups for mirror=2 (mirror=2 needs at "
			"least 2 iods), or first is not below count\n", path,
			(unsigned)l->count, l->mirror == 2 ? " with mirror=2" : "");
	else if (rc == -EPERM)
		fprintf(stderr, "rpfs setlayout: %s: only a directory or a regular "
			"file has a layout\n", path);
	else
		fprintf(stderr, "rpfs setlayout: %s: %s\n", path, strerror(-rc));
}

/* See rpfs.h. */
int adm_setlayout(int argc, char **argv)
{
	struct proto_layout l;
	struct lay_req r;
	int rc;

	if (argc != 3) {
		fprintf(stderr, "rpfs setlayout: expected PATH FIELD=VALUE[,...]\n");
		return ADM_USAGE;
	}
	rc = lay_parse(argv[2], &r);
	if (!rc)
		rc = lay_check_mount("setlayout", argv[1], NULL, 0);
	if (!rc)
		rc = lay_current("setlayout", argv[1], &l);
	if (rc)
		return rc;
	if (r.given & LAY_UNIT)
		l.unit = r.l.unit;
	if (r.given & LAY_COUNT)
		l.count = r.l.count;
	if (r.given & LAY_FIRST)
		l.first = r.l.first;
	if (r.given & LAY_MIRROR)
		l.mirror = r.l.mirror;
	rc = lay_write(argv[1], &l, r.given & LAY_FIRST);
	/* a mirror change alone keeps the count if the groups allow it,
	 * else takes the most they allow, as [layout] mirror does */
	while (rc == -EINVAL && (r.given & LAY_MIRROR) && !(r.given & LAY_COUNT) &&
	       l.count > 1) {
		l.count--;
		rc = lay_write(argv[1], &l, r.given & LAY_FIRST);
	}
	if (rc) {
		lay_refused(argv[1], &l, rc);
		return ADM_FAIL;
	}
	rc = lay_current("setlayout", argv[1], &l);
	if (!rc)
		printf("%s: unit=%u,count=%u%s\n", argv[1], (unsigned)l.unit,
		       (unsigned)l.count, l.mirror == 2 ? ",mirror=2" : "");
	return rc;
}

/* See rpfs.h. */
int adm_getlayout(int argc, char **argv)
{
	char buf[128];
	ssize_t n;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "rpfs getlayout: expected PATH\n");
		return ADM_USAGE;
	}
	rc = lay_check_mount("getlayout", argv[1], NULL, 0);
	if (rc)
		return rc;
	n = getxattr(argv[1], LAYOUT_XATTR, buf, sizeof(buf) - 1);
	if (n < 0) {
		fprintf(stderr, "rpfs getlayout: %s: %s\n", argv[1], strerror(errno));
		return ADM_FAIL;
	}
	buf[n] = '\0';
	printf("%s\n", buf);
	return ADM_OK;
}

/* See rpfs.h. */
int adm_stats_path(int argc, char **argv)
{
	static char buf[16384];
	char root[PATH_MAX];
	ssize_t n;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "rpfs stats: expected PATH or --server HOST:PORT\n");
		return ADM_USAGE;
	}
	rc = lay_check_mount("stats", argv[1], root, sizeof(root));
	if (rc)
		return rc;
	n = getxattr(root, STATS_XATTR, buf, sizeof(buf) - 1);
	if (n < 0) {
		fprintf(stderr, "rpfs stats: %s (the mount holding %s): %s\n", root,
			argv[1], strerror(errno));
		return ADM_FAIL;
	}
	buf[n] = '\0';
	printf("%s\n", buf);
	return ADM_OK;
}

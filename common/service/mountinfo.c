/*
 * mountinfo.c - find the mount holding a path in /proc/self/mountinfo
 * (mnt_); see mountinfo.h. Cost: one read of mountinfo per call.
 */
#include "mountinfo.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

/* One parsed mountinfo line; the strings point into the line. */
struct mnt_entry {
	unsigned int major, minor;
	char *point;  /* unescaped in place */
	char *fstype;
};

/* Undo mountinfo's octal escapes (\040 for a space, ...) in place. */
static void mnt_unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
				      (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* Split one mountinfo line ("ID PARENT MAJ:MIN ROOT POINT OPTS [OPT...] -
 * FSTYPE SOURCE SUPEROPTS") into e. @return 0 or -EINVAL */
static int mnt_parse_line(char *line, struct mnt_entry *e)
{
	char *save = NULL, *tok;
	int field = 0;

	e->point = e->fstype = NULL;
	for (tok = strtok_r(line, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save), field++) {
		if (field == 2 && sscanf(tok, "%u:%u", &e->major, &e->minor) != 2)
			return -EINVAL;
		if (field == 4)
			e->point = tok;
		if (field > 5 && !strcmp(tok, "-")) {
			e->fstype = strtok_r(NULL, " \n", &save);
			break;
		}
	}
	if (!e->point || !e->fstype)
		return -EINVAL;
	mnt_unescape(e->point);
	return 0;
}

/* Whether the mount point p is path itself or a directory above it. */
static int mnt_holds(const char *p, const char *path)
{
	size_t n = strlen(p);

	if (!strcmp(p, "/"))
		return 1;
	return !strncmp(p, path, n) && (path[n] == '\0' || path[n] == '/');
}

/* Copy s into dst (cap bytes). @return 0 or -ENAMETOOLONG */
static int mnt_copy(char *dst, size_t cap, const char *s)
{
	if (!dst)
		return 0;
	if (strlen(s) >= cap)
		return -ENAMETOOLONG;
	strcpy(dst, s);
	return 0;
}

/* See mountinfo.h. */
int mnt_find(const char *path, char *root, size_t rootcap, char *fstype,
	     size_t fscap)
{
	char real[PATH_MAX], *line = NULL;
	size_t cap = 0, best = 0;
	struct stat st;
	FILE *f;
	int rc = -ENOENT;

	if (stat(path, &st) < 0 || !realpath(path, real))
		return -errno;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		struct mnt_entry e;

		if (mnt_parse_line(line, &e) ||
		    makedev(e.major, e.minor) != st.st_dev ||
		    !mnt_holds(e.point, real) || strlen(e.point) < best)
			continue;
		best = strlen(e.point);
		rc = mnt_copy(root, rootcap, e.point);
		if (!rc)
			rc = mnt_copy(fstype, fscap, e.fstype);
		if (rc)
			break;
	}
	free(line);
	fclose(f);
	return rc;
}

/* See mountinfo.h. */
int mnt_on_rpfs(const char *path, char *root, size_t rootcap)
{
	char fstype[64];
	struct statfs sf;
	int rc;

	if (statfs(path, &sf) < 0)
		return -errno;
	if (sf.f_type != FUSE_SUPER_MAGIC)
		return -EMEDIUMTYPE;
	rc = mnt_find(path, root, rootcap, fstype, sizeof(fstype));
	if (rc == -ENOENT || rc == -ENAMETOOLONG)
		return -EMEDIUMTYPE;  /* no such mount, or an odd type name */
	if (rc)
		return rc;
	return strcmp(fstype, MNT_RPFS_FSTYPE) ? -EMEDIUMTYPE : 0;
}

/* See mountinfo.h. */
int mnt_is_rpfs_mountpoint(const char *dir)
{
	char real[PATH_MAX], *line = NULL;
	size_t cap = 0;
	FILE *f;
	int found = 0;

	if (!realpath(dir, real))
		return -errno;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	while (!found && getline(&line, &cap, f) > 0) {
		struct mnt_entry e;

		found = !mnt_parse_line(line, &e) && !strcmp(e.point, real) &&
			!strcmp(e.fstype, MNT_RPFS_FSTYPE);
	}
	free(line);
	fclose(f);
	return found;
}

/*
 * fe_bdi.c - the readahead window of a FUSE mount's bdi (fe_bdi.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fe_bdi.h"

/* Undo mountinfo's octal escapes (\040 for a space, ...) in place. */
static void mi_unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = 0;
}

/* Find "MAJOR:MINOR" of the newest fuse mount on mountpoint in
 * /proc/self/mountinfo. Cost: one pass over the mount table.
 * @return 0, -ENOENT, -errno from fopen */
static int mi_find(const char *mountpoint, char *dev, size_t cap)
{
	char line[4096];
	int found = -ENOENT;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char id[64], mp[2048], *sep, fstype[64];

		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE ... */
		if (sscanf(line, "%*s %*s %63s %*s %2047s", id, mp) != 2)
			continue;
		sep = strstr(line, " - ");
		if (!sep || sscanf(sep + 3, "%63s", fstype) != 1 ||
		    strncmp(fstype, "fuse", 4) != 0)
			continue;
		mi_unescape(mp);
		if (strcmp(mp, mountpoint) != 0 || strlen(id) >= cap)
			continue;
		strcpy(dev, id); /* later lines are newer mounts: keep the last */
		found = 0;
	}
	fclose(f);
	return found;
}

/* See fe_bdi.h. Cost: a mountinfo pass and one sysfs write. */
int fe_bdi_set_readahead(const char *mountpoint, unsigned kb)
{
	char dev[64], path[128], val[16];
	int fd, rc, n;
	ssize_t w;

	rc = mi_find(mountpoint, dev, sizeof(dev));
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = snprintf(val, sizeof(val), "%u", kb);
	w = write(fd, val, (size_t)n);
	rc = w == n ? 0 : w < 0 ? -errno : -EIO;
	close(fd);
	return rc;
}

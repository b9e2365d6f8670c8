/* setid.c - the set-id dropping rule of writes, truncates and chown
 * (setid.h). */
#include "setid.h"

#include <sys/stat.h>

/* Linear scan of at most PROTO_MAX_GROUPS gids. */
int setid_in_group(const struct proto_cred *c, uint32_t gid)
{
	if (c->gid == gid)
		return 1;
	for (uint16_t i = 0; i < c->ngroups && i < PROTO_MAX_GROUPS; i++)
		if (c->groups[i] == gid)
			return 1;
	return 0;
}

/* S_ISGID is a real set-group-ID bit with S_IXGRP (always dropped); without
 * it, it is kept only for a caller in the file's group or root
 * (setattr_should_drop_sgid). */
static uint32_t kill_sgid(const struct proto_cred *c, uint32_t mode,
			  uint32_t gid)
{
	if (!(mode & S_ISGID))
		return 0;
	if (mode & S_IXGRP)
		return S_ISGID;
	return c->uid != 0 && !setid_in_group(c, gid) ? S_ISGID : 0;
}

/* Write / truncate: see setid.h (setattr_should_drop_suidgid). */
uint32_t setid_kill_write(const struct proto_cred *c, uint32_t mode,
			  uint32_t gid)
{
	if (c->uid == 0 || !S_ISREG(mode))
		return 0;
	return (mode & S_ISUID) | kill_sgid(c, mode, gid);
}

/* chown: see setid.h (chown_common). */
uint32_t setid_kill_chown(const struct proto_cred *c, uint32_t mode,
			  uint32_t gid)
{
	if (S_ISDIR(mode))
		return 0;
	return (mode & S_ISUID) | kill_sgid(c, mode, gid);
}

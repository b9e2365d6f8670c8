/* mgr_perm.c - POSIX permission checks on mgr inodes. */
#include "mgr_perm.h"

#include <errno.h>
#include <sys/stat.h>

#include "setid.h"

/* Group membership, the rule shared with the client (setid.c). */
int mgr_perm_in_group(const struct proto_cred *c, uint32_t gid)
{
	return setid_in_group(c, gid);
}

/* Pick the owner, group or other triplet and test mask against it. */
int mgr_perm_check(const struct proto_cred *c, const struct mgr_inode *in,
		   uint32_t mask)
{
	uint32_t bits;

	mask &= 7;
	if (c->uid == 0) {
		if ((mask & MGR_MAY_EXEC) && !S_ISDIR(in->mode) &&
		    !(in->mode & (S_IXUSR | S_IXGRP | S_IXOTH)))
			return -EACCES;
		return 0;
	}
	if (c->uid == in->uid)
		bits = (in->mode >> 6) & 7;
	else if (mgr_perm_in_group(c, in->gid))
		bits = (in->mode >> 3) & 7;
	else
		bits = in->mode & 7;
	return (bits & mask) == mask ? 0 : -EACCES;
}

/* In a sticky directory only the owner of the entry or of the directory
 * (or root) may remove it. */
int mgr_perm_sticky(const struct proto_cred *c, const struct mgr_inode *dir,
		    const struct mgr_inode *victim)
{
	if (!(dir->mode & S_ISVTX) || c->uid == 0 || c->uid == dir->uid ||
	    c->uid == victim->uid)
		return 0;
	return -EPERM;
}

/* Owner or root. */
int mgr_perm_owner(const struct proto_cred *c, const struct mgr_inode *in)
{
	return c->uid == 0 || c->uid == in->uid;
}

/* Root squash, as NFS's root_squash: uid 0 becomes nobody and nogroup,
 * gid 0 becomes nogroup whatever the uid, and group 0 leaves the
 * supplementary list, so no caller keeps root's user or group rights. */
void mgr_perm_squash(struct proto_cred *c)
{
	uint16_t j = 0;

	if (c->uid == 0) {
		c->uid = PROTO_NOBODY_ID;
		c->gid = PROTO_NOBODY_ID;
	}
	if (c->gid == 0)
		c->gid = PROTO_NOBODY_ID;
	for (uint16_t i = 0; i < c->ngroups && i < PROTO_MAX_GROUPS; i++)
		if (c->groups[i] != 0)
			c->groups[j++] = c->groups[i];
	c->ngroups = j;
}

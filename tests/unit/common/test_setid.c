/*
 * test_setid.c - unit tests of the set-id dropping rule (common/proto/setid.c):
 * the expected bits are what tmpfs/ext4 did on Linux 6.18 for the same
 * write, truncate and chown (see mgr/ns/README.md "Set-id bits"). Exits 0
 * when all pass.
 */
#include "setid.h"
#include "check.h"

#include <stdio.h>
#include <sys/stat.h>



#define SUG (S_ISUID | S_ISGID)

/* A credential: uid, primary gid and at most one supplementary group. */
static struct proto_cred cred(uint32_t uid, uint32_t gid, int ngroups,
			      uint32_t group)
{
	struct proto_cred c = { .uid = uid, .gid = gid, .ngroups = (uint16_t)ngroups };

	c.groups[0] = group;
	return c;
}

/* Writes and truncates: root keeps everything, others lose S_ISUID and a
 * real S_ISGID; S_ISGID without S_IXGRP goes only outside the group. */
static void test_write(void)
{
	struct proto_cred root = cred(0, 0, 0, 0);
	struct proto_cred nobody = cred(65534, 65534, 0, 0);
	struct proto_cred member = cred(65534, 65534, 1, 4242);
	uint32_t k;

	k = setid_kill_write(&nobody, S_IFREG | 06777, 0);
	CHECK(k == SUG, "other uid, 6777: %o", k);
	k = setid_kill_write(&nobody, S_IFREG | 06767, 0);
	CHECK(k == SUG, "other uid, 6767, not in group: %o", k);
	k = setid_kill_write(&nobody, S_IFREG | 04777, 0);
	CHECK(k == S_ISUID, "other uid, 4777: %o", k);
	k = setid_kill_write(&member, S_IFREG | 06767, 4242);
	CHECK(k == S_ISUID, "supplementary member, 6767: %o", k);
	k = setid_kill_write(&member, S_IFREG | 06777, 4242);
	CHECK(k == SUG, "member, 6777 (group exec): %o", k);
	k = setid_kill_write(&nobody, S_IFREG | 06767, 65534);
	CHECK(k == S_ISUID, "owner in primary group, 6767: %o", k);
	k = setid_kill_write(&root, S_IFREG | 06777, 65534);
	CHECK(k == 0, "root keeps: %o", k);
	k = setid_kill_write(&nobody, S_IFREG | 0777, 0);
	CHECK(k == 0, "no set-id bits: %o", k);
	k = setid_kill_write(&nobody, S_IFDIR | 02777, 0);
	CHECK(k == 0, "not a regular file: %o", k);
}

/* chown/chgrp: S_ISUID always goes (also for root and an unchanged owner),
 * a real S_ISGID too; S_ISGID without S_IXGRP stays for root and members. */
static void test_chown(void)
{
	struct proto_cred root = cred(0, 0, 0, 0);
	struct proto_cred nobody = cred(65534, 65534, 0, 0);
	uint32_t k;

	k = setid_kill_chown(&root, S_IFREG | 06777, 0);
	CHECK(k == SUG, "root, 6777: %o", k);
	k = setid_kill_chown(&root, S_IFREG | 06767, 0);
	CHECK(k == S_ISUID, "root, 6767: %o", k);
	k = setid_kill_chown(&nobody, S_IFREG | 06767, 65534);
	CHECK(k == S_ISUID, "owner in group, 6767: %o", k);
	k = setid_kill_chown(&nobody, S_IFREG | 06767, 4242);
	CHECK(k == SUG, "owner outside the group, 6767: %o", k);
	k = setid_kill_chown(&root, S_IFDIR | 06777, 0);
	CHECK(k == 0, "directory keeps: %o", k);
}

int main(void)
{
	test_write();
	test_chown();
	return check_summary("test_setid");
}

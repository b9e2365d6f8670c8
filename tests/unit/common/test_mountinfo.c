/*
 * test_mountinfo.c - common/service/mountinfo.c: parsing a mountinfo line (escaped
 * mount points, optional fields), the mount-point prefix rule, and the
 * live answers for / and a path that is not on rpfs. Includes the .c file
 * to reach its static helpers.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "../../../common/service/mountinfo.c"
#include "check.h"

/* mnt_parse_line on lines as the kernel writes them. */
static void test_parse(void)
{
	char l1[] = "36 35 98:0 /mnt1 /mnt/my\\040dir rw,noatime master:1 - fuse.rpfs "
		    "127.0.0.1:7400 rw,user_id=0\n";
	char l2[] = "22 1 0:21 / /proc rw,nosuid - proc proc rw\n";
	char l3[] = "22 1 0:21 / /proc rw,nosuid\n";  /* no separator */
	char l4[] = "x y zz / /a rw - ext4 /dev/sda1 rw\n";  /* bad maj:min */
	struct mnt_entry e;

	CHECK(mnt_parse_line(l1, &e) == 0, "optional field and escape");
	CHECK(!strcmp(e.point, "/mnt/my dir"), "point %s", e.point);
	CHECK(!strcmp(e.fstype, "fuse.rpfs"), "fstype %s", e.fstype);
	CHECK(e.major == 98 && e.minor == 0, "dev %u:%u", e.major, e.minor);
	CHECK(mnt_parse_line(l2, &e) == 0 && !strcmp(e.fstype, "proc") &&
	      !strcmp(e.point, "/proc"), "no optional field");
	CHECK(mnt_parse_line(l3, &e) == -EINVAL, "no separator");
	CHECK(mnt_parse_line(l4, &e) == -EINVAL, "bad device");
}

/* The prefix rule: a mount point holds itself and what is below it. */
static void test_holds(void)
{
	CHECK(mnt_holds("/", "/anything"), "/");
	CHECK(mnt_holds("/mnt/a", "/mnt/a"), "itself");
	CHECK(mnt_holds("/mnt/a", "/mnt/a/b/c"), "below");
	CHECK(!mnt_holds("/mnt/a", "/mnt/ab"), "a sibling with the prefix");
	CHECK(!mnt_holds("/mnt/a", "/mnt"), "above");
}

/* Live: / is a mount point of something; /proc is not rpfs. */
static void test_live(void)
{
	char root[PATH_MAX], type[64];

	CHECK(mnt_find("/proc/self", root, sizeof(root), type, sizeof(type)) == 0 &&
	      !strcmp(root, "/proc") && !strcmp(type, "proc"), "/proc: %s %s", root, type);
	CHECK(mnt_on_rpfs("/proc", NULL, 0) == -EMEDIUMTYPE, "/proc is not rpfs");
	CHECK(mnt_on_rpfs("/no/such/path", NULL, 0) == -ENOENT, "missing path");
	CHECK(mnt_is_rpfs_mountpoint("/proc") == 0, "/proc is no rpfs mount point");
	CHECK(mnt_find("/proc", root, 2, type, sizeof(type)) == -ENAMETOOLONG,
	      "small buffer");
}

int main(void)
{
	test_parse();
	test_holds();
	test_live();
	return check_summary("mountinfo");
}

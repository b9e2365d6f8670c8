/*
 * test_nscheck_damage.c - a test helper that damages a stopped mgr's
 * namespace on purpose, for tests/integration/test_nscheck.py:
 *
 *   test_nscheck_damage lmdb DIR PARENT NAME
 *   test_nscheck_damage postgresql URI PARENT NAME
 *
 * deletes the directory entry PARENT/NAME (its dirents record only: the
 * dirseq record stays, as a crash between the two writes would leave it
 * if they were not one transaction). Exit 0 done, 1 failed (printed), 2
 * usage. Not installed.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mgr_db.h"
#include "mgr_kv.h"

/* Delete the dirents record parent/name in one write txn. @return 0, -errno */
static int del_dirent(struct mgr_db *db, uint64_t parent, const char *name)
{
	uint8_t k[8 + 256];
	uint64_t be = htobe64(parent);
	size_t len = strlen(name);
	struct mgr_txn *t;
	int rc;

	if (len == 0 || len > 255)
		return -EINVAL;
	memcpy(k, &be, 8);
	memcpy(k + 8, name, len);
	rc = mgr_db_begin(db, 0, &t);
	if (rc)
		return rc;
	rc = mgr_kv_del(mgr_db_txn_kv(t), MGR_KV_DIRENTS, k, 8 + len);
	if (rc) {
		mgr_db_abort(t);
		return rc;
	}
	return mgr_db_commit(t);
}

int main(int argc, char **argv)
{
	struct mgr_kv_conf kc = { 0 };
	struct mgr_db_limits lim;
	struct mgr_db *db;
	char msg[512], *end;
	uint64_t parent;
	int rc;

	log_init("test_nscheck_damage", LOG_WARNING);
	if (argc != 5 || mgr_kv_kind_parse(argv[1], &kc.kind)) {
		fprintf(stderr, "usage: test_nscheck_damage lmdb|postgresql DIR|URI "
			"PARENT NAME\n");
		return 2;
	}
	errno = 0;
	parent = strtoull(argv[3], &end, 10);
	if (errno || *end || end == argv[3] || parent == 0) {
		fprintf(stderr, "test_nscheck_damage: PARENT: expected an inode "
			"number, got \"%s\"\n", argv[3]);
		return 2;
	}
	if (kc.kind == MGR_KV_LMDB)
		kc.dir = argv[2];
	else
		kc.uri = argv[2];
	mgr_db_limits_default(&lim);
	rc = mgr_db_open_store(&db, &kc, &lim, 0, msg, sizeof(msg));
	if (rc) {
		fprintf(stderr, "test_nscheck_damage: %s\n", msg);
		return 1;
	}
	rc = del_dirent(db, parent, argv[4]);
	mgr_db_close(db);
	if (rc) {
		fprintf(stderr, "test_nscheck_damage: delete %s/%s: %s\n", argv[3],
			argv[4], strerror(-rc));
		return 1;
	}
	return 0;
}

/*
 * test_ns_txn.h - run one namespace call (mgr_ns.h, mgr_xattr.h) in a
 * transaction of its own, ended as mgr_ops.c ends an op's: committed when
 * the call returned 0, aborted otherwise. RD begins a read txn, WR a write
 * txn. Each evaluates to the call's result, or to the begin's or the
 * commit's error. For the unit tests of the mgr.
 */
#ifndef RPFS_TEST_NS_TXN_H
#define RPFS_TEST_NS_TXN_H

#include "mgr_db.h"

/* End t as mgr_ops does after a call that returned rc. */
static inline int ns_txn_end(struct mgr_txn *t, int rc)
{
	if (rc) {
		mgr_db_abort(t);
		return rc;
	}
	return mgr_db_commit(t);
}

#define NS_TXN(rdonly, fn, db, ...) ({					\
	struct mgr_db *ns_db_ = (db);					\
	struct mgr_txn *ns_t_;						\
	int ns_rc_ = mgr_db_begin(ns_db_, (rdonly), &ns_t_);		\
	if (!ns_rc_)							\
		ns_rc_ = ns_txn_end(ns_t_, fn(ns_db_, ns_t_, __VA_ARGS__)); \
	ns_rc_;								\
})
#define RD(fn, ...) NS_TXN(1, fn, __VA_ARGS__)
#define WR(fn, ...) NS_TXN(0, fn, __VA_ARGS__)

#endif

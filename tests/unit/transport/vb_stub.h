/*
 * vb_stub.h - stubbed memory registration for the unit tests that include
 * the verbs backend's .c files (as SPDK tests do): include this first,
 * then the .c files. ibv_reg_mr returns a fake MR that remembers its range
 * and counts (stub_regs, stub_deregs). With stub_check_mapped set it fails
 * with EFAULT, as the kernel does, when a page of the range is not mapped
 * (checked with mincore; counted in stub_fails). It brings the tests'
 * CHECK (check_return.h).
 */
#ifndef RPFS_VB_STUB_H
#define RPFS_VB_STUB_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "check_return.h"

static int stub_regs, stub_deregs, stub_fails;
static int stub_check_mapped; /* fail on unmapped pages, as the kernel */

/* Whether every page of [addr, addr + len) is mapped (at most 16 MiB). */
static int stub_mapped(void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr & ~(uintptr_t)4095;
	size_t l = (((uintptr_t)addr + len + 4095) & ~(uintptr_t)4095) - a;
	unsigned char vec[4096];

	return l / 4096 <= sizeof(vec) && mincore((void *)a, l, vec) == 0;
}

/* Stub: a fake MR remembering its range (or EFAULT, see above). */
static struct ibv_mr *stub_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
				  int acc)
{
	struct ibv_mr *mr;

	(void)acc;
	if (stub_check_mapped && !stub_mapped(addr, len)) {
		stub_fails++;
		errno = EFAULT;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	mr->pd = pd;
	mr->addr = addr;
	mr->length = len;
	mr->lkey = mr->rkey = (uint32_t)++stub_regs;
	return mr;
}

/* Stub: count and free. */
static int stub_dereg_mr(struct ibv_mr *mr)
{
	stub_deregs++;
	free(mr);
	return 0;
}

#undef ibv_reg_mr
#define ibv_reg_mr stub_reg_mr
#define ibv_dereg_mr stub_dereg_mr

#endif

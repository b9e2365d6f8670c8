/*
 * test_pg.h - helpers the mgr's unit tests share for their PostgreSQL
 * stores (test_mgr_kv.c, test_mgr_nscheck.c). Header-only: each test is
 * one program.
 */
#ifndef RPFS_TEST_PG_H
#define RPFS_TEST_PG_H

#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

/* uri with its database (and, if pass, its password) replaced, as a
 * key=value conninfo. @return 0, -1 */
static inline int pg_uri_with(const char *uri, const char *db, const char *pass,
		       char *out, size_t cap)
{
	PQconninfoOption *o = PQconninfoParse(uri, NULL);
	size_t n = 0;

	if (!o)
		return -1;
	out[0] = '\0';
	for (PQconninfoOption *p = o; p->keyword; p++) {
		const char *v = p->val;

		if (!strcmp(p->keyword, "dbname"))
			v = db;
		else if (pass && !strcmp(p->keyword, "password"))
			v = pass;
		if (!v)
			continue;
		n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s='",
				      n ? " " : "", p->keyword);
		for (; *v && n + 3 < cap; v++) {
			if (*v == '\'' || *v == '\\')
				out[n++] = '\\';
			out[n++] = *v;
		}
		n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "'");
	}
	PQconninfoFree(o);
	return n < cap ? 0 : -1;
}

#endif

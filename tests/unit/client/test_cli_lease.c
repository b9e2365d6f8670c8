/*
 * test_cli_lease.c - unit tests of the mount's lease record
 * (fuse-client/core/cli_lease.c): which names may be kept long, and what
 * an invalidation, a recall and a reset take back.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli_lease.h"
#include "check.h"

/* Names a recall or reset handed back, as "dir/name " text. */
static char back[4096];

/* cli_lease_each_fn: note the name. */
static void note(uint64_t dir, const char *name, size_t len, void *arg)
{
	size_t n = strlen(back);

	(void)arg;
	snprintf(back + n, sizeof(back) - n, "%llu/%.*s ",
		 (unsigned long long)dir, (int)len, name ? name : "");
}

/* take with the grant (dir, evseq) */
static int take(struct cli_lease *t, uint64_t gen, uint64_t dir,
		uint64_t evseq, const char *name)
{
	struct proto_grant g = { dir, evseq };

	return cli_lease_take(t, gen, 1, &g, dir, name, strlen(name), 100 + dir);
}

int main(void)
{
	struct cli_lease *t;
	struct proto_grant g = { 5, 0 }, none = { 0, 0 };
	uint64_t gen, since;

	CHECK(cli_lease_new(&t, 3) == 0, "new");
	gen = cli_lease_gen(t);
	CHECK(take(t, gen, 5, 0, "a") == 1, "granted: kept");
	CHECK(take(t, gen, 5, 0, "a") == 1 && cli_lease_names(t) == 1,
	      "the same name again: one record");
	CHECK(cli_lease_take(t, gen, 0, &g, 5, "b", 1, 1) == 0, "not live");
	CHECK(cli_lease_take(t, gen, 1, &none, 5, "b", 1, 1) == 0, "no grant");
	CHECK(cli_lease_take(t, gen, 1, &g, 6, "b", 1, 1) == 0, "a grant on another dir");
	CHECK(cli_lease_dir_held(t, 5, 1, &since) && since == 105,
	      "dir 5 held since the first take's clock");
	CHECK(!cli_lease_dir_held(t, 5, 0, &since), "not while the channel is down");
	CHECK(!cli_lease_dir_held(t, 6, 1, &since), "dir 6 not held");
	/* an invalidation of dir 5 at event 3 voids grants made before it */
	cli_lease_inval(t, 5, "a", 1, 3);
	CHECK(cli_lease_names(t) == 0, "the name is forgotten");
	CHECK(take(t, gen, 5, 2, "b") == 0, "a grant older than the invalidation");
	CHECK(take(t, gen, 5, 3, "b") == 1 && take(t, gen, 5, 4, "c") == 1 &&
	      take(t, gen, 7, 4, "x") == 1, "newer grants");
	CHECK(take(t, gen, 7, 4, "y") == 0, "past max_names (3)");
	/* a recall of dir 5 hands back its names only */
	back[0] = '\0';
	cli_lease_recall(t, 5, 6, note, NULL);
	CHECK(strlen(back) == strlen("5/b 5/c 5/ ") && strstr(back, "5/b ") &&
	      strstr(back, "5/c ") && strstr(back, "5/ ") && cli_lease_names(t) == 1,
	      "recalled (its names and its attributes): %s", back);
	CHECK(!cli_lease_dir_held(t, 5, 1, &since), "dir 5 no longer held");
	CHECK(take(t, gen, 5, 5, "b") == 0 && take(t, gen, 5, 6, "b") == 1,
	      "grants after the recall only");
	/* a reset hands back everything and voids grants asked for before */
	back[0] = '\0';
	cli_lease_reset(t, note, NULL);
	CHECK(strlen(back) > 0 && strstr(back, "7/x") && strstr(back, "5/b") &&
	      strstr(back, "7/ ") && strstr(back, "5/ ") &&
	      cli_lease_names(t) == 0, "reset (names and held dirs): %s", back);
	CHECK(!cli_lease_dir_held(t, 7, 1, &since), "nothing held after it");
	CHECK(take(t, gen, 5, 9, "z") == 0, "a request sent before the reset");
	gen = cli_lease_gen(t);
	CHECK(take(t, gen, 5, 0, "z") == 1, "after it: the directory is new again");
	cli_lease_free(t);
	return check_summary("test_cli_lease");
}

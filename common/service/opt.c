/* opt.c - the engine of the programs' option tables; see opt.h. */
#include "opt.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "cfg.h"
#include "log.h"

#define OPT_VAL_BASE 256            /* getopt_long's val of entry i: + i */
#define OPT_VAL_MD (OPT_VAL_BASE - 1) /* --help-markdown */
#define OPT_COL 32                  /* help: where the facts start */
#define OPT_WIDTH 78                /* help: the widest line */
#define OPT_INDENT 6                /* help: the indent of the help text */

/* Store v into the integer field at p, size bytes wide. */
static void opt_store(void *p, size_t size, long long v)
{
	uint8_t u8 = (uint8_t)v;
	uint16_t u16 = (uint16_t)v;
	uint32_t u32 = (uint32_t)v;
	uint64_t u64 = (uint64_t)v;

	if (size == 1)
		memcpy(p, &u8, 1);
	else if (size == 2)
		memcpy(p, &u16, 2);
	else if (size == 4)
		memcpy(p, &u32, 4);
	else
		memcpy(p, &u64, 8);
}

/* The integer at p, size bytes wide, sign-extended when sgn. */
static long long opt_load(const void *p, size_t size, int sgn)
{
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	if (size == 1) {
		memcpy(&u8, p, 1);
		return sgn ? (int8_t)u8 : (long long)u8;
	}
	if (size == 2) {
		memcpy(&u16, p, 2);
		return sgn ? (int16_t)u16 : (long long)u16;
	}
	if (size == 4) {
		memcpy(&u32, p, 4);
		return sgn ? (int32_t)u32 : (long long)u32;
	}
	memcpy(&u64, p, 8);
	return (long long)u64;
}

/* Append s to buf (cap bytes, *n used), cutting what does not fit. */
static void opt_cat(char *buf, size_t cap, size_t *n, const char *s)
{
	size_t len = strlen(s);

	if (*n + 1 >= cap)
		return;
	if (len > cap - 1 - *n)
		len = cap - 1 - *n;
	memcpy(buf + *n, s, len);
	*n += len;
	buf[*n] = '\0';
}

/* A size as "4M", "1024G", "1K", or in bytes when it is no whole K. */
static void opt_size_text(long long v, char *buf, size_t cap)
{
	static const char sfx[] = "GMK";

	for (int i = 0; i < 3; i++) {
		int shift = 30 - 10 * i;

		if (v > 0 && !(v & ((1LL << shift) - 1))) {
			snprintf(buf, cap, "%lld%c", v >> shift, sfx[i]);
			return;
		}
	}
	snprintf(buf, cap, "%lld", v);
}

/* v, a value in o's range unit, as messages and help write it. */
static const char *opt_num(const struct opt *o, long long v, char *buf,
			   size_t cap)
{
	if (o->kind == OPT_MS || o->kind == OPT_SECONDS)
		snprintf(buf, cap, "%g", (double)v / 1000);
	else if (o->kind == OPT_SIZE && !(o->flags & OPT_BYTES))
		opt_size_text(v, buf, cap);
	else
		snprintf(buf, cap, "%lld", v);
	return buf;
}

/* Copy tmpl into out with {lo} and {hi} replaced by o's range. */
static void opt_expand(const struct opt *o, const char *tmpl, char *out,
		       size_t cap)
{
	char lo[32], hi[32], one[2] = "";
	size_t n = 0;

	opt_num(o, o->lo, lo, sizeof(lo));
	opt_num(o, o->hi, hi, sizeof(hi));
	out[0] = '\0';
	while (*tmpl) {
		if (!strncmp(tmpl, "{lo}", 4) || !strncmp(tmpl, "{hi}", 4)) {
			opt_cat(out, cap, &n, tmpl[1] == 'l' ? lo : hi);
			tmpl += 4;
			continue;
		}
		one[0] = *tmpl++;
		opt_cat(out, cap, &n, one);
	}
}

/* The message of a bad value s of o, given as name. @return -EINVAL */
static int opt_bad(const struct opt *o, const char *name, const char *s,
		   char *err, size_t errcap)
{
	char what[256];

	opt_expand(o, o->what ? o->what : "a value", what, sizeof(what));
	snprintf(err, errcap, "%s: expected %s, got \"%s\"", name, what, s);
	return -EINVAL;
}

/* A decimal integer whose first character is a digit. @return 0, -EINVAL */
static int opt_int(const char *s, long long *v)
{
	char *end;

	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return errno || *end ? -EINVAL : 0;
}

/* Seconds with a fraction within o's range (ms). @return 0, -EINVAL */
static int opt_secs(const struct opt *o, const char *s, double *d)
{
	double lo = (double)o->lo / 1000, hi = (double)o->hi / 1000;
	char *end;

	errno = 0;
	*d = strtod(s, &end);
	if (errno || end == s || *end)
		return -EINVAL;
	if ((o->flags & OPT_ABOVE) ? !(*d > lo) : !(*d >= lo))
		return -EINVAL;
	return *d > hi ? -EINVAL : 0;
}

/* An OPT_STRING value into field (a copy with OPT_COPY).
 * @return 0, -EINVAL (err set), -ENOMEM */
static int opt_string(const struct opt *o, const char *name, const char *s,
		      void *field, char *err, size_t errcap)
{
	char *copy;

	if ((!s[0] && !(o->flags & OPT_EMPTY)) || (o->check && o->check(s)))
		return opt_bad(o, name, s, err, errcap);
	if (!(o->flags & OPT_COPY)) {
		memcpy(field, &s, sizeof(s));
		return 0;
	}
	copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	free(*(char **)field);
	*(char **)field = copy;
	return 0;
}

/* A number-like value (OPT_INT, OPT_SIZE, OPT_MS, OPT_SECONDS, OPT_ONOFF,
 * OPT_LEVEL) into field. @return 0, -EINVAL (err set) */
static int opt_number(const struct opt *o, const char *name, const char *s,
		      void *field, char *err, size_t errcap)
{
	long long v = 0;
	uint64_t u = 0;
	double d = 0;

	if (o->kind == OPT_INT && (opt_int(s, &v) || v < o->lo || v > o->hi))
		return opt_bad(o, name, s, err, errcap);
	if (o->kind == OPT_INT)
		v *= o->scale ? o->scale : 1;
	if (o->kind == OPT_SIZE &&
	    (cfg_parse_size(s, &u) || u < (uint64_t)o->lo || u > (uint64_t)o->hi ||
	     ((o->flags & OPT_POW2) && (u & (u - 1)))))
		return opt_bad(o, name, s, err, errcap);
	if (o->kind == OPT_SIZE)
		v = (long long)u;
	if ((o->kind == OPT_MS || o->kind == OPT_SECONDS) && opt_secs(o, s, &d))
		return opt_bad(o, name, s, err, errcap);
	if (o->kind == OPT_SECONDS) {
		memcpy(field, &d, sizeof(d));
		return 0;
	}
	if (o->kind == OPT_MS)
		v = (long long)(d * 1000 + 0.5);
	if (o->kind == OPT_ONOFF && strcmp(s, "on") && strcmp(s, "off"))
		return opt_bad(o, name, s, err, errcap);
	if (o->kind == OPT_ONOFF)
		v = !strcmp(s, "on");
	if (o->kind == OPT_LEVEL && (v = log_level_parse(s)) < LOG_ERR)
		return opt_bad(o, name, s, err, errcap);
	opt_store(field, o->size, v);
	return 0;
}

/* The option as a message names it: "--lease" or "-o timeout". */
static const char *opt_name(const struct opt_prog *p, const struct opt *o,
			    char *buf, size_t cap)
{
	snprintf(buf, cap, "%s%s", p->style == OPT_MOUNT ? "-o " : "--",
		 o->name);
	return buf;
}

/* Where the next value of the OPT_LIST entry o goes in args, NULL when its
 * array is full (err set). */
static char *opt_list_next(const struct opt *o, const char *name, void *args,
			   char *err, size_t errcap)
{
	long long n = opt_load((char *)args + o->count_off, o->count_size, 0);
	char many[128];
	struct opt lim = *o;

	if (n < o->max)
		return (char *)args + o->off + (size_t)n * o->stride;
	lim.kind = OPT_INT;
	lim.hi = o->max;
	opt_expand(&lim, o->many ? o->many : "at most {hi}", many, sizeof(many));
	snprintf(err, errcap, "%s: %s", name, many);
	return NULL;
}

/* See opt.h. */
int opt_set(const struct opt_prog *p, unsigned i, const char *name,
	    const char *s, void *args, char *err, size_t errcap)
{
	const struct opt *o = &p->opts[i];
	char *field = (char *)args + o->off, buf[80];
	struct opt_addr *a;
	int rc;

	if (!name)
		name = opt_name(p, o, buf, sizeof(buf));
	if (o->flags & OPT_LIST) {
		field = opt_list_next(o, name, args, err, errcap);
		if (!field)
			return -EINVAL;
	}
	a = (struct opt_addr *)(void *)field;
	switch (o->kind) {
	case OPT_SWITCH:
		opt_store(field, o->size, !(o->flags & OPT_NEGATE));
		return 0;
	case OPT_ADDR:
		rc = addr_parse(name, s, o->addr, a->host, sizeof(a->host),
				&a->port, err, errcap) ? -EINVAL : 0;
		break;
	case OPT_STRING:
		rc = opt_string(o, name, s, field, err, errcap);
		break;
	case OPT_CUSTOM:
		return o->parse(o, name, s, args, err, errcap);
	default:
		return opt_number(o, name, s, field, err, errcap);
	}
	if (!rc && (o->flags & OPT_LIST))
		opt_store((char *)args + o->count_off, o->count_size,
			  opt_load((char *)args + o->count_off, o->count_size, 0) + 1);
	return rc;
}

/* See opt.h. */
void opt_defaults(const struct opt_prog *p, void *args)
{
	for (unsigned i = 0; i < p->nopts; i++) {
		const struct opt *o = &p->opts[i];
		char *field = (char *)args + o->off;
		double d = (double)o->def / 1000;

		if (o->kind == OPT_SECONDS)
			memcpy(field, &d, sizeof(d));
		else if (o->kind == OPT_STRING && !(o->flags & (OPT_COPY | OPT_LIST)))
			memcpy(field, &o->defstr, sizeof(o->defstr));
		else if (o->kind == OPT_SWITCH && !(o->flags & OPT_NEGATE))
			opt_store(field, o->size, o->def);
		else if (o->kind != OPT_ADDR && o->kind != OPT_CUSTOM &&
			 o->kind != OPT_STRING && o->kind != OPT_SWITCH)
			opt_store(field, o->size, o->def);
	}
}

/*
 * getopt_long's options for p (entry i answers OPT_VAL_BASE + i, or its
 * letter), with --help and --help-markdown, into *out (malloc'd), and the
 * short flags into shorts. @return 0, -ENOMEM
 */
static int opt_getopt_table(const struct opt_prog *p, struct option **out,
			    char *shorts, size_t cap)
{
	struct option *lo = calloc(p->nopts + 3, sizeof(*lo));
	size_t n = 0;

	if (!lo)
		return -ENOMEM;
	opt_cat(shorts, cap, &n, ":h");
	for (unsigned i = 0; i < p->nopts; i++) {
		const struct opt *o = &p->opts[i];
		char one[3] = { o->letter, o->kind == OPT_SWITCH ? 0 : ':', 0 };

		lo[i].name = o->name;
		lo[i].has_arg = o->kind == OPT_SWITCH ? no_argument : required_argument;
		lo[i].val = o->letter ? o->letter : OPT_VAL_BASE + (int)i;
		if (o->letter)
			opt_cat(shorts, cap, &n, one);
	}
	lo[p->nopts] = (struct option){ "help", no_argument, NULL, 'h' };
	lo[p->nopts + 1] = (struct option){ "help-markdown", no_argument, NULL,
					    OPT_VAL_MD };
	*out = lo;
	return 0;
}

/* The entry getopt_long's answer c stands for. @return its index, -ENOENT */
static int opt_from_val(const struct opt_prog *p, int c)
{
	for (unsigned i = 0; i < p->nopts; i++)
		if (c == (p->opts[i].letter ? p->opts[i].letter :
			  OPT_VAL_BASE + (int)i))
			return (int)i;
	return -ENOENT;
}

/* getopt_long over argv with the table lo; the arguments that are no
 * option are left at argv[optind..argc). @return as opt_parse */
static int opt_loop(const struct opt_prog *p, int argc, char **argv,
		    void *args, const struct option *lo, const char *shorts,
		    uint64_t *given, char *err, size_t errcap)
{
	int c, i, rc;

	opterr = 0;
	optind = 0; /* a fresh start: glibc forgets any earlier scan */
	while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		if (c == 'h' || c == OPT_VAL_MD) {
			(c == 'h' ? opt_help : opt_markdown)(p, stdout);
			return OPT_HELP;
		}
		if (c == ':') {
			snprintf(err, errcap, "%s: missing argument", argv[optind - 1]);
			return -EINVAL;
		}
		i = opt_from_val(p, c);
		if (i < 0) {
			snprintf(err, errcap, "unknown option \"%s\"", argv[optind - 1]);
			return -EINVAL;
		}
		rc = opt_set(p, (unsigned)i, NULL, optarg, args, err, errcap);
		if (rc)
			return rc;
		*given |= 1ull << i;
	}
	return 0;
}

/* See opt.h. */
int opt_parse_args(const struct opt_prog *p, int argc, char **argv,
		   void *args, uint64_t *given, int *first, char *err,
		   size_t errcap)
{
	struct option *lo;
	char shorts[3 * 64 + 3];
	int rc;

	*given = 0;
	*first = argc;
	rc = opt_getopt_table(p, &lo, shorts, sizeof(shorts));
	if (rc) {
		snprintf(err, errcap, "out of memory");
		return rc;
	}
	rc = opt_loop(p, argc, argv, args, lo, shorts, given, err, errcap);
	free(lo);
	if (!rc)
		*first = optind;
	return rc;
}

/* See opt.h. */
int opt_parse(const struct opt_prog *p, int argc, char **argv, void *args,
	      uint64_t *given, char *err, size_t errcap)
{
	int first, rc;

	rc = opt_parse_args(p, argc, argv, args, given, &first, err, errcap);
	if (rc == 0 && first < argc) {
		snprintf(err, errcap, "unexpected argument \"%s\"", argv[first]);
		return -EINVAL;
	}
	return rc;
}

/* See opt.h. */
void opt_merge_conf(const struct opt_prog *p, const struct cfg *f,
		    void *args, uint64_t given)
{
	for (unsigned i = 0; f && i < p->nopts; i++) {
		const struct opt *o = &p->opts[i];
		const char *src = (const char *)f + o->cf_off;
		char *field = (char *)args + o->off;
		long long v;

		if (o->cf == OPT_CF_NONE || (given & (1ull << i)))
			continue;
		if (o->cf == OPT_CF_STR) {
			const char *s = *(char *const *)(const void *)src;

			if (s)
				memcpy(field, &s, sizeof(s));
			continue;
		}
		v = opt_load(src, o->cf_size, o->cf_unset < 0);
		if (v != o->cf_unset)
			opt_store(field, o->size, v);
	}
}

/* See opt.h. */
int opt_index(const struct opt_prog *p, const char *name)
{
	for (unsigned i = 0; i < p->nopts; i++)
		if (!strcmp(p->opts[i].name, name))
			return (int)i;
	return -ENOENT;
}

/* See opt.h. */
int opt_given(const struct opt_prog *p, uint64_t given, const char *name)
{
	int i = opt_index(p, name);

	return i >= 0 && (given & (1ull << i));
}

/* See opt.h. */
void opt_free(const struct opt_prog *p, void *args)
{
	for (unsigned i = 0; i < p->nopts; i++) {
		const struct opt *o = &p->opts[i];
		char **field = (char **)(void *)((char *)args + o->off);

		if (o->kind == OPT_STRING && (o->flags & OPT_COPY)) {
			free(*field);
			*field = NULL;
		}
	}
}

/* The flag as help shows it: "--lease SECONDS", "-o timeout=S". */
static void opt_flag_text(const struct opt_prog *p, const struct opt *o,
			  char *buf, size_t cap)
{
	int arg = o->kind != OPT_SWITCH;

	if (p->style == OPT_MOUNT)
		snprintf(buf, cap, "-o %s%s%s", o->name, arg ? "=" : "",
			 arg ? o->arg : "");
	else if (o->letter)
		snprintf(buf, cap, "-%c, --%s%s%s", o->letter, o->name,
			 arg ? " " : "", arg ? o->arg : "");
	else
		snprintf(buf, cap, "--%s%s%s", o->name, arg ? " " : "",
			 arg ? o->arg : "");
}

/* The range as help shows it ("2..600"), "" for kinds without one. */
static void opt_range_text(const struct opt *o, char *buf, size_t cap)
{
	char lo[32], hi[32];

	buf[0] = '\0';
	if (o->kind != OPT_INT && o->kind != OPT_SIZE && o->kind != OPT_MS &&
	    o->kind != OPT_SECONDS)
		return;
	opt_num(o, o->lo, lo, sizeof(lo));
	opt_num(o, o->hi, hi, sizeof(hi));
	if (o->flags & OPT_ABOVE)
		snprintf(buf, cap, "above %s, at most %s", lo, hi);
	else
		snprintf(buf, cap, "%s..%s", lo, hi);
}

/* The default as help shows it ("10", "4G", "on", "notice"), or "". */
static void opt_default_text(const struct opt *o, char *buf, size_t cap)
{
	static const char *const levels[] = { "emerg", "alert", "crit", "err",
		"warning", "notice", "info", "debug" };
	long long scale = o->kind == OPT_INT && o->scale ? o->scale : 1;

	buf[0] = '\0';
	if (o->defdoc)
		snprintf(buf, cap, "%s", o->defdoc);
	else if (o->kind == OPT_INT || o->kind == OPT_SIZE ||
		 o->kind == OPT_MS || o->kind == OPT_SECONDS)
		opt_num(o, o->def / scale, buf, cap);
	else if (o->kind == OPT_ONOFF)
		snprintf(buf, cap, "%s", o->def ? "on" : "off");
	else if (o->kind == OPT_LEVEL && o->def >= 0 && o->def < 8)
		snprintf(buf, cap, "%s", levels[o->def]);
	else if (o->kind == OPT_STRING && o->defstr)
		snprintf(buf, cap, "%s", o->defstr);
}

/* Write text wrapped at OPT_WIDTH, each line indented by indent. */
static void opt_wrap(FILE *f, const char *text, int indent)
{
	int col = 0;

	while (*text) {
		size_t w = strcspn(text, " ");

		if (col > indent && col + 1 + (int)w > OPT_WIDTH) {
			fputc('\n', f);
			col = 0;
		}
		if (col == 0)
			col = fprintf(f, "%*s", indent, "");
		else
			col += fprintf(f, " ");
		col += fprintf(f, "%.*s", (int)w, text);
		text += w;
		text += strspn(text, " ");
	}
	if (col)
		fputc('\n', f);
}

/* One entry of --help: the flag, its facts (range, default, key), then
 * its help text. */
static void opt_help_entry(const struct opt_prog *p, const struct opt *o,
			   FILE *f)
{
	char flag[128], range[80], def[80], facts[320];
	size_t n = 0;
	int col;

	opt_flag_text(p, o, flag, sizeof(flag));
	opt_range_text(o, range, sizeof(range));
	opt_default_text(o, def, sizeof(def));
	facts[0] = '\0';
	opt_cat(facts, sizeof(facts), &n, range);
	if (def[0]) {
		opt_cat(facts, sizeof(facts), &n, n ? ", default " : "default ");
		opt_cat(facts, sizeof(facts), &n, def);
	}
	if (o->key) {
		opt_cat(facts, sizeof(facts), &n, n ? ", " : "");
		opt_cat(facts, sizeof(facts), &n, o->key);
	}
	col = fprintf(f, "  %s", flag);
	if (facts[0] && col + 2 <= OPT_COL && OPT_COL + n <= OPT_WIDTH) {
		fprintf(f, "%*s%s\n", OPT_COL - col, "", facts);
	} else {
		fputc('\n', f);
		opt_wrap(f, facts, OPT_COL);
	}
	opt_wrap(f, o->help, OPT_INDENT);
}

/* See opt.h. */
void opt_help(const struct opt_prog *p, FILE *f)
{
	int keys = 0, testing = 0;

	for (unsigned i = 0; i < p->nopts; i++) {
		keys |= p->opts[i].key != NULL;
		testing |= (p->opts[i].flags & OPT_TESTING) != 0;
	}
	fputs(p->usage, f);
	if (p->intro)
		fputs(p->intro, f);
	fprintf(f, "Options%s:\n", keys ? " (one given here wins over its "
		"rpfs.conf key)" : "");
	for (int pass = 0; pass <= testing; pass++) {
		if (pass)
			fputs("For testing only:\n", f);
		for (unsigned i = 0; i < p->nopts; i++)
			if (!(p->opts[i].flags & OPT_TESTING) == !pass)
				opt_help_entry(p, &p->opts[i], f);
	}
}

/* Write s as one Markdown table cell: | escaped. */
static void opt_md_cell(FILE *f, const char *pre, const char *s,
			const char *post)
{
	fputs(pre, f);
	for (; *s; s++) {
		if (*s == '|')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputs(post, f);
}

/* See opt.h. */
void opt_markdown(const struct opt_prog *p, FILE *f)
{
	char flag[128], range[80], def[80];

	fprintf(f, "| %s | range | default | rpfs.conf | what |\n"
		"|---|---|---|---|---|\n", p->name);
	for (unsigned i = 0; i < p->nopts; i++) {
		const struct opt *o = &p->opts[i];

		opt_flag_text(p, o, flag, sizeof(flag));
		opt_range_text(o, range, sizeof(range));
		opt_default_text(o, def, sizeof(def));
		opt_md_cell(f, "| `", flag, "` ");
		opt_md_cell(f, "| ", range, " ");
		opt_md_cell(f, "| ", def, " ");
		opt_md_cell(f, o->key ? "| `" : "| ", o->key ? o->key : "",
			    o->key ? "` " : " ");
		opt_md_cell(f, "| ", o->flags & OPT_TESTING ? "For testing only: " :
			    "", "");
		opt_md_cell(f, "", o->help, " |\n");
	}
}

/*
 * opt.h - one option table per program. Each entry of a program's table
 * says, for one setting: its flag (--name; -o name=VALUE for rpfs-fuse),
 * the rpfs.conf key that may give it too, its default, how its value is
 * parsed and checked (a kind and a range), where it goes in the
 * program's arguments struct, and its help line. From the table come
 * getopt_long's options, the defaults, the message for a bad value, the
 * merge of the config file under the flags (a flag given on the command
 * line wins over its key), --help and the README's table
 * (--help-markdown, checked against README.md by a meson test).
 *
 * The config file itself is read and checked by cfg.c (cfg_load), which
 * knows every key of every section; an entry's cf_* fields name the
 * member of struct cfg that holds its key's value, already checked, in
 * the unit of the entry's field.
 *
 * A bad value's message: "NAME: expected WHAT, got "VALUE"", NAME the
 * flag as given ("--lease", "-o timeout"), WHAT the entry's what with
 * {lo} and {hi} replaced by its range.
 */
#ifndef RPFS_OPT_H
#define RPFS_OPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "proto.h"

struct cfg;

/* What an option's value is, and so how it is parsed and stored. */
enum opt_kind {
	OPT_SWITCH,  /* no value: the int field becomes 1 (OPT_NEGATE: 0) */
	OPT_INT,     /* a decimal integer lo..hi (first character a digit);
		      * the field (any integer size) holds it times scale */
	OPT_SIZE,    /* a size with an optional K, M or G suffix, lo..hi
		      * bytes (OPT_POW2: a power of two); integer field */
	OPT_MS,      /* seconds with a fraction, lo..hi milliseconds; the
		      * int field holds milliseconds (rounded) */
	OPT_SECONDS, /* the same into a double field, in seconds */
	OPT_ADDR,    /* HOST:PORT (addr_parse with .addr flags) into a
		      * struct opt_addr */
	OPT_STRING,  /* a string, not empty (unless OPT_EMPTY), checked by
		      * .check if set; a const char * field (char * with
		      * OPT_COPY) */
	OPT_ONOFF,   /* on or off: the int field becomes 1 or 0 */
	OPT_LEVEL,   /* a log level (log_level_parse, err..debug): int */
	OPT_CUSTOM,  /* .parse does it all (e.g. a repeated option) */
};

/* Entry flags. */
#define OPT_POW2    0x01u /* OPT_SIZE: a power of two */
#define OPT_BYTES   0x02u /* OPT_SIZE: the range in bytes in what, not 4K */
#define OPT_EMPTY   0x04u /* OPT_STRING: "" is a value */
#define OPT_COPY    0x08u /* OPT_STRING: the field owns a copy (opt_free) */
#define OPT_TESTING 0x10u /* for tests only: listed last, marked so */
#define OPT_NEGATE  0x20u /* OPT_SWITCH: the field becomes 0, not 1 */
#define OPT_ABOVE   0x40u /* OPT_MS, OPT_SECONDS: lo itself is refused */
#define OPT_LIST    0x80u /* OPT_ADDR, OPT_STRING: repeatable; the field is
			   * an array of .max elements .stride bytes apart
			   * (OPT_ADDR: each begins as a struct opt_addr),
			   * counted by the integer at .count_off */

/* An OPT_ADDR field. */
struct opt_addr {
	char host[PROTO_MAX_HOST + 1];
	uint16_t port;
};

/* How the config file's value of an entry's key is found in struct cfg. */
enum opt_cf {
	OPT_CF_NONE,  /* no member: the key is applied elsewhere (or none) */
	OPT_CF_NUM,   /* an integer member; cf_unset means "not in the file" */
	OPT_CF_STR,   /* a char * member; NULL means "not in the file" */
};

/* One option of a program. Tables are const and built with OPT_AT and
 * OPT_CF below. */
struct opt {
	const char *name;    /* "listen": --listen (or -o listen=) */
	char letter;         /* a short flag, or 0 */
	unsigned char kind;  /* enum opt_kind */
	unsigned short flags; /* OPT_POW2 ... */
	const char *arg;     /* the value's name in help: "HOST:PORT" */
	size_t off, size;    /* the field in the program's struct (OPT_AT) */
	long long lo, hi;    /* the range, in the flag's unit (OPT_INT), in
			      * bytes (OPT_SIZE), in ms (OPT_MS, OPT_SECONDS) */
	long long scale;     /* OPT_INT: the field holds value * scale (0: 1) */
	long long def;       /* the default, in the field's unit (OPT_SECONDS:
			      * ms); strings: see defstr */
	const char *defstr;  /* OPT_STRING: the default (NULL: none) */
	const char *defdoc;  /* the default as help says it, when that is
			      * not def ("" : say none) */
	const char *what;    /* a bad value: "expected " what; {lo} {hi} */
	unsigned addr;       /* OPT_ADDR: addr_parse flags (ADDR_PORT0 ...) */
	unsigned max;        /* OPT_LIST: the array's elements */
	size_t stride, count_off, count_size; /* OPT_LIST, see OPT_AT_LIST */
	const char *many;    /* OPT_LIST: "NAME: " many, when the array is
			      * full; {hi} is max */
	/* OPT_STRING: 0 if s is a valid value, else nonzero */
	int (*check)(const char *s);
	/* OPT_CUSTOM: parse s, given as name, into args; on a bad value
	 * write the message to err and return -EINVAL */
	int (*parse)(const struct opt *o, const char *name, const char *s,
		     void *args, char *err, size_t errcap);
	const char *key;     /* its rpfs.conf key: "[mgr] lease", or NULL */
	unsigned char cf;    /* enum opt_cf */
	unsigned char cf_size;
	signed char cf_unset; /* OPT_CF_NUM: the member's "not in the file";
			       * -1: a signed member, else 0 */
	size_t cf_off;       /* the member of struct cfg */
	const char *help;    /* what it is for; range, default and key are
			      * added by the help writers */
};

/* The field f of struct T, as .off and .size. */
#define OPT_AT(T, f) .off = offsetof(T, f), .size = sizeof(((T *)0)->f)

/* The array field f of struct T counted by its integer field n (OPT_LIST). */
#define OPT_AT_LIST(T, f, n) .off = offsetof(T, f),                        \
	.size = sizeof(((T *)0)->f[0]), .stride = sizeof(((T *)0)->f[0]),     \
	.max = sizeof(((T *)0)->f) / sizeof(((T *)0)->f[0]),                  \
	.count_off = offsetof(T, n), .count_size = sizeof(((T *)0)->n)

/* The struct cfg member m holding the key's value: an integer, "not in
 * the file" when it equals unset: -1 for a signed member, 0 for an
 * unsigned one. */
#define OPT_CF(m, unset) .cf = OPT_CF_NUM, .cf_off = offsetof(struct cfg, m), \
	.cf_size = sizeof(((struct cfg *)0)->m), .cf_unset = (unset)
/* The struct cfg member m, a string, NULL when not in the file. */
#define OPT_CF_S(m) .cf = OPT_CF_STR, .cf_off = offsetof(struct cfg, m)

/* How a program writes its flags. */
enum opt_style {
	OPT_LONG,   /* --name VALUE, --name=VALUE, -l VALUE */
	OPT_MOUNT,  /* -o name=VALUE, -o name (rpfs-fuse) */
};

/* A program: its name, its table and the text around the table. */
struct opt_prog {
	const char *name;    /* "rpfs-mgr", for messages */
	unsigned char style; /* enum opt_style */
	const char *usage;   /* the synopsis, first in --help */
	const char *intro;   /* text after the synopsis, or NULL */
	const struct opt *opts;
	unsigned nopts;      /* at most 64 */
};

#define OPT_HELP 1 /* opt_parse: --help (or -h) was printed */

/**
 * Write every entry's default into args (OPT_CUSTOM and OPT_ADDR fields
 * are left as they are: zero them first).
 */
void opt_defaults(const struct opt_prog *p, void *args);

/**
 * Parse the command line with getopt_long (from argv[1]; no positional
 * argument is taken) into args, after opt_defaults. -h, --help and the
 * hidden --help-markdown print and return OPT_HELP.
 * @param[out] given bit i set for each entry i given on the command line
 * @param[out] err on -EINVAL, one line: "--lease: expected SECONDS 2..600,
 *	got "1"", "--x: missing argument", "unknown option "--x"",
 *	"unexpected argument "x"" (the caller prefixes the program's name)
 * @return 0, OPT_HELP, -EINVAL a bad command line, -ENOMEM
 */
int opt_parse(const struct opt_prog *p, int argc, char **argv, void *args,
	      uint64_t *given, char *err, size_t errcap);

/**
 * opt_parse for a program that takes positional arguments too: they are
 * left, in their order, at argv[*first..argc) (getopt_long moves them
 * behind the options; "--" ends the options). The caller checks them.
 * @param[out] first the index of the first positional argument (argc:
 *	none)
 * @return as opt_parse, without its "unexpected argument"
 */
int opt_parse_args(const struct opt_prog *p, int argc, char **argv,
		   void *args, uint64_t *given, int *first, char *err,
		   size_t errcap);

/**
 * Parse one value s of entry i into args (for a program that runs its own
 * option loop, as rpfs-fuse with fuse_opt_parse).
 * @param name the option as given, for the message ("-o timeout")
 * @param[out] err on -EINVAL, "NAME: expected WHAT, got "S""
 * @return 0, -EINVAL a bad value, -ENOMEM (OPT_COPY)
 */
int opt_set(const struct opt_prog *p, unsigned i, const char *name,
	    const char *s, void *args, char *err, size_t errcap);

/**
 * The config file under the flags: for each entry with a cf member that is
 * set in f and whose flag was not given, copy the file's value into args.
 * A NULL f does nothing.
 */
void opt_merge_conf(const struct opt_prog *p, const struct cfg *f,
		    void *args, uint64_t given);

/**
 * The index of the entry named name.
 * @return 0..nopts-1, -ENOENT
 */
int opt_index(const struct opt_prog *p, const char *name);

/** Whether the entry named name was given on the command line. */
int opt_given(const struct opt_prog *p, uint64_t given, const char *name);

/** Free the OPT_COPY strings of args (NULL fields are fine). */
void opt_free(const struct opt_prog *p, void *args);

/** Write --help: the synopsis, the intro and one paragraph per entry. */
void opt_help(const struct opt_prog *p, FILE *f);

/** Write the README's table of p: one Markdown row per entry. */
void opt_markdown(const struct opt_prog *p, FILE *f);

#endif

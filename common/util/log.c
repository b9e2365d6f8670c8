/* log.c - stderr logging: syslog priority prefixes for journald, plain
 * "ident: message" lines on a terminal. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <stdlib.h>
#include <unistd.h>

/* Set by log_init()/log_set_key_option() from main() before any thread,
 * read-only afterwards: no lock. */
static const char *log_ident = "rpfs";
static int log_level = LOG_INFO;
static int log_tty = -1;              /* stderr is a terminal; -1: not asked */
static const char *log_key_opt;       /* e.g. "-o key=FILE", or NULL */

/* Remember ident and level, and whether stderr is a terminal (then lines
 * carry no "<N>" prefix); called from main() before any thread. */
void log_init(const char *ident, int level)
{
	if (ident)
		log_ident = ident;
	if (level >= LOG_EMERG && level <= LOG_DEBUG)
		log_level = level;
	log_tty = isatty(STDERR_FILENO) == 1;
}

/* Remember the option of this program that gives a cluster key. */
void log_set_key_option(const char *opt)
{
	log_key_opt = opt;
}

/* See log.h. */
const char *log_key_advice(void)
{
	static char buf[128];

	if (!log_key_opt)
		return "configure key = in rpfs.conf";
	if (!buf[0])
		snprintf(buf, sizeof(buf), "configure key = in rpfs.conf or give %s "
			 "to %s", log_key_opt, log_ident);
	return buf;
}

/* Map a level name or digit to its syslog value. */
int log_level_parse(const char *s)
{
	static const char *const names[] = { "emerg", "alert", "crit", "err",
					     "warning", "notice", "info", "debug" };
	for (int i = 0; i < 8; i++)
		if (strcasecmp(s, names[i]) == 0)
			return i;
	if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0')
		return s[0] - '0';
	return -EINVAL;
}

/* Format one line into a stack buffer and write it with a single write(2),
 * so lines from different threads never interleave. Cost: one syscall. */
void log_msg(int prio, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n, m;

	if (prio > log_level)
		return;
	if (log_tty < 0)
		log_tty = isatty(STDERR_FILENO) == 1;
	if (log_tty)
		n = snprintf(line, sizeof(line), "%s: ", log_ident);
	else
		n = snprintf(line, sizeof(line), "<%d>%s: ", prio, log_ident);
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, n);
	(void)w;
}

/*
 * log.h - logging to stderr with syslog priority prefixes ("<3>", "<6>", ...)
 * so that journald files each line by level; on a terminal the lines are
 * plain ("rpfs: ..."). Thread-safe: one write(2) per line.
 */
#ifndef RPFS_LOG_H
#define RPFS_LOG_H

#include <syslog.h>

/**
 * Set the program name printed on each line and the most verbose level kept.
 * @param ident program name, e.g. "rpfs-iod" (the pointer is kept)
 * @param level LOG_ERR .. LOG_DEBUG
 */
void log_init(const char *ident, int level);

/**
 * Name the option that gives this program a cluster key (the pointer is
 * kept), so that advice names it; call from main() before any thread.
 * @param opt e.g. "-o key=FILE" (rpfs-fuse) or "--key FILE" (rpfs)
 */
void log_set_key_option(const char *opt);

/**
 * Advice for a peer that wants a cluster key we lack, for this program.
 * @return e.g. "configure key = in rpfs.conf or give -o key=FILE to rpfs-fuse"
 */
const char *log_key_advice(void);

/** Parse "err", "warning", "notice", "info", "debug" or 3..7. @return level or -EINVAL */
int log_level_parse(const char *s);

/** Emit one line at prio if prio <= the configured level. */
void log_msg(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif

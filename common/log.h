/*
 * log.h - logging to stderr with syslog priority prefixes ("<3>", "<6>", ...)
 * so that journald files each line by level. Thread-safe: one write(2) per line.
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

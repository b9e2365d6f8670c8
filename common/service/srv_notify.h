/*
 * srv_notify.h - systemd integration of the daemons (Type=notify units):
 * READY=1 once listening, STATUS= lines, STOPPING=1, and WATCHDOG=1 from a
 * libev timer at half of WATCHDOG_USEC when the unit sets WatchdogSec=.
 * Built without libsystemd (RPFS_HAVE_SYSTEMD=0) every call is a no-op.
 * Loop thread only.
 */
#ifndef RPFS_SRV_NOTIFY_H
#define RPFS_SRV_NOTIFY_H

struct ev_loop;

/**
 * Start the watchdog timer in loop if the service manager asked for one.
 * @return 0, or -errno from sd_watchdog_enabled (logged, harmless)
 */
int sdn_start(struct ev_loop *loop);

/** Stop the watchdog timer and tell the manager we are stopping. */
void sdn_stop(struct ev_loop *loop);

/** Send READY=1 and STATUS=status. */
void sdn_ready(const char *status);

/** Send STATUS=status (free text shown by systemctl status). */
void sdn_status(const char *status);

#endif

/* srv_notify.c - sd_notify readiness, status and watchdog; see srv_notify.h. */
#include "srv_notify.h"
#include "log.h"

#include <ev.h>
#include <stdio.h>
#include <string.h>

#if RPFS_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

static ev_timer sdn_wd;      /* watchdog keep-alive (loop thread only) */
static int sdn_wd_on;        /* sdn_wd started (loop thread only) */

/* Timer: tell the manager we are alive. Cost: one datagram. */
static void sdn_wd_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	sd_notify(0, "WATCHDOG=1");
}

/* See srv_notify.h. */
int sdn_start(struct ev_loop *loop)
{
	uint64_t usec = 0;
	int rc = sd_watchdog_enabled(0, &usec);

	if (rc < 0) {
		log_warn("systemd watchdog: %s", strerror(-rc));
		return rc;
	}
	if (rc == 0 || usec == 0)
		return 0;
	ev_timer_init(&sdn_wd, sdn_wd_cb, 0., (double)usec / 2e6);
	ev_timer_again(loop, &sdn_wd);
	sdn_wd_on = 1;
	log_info("systemd watchdog: keep-alive every %.1f s", (double)usec / 2e6);
	return 0;
}

/* See srv_notify.h. */
void sdn_stop(struct ev_loop *loop)
{
	if (sdn_wd_on)
		ev_timer_stop(loop, &sdn_wd);
	sdn_wd_on = 0;
	sd_notify(0, "STOPPING=1");
}

/* See srv_notify.h. */
void sdn_ready(const char *status)
{
	sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

/* See srv_notify.h. */
void sdn_status(const char *status)
{
	sd_notifyf(0, "STATUS=%s", status);
}

#else /* !RPFS_HAVE_SYSTEMD */

int sdn_start(struct ev_loop *loop)
{
	return 0;
}

void sdn_stop(struct ev_loop *loop)
{
}

void sdn_ready(const char *status)
{
}

void sdn_status(const char *status)
{
}

#endif

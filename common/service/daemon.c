/* daemon.c - start-up scaffolding of the daemons; see daemon.h. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "addr.h"
#include "log.h"
#include "net_auth.h"
#include "srv_notify.h"

/* See daemon.h. */
int dmn_mkdir_p(const char *dir)
{
	char path[PATH_MAX];
	size_t len = strlen(dir);

	if (len == 0)
		return -EINVAL;
	if (len >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, dir, len + 1);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* See daemon.h. */
int dmn_lock_dir(const char *dir)
{
	char path[PATH_MAX];
	int fd, rc;

	if (snprintf(path, sizeof(path), "%s/.lock", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (ftruncate(fd, 0) == 0)
		dprintf(fd, "%ld\n", (long)getpid());
	return fd;
}

/* SIGTERM/SIGINT: leave the loop so that the daemon closes everything. */
static void dmn_on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct dmn_signals *s = w->data;

	log_notice("signal %d: shutting down", w->signum);
	s->stopped = 1;
	ev_break(loop, EVBREAK_ALL);
}

/* See daemon.h. */
void dmn_signals_start(struct dmn_signals *s, struct ev_loop *loop)
{
	s->stopped = 0;
	ev_signal_init(&s->term, dmn_on_signal, SIGTERM);
	s->term.data = s;
	ev_signal_start(loop, &s->term);
	ev_signal_init(&s->intr, dmn_on_signal, SIGINT);
	s->intr.data = s;
	ev_signal_start(loop, &s->intr);
}

/* See daemon.h. */
void dmn_signals_stop(struct dmn_signals *s, struct ev_loop *loop)
{
	ev_signal_stop(loop, &s->intr);
	ev_signal_stop(loop, &s->term);
}

/* See daemon.h. */
void dmn_ready(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_notice("ready: %s", msg);
	sdn_ready(msg);
}

/* See daemon.h. */
int dmn_transport_check(const char *s)
{
	enum net_transport t;

	return net_transport_parse(s, &t);
}

/* See daemon.h. */
int dmn_load_conf(const char *path, struct cfg **conf, struct net_opts *o,
		  char *err, size_t errcap)
{
	int rc;

	*conf = NULL;
	net_opts_default(o);
	if (!path)
		return 0;
	rc = cfg_load(conf, path, err, errcap);
	if (rc)
		return rc;
	rc = cfg_net_opts(*conf, o, err, errcap);
	if (rc) {
		cfg_free(*conf);
		*conf = NULL;
	}
	return rc;
}

/* See daemon.h. */
int dmn_metrics_conf(struct dmn_args *d, const struct cfg *f, int given,
		     long offset)
{
	long port;

	if (given) {
		d->metrics_what = "--metrics";
		return 0;
	}
	if (!f || !f->metrics_host[0])
		return 0;
	port = f->metrics_port ? f->metrics_port + offset : 0;
	if (port > 65535)
		return -ERANGE;
	snprintf(d->metrics.host, sizeof(d->metrics.host), "%s", f->metrics_host);
	d->metrics.port = (uint16_t)port;
	d->metrics_what = "[metrics] listen";
	return 0;
}

/* See daemon.h. */
int dmn_settle(struct dmn_args *d, const struct cfg *conf, int rt_given,
	       const struct opt_addr *listen, struct net_opts *o, char *err,
	       size_t errcap)
{
	char msg[512];
	int rc;

	if (d->key_path && (!conf || d->key_path != conf->key_path)) {
		rc = cfg_load_key(d->key_path, o, msg, sizeof(msg));
		if (rc) {
			snprintf(err, errcap, "--key: %s", msg);
			return rc;
		}
	}
	rc = cfg_server_keys(conf, d->srv_key_path, o, err, errcap);
	if (rc)
		return rc;
	if (d->transport)
		(void)net_transport_parse(d->transport, &o->transport);
	if (rt_given)
		o->request_timeout_ms = d->request_timeout_ms;
	rc = addr_listen_check(listen->host, listen->port, net_auth_keyed(o),
			       d->insecure, &d->listen_warn, d->listen_msg,
			       sizeof(d->listen_msg));
	if (rc)
		snprintf(err, errcap, "%s", d->listen_msg);
	return rc;
}

#if !RPFS_HAVE_METRICS
/* See daemon.h: built without libmicrohttpd. */
int dmn_metrics_start(struct dmn_metrics **out, const struct dmn_metrics_kind *k,
		      const struct dmn_metrics_src *src, const void *priv,
		      char *err, size_t errcap)
{
	snprintf(err, errcap, "%s: this %s was built without metrics (meson "
		 "-Dmetrics=enabled, libmicrohttpd-dev)", src->what,
		 program_invocation_short_name);
	return -ENOTSUP;
}

/* See daemon.h. */
void dmn_metrics_stop(struct dmn_metrics *d)
{
}
#endif

/* daemon_metrics.c - a daemon's Prometheus endpoint on its loop; see
 * daemon.h. Built with -Dmetrics only (libmetrics). */
#include "daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "log.h"

/* ev_timer: the program's snapshot, every second. Loop thread. */
static void dmn_metrics_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct dmn_metrics *d = t->data;

	d->on_tick(d);
}

/* Start the endpoint d of kind k, allocated and filled by
 * dmn_metrics_start. @return as dmn_metrics_start */
static int dmn_metrics_serve(struct dmn_metrics *d,
			     const struct dmn_metrics_kind *k,
			     const struct dmn_metrics_src *src, char *err,
			     size_t errcap)
{
	char addr[ADDR_STRLEN];
	int rc;

	d->ops = calloc(1, sizeof(*d->ops));
	if (!d->ops) {
		snprintf(err, errcap, "%s: out of memory", src->what);
		return -ENOMEM;
	}
	d->loop = src->loop;
	d->srv = src->srv;
	d->on_tick = k->on_tick;
	pthread_mutex_init(&d->lock, NULL);
	d->on_tick(d); /* the first snapshot */
	rc = metrics_start(&d->http, src->what, src->host, src->port, k->write,
			   d, err, errcap);
	if (rc) {
		pthread_mutex_destroy(&d->lock);
		free(d->ops);
		return rc;
	}
	ev_timer_init(&d->tick, dmn_metrics_tick, 1.0, 1.0);
	d->tick.data = d;
	ev_timer_start(d->loop, &d->tick);
	net_server_set_opstats(d->srv, d->ops);
	log_notice("metrics on http://%s/metrics", addr_format(addr, sizeof(addr),
		   src->host, metrics_port(d->http)));
	return 0;
}

/* See daemon.h. */
int dmn_metrics_start(struct dmn_metrics **out, const struct dmn_metrics_kind *k,
		      const struct dmn_metrics_src *src, const void *priv,
		      char *err, size_t errcap)
{
	struct dmn_metrics *d = calloc(1, k->size);
	int rc;

	if (!d) {
		snprintf(err, errcap, "%s: out of memory", src->what);
		return -ENOMEM;
	}
	memcpy((char *)d + k->priv_off, priv, k->priv_size);
	rc = dmn_metrics_serve(d, k, src, err, errcap);
	if (rc) {
		free(d);
		return rc;
	}
	*out = d;
	return 0;
}

/* See daemon.h. The server stops timing before ops is freed. */
void dmn_metrics_stop(struct dmn_metrics *d)
{
	if (!d)
		return;
	metrics_stop(d->http);
	ev_timer_stop(d->loop, &d->tick);
	net_server_set_opstats(d->srv, NULL);
	pthread_mutex_destroy(&d->lock);
	free(d->ops);
	free(d);
}

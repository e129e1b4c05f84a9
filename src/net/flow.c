/* The flow-control layer (rtaccel/net.h): priority scheduling of transfers at
 * chunk boundaries on the sending side, one receive thread per link that
 * puts chunks in place, freshness checks, ACKs with timeout and retry.
 *
 * Sending. A link has one token: whoever holds it writes the next frame.
 * Senders that want it and cannot have it wait in a list ordered by
 * priority, then by arrival, each on its own condition variable, so that
 * handing the token over wakes exactly the next one. The holder checks the
 * list at every chunk boundary and hands over only to a strictly better
 * waiter: a transfer of equal priority keeps the link to its end (FIFO among
 * equals). The check is one atomic load while nobody waits.
 *
 * ACKs are frames like any other and need the token, but the receive thread
 * must never wait for it: the holder may be stuck writing to a peer whose
 * receive thread is stuck the same way. So the receive thread queues its
 * ACKs and sends them only if the token is free; otherwise the holder sends
 * them at its next chunk boundary.
 *
 * Receiving. Every channel has slots; a transfer arrives into a free one
 * (no reader holds it and it is not the newest), and becomes the newest with
 * its last chunk. A reader of one channel sleeps on that channel's futex
 * word, so that an arrival wakes its own readers and nobody else's: with a
 * word for the whole process, the gateway's one thread per remote client
 * all woke for every request (a herd that grew with the clients). Readers
 * of several channels at once sleep on one word that every arrival bumps. */
#include "rtaccel/net.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/fork.h"
#include "core/futex.h"
#include "net/flow.h"
#include "net/transport.h"

#define ACK_PRIORITY 256 /* above every channel's */
#define PENDING_ACKS 64
#define RX_POLL_NS (200ull * 1000 * 1000)

struct slot {
	uint8_t *data;
	uint64_t len, seq, stamp_ns, arrival_ns;
	int stale;
	uint32_t readers; /* guarded by the channel's mu */
};

struct rtaccel_net_channel {
	struct rtaccel_net_link *link;
	struct rtaccel_net_channel_attr attr;
	/* sending */
	uint64_t next_transfer;	/* guarded by the link's mu */
	_Atomic uint64_t acked; /* the highest transfer the peer acknowledged */
	/* receiving: the receive thread alone writes these, under mu */
	pthread_mutex_t mu;
	struct slot *slots;
	int newest;	     /* -1: none yet */
	int filling;	     /* the slot of the transfer arriving, or -1 */
	uint64_t filling_seq, filled;
	uint64_t completed;  /* the newest whole transfer's number */
	/* bumped by every arrival and by the link's failure; its readers sleep on it */
	_Atomic uint32_t arrivals;
	_Atomic uint32_t sleepers;
	/* statistics, relaxed */
	struct {
		_Atomic uint64_t sent, bytes_sent, chunks_sent, preempted, stale_dropped,
			stale_flagged, retries, ack_timeouts, received, bytes_received,
			stale_received, duplicates, overruns, rejected;
	} st;
};

struct waiter {
	struct waiter *next;
	int priority;
	uint64_t order;
	bool granted;
	pthread_cond_t cv;
};

struct ack {
	uint32_t channel;
	uint64_t transfer;
};

struct rtaccel_net_link {
	struct net_link t;
	struct rtaccel_net_options opt;
	pthread_mutex_t mu;
	bool busy;			/* somebody holds the token */
	struct waiter *waiters;		/* best first */
	_Atomic int nwaiting;
	uint64_t order;			/* arrivals at the token */
	struct ack acks[PENDING_ACKS];	/* queued by the receive thread */
	int nacks;			/* guarded by mu */
	_Atomic int acks_queued;	/* nacks, for a look without mu */
	pthread_cond_t ack_cv;		/* senders waiting for ACKs */
	_Atomic int err;		/* the link's failure, sticky */
	char why[160];
	rtaccel_net_channel_t *channels[RTACCEL_NET_CHANNELS];
	_Atomic int nchannels;
	pthread_t rx;
	bool rx_started;
	_Atomic int rx_priority; /* the receive thread's SCHED_FIFO priority now */
	_Atomic bool closing;
	struct rtaccel_fork_entry fork;
};

struct rtaccel_net_listener {
	struct net_listener l;
	struct rtaccel_net_options opt;
	char address[300];
	char peers[RTACCEL_NET_ALLOW_MAX][64];
	struct rtaccel_fork_entry fork;
};

static const char forked_why[] = "the link belongs to the process this one was forked from";

/* Every arrival and every link failure bumps this word too; readers of
 * several channels sleep on it. */
static _Atomic uint32_t any_arrivals;
static _Atomic uint32_t any_sleepers;

static void bump(_Atomic uint32_t *word, _Atomic uint32_t *sleepers)
{
	atomic_fetch_add(word, 1);
	if (atomic_load(sleepers))
		futex_wake((uint32_t *)word, INT_MAX, false);
}

/* Something arrived on CH. */
static void announce(rtaccel_net_channel_t *ch)
{
	bump(&ch->arrivals, &ch->sleepers);
	bump(&any_arrivals, &any_sleepers);
}

void rtaccel_net_options_default(struct rtaccel_net_options *o)
{
	memset(o, 0, sizeof(*o));
	o->chunk = 64u << 10;
	o->max_transfer = 256ull << 20;
	o->handshake_ns = 5ull * RTACCEL_NS_PER_S;
}

static int check_options(const struct rtaccel_net_options *o)
{
	if (o->chunk < 1024 || o->chunk > (16u << 20) || o->max_transfer == 0 ||
	    o->window > (1u << 30) || o->rx_priority < 0 || o->rx_priority > 99)
		return -EINVAL;
	return 0;
}

/* The window is the transport's default unless told (rtaccel/net.h). */
static int limits_of(const struct rtaccel_net_options *o, const char *address,
		     struct net_limits *l)
{
	const struct rtaccel_net_transport *t = rtaccel_net_transport_find(address);
	if (!t)
		return -EINVAL;
	net_limits_defaults(l);
	l->frame.max_chunk = o->chunk;
	l->frame.max_transfer = o->max_transfer;
	l->handshake_ns = o->handshake_ns;
	l->window = o->window ? o->window : rtaccel_net_default_window(t, o->chunk);
	return 0;
}

static int pi_mutex_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
	int r = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return -r;
}

static void cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}

/* Waits on CV until DEADLINE; -ETIMEDOUT after it. */
static int cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline)
{
	if (deadline == UINT64_MAX)
		return -pthread_cond_wait(cv, mu);
	struct timespec ts = rtaccel_timespec_of(deadline);
	return -pthread_cond_timedwait(cv, mu, &ts);
}

/* The link fails with ERR (the first failure wins); everyone waiting is
 * told. */
static void fail(struct rtaccel_net_link *link, int err, const char *why)
{
	/* A link that timed out in the middle of a frame is broken, which is
	 * not what -ETIMEDOUT tells a caller ("nothing yet, ask again"): a
	 * reader that took it for that would poll a dead link for ever. */
	if (err == -ETIMEDOUT)
		err = -ECONNABORTED;
	pthread_mutex_lock(&link->mu);
	int expected = 0;
	if (atomic_compare_exchange_strong(&link->err, &expected, err))
		snprintf(link->why, sizeof(link->why), "%s", why);
	for (struct waiter *w = link->waiters; w; w = w->next)
		pthread_cond_signal(&w->cv);
	pthread_cond_broadcast(&link->ack_cv);
	pthread_mutex_unlock(&link->mu);
	/* Channels are only ever added until the link is closed. */
	const int n = atomic_load(&link->nchannels);
	for (int i = 0; i < n; i++)
		bump(&link->channels[i]->arrivals, &link->channels[i]->sleepers);
	bump(&any_arrivals, &any_sleepers);
}

static void fail_transport(struct rtaccel_net_link *link, int err, const char *doing)
{
	char why[160];
	snprintf(why, sizeof(why), "%s: %s", doing,
		 err == -EPROTO || (err == -ECONNRESET && link->t.why[0]) ? link->t.why
		 : err == -ETIMEDOUT || err == -ECONNABORTED ? "timed out in the middle of a frame"
				     : strerror(-err));
	fail(link, err, why);
}

/* ---- the token ---- */

static bool better(const struct waiter *a, int priority, uint64_t order)
{
	return a->priority > priority || (a->priority == priority && a->order < order);
}

static void enqueue(struct rtaccel_net_link *link, struct waiter *w)
{
	struct waiter **p = &link->waiters;
	while (*p && !better(w, (*p)->priority, (*p)->order))
		p = &(*p)->next;
	w->next = *p;
	*p = w;
	atomic_fetch_add(&link->nwaiting, 1);
}

static void unlink_waiter(struct rtaccel_net_link *link, struct waiter *w)
{
	for (struct waiter **p = &link->waiters; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			atomic_fetch_sub(&link->nwaiting, 1);
			return;
		}
}

/* Hands the token to the best waiter, or frees it. Under mu. */
static void pass_token(struct rtaccel_net_link *link)
{
	struct waiter *w = link->waiters;
	if (!w) {
		link->busy = false;
		return;
	}
	link->waiters = w->next;
	atomic_fetch_sub(&link->nwaiting, 1);
	w->granted = true;
	pthread_cond_signal(&w->cv);
}

/* Waits for the token as W (priority and order set). Under mu. */
static int wait_token(struct rtaccel_net_link *link, struct waiter *w, uint64_t deadline)
{
	w->granted = false;
	enqueue(link, w);
	while (!w->granted) {
		int err = atomic_load(&link->err);
		if (!err)
			err = cond_wait_until(&w->cv, &link->mu, deadline);
		if (err && !w->granted) {
			unlink_waiter(link, w);
			return err == -ETIMEDOUT ? -ETIMEDOUT : atomic_load(&link->err);
		}
	}
	return 0;
}

static int take_token(struct rtaccel_net_link *link, struct waiter *w, uint64_t deadline)
{
	pthread_mutex_lock(&link->mu);
	if (!w->order) /* a retry keeps its first place among equals */
		w->order = ++link->order;
	int err = atomic_load(&link->err);
	if (!err) {
		if (!link->busy) {
			link->busy = true;
		} else {
			err = wait_token(link, w, deadline);
		}
	}
	pthread_mutex_unlock(&link->mu);
	return err;
}

/* The queued ACKs, sent by the token's holder. */
static int flush_acks(struct rtaccel_net_link *link)
{
	for (;;) {
		pthread_mutex_lock(&link->mu);
		if (!link->nacks) {
			pthread_mutex_unlock(&link->mu);
			return 0;
		}
		struct ack a = link->acks[0];
		memmove(link->acks, link->acks + 1, sizeof(a) * (size_t)--link->nacks);
		atomic_store_explicit(&link->acks_queued, link->nacks, memory_order_relaxed);
		pthread_mutex_unlock(&link->mu);
		struct net_frame f = {.type = NET_FRAME_ACK, .channel = a.channel,
				      .transfer = a.transfer, .priority = 255};
		int err = net_link_send(&link->t, &f, NULL, 0, RTACCEL_NS_PER_S);
		if (err) {
			fail_transport(link, err, "sending an ACK");
			return err;
		}
	}
}

static void give_token(struct rtaccel_net_link *link)
{
	flush_acks(link);
	pthread_mutex_lock(&link->mu);
	pass_token(link);
	pthread_mutex_unlock(&link->mu);
}

/* At a chunk boundary: lets a strictly better waiter go first, and waits
 * for the token to come back. */
static int chunk_boundary(struct rtaccel_net_link *link, struct waiter *w,
			  rtaccel_net_channel_t *ch, uint64_t deadline)
{
	if (atomic_load_explicit(&link->acks_queued, memory_order_relaxed))
		flush_acks(link);
	if (atomic_load_explicit(&link->nwaiting, memory_order_relaxed) == 0)
		return 0;
	pthread_mutex_lock(&link->mu);
	int err = 0;
	if (link->waiters && better(link->waiters, w->priority, w->order)) {
		atomic_fetch_add_explicit(&ch->st.preempted, 1, memory_order_relaxed);
		pass_token(link);
		err = wait_token(link, w, deadline);
	}
	pthread_mutex_unlock(&link->mu);
	return err;
}

/* ---- sending ---- */

static int send_transfer(rtaccel_net_channel_t *ch, struct waiter *w, const uint8_t *data,
			 size_t len, uint64_t transfer, uint64_t stamp, uint8_t flags,
			 uint64_t deadline)
{
	struct rtaccel_net_link *link = ch->link;
	const uint32_t chunk = link->opt.chunk;
	size_t off = 0;
	do {
		if (off) {
			int err = chunk_boundary(link, w, ch, deadline);
			if (err)
				return err;
		}
		uint32_t n = len - off < chunk ? (uint32_t)(len - off) : chunk;
		bool last = off + n == len;
		struct net_frame f = {.type = NET_FRAME_DATA, .channel = ch->attr.id,
				      .priority = ch->attr.priority, .transfer = transfer,
				      .offset = off, .total = len, .length = n, .stamp_ns = stamp,
				      .flags = (uint8_t)(flags | (last ? NET_FLAG_LAST : 0))};
		struct iovec iov = {(void *)(data + off), n};
		int err = net_link_send(&link->t, &f, &iov, n ? 1 : 0, net_time_left(deadline));
		if (err) {
			/* part of a frame may be on the wire: the link is done */
			fail_transport(link, err, "sending");
			return err;
		}
		atomic_fetch_add_explicit(&ch->st.chunks_sent, 1, memory_order_relaxed);
		off += n;
	} while (off < len);
	/* chunks sent from a registered region are read by the device after
	 * the post: the caller may reuse DATA only once it has */
	int err = net_link_drain(&link->t, net_time_left(deadline));
	if (err)
		fail_transport(link, err, "sending");
	return err;
}

static int wait_ack(rtaccel_net_channel_t *ch, uint64_t transfer, uint64_t until)
{
	struct rtaccel_net_link *link = ch->link;
	pthread_mutex_lock(&link->mu);
	int err = 0;
	while (atomic_load(&ch->acked) < transfer && !(err = atomic_load(&link->err)))
		if ((err = cond_wait_until(&link->ack_cv, &link->mu, until)))
			break;
	pthread_mutex_unlock(&link->mu);
	return atomic_load(&ch->acked) >= transfer ? 0 : err;
}

int rtaccel_net_send(rtaccel_net_channel_t *ch, const void *data, size_t len, uint64_t stamp_ns,
		     uint64_t timeout_ns)
{
	struct rtaccel_net_link *link = ch->link;
	if (len > link->opt.max_transfer)
		return -EMSGSIZE;
	if (!data && len)
		return -EINVAL;
	const uint64_t deadline = net_deadline_after(timeout_ns);
	if (!stamp_ns)
		stamp_ns = rtaccel_clock_ns(CLOCK_REALTIME);
	struct waiter w = {.priority = ch->attr.priority};
	cond_init(&w.cv);
	int err = take_token(link, &w, deadline);
	if (err)
		goto out;
	/* the QoS check: the data's age when its turn has come */
	uint8_t flags = ch->attr.ack_timeout_ns ? NET_FLAG_ACK : 0;
	uint64_t now = rtaccel_clock_ns(CLOCK_REALTIME);
	if (ch->attr.freshness_ns && now > stamp_ns && now - stamp_ns > ch->attr.freshness_ns) {
		if (ch->attr.stale == RTACCEL_NET_STALE_DROP) {
			atomic_fetch_add_explicit(&ch->st.stale_dropped, 1, memory_order_relaxed);
			give_token(link);
			err = -ESTALE;
			goto out;
		}
		atomic_fetch_add_explicit(&ch->st.stale_flagged, 1, memory_order_relaxed);
		flags |= NET_FLAG_STALE;
	}
	pthread_mutex_lock(&link->mu);
	uint64_t transfer = ++ch->next_transfer;
	pthread_mutex_unlock(&link->mu);
	for (uint32_t attempt = 0;; attempt++) {
		err = send_transfer(ch, &w, data, len, transfer, stamp_ns, flags, deadline);
		if (err)
			goto out; /* the token is gone with the link, or was never given back */
		give_token(link);
		if (!ch->attr.ack_timeout_ns)
			break;
		uint64_t until = net_deadline_after(ch->attr.ack_timeout_ns);
		err = wait_ack(ch, transfer, until < deadline ? until : deadline);
		if (err != -ETIMEDOUT || attempt == ch->attr.retries ||
		    rtaccel_monotonic_ns() >= deadline) {
			if (err == -ETIMEDOUT)
				atomic_fetch_add_explicit(&ch->st.ack_timeouts, 1, memory_order_relaxed);
			if (err)
				goto out;
			break;
		}
		atomic_fetch_add_explicit(&ch->st.retries, 1, memory_order_relaxed);
		if ((err = take_token(link, &w, deadline)))
			goto out;
	}
	atomic_fetch_add_explicit(&ch->st.sent, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&ch->st.bytes_sent, len, memory_order_relaxed);
out:
	pthread_cond_destroy(&w.cv);
	return err;
}

/* ---- receiving ---- */

static rtaccel_net_channel_t *find_channel(struct rtaccel_net_link *link, uint32_t id)
{
	int n = atomic_load_explicit(&link->nchannels, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (link->channels[i]->attr.id == id)
			return link->channels[i];
	return NULL;
}

/* A slot no reader holds that is not the newest. Under mu. */
static int free_slot(rtaccel_net_channel_t *ch)
{
	for (uint32_t i = 0; i < ch->attr.slots; i++)
		if (!ch->slots[i].readers && (int)i != ch->newest)
			return (int)i;
	return -1;
}

static void queue_ack(struct rtaccel_net_link *link, uint32_t channel, uint64_t transfer)
{
	pthread_mutex_lock(&link->mu);
	if (link->nacks == PENDING_ACKS) /* the sender retries what falls off */
		memmove(link->acks, link->acks + 1, sizeof(link->acks[0]) * --link->nacks);
	link->acks[link->nacks++] = (struct ack){channel, transfer};
	atomic_store_explicit(&link->acks_queued, link->nacks, memory_order_relaxed);
	bool mine = !link->busy;
	if (mine)
		link->busy = true;
	pthread_mutex_unlock(&link->mu);
	if (mine)
		give_token(link);
}

static int receive_data(struct rtaccel_net_link *link, const struct net_frame *f)
{
	rtaccel_net_channel_t *ch = find_channel(link, f->channel);
	if (!ch)
		return net_link_recv_payload(&link->t, NULL, f->length, NET_STALL_NS);
	pthread_mutex_lock(&ch->mu);
	struct slot *s = NULL;
	if (f->offset == 0) {
		if (ch->filling >= 0) /* the last transfer never finished */
			atomic_fetch_add_explicit(&ch->st.rejected, 1, memory_order_relaxed);
		ch->filling = -1;
		if (f->transfer <= ch->completed) {
			atomic_fetch_add_explicit(&ch->st.duplicates, 1, memory_order_relaxed);
		} else if (f->total > ch->attr.max_size) {
			atomic_fetch_add_explicit(&ch->st.rejected, 1, memory_order_relaxed);
		} else if ((ch->filling = free_slot(ch)) < 0) {
			atomic_fetch_add_explicit(&ch->st.overruns, 1, memory_order_relaxed);
		} else {
			ch->filling_seq = f->transfer;
			ch->filled = 0;
		}
	} else if (ch->filling >= 0 &&
		   (f->transfer != ch->filling_seq || f->offset != ch->filled)) {
		atomic_fetch_add_explicit(&ch->st.rejected, 1, memory_order_relaxed);
		ch->filling = -1;
	}
	if (ch->filling >= 0)
		s = &ch->slots[ch->filling];
	pthread_mutex_unlock(&ch->mu);

	/* the payload goes in place, outside the lock: readers never see a
	 * slot that is filling */
	int err = net_link_recv_payload(&link->t, s ? s->data + f->offset : NULL, f->length,
					NET_STALL_NS);
	if (err)
		return err;
	bool ack = false;
	if (f->flags & NET_FLAG_LAST) {
		pthread_mutex_lock(&ch->mu);
		if (s && ch->filling >= 0) {
			uint64_t now_real = rtaccel_clock_ns(CLOCK_REALTIME);
			s->len = f->total;
			s->seq = f->transfer;
			s->stamp_ns = f->stamp_ns;
			s->arrival_ns = rtaccel_monotonic_ns();
			s->stale = (f->flags & NET_FLAG_STALE) ||
				   (ch->attr.freshness_ns && now_real > f->stamp_ns &&
				    now_real - f->stamp_ns > ch->attr.freshness_ns);
			ch->newest = ch->filling;
			ch->completed = f->transfer;
			ch->filling = -1;
			atomic_fetch_add_explicit(&ch->st.received, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&ch->st.bytes_received, f->total,
						  memory_order_relaxed);
			if (s->stale)
				atomic_fetch_add_explicit(&ch->st.stale_received, 1,
							  memory_order_relaxed);
			ack = true;
		} else if (f->transfer <= ch->completed) {
			ack = true; /* our ACK was lost: say it again */
		}
		pthread_mutex_unlock(&ch->mu);
		if (ack)
			announce(ch);
		if (ack && (f->flags & NET_FLAG_ACK))
			queue_ack(link, f->channel, f->transfer);
	} else if (s) {
		pthread_mutex_lock(&ch->mu);
		if (ch->filling >= 0)
			ch->filled += f->length;
		pthread_mutex_unlock(&ch->mu);
	}
	return 0;
}

static void *receive_loop(void *arg)
{
	struct rtaccel_net_link *link = arg;
	for (;;) {
		struct net_frame f;
		int err = net_link_recv_header(&link->t, &f, RX_POLL_NS);
		if (err == -ETIMEDOUT && !atomic_load(&link->closing))
			continue;
		if (err) {
			fail_transport(link, atomic_load(&link->closing) ? -ECONNRESET : err,
				       atomic_load(&link->closing) ? "closed" : "receiving");
			return NULL;
		}
		switch (f.type) {
		case NET_FRAME_DATA:
			err = receive_data(link, &f);
			break;
		case NET_FRAME_ACK: {
			rtaccel_net_channel_t *ch = find_channel(link, f.channel);
			if (ch) {
				pthread_mutex_lock(&link->mu);
				if (f.transfer > atomic_load(&ch->acked) &&
				    f.transfer <= ch->next_transfer)
					atomic_store(&ch->acked, f.transfer);
				pthread_cond_broadcast(&link->ack_cv);
				pthread_mutex_unlock(&link->mu);
			}
			break;
		}
		default:
			snprintf(link->t.why, sizeof(link->t.why), "a frame of type %d mid-link",
				 f.type);
			err = -EPROTO;
		}
		if (err) {
			fail_transport(link, err, "receiving");
			return NULL;
		}
	}
}

static int start_receiver(struct rtaccel_net_link *link)
{
	pthread_attr_t a;
	pthread_attr_init(&a);
	if (link->opt.rx_priority) {
		struct sched_param sp = {.sched_priority = link->opt.rx_priority};
		pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
		pthread_attr_setschedpolicy(&a, SCHED_FIFO);
		pthread_attr_setschedparam(&a, &sp);
	}
	int r = pthread_create(&link->rx, &a, receive_loop, link);
	pthread_attr_destroy(&a);
	if (r)
		return -r;
	link->rx_started = true;
	atomic_store(&link->rx_priority, link->opt.rx_priority);
	return 0;
}

int rtaccel_net_rx_priority(const rtaccel_net_link_t *link)
{
	return atomic_load(&link->rx_priority);
}

int rtaccel_net_set_rx_priority(rtaccel_net_link_t *link, int priority)
{
	if (priority < 0 || priority > 99)
		return -EINVAL;
	if (!link->rx_started) /* a forked child's copy: no receive thread here */
		return atomic_load(&link->err);
	struct sched_param sp = {.sched_priority = priority};
	int r = pthread_setschedparam(link->rx, priority ? SCHED_FIFO : SCHED_OTHER, &sp);
	if (r)
		return -r;
	atomic_store(&link->rx_priority, priority);
	return 0;
}

/* ---- links ---- */

/* A child forked from the link's process: its copy of the link fails with
 * -ENOTCONN and lets go of the descriptors (net_link_forget), so that the
 * child neither reaches the parent's peer nor, living on, keeps the link
 * open after the parent has ended (core/fork.h). */
static void link_in_child(struct rtaccel_fork_entry *entry)
{
	struct rtaccel_net_link *link =
		(struct rtaccel_net_link *)((char *)entry - offsetof(struct rtaccel_net_link, fork));
	/* The parent's threads may have held these at the fork, and waited on
	 * them; none of those threads is in this process. */
	pi_mutex_init(&link->mu);
	cond_init(&link->ack_cv);
	link->busy = false;
	link->waiters = NULL;
	atomic_store(&link->nwaiting, 0);
	link->nacks = 0;
	atomic_store(&link->acks_queued, 0);
	for (int i = 0; i < atomic_load(&link->nchannels); i++)
		pi_mutex_init(&link->channels[i]->mu);
	link->rx_started = false;
	atomic_store(&link->err, -ENOTCONN);
	snprintf(link->why, sizeof(link->why), "%s", forked_why);
	net_link_forget(&link->t);
}

static void listener_in_child(struct rtaccel_fork_entry *entry)
{
	struct rtaccel_net_listener *l =
		(struct rtaccel_net_listener *)((char *)entry - offsetof(struct rtaccel_net_listener, fork));
	net_listener_forget(&l->l);
}

static int make_link(struct net_link *t, const struct rtaccel_net_options *o,
		     rtaccel_net_link_t **out)
{
	struct rtaccel_net_link *link = calloc(1, sizeof(*link));
	if (!link) {
		net_link_close(t);
		return -ENOMEM;
	}
	link->t = *t;
	link->opt = *o;
	int err = pi_mutex_init(&link->mu);
	cond_init(&link->ack_cv);
	if (!err)
		err = start_receiver(link);
	if (err) {
		net_link_close(&link->t);
		free(link);
		return err;
	}
	link->fork.in_child = link_in_child;
	rtaccel_fork_track(&link->fork);
	*out = link;
	return 0;
}

int rtaccel_net_listen(const char *address, const char *const *allow, int nallow, const char *name,
		       const struct rtaccel_net_options *o, rtaccel_net_listener_t **out)
{
	struct rtaccel_net_options def;
	if (!o) {
		rtaccel_net_options_default(&def);
		o = &def;
	}
	if (!address || !name || nallow < 0 || nallow > RTACCEL_NET_ALLOW_MAX ||
	    (nallow && !allow) || check_options(o))
		return -EINVAL;
	struct rtaccel_net_listener *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	struct net_allow a = {.count = nallow};
	for (int i = 0; i < nallow; i++) {
		if (!allow[i] || strlen(allow[i]) >= sizeof(l->peers[i])) {
			free(l);
			return -EINVAL;
		}
		a.peers[i] = strcpy(l->peers[i], allow[i]); /* the listener keeps its own */
	}
	struct net_limits limits;
	int err = limits_of(o, address, &limits);
	l->opt = *o;
	if (!err)
		err = net_listen(address, &a, name, &limits, &l->l);
	if (!err)
		err = net_listener_address(&l->l, address, l->address, sizeof(l->address));
	if (err) {
		net_listener_close(&l->l);
		free(l);
		return err;
	}
	l->fork.in_child = listener_in_child;
	rtaccel_fork_track(&l->fork);
	*out = l;
	return 0;
}

int rtaccel_net_listener_address(const rtaccel_net_listener_t *l, char *out, size_t n)
{
	return snprintf(out, n, "%s", l->address) < (int)n ? 0 : -ENAMETOOLONG;
}

int rtaccel_net_accept(rtaccel_net_listener_t *l, uint64_t timeout_ns, rtaccel_net_link_t **out,
		       char *refused, size_t refused_len)
{
	if (!l->l.transport) /* a forked child's copy, let go of */
		return -ENOTCONN;
	struct net_link t;
	int err = net_accept(&l->l, timeout_ns, &t, refused, refused_len);
	return err ? err : make_link(&t, &l->opt, out);
}

void rtaccel_net_listener_close(rtaccel_net_listener_t *l)
{
	if (!l)
		return;
	rtaccel_fork_untrack(&l->fork);
	net_listener_close(&l->l);
	free(l);
}

int rtaccel_net_connect(const char *address, const char *name, const struct rtaccel_net_options *o,
			uint64_t timeout_ns, rtaccel_net_link_t **out)
{
	struct rtaccel_net_options def;
	if (!o) {
		rtaccel_net_options_default(&def);
		o = &def;
	}
	if (!address || !name || check_options(o))
		return -EINVAL;
	struct net_limits limits;
	int err = limits_of(o, address, &limits);
	struct net_link t;
	if (!err)
		err = net_connect(address, name, &limits, timeout_ns, &t);
	return err ? err : make_link(&t, o, out);
}

int net_flow_waiting(const rtaccel_net_link_t *link) { return atomic_load(&link->nwaiting); }

uint64_t net_flow_zero_copy_sends(const rtaccel_net_link_t *link)
{
	return net_link_zero_copy_sends(&link->t);
}

int rtaccel_net_register(rtaccel_net_link_t *link, const void *buf, size_t len)
{
	/* under the token: the region table is the sending side's */
	struct waiter w = {.priority = ACK_PRIORITY};
	cond_init(&w.cv);
	int err = take_token(link, &w, net_deadline_after(RTACCEL_NS_PER_S));
	if (!err) {
		err = net_link_register(&link->t, buf, len);
		give_token(link);
	}
	pthread_cond_destroy(&w.cv);
	return err;
}

const char *rtaccel_net_peer(const rtaccel_net_link_t *link) { return link->t.peer_name; }
const char *rtaccel_net_peer_address(const rtaccel_net_link_t *link) { return link->t.peer_addr; }

const char *rtaccel_net_error(const rtaccel_net_link_t *link)
{
	return atomic_load(&link->err) ? link->why : "";
}

void rtaccel_net_close(rtaccel_net_link_t *link)
{
	if (!link)
		return;
	rtaccel_fork_untrack(&link->fork);
	/* BYE under the token, so that it does not land inside a frame */
	struct waiter w = {.priority = ACK_PRIORITY};
	cond_init(&w.cv);
	if (!atomic_load(&link->err) && take_token(link, &w, net_deadline_after(RTACCEL_NS_PER_S)) == 0) {
		struct net_frame bye = {.type = NET_FRAME_BYE};
		net_link_send(&link->t, &bye, NULL, 0, 100 * 1000 * 1000);
	}
	pthread_cond_destroy(&w.cv);
	atomic_store(&link->closing, true);
	net_link_shutdown(&link->t);
	if (link->rx_started)
		pthread_join(link->rx, NULL);
	net_link_close(&link->t);
	for (int i = 0; i < atomic_load(&link->nchannels); i++) {
		rtaccel_net_channel_t *ch = link->channels[i];
		for (uint32_t s = 0; s < ch->attr.slots; s++)
			free(ch->slots[s].data);
		free(ch->slots);
		pthread_mutex_destroy(&ch->mu);
		free(ch);
	}
	pthread_cond_destroy(&link->ack_cv);
	pthread_mutex_destroy(&link->mu);
	free(link);
}

/* ---- channels ---- */

int rtaccel_net_channel_open(rtaccel_net_link_t *link, const struct rtaccel_net_channel_attr *attr,
			     rtaccel_net_channel_t **out)
{
	if (!attr || attr->max_size > link->opt.max_transfer || attr->slots > 1024 ||
	    (attr->stale != RTACCEL_NET_STALE_DROP && attr->stale != RTACCEL_NET_STALE_FLAG))
		return -EINVAL;
	pthread_mutex_lock(&link->mu);
	int n = atomic_load(&link->nchannels);
	int err = n == RTACCEL_NET_CHANNELS ? -ENOSPC : 0;
	for (int i = 0; i < n && !err; i++)
		if (link->channels[i]->attr.id == attr->id)
			err = -EEXIST;
	pthread_mutex_unlock(&link->mu);
	if (err)
		return err;
	rtaccel_net_channel_t *ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	ch->link = link;
	ch->attr = *attr;
	if (!ch->attr.slots)
		ch->attr.slots = 4;
	ch->newest = ch->filling = -1;
	ch->slots = calloc(ch->attr.slots, sizeof(*ch->slots));
	err = ch->slots ? pi_mutex_init(&ch->mu) : -ENOMEM;
	for (uint32_t i = 0; i < ch->attr.slots && !err && attr->max_size; i++)
		if (!(ch->slots[i].data = malloc(attr->max_size)))
			err = -ENOMEM;
	if (!err) {
		pthread_mutex_lock(&link->mu);
		n = atomic_load(&link->nchannels);
		for (int i = 0; i < n && !err; i++)
			if (link->channels[i]->attr.id == attr->id)
				err = -EEXIST;
		if (!err && n == RTACCEL_NET_CHANNELS)
			err = -ENOSPC;
		if (!err) {
			link->channels[n] = ch;
			atomic_store_explicit(&link->nchannels, n + 1, memory_order_release);
		}
		pthread_mutex_unlock(&link->mu);
	}
	if (err) {
		for (uint32_t i = 0; ch->slots && i < ch->attr.slots; i++)
			free(ch->slots[i].data);
		free(ch->slots);
		free(ch);
		return err;
	}
	*out = ch;
	return 0;
}

/* The newest transfer after *SEEN into MSG, if there is one. */
static bool try_take(rtaccel_net_channel_t *ch, uint64_t *seen, struct rtaccel_net_msg *msg)
{
	bool got = false;
	pthread_mutex_lock(&ch->mu);
	if (ch->newest >= 0 && ch->slots[ch->newest].seq > *seen) {
		struct slot *s = &ch->slots[ch->newest];
		s->readers++;
		*msg = (struct rtaccel_net_msg){.data = s->data, .len = s->len, .seq = s->seq,
						.stamp_ns = s->stamp_ns,
						.arrival_ns = s->arrival_ns, .stale = s->stale,
						.ch = ch, .slot = (uint32_t)ch->newest};
		*seen = s->seq;
		got = true;
	}
	pthread_mutex_unlock(&ch->mu);
	return got;
}

static bool has_newer(rtaccel_net_channel_t *ch, uint64_t seen)
{
	pthread_mutex_lock(&ch->mu);
	bool r = ch->newest >= 0 && ch->slots[ch->newest].seq > seen;
	pthread_mutex_unlock(&ch->mu);
	return r;
}

/* Spins until WORD moves on from GEN, or DEADLINE: loads alone, the clock
 * (the vDSO's) read now and then. */
static int spin_arrival(_Atomic uint32_t *word, uint32_t gen, uint64_t deadline)
{
	for (uint32_t spins = 0; atomic_load_explicit(word, memory_order_acquire) == gen; spins++) {
		if (spins % 256 == 0 && rtaccel_monotonic_ns() >= deadline)
			return -ETIMEDOUT;
		cpu_relax();
	}
	return 0;
}

/* Sleeps until WORD moves on from GEN, or DEADLINE. */
static int sleep_arrival(_Atomic uint32_t *word, _Atomic uint32_t *sleepers, uint32_t gen,
			 uint64_t deadline)
{
	if (rtaccel_monotonic_ns() >= deadline)
		return -ETIMEDOUT;
	struct timespec ts = rtaccel_timespec_of(deadline);
	atomic_fetch_add(sleepers, 1);
	int err = futex_wait((uint32_t *)word, gen, false, CLOCK_MONOTONIC,
			     deadline == UINT64_MAX ? NULL : &ts);
	atomic_fetch_sub(sleepers, 1);
	return err == -ETIMEDOUT ? -ETIMEDOUT : 0;
}

int rtaccel_net_take(rtaccel_net_channel_t *ch, uint64_t *seen, uint64_t timeout_ns,
		     struct rtaccel_net_msg *msg)
{
	struct rtaccel_net_input in = {.ch = ch, .seen = *seen};
	int err = rtaccel_net_wait(&in, 1, RTACCEL_NET_ALL, timeout_ns);
	if (!err) {
		*seen = in.seen;
		*msg = in.msg;
	}
	return err;
}

void rtaccel_net_release(struct rtaccel_net_msg *msg)
{
	rtaccel_net_channel_t *ch = msg->ch;
	if (!ch)
		return;
	pthread_mutex_lock(&ch->mu);
	if (ch->slots[msg->slot].readers)
		ch->slots[msg->slot].readers--;
	pthread_mutex_unlock(&ch->mu);
	msg->ch = NULL;
}

int rtaccel_net_wait(struct rtaccel_net_input *in, int n, int when, uint64_t timeout_ns)
{
	const bool spin = when & RTACCEL_NET_SPIN;
	when &= ~RTACCEL_NET_SPIN;
	if (n <= 0 || !in || (when != RTACCEL_NET_ANY && when != RTACCEL_NET_ALL))
		return -EINVAL;
	const uint64_t deadline = net_deadline_after(timeout_ns);
	_Atomic uint32_t *word = n == 1 ? &in[0].ch->arrivals : &any_arrivals;
	_Atomic uint32_t *sleepers = n == 1 ? &in[0].ch->sleepers : &any_sleepers;
	for (;;) {
		uint32_t gen = atomic_load(word);
		int ready = 0, failed = 0;
		for (int i = 0; i < n; i++) {
			in[i].ready = has_newer(in[i].ch, in[i].seen);
			ready += in[i].ready;
			if (!in[i].ready && !failed)
				failed = atomic_load(&in[i].ch->link->err);
		}
		if (ready == n || (when == RTACCEL_NET_ANY && ready)) {
			/* a slot only ever gets newer, so what was ready still is */
			for (int i = 0; i < n; i++)
				if (in[i].ready)
					in[i].ready = try_take(in[i].ch, &in[i].seen, &in[i].msg);
			return 0;
		}
		if (failed)
			return failed;
		int err = spin ? spin_arrival(word, gen, deadline)
			       : sleep_arrival(word, sleepers, gen, deadline);
		if (err)
			return err;
	}
}

void rtaccel_net_channel_stats(const rtaccel_net_channel_t *ch, struct rtaccel_net_stats *out)
{
#define GET(f) out->f = atomic_load_explicit(&ch->st.f, memory_order_relaxed)
	GET(sent);
	GET(bytes_sent);
	GET(chunks_sent);
	GET(preempted);
	GET(stale_dropped);
	GET(stale_flagged);
	GET(retries);
	GET(ack_timeouts);
	GET(received);
	GET(bytes_received);
	GET(stale_received);
	GET(duplicates);
	GET(overruns);
	GET(rejected);
#undef GET
}

/* The RDMA transport (see transport.h): one RC queue pair per link, set up
 * with librdmacm and driven with libibverbs. Frames travel as SEND messages
 * from registered send slots into registered receive slots the receiver
 * keeps posted; the byte stream the frame layer reads is the messages'
 * payloads in order. A sender with no free send slot waits for a send
 * completion, so the slots are the link's window. RNR retries are infinite:
 * a receiver that has not reposted a slot yet slows the sender down instead
 * of failing the link.
 *
 * A payload that lies in a region the application registered goes without a
 * copy: the SEND's second gather entry points at it, and the flow-control
 * layer drains those sends before its send call returns, so that the
 * application never reuses a buffer the device still reads.
 *
 * Every wait is a ppoll on the completion channel and the connection's
 * event channel together, so a peer that disconnects or dies ends the wait
 * (-ECONNRESET) and a deadline ends it (-ETIMEDOUT). The connection manager
 * gives the peer's IP address before we accept: a stranger is rejected
 * before any memory of ours is registered for it. */
#include "net/rdma.h"
#include "net/transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 16
#define SLOT_SIZE (128u << 10) /* a 64 KiB chunk and its header in one message */
#define RESOLVE_MS 2000
#define REGIONS 8 /* RTACCEL_NET_REGIONS */

struct region {
	const uint8_t *base;
	size_t len;
	struct ibv_mr *mr;
};

struct net_rdma {
	struct rdma_event_channel *ec;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *send_cc, *recv_cc;
	struct ibv_cq *send_cq, *recv_cq;
	struct ibv_mr *mr;
	uint8_t *mem; /* SLOTS receive slots, then SLOTS send slots */
	int send_slots;	 /* the window, in slots */
	/* receiving: one thread */
	int cur;	 /* the slot being read, or -1 */
	uint32_t cur_len, cur_off;
	/* sending: one thread at a time */
	bool send_busy[SLOTS];
	bool send_zero_copy[SLOTS]; /* its payload is the application's */
	int send_free;
	int zero_copy_outstanding;
	uint64_t zero_copy_sends;
	struct region regions[REGIONS];
	int nregions;
	pthread_mutex_t cm_mu; /* reading connection events */
	atomic_bool down;
	bool connected;
};

static uint8_t *recv_slot(struct net_rdma *r, int i) { return r->mem + (size_t)i * SLOT_SIZE; }
static uint8_t *send_slot(struct net_rdma *r, int i)
{
	return r->mem + (size_t)(SLOTS + i) * SLOT_SIZE;
}

static int nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

static struct net_rdma *rdma_new(void)
{
	struct net_rdma *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->cur = -1;
	pthread_mutex_init(&r->cm_mu, NULL);
	return r;
}

static void free_resources(struct net_rdma *r)
{
	if (r->id && r->id->qp)
		rdma_destroy_qp(r->id);
	for (int i = 0; i < r->nregions; i++)
		ibv_dereg_mr(r->regions[i].mr);
	r->nregions = 0;
	if (r->mr)
		ibv_dereg_mr(r->mr);
	if (r->send_cq)
		ibv_destroy_cq(r->send_cq);
	if (r->recv_cq)
		ibv_destroy_cq(r->recv_cq);
	if (r->send_cc)
		ibv_destroy_comp_channel(r->send_cc);
	if (r->recv_cc)
		ibv_destroy_comp_channel(r->recv_cc);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	free(r->mem);
	r->mr = NULL;
	r->send_cq = r->recv_cq = NULL;
	r->send_cc = r->recv_cc = NULL;
	r->pd = NULL;
	r->mem = NULL;
}

static void rdma_free(struct net_rdma *r)
{
	if (!r)
		return;
	if (r->connected)
		rdma_disconnect(r->id);
	free_resources(r);
	if (r->id)
		rdma_destroy_id(r->id);
	if (r->ec)
		rdma_destroy_event_channel(r->ec);
	pthread_mutex_destroy(&r->cm_mu);
	free(r);
}

/* Waits for the next event on EC, of type WANT; any other is an error. */
static int wait_event(struct rdma_event_channel *ec, enum rdma_cm_event_type want, uint64_t deadline,
		      struct rdma_cm_event **out)
{
	for (;;) {
		struct rdma_cm_event *ev;
		if (rdma_get_cm_event(ec, &ev) == 0) {
			if (ev->event == want) {
				if (out) {
					*out = ev;
				} else {
					rdma_ack_cm_event(ev);
				}
				return 0;
			}
			int err = ev->event == RDMA_CM_EVENT_REJECTED	   ? -ECONNREFUSED
				  : ev->event == RDMA_CM_EVENT_UNREACHABLE ? -EHOSTUNREACH
				  : ev->event == RDMA_CM_EVENT_ADDR_ERROR  ? -EADDRNOTAVAIL
				  : ev->event == RDMA_CM_EVENT_ROUTE_ERROR ? -ENETUNREACH
				  : ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL ? -ENODEV
									      : -ECONNRESET;
			rdma_ack_cm_event(ev);
			return err;
		}
		if (errno != EAGAIN)
			return -errno;
		int err = net_wait_fds(ec->fd, POLLIN, -1, 0, deadline);
		if (err)
			return err;
	}
}

/* Protection domain, completion queues, the queue pair on ID, registered
 * slots, and every receive slot posted. */
static int setup_resources(struct net_rdma *r, const struct net_limits *limits)
{
	struct ibv_context *ctx = r->id->verbs;
	if (!ctx)
		return -ENODEV;
	r->send_slots = limits->window ? (int)(limits->window / SLOT_SIZE) : SLOTS;
	r->send_slots = r->send_slots < 2 ? 2 : r->send_slots > SLOTS ? SLOTS : r->send_slots;
	r->send_free = r->send_slots;
	if (!(r->pd = ibv_alloc_pd(ctx)) || !(r->send_cc = ibv_create_comp_channel(ctx)) ||
	    !(r->recv_cc = ibv_create_comp_channel(ctx)))
		return errno ? -errno : -ENOMEM;
	if (nonblocking(r->send_cc->fd) || nonblocking(r->recv_cc->fd))
		return -errno;
	if (!(r->send_cq = ibv_create_cq(ctx, SLOTS, NULL, r->send_cc, 0)) ||
	    !(r->recv_cq = ibv_create_cq(ctx, SLOTS, NULL, r->recv_cc, 0)))
		return errno ? -errno : -ENOMEM;
	if (posix_memalign((void **)&r->mem, 4096, 2ull * SLOTS * SLOT_SIZE))
		return -ENOMEM;
	r->mr = ibv_reg_mr(r->pd, r->mem, 2ull * SLOTS * SLOT_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!r->mr)
		return errno ? -errno : -ENOMEM; /* a locked-memory limit, typically */
	struct ibv_qp_init_attr qa = {
		.send_cq = r->send_cq,
		.recv_cq = r->recv_cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = SLOTS, .max_recv_wr = SLOTS, .max_send_sge = 2, .max_recv_sge = 1},
	};
	if (rdma_create_qp(r->id, r->pd, &qa))
		return -errno;
	for (int i = 0; i < SLOTS; i++) {
		struct ibv_sge sge = {(uintptr_t)recv_slot(r, i), SLOT_SIZE, r->mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;
		int err = ibv_post_recv(r->id->qp, &wr, &bad);
		if (err)
			return -err;
	}
	return 0;
}

/* A peer that died without disconnecting shows as an unacknowledged send:
 * 4.096 us * 2^14 = 67 ms per try, 7 tries, then the completion fails and
 * the link with it, in about half a second rather than the route's default
 * of several seconds. Set before the route is resolved. */
static void set_ack_timeout(struct rdma_cm_id *id)
{
	uint8_t timeout = 14;
	rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, sizeof(timeout));
}

static void conn_param(struct rdma_conn_param *p)
{
	memset(p, 0, sizeof(*p));
	p->responder_resources = 1;
	p->initiator_depth = 1;
	p->retry_count = 7;
	p->rnr_retry_count = 7; /* infinite: see the top */
}

/* Reads pending connection events: a disconnect marks the link down. */
static void check_cm(struct net_link *link)
{
	struct net_rdma *r = link->priv;
	pthread_mutex_lock(&r->cm_mu);
	struct rdma_cm_event *ev;
	while (rdma_get_cm_event(r->ec, &ev) == 0) {
		if (ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL ||
		    ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT) {
			atomic_store(&r->down, true);
			snprintf(link->why, sizeof(link->why), "the peer is gone");
		}
		rdma_ack_cm_event(ev);
	}
	pthread_mutex_unlock(&r->cm_mu);
}

/* A completion that failed fails the link. */
static int completed(struct net_link *link, const struct ibv_wc *wc)
{
	if (wc->status == IBV_WC_SUCCESS)
		return 0;
	struct net_rdma *r = link->priv;
	snprintf(link->why, sizeof(link->why), "%s", ibv_wc_status_str(wc->status));
	atomic_store(&r->down, true);
	return -ECONNRESET;
}

/* The next completion on CQ (through CC), or a deadline, or the link down. */
static int next_completion(struct net_link *link, struct ibv_cq *cq, struct ibv_comp_channel *cc,
			   struct ibv_wc *wc, uint64_t deadline)
{
	struct net_rdma *r = link->priv;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return -EIO;
		if (n == 1)
			return completed(link, wc);
		if (atomic_load(&r->down))
			return -ECONNRESET;
		if (ibv_req_notify_cq(cq, 0))
			return -EIO;
		if ((n = ibv_poll_cq(cq, 1, wc)) != 0) /* arrived before the notification was armed */
			return n < 0 ? -EIO : completed(link, wc);
		int err = net_wait_fds(cc->fd, POLLIN, r->ec->fd, POLLIN, deadline);
		if (err)
			return err;
		struct ibv_cq *ev_cq;
		void *ctx;
		if (ibv_get_cq_event(cc, &ev_cq, &ctx) == 0)
			ibv_ack_cq_events(ev_cq, 1);
		check_cm(link);
	}
}

static void reap_send(struct net_rdma *r, const struct ibv_wc *wc)
{
	r->send_busy[wc->wr_id] = false;
	r->send_free++;
	if (r->send_zero_copy[wc->wr_id]) {
		r->send_zero_copy[wc->wr_id] = false;
		r->zero_copy_outstanding--;
	}
}

/* A free send slot, waiting for a completion while the window is full. */
static int free_send_slot(struct net_link *link, uint64_t deadline, int *slot)
{
	struct net_rdma *r = link->priv;
	while (r->send_free == 0) {
		struct ibv_wc wc;
		int err = next_completion(link, r->send_cq, r->send_cc, &wc, deadline);
		if (err)
			return err;
		reap_send(r, &wc);
	}
	int i = 0;
	while (i < r->send_slots && r->send_busy[i])
		i++;
	*slot = i;
	return 0;
}

static int post_send(struct net_rdma *r, int slot, struct ibv_sge *sge, int nsge)
{
	struct ibv_send_wr wr = {.wr_id = (uint64_t)slot, .sg_list = sge, .num_sge = nsge,
				 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	int err = ibv_post_send(r->id->qp, &wr, &bad);
	if (err)
		return -err;
	r->send_busy[slot] = true;
	r->send_free--;
	return 0;
}

static struct ibv_mr *region_of(struct net_rdma *r, const void *p, size_t len)
{
	const uint8_t *b = p;
	for (int i = 0; i < r->nregions; i++)
		if (b >= r->regions[i].base && len <= r->regions[i].len &&
		    (size_t)(b - r->regions[i].base) <= r->regions[i].len - len)
			return r->regions[i].mr;
	return NULL;
}

static int rc_write(struct net_link *link, struct iovec *iov, int iovcnt, uint64_t deadline)
{
	struct net_rdma *r = link->priv;
	if (atomic_load(&r->down))
		return -ECONNRESET;
	/* a frame whose payload lies in a registered region: the header from
	 * a slot, the payload from where it is */
	struct ibv_mr *mr;
	if (iovcnt == 2 && iov[0].iov_len == NET_FRAME_HEADER && iov[1].iov_len &&
	    NET_FRAME_HEADER + iov[1].iov_len <= SLOT_SIZE &&
	    (mr = region_of(r, iov[1].iov_base, iov[1].iov_len))) {
		int slot, err = free_send_slot(link, deadline, &slot);
		if (err)
			return err;
		memcpy(send_slot(r, slot), iov[0].iov_base, NET_FRAME_HEADER);
		struct ibv_sge sge[2] = {
			{(uintptr_t)send_slot(r, slot), NET_FRAME_HEADER, r->mr->lkey},
			{(uintptr_t)iov[1].iov_base, (uint32_t)iov[1].iov_len, mr->lkey},
		};
		if ((err = post_send(r, slot, sge, 2)))
			return err;
		r->send_zero_copy[slot] = true;
		r->zero_copy_outstanding++;
		r->zero_copy_sends++;
		return 0;
	}
	/* anything else is copied into slots, a message per slot */
	int slot = -1;
	uint32_t fill = 0;
	for (int i = 0; i < iovcnt; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t len = iov[i].iov_len;
		while (len > 0) {
			if (slot < 0) {
				int err = free_send_slot(link, deadline, &slot);
				if (err)
					return err;
				fill = 0;
			}
			size_t n = SLOT_SIZE - fill < len ? SLOT_SIZE - fill : len;
			memcpy(send_slot(r, slot) + fill, p, n);
			fill += (uint32_t)n;
			p += n;
			len -= n;
			if (fill == SLOT_SIZE) {
				struct ibv_sge sge = {(uintptr_t)send_slot(r, slot), fill, r->mr->lkey};
				int err = post_send(r, slot, &sge, 1);
				if (err)
					return err;
				slot = -1;
			}
		}
	}
	if (slot >= 0) {
		struct ibv_sge sge = {(uintptr_t)send_slot(r, slot), fill, r->mr->lkey};
		return post_send(r, slot, &sge, 1);
	}
	return 0;
}

static int rc_register(struct net_link *link, const void *buf, size_t len)
{
	struct net_rdma *r = link->priv;
	if (region_of(r, buf, len))
		return 0;
	if (r->nregions == REGIONS)
		return -ENOSPC;
	struct ibv_mr *mr = ibv_reg_mr(r->pd, (void *)buf, len, 0);
	if (!mr)
		return errno ? -errno : -ENOMEM;
	r->regions[r->nregions++] = (struct region){buf, len, mr};
	return 0;
}

static int rc_drain(struct net_link *link, uint64_t deadline)
{
	struct net_rdma *r = link->priv;
	while (r->zero_copy_outstanding > 0) {
		struct ibv_wc wc;
		int err = next_completion(link, r->send_cq, r->send_cc, &wc, deadline);
		if (err)
			return err;
		reap_send(r, &wc);
	}
	return 0;
}

static uint64_t rc_zero_copy_sends(const struct net_link *link)
{
	return ((const struct net_rdma *)link->priv)->zero_copy_sends;
}

static int rc_read(struct net_link *link, void *buf, size_t len, uint64_t deadline)
{
	struct net_rdma *r = link->priv;
	uint8_t *p = buf;
	const size_t want = len;
	while (len > 0) {
		if (r->cur < 0) {
			struct ibv_wc wc;
			bool started = len < want;
			int err = next_completion(link, r->recv_cq, r->recv_cc, &wc,
						  net_read_deadline(deadline, started));
			if (err)
				return net_read_failed(err, started);
			r->cur = (int)wc.wr_id;
			r->cur_len = wc.byte_len;
			r->cur_off = 0;
		}
		size_t n = r->cur_len - r->cur_off < len ? r->cur_len - r->cur_off : len;
		if (p) {
			memcpy(p, recv_slot(r, r->cur) + r->cur_off, n);
			p += n;
		}
		r->cur_off += (uint32_t)n;
		len -= n;
		if (r->cur_off == r->cur_len) { /* give the slot back to the peer */
			struct ibv_sge sge = {(uintptr_t)recv_slot(r, r->cur), SLOT_SIZE, r->mr->lkey};
			struct ibv_recv_wr wr = {.wr_id = (uint64_t)r->cur, .sg_list = &sge, .num_sge = 1},
					   *bad;
			r->cur = -1;
			int err = ibv_post_recv(r->id->qp, &wr, &bad);
			if (err)
				return -err;
		}
	}
	return 0;
}

/* ADDRESS resolved, and a connection id on an event channel of its own. */
static int rdma_open(const char *address, bool passive, struct addrinfo **ai, struct net_rdma **out)
{
	int err = net_resolve(address, "rdma:", passive, ai);
	if (err)
		return err;
	struct net_rdma *r = rdma_new();
	if (!r) {
		freeaddrinfo(*ai);
		return -ENOMEM;
	}
	if (!(r->ec = rdma_create_event_channel()) || nonblocking(r->ec->fd) ||
	    rdma_create_id(r->ec, &r->id, NULL, RDMA_PS_TCP)) {
		err = errno ? -errno : -ENODEV;
		freeaddrinfo(*ai);
		rdma_free(r);
		return err;
	}
	*out = r;
	return 0;
}

static int rc_listen(struct net_listener *l, const char *address)
{
	struct addrinfo *ai;
	struct net_rdma *r;
	int err = rdma_open(address, true, &ai, &r);
	if (err)
		return err;
	if (rdma_bind_addr(r->id, ai->ai_addr) || rdma_listen(r->id, 16)) {
		err = errno ? -errno : -ENODEV;
		freeaddrinfo(ai);
		rdma_free(r);
		return err;
	}
	freeaddrinfo(ai);
	/* bound to an address no RDMA device serves: the kernel still says yes */
	if (!r->id->verbs) {
		rdma_free(r);
		return -ENODEV;
	}
	l->priv = r;
	return 0;
}

static int rc_port(const struct net_listener *l)
{
	return ntohs(rdma_get_src_port(((const struct net_rdma *)l->priv)->id));
}

static int rc_accept(struct net_listener *l, uint64_t deadline, struct net_link *out, char *who,
		       size_t who_len)
{
	struct net_rdma *listening = l->priv;
	struct rdma_cm_event *ev;
	int err;
	for (;;) {
		/* a peer that gave up between its request and our accept leaves
		 * other events behind on the listener's channel: not ours to fail on */
		while ((err = rdma_get_cm_event(listening->ec, &ev)) == 0 &&
		       ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
			rdma_ack_cm_event(ev);
		if (!err)
			break;
		if (errno != EAGAIN)
			return -errno;
		if ((err = net_wait_fds(listening->ec->fd, POLLIN, -1, 0, deadline)))
			return err;
	}
	struct rdma_cm_id *id = ev->id;
	char addr[64];
	net_numeric_address(rdma_get_peer_addr(id), addr, sizeof(addr));
	snprintf(who, who_len, "rdma:%s", addr);
	if (!net_allowed(&l->allow, addr)) {
		rdma_reject(id, NULL, 0);
		rdma_ack_cm_event(ev);
		rdma_destroy_id(id);
		return -EACCES;
	}
	rdma_ack_cm_event(ev);
	struct net_rdma *r = rdma_new();
	if (!r) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return -ENOMEM;
	}
	r->id = id;
	set_ack_timeout(id);
	struct rdma_conn_param param;
	conn_param(&param);
	if (!(r->ec = rdma_create_event_channel()) || nonblocking(r->ec->fd) ||
	    rdma_migrate_id(id, r->ec)) {
		err = -errno;
		rdma_reject(id, NULL, 0);
		rdma_free(r);
		return err;
	}
	if ((err = setup_resources(r, &l->limits)) || (rdma_accept(id, &param) && (err = -errno)) ||
	    (err = wait_event(r->ec, RDMA_CM_EVENT_ESTABLISHED, deadline, NULL))) {
		rdma_reject(id, NULL, 0);
		rdma_free(r);
		return err;
	}
	r->connected = true;
	out->priv = r;
	snprintf(out->peer_addr, sizeof(out->peer_addr), "rdma:%s", addr);
	return 0;
}

static int rc_connect(struct net_link *link, const char *address, uint64_t deadline)
{
	struct addrinfo *ai;
	struct net_rdma *r;
	int err = rdma_open(address, false, &ai, &r);
	if (err)
		return err;
	struct rdma_conn_param param;
	conn_param(&param);
	if (rdma_resolve_addr(r->id, NULL, ai->ai_addr, RESOLVE_MS)) {
		err = errno ? -errno : -ENODEV;
		goto fail;
	}
	if ((err = wait_event(r->ec, RDMA_CM_EVENT_ADDR_RESOLVED, deadline, NULL)))
		goto fail;
	set_ack_timeout(r->id);
	if (rdma_resolve_route(r->id, RESOLVE_MS)) {
		err = -errno;
		goto fail;
	}
	if ((err = wait_event(r->ec, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, NULL)) ||
	    (err = setup_resources(r, &link->limits)))
		goto fail;
	if (rdma_connect(r->id, &param)) {
		err = -errno;
		goto fail;
	}
	if ((err = wait_event(r->ec, RDMA_CM_EVENT_ESTABLISHED, deadline, NULL)))
		goto fail;
	freeaddrinfo(ai);
	r->connected = true;
	link->priv = r;
	return 0;
fail:
	freeaddrinfo(ai);
	rdma_free(r);
	return err;
}

static void rc_shutdown(struct net_link *link)
{
	struct net_rdma *r = link->priv;
	/* what was posted (a BYE, typically) goes out before the queue pair
	 * stops: disconnecting flushes sends that have not */
	const uint64_t deadline = net_deadline_after(200 * 1000 * 1000);
	while (r->connected && r->send_free < r->send_slots && !atomic_load(&r->down)) {
		struct ibv_wc wc;
		if (next_completion(link, r->send_cq, r->send_cc, &wc, deadline))
			break;
		reap_send(r, &wc);
	}
	atomic_store(&r->down, true);
	if (r->connected) {
		rdma_disconnect(r->id); /* ends our own waits through the event channel */
		r->connected = false;
	}
}

static void rc_close(struct net_link *link) { rdma_free(link->priv); }
static void rc_close_listener(struct net_listener *l) { rdma_free(l->priv); }

static const struct net_transport_ops rdma_ops = {
	.listen = rc_listen,
	.accept = rc_accept,
	.connect = rc_connect,
	.write = rc_write,
	.read = rc_read,
	.shutdown = rc_shutdown,
	.close = rc_close,
	.close_listener = rc_close_listener,
	/* No forget, no forget_listener: the queue pair, its memory, the
	 * connection and the listening id are the kernel's, reached through
	 * the descriptors a forked child shares with its parent, and whatever
	 * the child destroys or disconnects, the parent loses. */
	.port = rc_port,
	.register_region = rc_register,
	.drain = rc_drain,
	.zero_copy_sends = rc_zero_copy_sends,
};

const struct net_transport net_rdma_transport = {.info = NET_RDMA_INFO, .ops = &rdma_ops};

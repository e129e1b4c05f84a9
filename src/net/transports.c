/* The transports, by their address scheme: adding one is its file (a struct
 * net_transport, see transport.h) and its line here. */
#include "net/transport.h"

#include <string.h>

static const struct net_transport *const transports[] = {
	&net_tcp_transport,
	&net_rdma_transport,
	&net_shm_transport,
};

#define NTRANSPORTS ((int)(sizeof(transports) / sizeof(transports[0])))

/* NAME alone ("tcp") or the scheme of an address ("tcp:..."). */
static bool names(const struct net_transport *t, const char *name)
{
	size_t n = strlen(t->info.name);
	return strncmp(name, t->info.name, n) == 0 && (name[n] == 0 || name[n] == ':');
}

const struct net_transport *net_transport_of(const char *address)
{
	if (!address || !strchr(address, ':'))
		return NULL;
	for (int i = 0; i < NTRANSPORTS; i++)
		if (names(transports[i], address))
			return transports[i];
	return NULL;
}

const struct rtaccel_net_transport *rtaccel_net_transport_find(const char *name)
{
	if (!name)
		return NULL;
	for (int i = 0; i < NTRANSPORTS; i++)
		if (names(transports[i], name))
			return &transports[i]->info;
	return NULL;
}

const struct rtaccel_net_transport *rtaccel_net_transport_at(int i)
{
	return i >= 0 && i < NTRANSPORTS ? &transports[i]->info : NULL;
}

uint32_t rtaccel_net_default_window(const struct rtaccel_net_transport *t, uint32_t chunk)
{
	return t->window_chunks ? t->window_chunks * chunk : t->window_bytes;
}

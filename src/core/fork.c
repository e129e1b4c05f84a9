#include "core/fork.h"

#include <pthread.h>
#include <stddef.h>

/* The list is locked across the fork, so that a child never sees one half
 * changed; in the child, the forking thread, the only one there, unlocks it
 * once every entry has let go. */
static pthread_mutex_t entries_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rtaccel_fork_entry *entries;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void lock_entries(void) { pthread_mutex_lock(&entries_mu); }
static void unlock_entries(void) { pthread_mutex_unlock(&entries_mu); }

static void let_go_in_child(void)
{
	for (struct rtaccel_fork_entry *e = entries; e; e = e->next)
		e->in_child(e);
	pthread_mutex_unlock(&entries_mu);
}

static void register_atfork(void) { pthread_atfork(lock_entries, unlock_entries, let_go_in_child); }

void rtaccel_fork_track(struct rtaccel_fork_entry *entry)
{
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&entries_mu);
	entry->prev = NULL;
	entry->next = entries;
	if (entries)
		entries->prev = entry;
	entries = entry;
	pthread_mutex_unlock(&entries_mu);
}

void rtaccel_fork_untrack(struct rtaccel_fork_entry *entry)
{
	pthread_mutex_lock(&entries_mu);
	if (entry->prev)
		entry->prev->next = entry->next;
	else
		entries = entry->next;
	if (entry->next)
		entry->next->prev = entry->prev;
	entry->prev = entry->next = NULL;
	pthread_mutex_unlock(&entries_mu);
}

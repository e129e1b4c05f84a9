/* What a child forked from the process must let go of as it starts (core,
 * internal; C and C++).
 *
 * A child gets a copy of its parent's memory and descriptors, and none of
 * its other threads. A connection one of rtaccel's libraries holds (a
 * client's socket to the server, a net link, a net listener) stays the
 * parent's: a child that used its copy, or closed it politely, would reach
 * the parent's peer, and its copies of the descriptors would keep the
 * connection open after the parent had ended. Each such object tracks an
 * entry here; in a child, each entry's in_child runs once, before fork()
 * returns there. in_child may neither track nor untrack. */
#ifndef RTACCEL_CORE_FORK_H
#define RTACCEL_CORE_FORK_H

#ifdef __cplusplus
extern "C" {
#endif

struct rtaccel_fork_entry {
	struct rtaccel_fork_entry *prev, *next;
	void (*in_child)(struct rtaccel_fork_entry *entry);
};

/* ENTRY's in_child is set; it stays tracked until untracked. */
void rtaccel_fork_track(struct rtaccel_fork_entry *entry);
void rtaccel_fork_untrack(struct rtaccel_fork_entry *entry);

#ifdef __cplusplus
}
#endif

#endif

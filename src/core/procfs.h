/* Figures the kernel gives in /proc (core, internal; C and C++). Header-only,
 * for programs that link nothing of rtaccel. */
#ifndef RTACCEL_CORE_PROCFS_H
#define RTACCEL_CORE_PROCFS_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The value of the first line of PATH that FORMAT reads (as
 * "MemAvailable: %llu kB"), in *VALUE; false where the file or the line is
 * not there. */
static inline bool rtaccel_proc_field(const char *path, const char *format, unsigned long long *value)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	char line[256];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, format, value) == 1;
	fclose(f);
	return found;
}

/* What /proc/PID/stat says of a process. */
struct rtaccel_proc_stat {
	char name[32]; /* its comm: the kernel keeps 15 bytes */
	char state;    /* 'R', 'S', 'T' (stopped), 'Z' (ended, not yet reaped), ... */
	int parent;
	int group; /* its process group */
};

/* PID's stat in *ST; false where PID is gone. */
static inline bool rtaccel_read_proc_stat(long pid, struct rtaccel_proc_stat *st)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	const bool read = fgets(line, sizeof(line), f) != NULL;
	fclose(f);
	/* "PID (NAME) STATE PPID PGRP ...": a name may hold spaces and
	 * parentheses, so it ends at the last ')'. */
	const char *open = read ? strchr(line, '(') : NULL;
	const char *close = read ? strrchr(line, ')') : NULL;
	if (!open || !close || close < open ||
	    sscanf(close + 1, " %c %d %d", &st->state, &st->parent, &st->group) != 3)
		return false;
	size_t len = (size_t)(close - open - 1);
	if (len >= sizeof(st->name))
		len = sizeof(st->name) - 1;
	memcpy(st->name, open + 1, len);
	st->name[len] = '\0';
	return true;
}

/* Calls VISIT(CHILD, ARG) for each child of PID, of any of its threads
 * (/proc/PID/task/TID/children: a kernel with CONFIG_PROC_CHILDREN, as
 * Debian's). How many children; -1 where PID's tasks cannot be read. */
static inline int rtaccel_for_each_child(long pid, void (*visit)(long child, void *arg), void *arg)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%ld/task", pid);
	DIR *tasks = opendir(path);
	if (!tasks)
		return -1;
	int counted = 0;
	struct dirent *e;
	while ((e = readdir(tasks))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/task/%.20s/children", pid, e->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		long child;
		while (fscanf(f, "%ld", &child) == 1) {
			visit(child, arg);
			counted++;
		}
		fclose(f);
	}
	closedir(tasks);
	return counted;
}

#endif

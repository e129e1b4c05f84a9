/* Uncontended job_begin and job_end make no system call: a child runs them
 * under a seccomp filter that kills it on any system call but write and
 * exit_group. preempt_disable/enable too. */
#include "rtaccel/isolate.h"
#include "test_util.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/wait.h>

static int forbid_syscalls(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {(unsigned short)(sizeof(f) / sizeof(f[0])), f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

int main(void)
{
	watchdog(30);
	rtaccel_gang_lock_t *lock;
	CHECK_EQ(rtaccel_gang_lock_create_private(&lock), 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (rtaccel_gang_join(lock, "solo", 10, 0) != 0)
			_exit(T_FAIL);
		if (forbid_syscalls() < 0) {
			perror("seccomp");
			_exit(T_SKIP);
		}
		for (int i = 0; i < 100000; i++) {
			if (rtaccel_gang_job_begin() != 0)
				_exit(T_FAIL);
			rtaccel_gang_preempt_disable();
			rtaccel_gang_preempt_enable();
			if (rtaccel_gang_job_end() != 0)
				_exit(T_FAIL);
		}
		static const char ok[] = "100000 uncontended jobs, no system call\n";
		if (write(1, ok, sizeof(ok) - 1) < 0)
			_exit(T_FAIL);
		syscall(SYS_exit_group, 0);
	}
	int status;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == T_SKIP)
		return T_SKIP;
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "child killed by signal %d: a gang operation made a system call\n",
			WTERMSIG(status));
		return T_FAIL;
	}
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return T_PASS;
}

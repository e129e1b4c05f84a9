/* Threads (core, internal; C, and a C++ wrapper).
 *
 * The calling thread's kernel id, read once per thread: the lock layer
 * marks owners with it and the shim's tracer names threads with it; after
 * fork the child's threads read theirs anew.
 *
 * Threads on a stack of a chosen size. A thread's default stack is
 * RLIMIT_STACK, 8 MiB, and a process that locks its memory (the server,
 * the executors, the regulator) keeps all of it resident for each of its
 * threads: the server's workers used 17-24 KiB of theirs, on the cpu and
 * the opencl backend. A thread can mark its unused stack when it starts and
 * read, when it ends, how much of it it ever used. */
#ifndef RTACCEL_CORE_THREAD_H
#define RTACCEL_CORE_THREAD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One system call in a thread's life (its first call), none after. */
uint32_t rtaccel_self_tid(void);

/* The stack of the threads rtaccel starts for its own work (a gateway's
 * session, a bridge's sender, an executor's second thread): tens of KiB
 * used, and a margin. */
#define RTACCEL_THREAD_STACK ((size_t)256 << 10)

/* pthread_create with a stack of STACK bytes (rounded up to pages, at
 * least PTHREAD_STACK_MIN); 0 or a positive error number. */
int rtaccel_thread_create(pthread_t *thread, size_t stack, void *(*fn)(void *), void *arg);

/* Fills the calling thread's stack below the caller's frame with a pattern
 * that rtaccel_stack_used reads back; not the main thread's. */
void rtaccel_stack_mark(void);

/* The most of its stack the calling thread has used since it marked it,
 * in bytes, and the stack's size in *SIZE; 0 where it marked none. */
size_t rtaccel_stack_used(size_t *size);

#ifdef __cplusplus
}

#include <functional>

namespace rtaccel::core {

// A joinable thread on a stack of a chosen size, where std::thread takes
// the default. Joined by its destructor.
class Thread {
 public:
  Thread() = default;
  Thread(Thread&& other) noexcept : id_(other.id_), started_(other.started_) { other.started_ = false; }
  Thread& operator=(Thread&& other) noexcept {
    if (this != &other) {
      join();
      id_ = other.id_;
      started_ = other.started_;
      other.started_ = false;
    }
    return *this;
  }
  Thread(const Thread&) = delete;
  Thread& operator=(const Thread&) = delete;
  ~Thread() { join(); }

  // Runs FN on a new thread of STACK bytes of stack; 0 or an error number
  // (then nothing runs).
  int start(size_t stack, std::function<void()> fn) {
    join();
    auto* call = new std::function<void()>(std::move(fn));
    const int err = rtaccel_thread_create(&id_, stack, trampoline, call);
    if (err) {
      delete call;
      return err;
    }
    started_ = true;
    return 0;
  }
  bool joinable() const { return started_; }
  void join() {
    if (started_) pthread_join(id_, nullptr);
    started_ = false;
  }

 private:
  static void* trampoline(void* arg) {
    auto* call = static_cast<std::function<void()>*>(arg);
    (*call)();
    delete call;
    return nullptr;
  }

  pthread_t id_{};
  bool started_ = false;
};

}  // namespace rtaccel::core
#endif

#endif /* RTACCEL_CORE_THREAD_H */

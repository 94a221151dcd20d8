#ifndef PARLEY_SYSTEM_SHIM_H
#define PARLEY_SYSTEM_SHIM_H
/* Linux calls that Swift's Glibc module does not expose (they need _GNU_SOURCE or
   live in headers the module map leaves out). */
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

long syscall(long number, ...);

int pthread_setname_np(pthread_t thread, const char *name);

static inline int parley_eventfd_nonblocking(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }
static inline int parley_thread_set_name(pthread_t thread, const char *name) { return pthread_setname_np(thread, name); }
/* Linux applies a nice value to the one thread whose id is given. */
static inline int parley_thread_lower_priority(int nice_value) {
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice_value);
}

#endif

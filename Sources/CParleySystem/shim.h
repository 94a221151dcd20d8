#ifndef PARLEY_SYSTEM_SHIM_H
#define PARLEY_SYSTEM_SHIM_H
/* Linux calls that Swift's Glibc module does not expose (they need _GNU_SOURCE or
   live in headers the module map leaves out). */
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <unistd.h>

long syscall(long number, ...);

int pthread_setname_np(pthread_t thread, const char *name);

static inline int parley_eventfd_nonblocking(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }
static inline int parley_thread_set_name(pthread_t thread, const char *name) { return pthread_setname_np(thread, name); }
/* Linux applies a nice value to the one thread whose id is given. */
static inline int parley_thread_lower_priority(int nice_value) {
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice_value);
}

/* epoll: struct epoll_event is packed on x86_64, which Swift does not import well, so
   events cross as plain arrays. */
static inline int parley_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
static inline int parley_epoll_ctl(int epoll_fd, int op, int fd, unsigned int events) {
    struct epoll_event event;
    event.events = events;
    event.data.u64 = 0;
    event.data.fd = fd;
    return epoll_ctl(epoll_fd, op, fd, &event);
}
static inline int parley_epoll_wait(int epoll_fd, int *fds, unsigned int *events, int max_events, int timeout_ms) {
    struct epoll_event ready[256];
    if (max_events > 256) max_events = 256;
    int count = epoll_wait(epoll_fd, ready, max_events, timeout_ms);
    for (int index = 0; index < count; index++) {
        fds[index] = ready[index].data.fd;
        events[index] = ready[index].events;
    }
    return count;
}

/* Descriptors the library leaves unused below the process's soft RLIMIT_NOFILE. A process
   whose clients took every descriptor dies: libdispatch's worker monitor (linked into the
   library) treats a failed open of /proc/<tid>/stat as fatal. SQLite also opens a cache's
   -wal and -shm when the cache is first used. */
#define PARLEY_DESCRIPTOR_RESERVE 64

/* The soft descriptor limit, or 0 when there is none. */
static inline long parley_descriptor_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 0;
    return (long)limit.rlim_cur;
}

/* Whether descriptor number `fd` is inside the reserve (Linux hands out the lowest free
   number, so every number below it is taken). */
static inline int parley_descriptor_in_reserve(long fd) {
    long limit = parley_descriptor_limit();
    return limit > 0 && fd + PARLEY_DESCRIPTOR_RESERVE >= limit;
}

/* The lowest free descriptor number (an fd is opened and closed), or -1 when none is free. */
static inline long parley_lowest_free_descriptor(void) {
    int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (probe < 0) return -1;
    close(probe);
    return probe;
}

#endif

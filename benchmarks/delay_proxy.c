/* delay_proxy: a TCP proxy that holds every chunk of bytes for a fixed delay in each direction,
 * so that a benchmark on one machine sees a service (PostgreSQL) as if it were a network hop
 * away. Two modes:
 *
 *   delay_proxy [--delay MS] [--realtime] LISTEN_PORT TARGET_HOST:TARGET_PORT
 *   delay_proxy --overhead [--realtime] [SECONDS]
 *
 * Proxy: listens on 127.0.0.1:LISTEN_PORT (0: any free port) and prints
 * "delay_proxy listening on 127.0.0.1:PORT, ..." once it does; each accepted connection is
 * forwarded to TARGET_HOST:TARGET_PORT. What is read from one side is written to the other
 * MS milliseconds (default 1, fractions allowed, 0 allowed) after it was read, in order; an
 * end of stream is passed on (shutdown) with the same delay. One thread, epoll: one queue per
 * direction, its chunks stamped with their due time; a timerfd wakes the loop at the earliest
 * one. On SIGTERM or SIGINT it closes everything and prints to stderr how many chunks it
 * forwarded and how late after their due time they went out.
 * --realtime: the proxy runs at real-time priority (SCHED_FIFO 1; needs root or CAP_SYS_NICE,
 * else it says so and runs as it is). A network hop does not wait for the CPU; a proxy that
 * shares busy cores with the servers and the database would wait for them on every chunk,
 * adding its run-queue waits to the delay asked for. It only sleeps between chunks, so it
 * takes little from the others.
 *
 * Overhead: what the proxy itself costs. An echo server and a proxy (delay 0, then 1 ms) run
 * as processes of their own; round trips of 64-byte messages, one at a time per connection,
 * over 1 and then 16 connections for SECONDS (default 1) each: directly, through the proxy at
 * delay 0 (the difference is the proxy's cost) and at delay 1 ms (it should add 2 ms to a
 * round trip, and no more). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A direction stops reading while this much waits in its queue (the receiver is slower). */
#define QUEUE_LIMIT (4u << 20)
#define READ_SIZE 65536

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* ---- the proxy ---------------------------------------------------------------------------- */

typedef struct chunk {
    struct chunk *next;
    uint64_t due;
    size_t length, sent;
    char data[];
} chunk;

struct connection;

/* Bytes read from `from`, written to `to` once due. */
typedef struct {
    int from, to;
    chunk *head, *tail;
    size_t queued;
    int reading;    /* EPOLLIN wanted on `from` */
    int blocked;    /* `to` was full: EPOLLOUT wanted on it */
    int ended;      /* `from` reached its end; passed on at end_due */
    uint64_t end_due;
    int shut;       /* shutdown(to, SHUT_WR) done */
} direction;

/* What epoll's data points at: one side (socket) of a connection. */
typedef struct {
    struct connection *connection;
    int fd;
    direction *reads_into;   /* the direction that reads this socket */
    direction *writes_from;  /* the direction that writes to it */
    uint32_t events;         /* registered with epoll */
    int removed;             /* taken out of epoll after a hang-up, see on_side */
} side;

typedef struct connection {
    struct connection *prev, *next;
    direction up, down; /* client -> target, target -> client */
    side client, target;
    int connecting;     /* the target's connect has not completed */
} connection;

static int epoll_fd, timer_fd, listen_fd, signal_fd;
static uint64_t delay_ns;
static int realtime; /* asked for with --realtime; 0 again when refused */
static struct sockaddr_storage target_address;
static socklen_t target_length;
static connection *connections;
static unsigned long long accepted_count, failed_count, chunk_count, bytes_to_target, bytes_to_clients;
/* How late chunks went out after their due time: counts per LATE_STEP_US microseconds, the
 * last bucket holding everything later. */
#define LATE_STEP_US 10
#define LATE_BUCKETS 10001
static unsigned long long late_buckets[LATE_BUCKETS];
static uint64_t late_max;

static void note_lateness(uint64_t late) {
    uint64_t bucket = late / 1000 / LATE_STEP_US;
    late_buckets[bucket < LATE_BUCKETS ? bucket : LATE_BUCKETS - 1]++;
    if (late > late_max) late_max = late;
}

/* The upper bound (µs) of the bucket holding the q-quantile of the lateness (at most the max). */
static double lateness_quantile(double q) {
    unsigned long long total = 0, seen = 0;
    double max = (double)late_max / 1e3;
    for (int i = 0; i < LATE_BUCKETS; i++) total += late_buckets[i];
    if (total == 0) return 0;
    for (int i = 0; i < LATE_BUCKETS - 1; i++) {
        seen += late_buckets[i];
        double bound = (double)(i + 1) * LATE_STEP_US;
        if ((double)seen >= q * (double)total) return bound < max ? bound : max;
    }
    return max;
}

static void update_events(side *s) {
    if (s->removed) return;
    uint32_t events = 0;
    if (s->connection->connecting) {
        if (s == &s->connection->target) events = EPOLLOUT;
        else if (s->reads_into->reading) events = EPOLLIN;
    } else {
        if (s->reads_into->reading) events |= EPOLLIN;
        if (s->writes_from->blocked) events |= EPOLLOUT;
    }
    if (events == s->events) return;
    struct epoll_event e = {.events = events, .data.ptr = s};
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, s->fd, &e);
    s->events = events;
}

static void free_queue(direction *d) {
    while (d->head) {
        chunk *c = d->head;
        d->head = c->next;
        free(c);
    }
    d->tail = NULL;
    d->queued = 0;
}

static void close_connection(connection *c) {
    close(c->client.fd); /* closing removes them from epoll */
    close(c->target.fd);
    free_queue(&c->up);
    free_queue(&c->down);
    if (c->prev) c->prev->next = c->next;
    else connections = c->next;
    if (c->next) c->next->prev = c->prev;
    free(c);
}

static void set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Reads what `d->from` has into its queue. 0 when the connection failed. */
static int read_side(direction *d, uint64_t now) {
    static char buffer[READ_SIZE];
    while (d->reading) {
        ssize_t n = read(d->from, buffer, sizeof buffer);
        if (n > 0) {
            chunk *c = malloc(sizeof *c + (size_t)n);
            if (c == NULL) return 0;
            c->next = NULL;
            c->due = now + delay_ns;
            c->length = (size_t)n;
            c->sent = 0;
            memcpy(c->data, buffer, (size_t)n);
            if (d->tail) d->tail->next = c;
            else d->head = c;
            d->tail = c;
            d->queued += (size_t)n;
            if (d->queued >= QUEUE_LIMIT) d->reading = 0;
            if ((size_t)n < sizeof buffer) return 1; /* drained: one read saved */
        } else if (n == 0) {
            d->reading = 0;
            d->ended = 1;
            d->end_due = now + delay_ns;
        } else if (errno == EINTR) {
            continue;
        } else {
            return errno == EAGAIN || errno == EWOULDBLOCK;
        }
    }
    return 1;
}

/* Writes the chunks of `d` that are due. 0 when the connection failed. */
static int write_due(direction *d, connection *c, uint64_t now) {
    if (c->connecting) return 1;
    while (d->head && d->head->due <= now) {
        chunk *h = d->head;
        ssize_t n = send(d->to, h->data + h->sent, h->length - h->sent, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                d->blocked = 1;
                return 1;
            }
            return 0;
        }
        if (h->sent == 0) note_lateness(now - h->due);
        h->sent += (size_t)n;
        if (h->sent < h->length) continue;
        d->queued -= h->length;
        if (d == &c->up) bytes_to_target += h->length;
        else bytes_to_clients += h->length;
        chunk_count++;
        d->head = h->next;
        if (d->head == NULL) d->tail = NULL;
        free(h);
        if (!d->ended && d->queued < QUEUE_LIMIT / 2) d->reading = 1;
    }
    d->blocked = 0;
    if (d->head == NULL && d->ended && !d->shut && d->end_due <= now) {
        shutdown(d->to, SHUT_WR);
        d->shut = 1;
    }
    return 1;
}

/* The earliest due time of anything still queued and writable, or 0 for none. */
static uint64_t next_due(void) {
    uint64_t earliest = 0;
    for (connection *c = connections; c; c = c->next) {
        if (c->connecting) continue;
        direction *ds[2] = {&c->up, &c->down};
        for (int i = 0; i < 2; i++) {
            direction *d = ds[i];
            uint64_t due = 0;
            if (d->head && !d->blocked) due = d->head->due;
            else if (!d->head && d->ended && !d->shut) due = d->end_due;
            if (due && (earliest == 0 || due < earliest)) earliest = due;
        }
    }
    return earliest;
}

static void arm_timer(uint64_t due) {
    struct itimerspec spec = {0};
    if (due) {
        spec.it_value.tv_sec = (time_t)(due / 1000000000u);
        spec.it_value.tv_nsec = (long)(due % 1000000000u);
    }
    timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &spec, NULL);
}

static void accept_connections(void) {
    for (;;) {
        int client = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (client < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) perror("delay_proxy: accept");
            return;
        }
        int target = socket(target_address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (target < 0 || (connect(target, (struct sockaddr *)&target_address, target_length) < 0 && errno != EINPROGRESS)) {
            perror("delay_proxy: connect to the target");
            failed_count++;
            if (target >= 0) close(target);
            close(client);
            continue;
        }
        set_nodelay(client);
        set_nodelay(target);
        connection *c = calloc(1, sizeof *c);
        c->up = (direction){.from = client, .to = target, .reading = 1};
        c->down = (direction){.from = target, .to = client, .reading = 1};
        c->client = (side){c, client, &c->up, &c->down, 0, 0};
        c->target = (side){c, target, &c->down, &c->up, 0, 0};
        c->connecting = 1;
        side *sides[2] = {&c->client, &c->target};
        for (int i = 0; i < 2; i++) {
            struct epoll_event e = {.events = 0, .data.ptr = sides[i]};
            epoll_ctl(epoll_fd, EPOLL_CTL_ADD, sides[i]->fd, &e);
            update_events(sides[i]);
        }
        c->next = connections;
        if (connections) connections->prev = c;
        connections = c;
        accepted_count++;
    }
}

/* Handles epoll's report on one side. 0 when the connection is to be closed. */
static int on_side(side *s, uint32_t events, uint64_t now) {
    connection *c = s->connection;
    if (c->connecting && s == &c->target) {
        int error = 0;
        socklen_t length = sizeof error;
        getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &error, &length);
        if (error != 0) {
            fprintf(stderr, "delay_proxy: connect to the target: %s\n", strerror(error));
            failed_count++;
            return 0;
        }
        c->connecting = 0;
        return write_due(&c->up, c, now) && write_due(&c->down, c, now);
    }
    if (events & EPOLLOUT) {
        if (!write_due(s->writes_from, c, now)) return 0;
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        if (s->reads_into->reading) {
            if (!read_side(s->reads_into, now)) return 0;
            /* Delay 0: what was read is due now. */
            if (delay_ns == 0 && !write_due(s->reads_into, c, now)) return 0;
        } else if (events & EPOLLERR) {
            return 0;
        } else if (events & EPOLLHUP) {
            /* Both ways of this socket are shut, and epoll reports that on every wait: it leaves
             * epoll. What the peer sent before may still wait unread (reading paused for a full
             * queue): the loop reads it once the queue has room. */
            epoll_ctl(epoll_fd, EPOLL_CTL_DEL, s->fd, NULL);
            s->removed = 1;
        }
    }
    return 1;
}

static int resolve_target(const char *spec) {
    const char *colon = strrchr(spec, ':');
    if (colon == NULL || colon == spec || colon[1] == '\0') return 0;
    char host[256];
    size_t length = (size_t)(colon - spec);
    if (length >= sizeof host) return 0;
    memcpy(host, spec, length);
    host[length] = '\0';
    /* [::1]:5432 */
    char *h = host;
    if (h[0] == '[' && length > 2 && h[length - 1] == ']') h[length - 1] = '\0', h++;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *found = NULL;
    int status = getaddrinfo(h, colon + 1, &hints, &found);
    if (status != 0) {
        fprintf(stderr, "delay_proxy: target %s: %s\n", spec, gai_strerror(status));
        return 0;
    }
    memcpy(&target_address, found->ai_addr, found->ai_addrlen);
    target_length = found->ai_addrlen;
    freeaddrinfo(found);
    return 1;
}

/* A listening socket on 127.0.0.1:port (0: any); its port in *bound. */
static int listen_loopback(int port, int *bound) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    if (bind(fd, (struct sockaddr *)&address, sizeof address) < 0 || listen(fd, 1024) < 0 ||
        getsockname(fd, (struct sockaddr *)&address, &length) < 0) {
        close(fd);
        return -1;
    }
    *bound = ntohs(address.sin_port);
    return fd;
}

/* Runs the proxy until SIGTERM or SIGINT. `ready`, when not -1, gets one byte once it listens
 * (the overhead mode's children); otherwise the "listening" line is printed. */
static int proxy_main(int port, const char *target, double delay_ms, int ready) {
    if (!resolve_target(target)) {
        fprintf(stderr, "delay_proxy: TARGET must be HOST:PORT (was '%s')\n", target);
        return 2;
    }
    delay_ns = (uint64_t)(delay_ms * 1e6 + 0.5);
    /* The timer's default slack (50 µs) would be added to every chunk's delay. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (realtime) {
        struct sched_param priority = {.sched_priority = 1};
        if (sched_setscheduler(0, SCHED_FIFO, &priority) < 0) {
            fprintf(stderr, "delay_proxy: --realtime refused (%s): running at normal priority\n", strerror(errno));
            realtime = 0;
        }
    }
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    int bound = 0;
    listen_fd = listen_loopback(port, &bound);
    if (listen_fd < 0) {
        fprintf(stderr, "delay_proxy: cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
        return 1;
    }
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    /* Epoll's data for what is not a side (closed_tag: a side closed earlier in the batch). */
    static int listen_tag, timer_tag, signal_tag, closed_tag;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &listen_tag};
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &e);
    e.data.ptr = &timer_tag;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, timer_fd, &e);
    e.data.ptr = &signal_tag;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, signal_fd, &e);
    if (ready >= 0) {
        char byte = 1;
        if (write(ready, &byte, 1) != 1) return 1;
        close(ready);
    } else {
        printf("delay_proxy listening on 127.0.0.1:%d, forwarding to %s, %g ms each way%s\n", bound, target, delay_ms,
               realtime ? ", real-time priority" : "");
        fflush(stdout);
    }
    uint64_t armed = 0;
    for (int running = 1; running;) {
        struct epoll_event events[64];
        int count = epoll_wait(epoll_fd, events, 64, -1);
        if (count < 0 && errno != EINTR) {
            perror("delay_proxy: epoll_wait");
            return 1;
        }
        uint64_t now = now_ns();
        /* A side handled in this batch may close its connection: its later events in the batch
         * are then skipped (its sides are freed). */
        for (int i = 0; i < count; i++) {
            void *tag = events[i].data.ptr;
            if (tag == &listen_tag) {
                accept_connections();
            } else if (tag == &timer_tag) {
                uint64_t expirations;
                if (read(timer_fd, &expirations, sizeof expirations) < 0) { /* nothing to read: spurious */ }
                armed = 0;
            } else if (tag == &signal_tag) {
                running = 0;
            } else if (tag != &closed_tag) {
                side *s = tag;
                if (!on_side(s, events[i].events, now)) {
                    connection *c = s->connection;
                    for (int j = i + 1; j < count; j++) {
                        side *other = events[j].data.ptr;
                        if (other == &c->client || other == &c->target) events[j].data.ptr = &closed_tag;
                    }
                    close_connection(c);
                }
            }
        }
        /* Everything now due, on every connection (the timer's chunks, and those of connections
         * that just became writable again). */
        now = now_ns();
        for (connection *c = connections, *next; c; c = next) {
            next = c->next;
            int ok = 1;
            side *sides[2] = {&c->client, &c->target};
            for (int k = 0; k < 2 && ok; k++)
                if (sides[k]->removed && sides[k]->reads_into->reading) ok = read_side(sides[k]->reads_into, now);
            ok = ok && write_due(&c->up, c, now) && write_due(&c->down, c, now);
            if (ok && c->up.shut && c->down.shut) ok = 0; /* both ends passed on: done */
            if (!ok) {
                close_connection(c);
                continue;
            }
            update_events(&c->client);
            update_events(&c->target);
        }
        uint64_t due = next_due();
        if (due != armed) {
            arm_timer(due);
            armed = due;
        }
    }
    while (connections) close_connection(connections);
    if (ready < 0) {
        fprintf(stderr,
                "delay_proxy: %llu connections (%llu failed), %llu chunks forwarded with %g ms each way (%.1f MB to "
                "the target, %.1f MB from it); sent after their due time (a full receiver's wait included) by p50 %.0f us, "
                "p99 %.0f us, p99.9 %.0f us, max %.0f us\n",
                accepted_count, failed_count, chunk_count, delay_ms, (double)bytes_to_target / 1e6,
                (double)bytes_to_clients / 1e6, lateness_quantile(0.5),
                lateness_quantile(0.99), lateness_quantile(0.999), (double)late_max / 1e3);
    }
    return 0;
}

/* ---- overhead ---------------------------------------------------------------------------- */

#define MESSAGE 64
#define MAX_CONNECTIONS 16

/* An echo server on a listening socket, until killed: one thread, poll. */
static void echo_server(int fd) {
    struct pollfd fds[MAX_CONNECTIONS * 3 + 1];
    int count = 1;
    fds[0] = (struct pollfd){.fd = fd, .events = POLLIN};
    for (;;) {
        if (poll(fds, (nfds_t)count, -1) < 0) continue;
        if (fds[0].revents & POLLIN) {
            int client = accept4(fd, NULL, NULL, SOCK_NONBLOCK);
            if (client >= 0 && count < (int)(sizeof fds / sizeof fds[0])) {
                set_nodelay(client);
                fds[count++] = (struct pollfd){.fd = client, .events = POLLIN};
            } else if (client >= 0) {
                close(client);
            }
        }
        for (int i = 1; i < count; i++) {
            if (!fds[i].revents) continue;
            char buffer[4096];
            ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
            if (n > 0) {
                if (write(fds[i].fd, buffer, (size_t)n) != n) n = 0; /* 64-byte echoes fit the buffer */
            }
            if (n == 0 || (n < 0 && errno != EAGAIN)) {
                close(fds[i].fd);
                fds[i--] = fds[--count];
            }
        }
    }
}

typedef struct {
    double rate, p50, p99;
} round_trips;

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Round trips of MESSAGE bytes on `count` connections to 127.0.0.1:port, one at a time
 * on each, for `seconds`. */
static int measure(int port, int count, double seconds, round_trips *out) {
    struct pollfd fds[MAX_CONNECTIONS];
    uint64_t sent_at[MAX_CONNECTIONS];
    size_t got[MAX_CONNECTIONS];
    size_t capacity = 1 << 20, samples = 0;
    uint64_t *rtt = malloc(capacity * sizeof *rtt);
    char message[MESSAGE];
    memset(message, 'x', sizeof message);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int i = 0; i < count; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0) {
            perror("delay_proxy --overhead: connect");
            return 0;
        }
        set_nodelay(fd);
        fds[i] = (struct pollfd){.fd = fd, .events = POLLIN};
    }
    /* One warm-up round trip each, not counted. */
    for (int i = 0; i < count; i++) {
        char buffer[MESSAGE];
        size_t have = 0;
        if (write(fds[i].fd, message, sizeof message) != (ssize_t)sizeof message) return 0;
        while (have < sizeof buffer) {
            ssize_t n = read(fds[i].fd, buffer + have, sizeof buffer - have);
            if (n <= 0) return 0;
            have += (size_t)n;
        }
    }
    uint64_t start = now_ns(), end = start + (uint64_t)(seconds * 1e9);
    for (int i = 0; i < count; i++) {
        sent_at[i] = now_ns();
        got[i] = 0;
        if (write(fds[i].fd, message, sizeof message) != (ssize_t)sizeof message) return 0;
    }
    int open = count;
    while (open > 0) {
        if (poll(fds, (nfds_t)count, 1000) <= 0) {
            fprintf(stderr, "delay_proxy --overhead: no echo for 1 s\n");
            return 0;
        }
        for (int i = 0; i < count; i++) {
            if (!(fds[i].revents & POLLIN)) continue;
            char buffer[MESSAGE];
            ssize_t n = read(fds[i].fd, buffer, sizeof buffer - got[i]);
            if (n <= 0) return 0;
            got[i] += (size_t)n;
            if (got[i] < MESSAGE) continue;
            uint64_t now = now_ns();
            if (samples < capacity) rtt[samples++] = now - sent_at[i];
            got[i] = 0;
            if (now >= end) {
                fds[i].events = 0;
                open--;
                continue;
            }
            sent_at[i] = now;
            if (write(fds[i].fd, message, sizeof message) != (ssize_t)sizeof message) return 0;
        }
    }
    double elapsed = (double)(now_ns() - start) / 1e9;
    for (int i = 0; i < count; i++) close(fds[i].fd);
    qsort(rtt, samples, sizeof *rtt, compare_u64);
    out->rate = (double)samples / elapsed;
    out->p50 = samples ? (double)rtt[samples / 2] / 1e3 : 0;
    out->p99 = samples ? (double)rtt[(size_t)((double)(samples - 1) * 0.99)] / 1e3 : 0;
    free(rtt);
    return 1;
}

/* A proxy in a child process at `delay_ms` in front of 127.0.0.1:target; its port in *port. */
static pid_t start_proxy(int target, double delay_ms, int *port) {
    int free_port = 0, probe = listen_loopback(0, &free_port);
    if (probe < 0) return -1;
    close(probe); /* the child binds it again at once (SO_REUSEADDR) */
    int ready[2];
    if (pipe(ready) < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        char spec[64];
        snprintf(spec, sizeof spec, "127.0.0.1:%d", target);
        _exit(proxy_main(free_port, spec, delay_ms, ready[1]));
    }
    close(ready[1]);
    char byte;
    ssize_t n = read(ready[0], &byte, 1);
    close(ready[0]);
    if (n != 1) {
        waitpid(pid, NULL, 0);
        return -1;
    }
    *port = free_port;
    return pid;
}

static void stop_child(pid_t pid) {
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

static int overhead_main(double seconds) {
    int echo_port = 0, echo_fd = listen_loopback(0, &echo_port);
    if (echo_fd < 0) {
        perror("delay_proxy --overhead: listen");
        return 1;
    }
    pid_t echo = fork();
    if (echo == 0) {
        int flags = fcntl(echo_fd, F_GETFL);
        fcntl(echo_fd, F_SETFL, flags & ~O_NONBLOCK);
        echo_server(echo_fd);
        _exit(0);
    }
    close(echo_fd);
    printf("delay_proxy overhead: round trips of %d-byte messages to an echo server on loopback TCP, one at a time per "
           "connection, %g s each (%ld cores, shared by the echo server, the proxy and this client; the proxy at %s "
           "priority)\n",
           MESSAGE, seconds, sysconf(_SC_NPROCESSORS_ONLN), realtime ? "real-time" : "normal");
    int counts[2] = {1, MAX_CONNECTIONS}, status = 0;
    for (int k = 0; k < 2 && status == 0; k++) {
        round_trips direct, zero, one;
        int zero_port = 0, one_port = 0;
        pid_t zero_proxy = start_proxy(echo_port, 0, &zero_port);
        pid_t one_proxy = start_proxy(echo_port, 1, &one_port);
        if (zero_proxy < 0 || one_proxy < 0 || !measure(echo_port, counts[k], seconds, &direct) ||
            !measure(zero_port, counts[k], seconds, &zero) || !measure(one_port, counts[k], seconds, &one)) {
            fprintf(stderr, "delay_proxy --overhead: the measure failed\n");
            status = 1;
        } else {
            printf("  %2d connection%s: direct %7.0f round trips/s, p50 %5.0f us, p99 %5.0f us\n", counts[k],
                   counts[k] > 1 ? "s" : " ", direct.rate, direct.p50, direct.p99);
            printf("      proxy, delay 0:  %7.0f round trips/s, p50 %5.0f us, p99 %5.0f us   (proxy's cost: p50 +%.0f us, "
                   "%.2fx the direct rate)\n",
                   zero.rate, zero.p50, zero.p99, zero.p50 - direct.p50, zero.rate / direct.rate);
            printf("      proxy, delay 1 ms: %5.0f round trips/s, p50 %5.0f us, p99 %5.0f us   (beyond the 2 ms asked: "
                   "p50 +%.0f us, p99 +%.0f us)\n",
                   one.rate, one.p50, one.p99, one.p50 - 2000, one.p99 - 2000);
        }
        if (zero_proxy > 0) stop_child(zero_proxy);
        if (one_proxy > 0) stop_child(one_proxy);
    }
    stop_child(echo);
    return status;
}

/* ---- main -------------------------------------------------------------------------------- */

static int usage(const char *program, const char *problem) {
    if (problem) fprintf(stderr, "delay_proxy: %s\n", problem);
    fprintf(stderr,
            "usage: %s [--delay MS] [--realtime] LISTEN_PORT TARGET_HOST:TARGET_PORT\n"
            "         forwards 127.0.0.1:LISTEN_PORT (0: any free port) to the target, every chunk held MS ms\n"
            "         each way (default 1; 0 and fractions allowed); stops on SIGTERM or SIGINT;\n"
            "         --realtime: at real-time priority (SCHED_FIFO), so that busy cores do not lengthen the delay\n"
            "       %s --overhead [--realtime] [SECONDS]\n"
            "         measures the proxy's own cost against a direct connection (SECONDS per measure, default 1)\n",
            program, program);
    return 2;
}

/* A number from the whole of `text` in [minimum, maximum], or -1. */
static double parse_number(const char *text, double minimum, double maximum) {
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(value >= minimum && value <= maximum)) return -1;
    return value;
}

int main(int argc, char **argv) {
    double delay_ms = 1;
    int overhead = 0, delay_given = 0, first = 1;
    for (; first < argc && strncmp(argv[first], "--", 2) == 0; first++) {
        if (strcmp(argv[first], "--overhead") == 0) {
            overhead = 1;
        } else if (strcmp(argv[first], "--realtime") == 0) {
            realtime = 1;
        } else if (strcmp(argv[first], "--delay") == 0) {
            if (first + 1 >= argc) return usage(argv[0], "--delay needs a value in milliseconds");
            delay_ms = parse_number(argv[++first], 0, 10000);
            if (delay_ms < 0) return usage(argv[0], "the delay must be a number of milliseconds from 0 to 10000");
            delay_given = 1;
        } else {
            char problem[128];
            snprintf(problem, sizeof problem, "unknown option %.60s", argv[first]);
            return usage(argv[0], problem);
        }
    }
    if (overhead) {
        if (delay_given) return usage(argv[0], "--overhead measures at delays 0 and 1 ms: --delay does not apply");
        if (argc - first > 1) return usage(argv[0], "--overhead takes at most one argument, SECONDS");
        double seconds = argc - first == 1 ? parse_number(argv[first], 0.1, 3600) : 1;
        if (seconds < 0) return usage(argv[0], "SECONDS must be a number from 0.1 to 3600");
        return overhead_main(seconds);
    }
    if (argc - first != 2) return usage(argv[0], argc - first < 2 ? "LISTEN_PORT and TARGET_HOST:TARGET_PORT are needed" : "too many arguments");
    double port = parse_number(argv[first], 0, 65535);
    if (port < 0 || port != (double)(int)port) return usage(argv[0], "LISTEN_PORT must be a port number from 0 to 65535");
    return proxy_main((int)port, argv[first + 1], delay_ms, -1);
}

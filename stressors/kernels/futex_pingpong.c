/* futex_pingpong: context-switch heavy work, as lock handoffs and request/response over
 * in-process queues cause it: the worker and one helper thread on the same CPU (the
 * helper inherits the worker's pinning) hand a futex word back and forth, each side
 * sleeping until the other answers, so every round trip is two voluntary context switches
 * and two futex wake-ups. Outside a segment the helper sleeps. One unit = one round trip;
 * bytes = 0. */
#define _GNU_SOURCE
#include "../stressor.h"
#include <errno.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { IDLE = 0, PING = 1, PONG = 2, QUIT = 3 };

struct pp_state { uint32_t turn; pthread_t helper; };

static void futex_wait(uint32_t *w, uint32_t val) { syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0); }
static void futex_wake(uint32_t *w) { syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

static void *pp_helper(void *arg) {
    struct pp_state *st = arg;
    for (;;) {
        uint32_t t;
        while ((t = __atomic_load_n(&st->turn, __ATOMIC_ACQUIRE)) != PING && t != QUIT) futex_wait(&st->turn, t);
        if (t == QUIT) return NULL;
        __atomic_store_n(&st->turn, PONG, __ATOMIC_RELEASE);
        futex_wake(&st->turn);
    }
}

static void *pp_thread_setup(struct stressor *s, int thread, char *err) {
    (void)thread;
    struct pp_state *st = calloc(1, sizeof *st);
    /* created from the pinned worker: same CPU, same nice, signals blocked */
    if (pthread_create(&st->helper, NULL, pp_helper, st)) {
        snprintf(err, ERRLEN, "%s: cannot create helper thread: %s", s->name, strerror(errno));
        free(st);
        return NULL;
    }
    return st;
}

static uint64_t pp_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    (void)s; (void)deadline_ns; (void)bytes;
    struct pp_state *st = ts;
    for (uint64_t u = 0; u < units; u++) {
        __atomic_store_n(&st->turn, PING, __ATOMIC_RELEASE);
        futex_wake(&st->turn);
        uint32_t t;
        while ((t = __atomic_load_n(&st->turn, __ATOMIC_ACQUIRE)) != PONG) futex_wait(&st->turn, t);
    }
    __atomic_store_n(&st->turn, IDLE, __ATOMIC_RELEASE);
    return units;
}

static void pp_thread_teardown(struct stressor *s, void *ts) {
    (void)s;
    struct pp_state *st = ts;
    __atomic_store_n(&st->turn, QUIT, __ATOMIC_RELEASE);
    futex_wake(&st->turn);
    pthread_join(st->helper, NULL);
    free(st);
}

static uint64_t pp_helper_cpu_ns(void *ts) { return thread_cpu_of(((struct pp_state *)ts)->helper); }

const struct kernel_ops kernel_futex_pingpong = {
    .name = "futex_pingpong", .thread_setup = pp_thread_setup, .step = pp_step,
    .thread_teardown = pp_thread_teardown, .helper_cpu_ns = pp_helper_cpu_ns,
};

/* cpu_contend: more runnable threads than CPUs, as an oversubscribed host has them. Each
 * worker thread that runs this variant gets `extra` helper threads on its own CPU (they
 * inherit its pinning); while a segment runs, the helpers spin until the segment's
 * deadline next to the worker, so the CPU's run queue holds 1 + extra threads: the CPU
 * pressure (PSI cpu some), run-queue waiting and involuntary context switches that a
 * CPU-bound stressor alone never causes. Outside the segment the helpers sleep on a futex.
 * One unit = 64 rounds of an integer mix on the worker; bytes = 0. */
#define _GNU_SOURCE
#include "../stressor.h"
#include <errno.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_EXTRA 8

struct contend_state {
    uint32_t gen;              /* futex word: bumped to start the helpers on a new segment */
    uint64_t until_ns;         /* the segment's deadline the helpers spin to */
    int quit, nextra;
    uint64_t x;
    pthread_t helpers[MAX_EXTRA];
};

static void futex_wait(uint32_t *w, uint32_t val) { syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0); }
static void futex_wake(uint32_t *w) { syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0); }

static uint64_t mix(uint64_t x, int rounds) {
    for (int i = 0; i < rounds; i++) x = (x ^ (x >> 31)) * 0x9E3779B97F4A7C15ull + (uint64_t)i;
    return x;
}

static void *helper_main(void *arg) {
    struct contend_state *st = arg;
    uint32_t seen = 0;
    volatile uint64_t sink = 0;
    for (;;) {
        uint32_t g;
        while ((g = __atomic_load_n(&st->gen, __ATOMIC_ACQUIRE)) == seen && !__atomic_load_n(&st->quit, __ATOMIC_RELAXED))
            futex_wait(&st->gen, seen);
        if (__atomic_load_n(&st->quit, __ATOMIC_RELAXED)) return NULL;
        seen = g;
        uint64_t until = __atomic_load_n(&st->until_ns, __ATOMIC_RELAXED), x = (uint64_t)(uintptr_t)&seen;
        while (now_ns() < until && !__atomic_load_n(&st->quit, __ATOMIC_RELAXED)) x = mix(x, 256);
        sink = x;
    }
    (void)sink;
}

static void *contend_thread_setup(struct stressor *s, int thread, char *err) {
    uint64_t extra;
    if (param_u64(s, "extra_threads", 1, &extra, err)) return NULL;
    if (extra < 1 || extra > MAX_EXTRA) {
        snprintf(err, ERRLEN, "%s: extra_threads=%llu not in 1..%d", s->name, (unsigned long long)extra, MAX_EXTRA);
        return NULL;
    }
    struct contend_state *st = calloc(1, sizeof *st);
    st->x = 0xC0FFEEull + (uint64_t)thread;
    for (uint64_t i = 0; i < extra; i++) {
        /* created from the pinned worker: same CPU, same nice, signals blocked */
        if (pthread_create(&st->helpers[i], NULL, helper_main, st)) {
            snprintf(err, ERRLEN, "%s: cannot create helper thread: %s", s->name, strerror(errno));
            st->quit = 1;
            futex_wake(&st->gen);
            for (int j = 0; j < st->nextra; j++) pthread_join(st->helpers[j], NULL);
            free(st);
            return NULL;
        }
        st->nextra++;
    }
    return st;
}

static uint64_t contend_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    (void)s; (void)bytes;
    struct contend_state *st = ts;
    if (__atomic_load_n(&st->until_ns, __ATOMIC_RELAXED) != deadline_ns) {
        /* a new segment: the helpers join the run queue until its deadline */
        __atomic_store_n(&st->until_ns, deadline_ns, __ATOMIC_RELAXED);
        __atomic_add_fetch(&st->gen, 1, __ATOMIC_RELEASE);
        futex_wake(&st->gen);
    }
    for (uint64_t u = 0; u < units; u++) st->x = mix(st->x, 64);
    return units;
}

static void contend_thread_teardown(struct stressor *s, void *ts) {
    (void)s;
    struct contend_state *st = ts;
    __atomic_store_n(&st->quit, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&st->gen, 1, __ATOMIC_RELEASE);
    futex_wake(&st->gen);
    for (int i = 0; i < st->nextra; i++) pthread_join(st->helpers[i], NULL);
    free(st);
}

static uint64_t contend_helper_cpu_ns(void *ts) {
    struct contend_state *st = ts;
    uint64_t ns = 0;
    for (int i = 0; i < st->nextra; i++) ns += thread_cpu_of(st->helpers[i]);
    return ns;
}

const struct kernel_ops kernel_cpu_contend = {
    .name = "cpu_contend", .thread_setup = contend_thread_setup, .step = contend_step,
    .thread_teardown = contend_thread_teardown, .helper_cpu_ns = contend_helper_cpu_ns,
};

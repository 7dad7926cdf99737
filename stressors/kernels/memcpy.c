/* memcpy: copy between two per-thread buffers that together make `working_set_bytes`
 * (sized to fit a cache level). One unit = one copy of half the working set;
 * bytes = bytes read + bytes written. */
#include "../stressor.h"
#include <stdlib.h>
#include <string.h>

struct copy_state { uint8_t *a, *b; uint64_t half; int dir; };

static void *copy_thread_setup(struct stressor *s, int thread, char *err) {
    (void)thread;
    struct copy_state *st = calloc(1, sizeof *st);
    uint64_t ws;
    if (param_u64(s, "working_set_bytes", 16384, &ws, err)) { free(st); return NULL; }
    st->half = (ws / 2 + 63) & ~63ull;
    if (st->half < 64) st->half = 64;
    st->a = aligned_alloc(64, st->half);
    st->b = aligned_alloc(64, st->half);
    memset(st->a, 1, st->half);
    memset(st->b, 2, st->half);
    return st;
}

static uint64_t copy_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    (void)s;
    struct copy_state *st = ts;
    for (uint64_t u = 0; u < units; u++) {
        if (st->dir) memcpy(st->a, st->b, st->half); else memcpy(st->b, st->a, st->half);
        st->dir ^= 1;
        __asm__ volatile("" ::: "memory");  /* keep every copy */
    }
    *bytes += units * st->half * 2;
    return units;
}

static void copy_thread_teardown(struct stressor *s, void *ts) {
    (void)s;
    struct copy_state *st = ts;
    free(st->a); free(st->b); free(st);
}

const struct kernel_ops kernel_memcpy = {
    .name = "memcpy", .thread_setup = copy_thread_setup, .step = copy_step,
    .thread_teardown = copy_thread_teardown,
};

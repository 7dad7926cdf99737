/* pointer_chase: dependent loads along one random cycle through a buffer sized to the
 * host's LLC (size read from sysfs at start-up). Every load waits for the previous one, so
 * this measures/loads cache latency rather than bandwidth. The cycle is built once and
 * shared read-only by all threads (each thread walks from its own starting node).
 * One unit = 64 loads; one op = one load; bytes = 64 per load (one cache line). */
#include "../stressor.h"
#include <stdio.h>
#include <stdlib.h>

#define LINE 64
struct chase_shared { uint64_t *buf; uint64_t bytes, nodes; };
struct chase_state { uint64_t pos; uint64_t sink; };

static int chase_setup(struct stressor *s, char *err) {
    if (!param_bool(s, "shared", 1)) {
        snprintf(err, ERRLEN, "%s: shared=false is not implemented by kernel %s (its buffer is shared)", s->name, s->kernel);
        return -1;
    }
    struct chase_shared *sh = calloc(1, sizeof *sh);
    if (param_u64(s, "working_set_bytes", 1 << 20, &sh->bytes, err)) { free(sh); return -1; }
    sh->nodes = sh->bytes / LINE;
    if (sh->nodes < 2) sh->nodes = 2;
    sh->bytes = sh->nodes * LINE;
    sh->buf = alloc_touched(sh->bytes, err);
    if (!sh->buf) { free(sh); return -1; }
    /* Sattolo's algorithm: a uniformly random single cycle over all nodes */
    uint64_t *perm = malloc(sh->nodes * sizeof *perm);
    for (uint64_t i = 0; i < sh->nodes; i++) perm[i] = i;
    uint64_t x = 0xC0FFEE;
    for (uint64_t i = sh->nodes - 1; i > 0; i--) {
        uint64_t j = xorshift64(&x) % i;
        uint64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    for (uint64_t i = 0; i < sh->nodes; i++) sh->buf[i * (LINE / 8)] = perm[i] * (LINE / 8);
    free(perm);
    s->shared = sh;
    return 0;
}

static void *chase_thread_setup(struct stressor *s, int thread, char *err) {
    (void)err;
    struct chase_shared *sh = s->shared;
    struct chase_state *st = calloc(1, sizeof *st);
    st->pos = ((uint64_t)thread * 7919 % sh->nodes) * (LINE / 8);
    return st;
}

static uint64_t chase_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    struct chase_shared *sh = s->shared;
    struct chase_state *st = ts;
    uint64_t p = st->pos;
    const uint64_t *buf = sh->buf;
    for (uint64_t u = 0; u < units * 64; u++) p = buf[p];
    st->pos = p;
    *bytes += units * 64 * LINE;
    return units * 64;
}

static void chase_thread_teardown(struct stressor *s, void *ts) { (void)s; free(ts); }

static void chase_teardown(struct stressor *s) {
    struct chase_shared *sh = s->shared;
    if (!sh) return;
    free_touched(sh->buf, sh->bytes);
    free(sh);
}

const struct kernel_ops kernel_pointer_chase = {
    .name = "pointer_chase", .setup = chase_setup, .thread_setup = chase_thread_setup,
    .step = chase_step, .thread_teardown = chase_thread_teardown, .teardown = chase_teardown,
};

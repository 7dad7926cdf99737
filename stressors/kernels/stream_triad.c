/* stream_triad: the STREAM triad a[i] = b[i] + s * c[i] (kernel and byte accounting as defined
 * by J. D. McCalpin's STREAM benchmark; written here, not copied) over three per-thread arrays
 * totalling `working_set_bytes` (far beyond the LLC), walked sequentially: sustained
 * memory bandwidth. One unit = 4096 elements; bytes = 24 per element (STREAM's count:
 * two 8-byte reads and one 8-byte write). */
#include "../stressor.h"
#include <stdio.h>
#include <stdlib.h>

#define UNIT 4096
struct triad_state { double *a, *b, *c; uint64_t n, pos, bytes; };

static void *triad_thread_setup(struct stressor *s, int thread, char *err) {
    (void)thread;
    if (param_bool(s, "shared", 0)) {
        snprintf(err, ERRLEN, "%s: shared=true is not implemented by kernel %s (arrays are per thread)", s->name, s->kernel);
        return NULL;
    }
    struct triad_state *st = calloc(1, sizeof *st);
    uint64_t ws;
    if (param_u64(s, "working_set_bytes", 256ull << 20, &ws, err)) { free(st); return NULL; }
    st->n = ws / 3 / sizeof(double) / UNIT * UNIT;
    if (st->n < UNIT) st->n = UNIT;
    st->bytes = st->n * sizeof(double);
    st->a = alloc_touched(st->bytes, err);
    st->b = alloc_touched(st->bytes, err);
    st->c = alloc_touched(st->bytes, err);
    if (!st->a || !st->b || !st->c) return NULL;
    for (uint64_t i = 0; i < st->n; i++) { st->b[i] = 1.0; st->c[i] = 2.0; }
    return st;
}

static uint64_t triad_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    (void)s;
    struct triad_state *st = ts;
    const double k = 3.0;
    for (uint64_t u = 0; u < units; u++) {
        double *restrict a = st->a + st->pos;
        const double *restrict b = st->b + st->pos, *restrict c = st->c + st->pos;
        for (int i = 0; i < UNIT; i++) a[i] = b[i] + k * c[i];
        st->pos += UNIT;
        if (st->pos >= st->n) st->pos = 0;
    }
    *bytes += units * UNIT * 24;
    return units * UNIT;
}

static void triad_thread_teardown(struct stressor *s, void *ts) {
    (void)s;
    struct triad_state *st = ts;
    free_touched(st->a, st->bytes); free_touched(st->b, st->bytes); free_touched(st->c, st->bytes);
    free(st);
}

const struct kernel_ops kernel_stream_triad = {
    .name = "stream_triad", .thread_setup = triad_thread_setup, .step = triad_step,
    .thread_teardown = triad_thread_teardown,
};

/* stream_read: a read-only sequential scan (sum) over a per-thread array of
 * `working_set_bytes`, far beyond the LLC: the memory traffic of analytics scans and
 * checksumming, which reads without writing back. The triad's writes halve what reads alone
 * reach; without this kernel the catalog fell ~10 % short of the host's memory-bandwidth
 * peak (the probe's read sum). One unit = 4096 elements; bytes = 8 per element read. */
#include "../stressor.h"
#include <stdio.h>
#include <stdlib.h>

#define UNIT 4096
struct scan_state { uint64_t *a; uint64_t n, pos, bytes, sum; };

static void *scan_thread_setup(struct stressor *s, int thread, char *err) {
    (void)thread;
    if (param_bool(s, "shared", 0)) {
        snprintf(err, ERRLEN, "%s: shared=true is not implemented by kernel %s (arrays are per thread)", s->name, s->kernel);
        return NULL;
    }
    struct scan_state *st = calloc(1, sizeof *st);
    uint64_t ws;
    if (param_u64(s, "working_set_bytes", 256ull << 20, &ws, err)) { free(st); return NULL; }
    st->n = ws / sizeof(uint64_t) / UNIT * UNIT;
    if (st->n < UNIT) st->n = UNIT;
    st->bytes = st->n * sizeof(uint64_t);
    st->a = alloc_touched(st->bytes, err);
    if (!st->a) { free(st); return NULL; }
    for (uint64_t i = 0; i < st->n; i++) st->a[i] = i;
    return st;
}

static uint64_t scan_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    (void)s; (void)deadline_ns;
    struct scan_state *st = ts;
    /* four independent sums: several cache lines in flight, vectorizable */
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (uint64_t u = 0; u < units; u++) {
        const uint64_t *restrict a = st->a + st->pos;
        for (int i = 0; i < UNIT; i += 4) { s0 += a[i]; s1 += a[i + 1]; s2 += a[i + 2]; s3 += a[i + 3]; }
        st->pos += UNIT;
        if (st->pos >= st->n) st->pos = 0;
    }
    st->sum += s0 + s1 + s2 + s3;   /* kept in the state: the loads cannot be dropped */
    *bytes += units * UNIT * sizeof(uint64_t);
    return units * UNIT;
}

static void scan_thread_teardown(struct stressor *s, void *ts) {
    (void)s;
    struct scan_state *st = ts;
    free_touched(st->a, st->bytes);
    free(st);
}

const struct kernel_ops kernel_stream_read = {
    .name = "stream_read", .thread_setup = scan_thread_setup, .step = scan_step,
    .thread_teardown = scan_thread_teardown,
};

/* stream_copy: the STREAM copy a[i] = b[i] (byte accounting as J. D. McCalpin's STREAM: 16 per
 * element, one 8-byte read and one 8-byte write; written here, not copied) over two per-thread
 * arrays totalling `working_set_bytes`, walked sequentially, with non-temporal stores on x86-64
 * (SSE2 streaming stores; plain stores elsewhere). Why: a store that misses the cache first
 * reads its line (read-for-ownership), so the triad moves a third more than it counts, while
 * bulk copies of large buffers (glibc's memcpy above its non-temporal threshold) write around
 * the cache. On a 16-CPU host the triad on every thread reached 0.65-0.82 of the memory peak
 * a memcpy on every thread measured (calibration's reach); this moves memory with the copy's
 * mechanism (on the 2-vCPU VM 48-75 GB/s on both threads where the triad moved 32-56; not yet
 * measured on 16 CPUs). One unit = 4096 elements (32 KiB read, 32 KiB written). */
#include "../stressor.h"
#include <stdio.h>
#include <stdlib.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#define UNIT 4096
struct copy_state { double *a, *b; uint64_t n, pos, bytes; };

static void *copy_thread_setup(struct stressor *s, int thread, char *err) {
    (void)thread;
    if (param_bool(s, "shared", 0)) {
        snprintf(err, ERRLEN, "%s: shared=true is not implemented by kernel %s (arrays are per thread)", s->name, s->kernel);
        return NULL;
    }
    struct copy_state *st = calloc(1, sizeof *st);
    uint64_t ws;
    if (param_u64(s, "working_set_bytes", 256ull << 20, &ws, err)) { free(st); return NULL; }
    st->n = ws / 2 / sizeof(double) / UNIT * UNIT;
    if (st->n < UNIT) st->n = UNIT;
    st->bytes = st->n * sizeof(double);
    st->a = alloc_touched(st->bytes, err);   /* page-aligned: the 16-byte stores below need it */
    st->b = alloc_touched(st->bytes, err);
    if (!st->a || !st->b) return NULL;
    for (uint64_t i = 0; i < st->n; i++) st->b[i] = 1.0;
    return st;
}

static void copy_unit(double *restrict a, const double *restrict b) {
#if defined(__x86_64__)
    for (int i = 0; i < UNIT; i += 8) {
        __m128i x0 = _mm_load_si128((const __m128i *)(b + i)), x1 = _mm_load_si128((const __m128i *)(b + i + 2));
        __m128i x2 = _mm_load_si128((const __m128i *)(b + i + 4)), x3 = _mm_load_si128((const __m128i *)(b + i + 6));
        _mm_stream_si128((__m128i *)(a + i), x0);
        _mm_stream_si128((__m128i *)(a + i + 2), x1);
        _mm_stream_si128((__m128i *)(a + i + 4), x2);
        _mm_stream_si128((__m128i *)(a + i + 6), x3);
    }
#else
    for (int i = 0; i < UNIT; i++) a[i] = b[i];
#endif
}

static uint64_t copy_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    (void)s; (void)deadline_ns;
    struct copy_state *st = ts;
    for (uint64_t u = 0; u < units; u++) {
        copy_unit(st->a + st->pos, st->b + st->pos);
        st->pos += UNIT;
        if (st->pos >= st->n) st->pos = 0;
    }
#if defined(__x86_64__)
    _mm_sfence();   /* the streamed lines reach memory before the step's bytes are reported */
#endif
    *bytes += units * UNIT * 16;
    return units * UNIT;
}

static void copy_thread_teardown(struct stressor *s, void *ts) {
    (void)s;
    struct copy_state *st = ts;
    free_touched(st->a, st->bytes); free_touched(st->b, st->bytes);
    free(st);
}

const struct kernel_ops kernel_stream_copy = {
    .name = "stream_copy", .thread_setup = copy_thread_setup, .step = copy_step,
    .thread_teardown = copy_thread_teardown,
};

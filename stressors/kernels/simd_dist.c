/* simd_dist: squared L2 distance between float vectors with explicit SIMD, 128-bit (SSE)
 * or 256-bit (AVX2, compiled with a target attribute and used only after a run-time CPU
 * check; a plan that uses the AVX2 variant on a CPU without AVX2 is refused at setup).
 * One unit = one distance between two `dim`-float vectors; one op = one vector pair. */
#include "../stressor.h"
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>

struct dist_state { float *a, *b; uint64_t dim, nvec, next; int bits; float sink; };

static int dist_setup(struct stressor *s, char *err) {
    uint64_t bits;
    if (param_u64(s, "vector_bits", 128, &bits, err)) return -1;
    if (bits != 128 && bits != 256) {
        snprintf(err, ERRLEN, "%s: vector_bits=%llu, expected 128 or 256", s->name, (unsigned long long)bits);
        return -1;
    }
    __builtin_cpu_init();
    if (bits == 256 && !__builtin_cpu_supports("avx2")) {
        snprintf(err, ERRLEN, "%s: this CPU has no AVX2 (see /proc/cpuinfo flags); "
                 "the 256-bit variant cannot run here", s->name);
        return -1;
    }
    return 0;
}

static void *dist_thread_setup(struct stressor *s, int thread, char *err) {
    struct dist_state *st = calloc(1, sizeof *st);
    uint64_t bits;
    if (param_u64(s, "dim", 1024, &st->dim, err) || param_u64(s, "vector_bits", 128, &bits, err)) {
        free(st);
        return NULL;
    }
    st->bits = (int)bits;
    st->dim = (st->dim + 7) & ~7ull;
    st->nvec = 8;  /* 8 x 1024 floats x 2 = 64 KiB: L2-resident, compute-bound */
    st->a = aligned_alloc(32, st->dim * st->nvec * sizeof(float));
    st->b = aligned_alloc(32, st->dim * st->nvec * sizeof(float));
    uint64_t x = 77 + (uint64_t)thread;
    for (uint64_t i = 0; i < st->dim * st->nvec; i++) {
        st->a[i] = (float)(xorshift64(&x) % 1000) / 1000.0f;
        st->b[i] = (float)(xorshift64(&x) % 1000) / 1000.0f;
    }
    return st;
}

static float dist_sse(const float *a, const float *b, uint64_t dim) {
    __m128 acc0 = _mm_setzero_ps(), acc1 = _mm_setzero_ps();
    for (uint64_t i = 0; i < dim; i += 8) {
        __m128 d0 = _mm_sub_ps(_mm_load_ps(a + i), _mm_load_ps(b + i));
        __m128 d1 = _mm_sub_ps(_mm_load_ps(a + i + 4), _mm_load_ps(b + i + 4));
        acc0 = _mm_add_ps(acc0, _mm_mul_ps(d0, d0));
        acc1 = _mm_add_ps(acc1, _mm_mul_ps(d1, d1));
    }
    float out[4];
    _mm_storeu_ps(out, _mm_add_ps(acc0, acc1));
    return out[0] + out[1] + out[2] + out[3];
}

__attribute__((target("avx2,fma")))
static float dist_avx2(const float *a, const float *b, uint64_t dim) {
    __m256 acc = _mm256_setzero_ps();
    for (uint64_t i = 0; i < dim; i += 8) {
        __m256 d = _mm256_sub_ps(_mm256_load_ps(a + i), _mm256_load_ps(b + i));
        acc = _mm256_fmadd_ps(d, d, acc);
    }
    float out[8];
    _mm256_storeu_ps(out, acc);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

static uint64_t dist_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    (void)s;
    struct dist_state *st = ts;
    float acc = 0;
    for (uint64_t u = 0; u < units; u++) {
        uint64_t off = st->next * st->dim;
        acc += st->bits == 256 ? dist_avx2(st->a + off, st->b + off, st->dim)
                               : dist_sse(st->a + off, st->b + off, st->dim);
        st->next = (st->next + 1) % st->nvec;
    }
    st->sink += acc;
    *bytes += units * st->dim * 2 * sizeof(float);
    return units;
}

static void dist_thread_teardown(struct stressor *s, void *ts) {
    (void)s;
    struct dist_state *st = ts;
    free(st->a); free(st->b); free(st);
}

const struct kernel_ops kernel_simd_dist = {
    .name = "simd_dist", .setup = dist_setup, .thread_setup = dist_thread_setup,
    .step = dist_step, .thread_teardown = dist_thread_teardown,
};

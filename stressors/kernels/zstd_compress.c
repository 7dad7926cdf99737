/* zstd_compress: libzstd compression of semi-compressible blocks (a real codec: entropy
 * coding, match finding, hash tables). One unit = one block; one op = one block. */
#include "../stressor.h"
#include <stdio.h>
#include <stdlib.h>
#include <zstd.h>

struct zstd_state { ZSTD_CCtx *cctx; uint8_t *src, *dst; uint64_t block, nblocks, next, dst_cap; int level; };

static void *zstd_thread_setup(struct stressor *s, int thread, char *err) {
    struct zstd_state *st = calloc(1, sizeof *st);
    uint64_t level;
    if (param_u64(s, "block_bytes", 16384, &st->block, err) || param_u64(s, "level", 3, &level, err)) {
        free(st);
        return NULL;
    }
    st->level = (int)level;
    st->nblocks = 16;
    st->src = malloc(st->block * st->nblocks);
    st->dst_cap = ZSTD_compressBound(st->block);
    st->dst = malloc(st->dst_cap);
    st->cctx = ZSTD_createCCtx();
    if (!st->cctx) { snprintf(err, ERRLEN, "%s: ZSTD_createCCtx failed", s->name); return NULL; }
    /* semi-compressible: words from a small vocabulary with random noise (ratio ~3) */
    uint64_t x = 99 + (uint64_t)thread;
    static const char *words[] = {"window ", "stressor ", "thread ", "plan ", "cache ", "memory ",
                                  "disk ", "network ", "trace ", "metric "};
    uint64_t n = st->block * st->nblocks, i = 0;
    while (i < n) {
        if (xorshift64(&x) % 4 == 0) { st->src[i++] = (uint8_t)xorshift64(&x); continue; }
        const char *w = words[xorshift64(&x) % 10];
        for (; *w && i < n; w++) st->src[i++] = (uint8_t)*w;
    }
    return st;
}

static uint64_t zstd_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    (void)s;
    struct zstd_state *st = ts;
    for (uint64_t u = 0; u < units; u++) {
        ZSTD_compressCCtx(st->cctx, st->dst, st->dst_cap, st->src + st->next * st->block, st->block, st->level);
        st->next = (st->next + 1) % st->nblocks;
    }
    *bytes += units * st->block;
    return units;
}

static void zstd_thread_teardown(struct stressor *s, void *ts) {
    (void)s;
    struct zstd_state *st = ts;
    ZSTD_freeCCtx(st->cctx);
    free(st->src); free(st->dst); free(st);
}

const struct kernel_ops kernel_zstd_compress = {
    .name = "zstd_compress", .thread_setup = zstd_thread_setup, .step = zstd_step,
    .thread_teardown = zstd_thread_teardown,
};

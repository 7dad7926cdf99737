/* random_access: random 64-bit read-modify-writes over one big buffer shared by all
 * threads (GUPS-like). Races between threads are harmless
 * by design (the data is noise). The buffer uses transparent huge pages (see
 * alloc_touched), so this is DRAM-latency rather than TLB bound. One unit = 64 updates; one op = one update;
 * bytes = 64 per update (each touches one cache line). */
#include "../stressor.h"
#include <stdio.h>
#include <stdlib.h>

struct ra_shared { uint64_t *buf; uint64_t bytes, words; };
struct ra_state { uint64_t x; };

static int ra_setup(struct stressor *s, char *err) {
    if (!param_bool(s, "shared", 1)) {
        snprintf(err, ERRLEN, "%s: shared=false is not implemented by kernel %s (its buffer is shared)", s->name, s->kernel);
        return -1;
    }
    struct ra_shared *sh = calloc(1, sizeof *sh);
    if (param_u64(s, "working_set_bytes", 1ull << 30, &sh->bytes, err)) { free(sh); return -1; }
    sh->words = sh->bytes / 8;
    sh->buf = alloc_touched(sh->bytes, err);
    if (!sh->buf) { free(sh); return -1; }
    s->shared = sh;
    return 0;
}

static void *ra_thread_setup(struct stressor *s, int thread, char *err) {
    (void)s; (void)err;
    struct ra_state *st = calloc(1, sizeof *st);
    st->x = 0x2545F4914F6CDD1Dull + (uint64_t)thread * 0x9E3779B97F4A7C15ull;
    return st;
}

static uint64_t ra_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    struct ra_shared *sh = s->shared;
    struct ra_state *st = ts;
    uint64_t *buf = sh->buf, words = sh->words, x = st->x;
    for (uint64_t u = 0; u < units * 64; u++) {
        uint64_t r = xorshift64(&x);
        buf[r % words] ^= r;
    }
    st->x = x;
    *bytes += units * 64 * 64;
    return units * 64;
}

static void ra_thread_teardown(struct stressor *s, void *ts) { (void)s; free(ts); }

static void ra_teardown(struct stressor *s) {
    struct ra_shared *sh = s->shared;
    if (!sh) return;
    free_touched(sh->buf, sh->bytes);
    free(sh);
}

const struct kernel_ops kernel_random_access = {
    .name = "random_access", .setup = ra_setup, .thread_setup = ra_thread_setup, .step = ra_step,
    .thread_teardown = ra_thread_teardown, .teardown = ra_teardown,
};

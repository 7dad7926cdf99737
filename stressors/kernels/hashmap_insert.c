/* hashmap_insert: inserts of random keys into one open-addressing (linear probing) hash
 * table with a large footprint, shared by all threads (compare-and-swap per slot).
 * When the table reaches 70 % load it is emptied in O(1) by bumping an epoch stored in
 * every slot, so the footprint stays fixed and no window pays for a big memset.
 * One unit = 32 inserts; one op = one insert; bytes = 64 per probed cache line. */
#include "../stressor.h"
#include <stdio.h>
#include <stdlib.h>

#define EPOCH_SHIFT 48
#define KEY_MASK ((1ull << EPOCH_SHIFT) - 1)
struct hm_shared { uint64_t *slots; uint64_t bytes, nslots; uint64_t epoch, inserted; };
struct hm_state { uint64_t x; };

static int hm_setup(struct stressor *s, char *err) {
    if (!param_bool(s, "shared", 1)) {
        snprintf(err, ERRLEN, "%s: shared=false is not implemented by kernel %s (its buffer is shared)", s->name, s->kernel);
        return -1;
    }
    struct hm_shared *sh = calloc(1, sizeof *sh);
    if (param_u64(s, "table_bytes", 512ull << 20, &sh->bytes, err)) { free(sh); return -1; }
    sh->nslots = sh->bytes / 8;
    sh->slots = alloc_touched(sh->bytes, err);   /* zero = epoch 0 = empty */
    if (!sh->slots) { free(sh); return -1; }
    sh->epoch = 1;
    s->shared = sh;
    return 0;
}

static void *hm_thread_setup(struct stressor *s, int thread, char *err) {
    (void)s; (void)err;
    struct hm_state *st = calloc(1, sizeof *st);
    st->x = 0xABCDEF12345ull + (uint64_t)thread * 0x9E3779B97F4A7C15ull;
    return st;
}

static uint64_t hm_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    struct hm_shared *sh = s->shared;
    struct hm_state *st = ts;
    uint64_t lines = 0, n = units * 32;
    uint64_t epoch = __atomic_load_n(&sh->epoch, __ATOMIC_RELAXED);
    for (uint64_t u = 0; u < n; u++) {
        uint64_t key = (xorshift64(&st->x) & KEY_MASK) | 1;
        uint64_t h = (key * 0x9E3779B97F4A7C15ull) % sh->nslots;
        uint64_t want = (epoch << EPOCH_SHIFT) | key;
        for (uint64_t probe = 0; probe < 64; probe++) {
            uint64_t *slot = &sh->slots[(h + probe) % sh->nslots];
            if (probe % 8 == 0) lines++;
            uint64_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
            if ((cur >> EPOCH_SHIFT) == (epoch & 0xFFFF) && cur != 0) {
                if ((cur & KEY_MASK) == key) break;     /* already present */
                continue;
            }
            if (__atomic_compare_exchange_n(slot, &cur, want, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) break;
        }
    }
    if (__atomic_add_fetch(&sh->inserted, n, __ATOMIC_RELAXED) > sh->nslots / 10 * 7) {
        uint64_t e = epoch;
        if (__atomic_compare_exchange_n(&sh->epoch, &e, (epoch % 0xFFFF) + 1, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            __atomic_store_n(&sh->inserted, 0, __ATOMIC_RELAXED);
    }
    *bytes += lines * 64;
    return n;
}

static void hm_thread_teardown(struct stressor *s, void *ts) { (void)s; free(ts); }

static void hm_teardown(struct stressor *s) {
    struct hm_shared *sh = s->shared;
    if (!sh) return;
    free_touched(sh->slots, sh->bytes);
    free(sh);
}

const struct kernel_ops kernel_hashmap_insert = {
    .name = "hashmap_insert", .setup = hm_setup, .thread_setup = hm_thread_setup, .step = hm_step,
    .thread_teardown = hm_thread_teardown, .teardown = hm_teardown,
};

/* int_crc32: CRC-32C (Castagnoli), table-driven, over a small per-thread buffer.
 * Integer ALU + L1 loads. One unit = 1 KiB of input; one op = one byte. */
#include "../stressor.h"
#include <stdlib.h>
#include <stdio.h>

static uint32_t table[256];

struct crc_state { uint8_t *buf; uint64_t len, pos; uint32_t crc; };

static int crc_setup(struct stressor *s, char *err) {
    (void)s; (void)err;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
    return 0;
}

static void *crc_thread_setup(struct stressor *s, int thread, char *err) {
    struct crc_state *st = calloc(1, sizeof *st);
    if (param_u64(s, "buffer_bytes", 16384, &st->len, err)) { free(st); return NULL; }
    if (st->len < 1024) st->len = 1024;
    st->len &= ~1023ull;
    st->buf = malloc(st->len);
    uint64_t x = 0x1234567 + (uint64_t)thread;
    for (uint64_t i = 0; i < st->len; i++) st->buf[i] = (uint8_t)xorshift64(&x);
    st->crc = ~0u;
    return st;
}

static uint64_t crc_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    (void)s;
    struct crc_state *st = ts;
    uint32_t c = st->crc;
    for (uint64_t u = 0; u < units; u++) {
        const uint8_t *p = st->buf + st->pos;
        for (int i = 0; i < 1024; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
        st->pos += 1024;
        if (st->pos >= st->len) st->pos = 0;
    }
    st->crc = c;
    *bytes += units * 1024;
    return units * 1024;
}

static void crc_thread_teardown(struct stressor *s, void *ts) {
    (void)s;
    struct crc_state *st = ts;
    free(st->buf);
    free(st);
}

const struct kernel_ops kernel_int_crc32 = {
    .name = "int_crc32", .setup = crc_setup, .thread_setup = crc_thread_setup,
    .step = crc_step, .thread_teardown = crc_thread_teardown,
};

/* fp_poly: double-precision polynomial evaluation by Horner's rule, 8 independent
 * dependent-FMA chains (keeps the FP pipes busy without memory traffic).
 * One unit = one evaluation of all 8 chains; one op = one multiply-add. */
#include "../stressor.h"
#include <stdlib.h>

struct poly_state { double coef[64]; uint64_t terms; double x[8]; double sink; };

static void *poly_thread_setup(struct stressor *s, int thread, char *err) {
    struct poly_state *st = calloc(1, sizeof *st);
    if (param_u64(s, "terms", 16, &st->terms, err)) { free(st); return NULL; }
    if (st->terms < 2) st->terms = 2;
    if (st->terms > 64) st->terms = 64;
    for (uint64_t i = 0; i < st->terms; i++) st->coef[i] = 1.0 / (double)(i + 2);
    for (int j = 0; j < 8; j++) st->x[j] = 0.1 + 0.01 * j + 0.001 * thread;
    return st;
}

static uint64_t poly_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    (void)s; (void)bytes;
    struct poly_state *st = ts;
    double acc[8];
    for (uint64_t u = 0; u < units; u++) {
        for (int j = 0; j < 8; j++) acc[j] = st->coef[0];
        for (uint64_t i = 1; i < st->terms; i++)
            for (int j = 0; j < 8; j++) acc[j] = acc[j] * st->x[j] + st->coef[i];
        /* feed the result back so the compiler cannot hoist the loop out */
        for (int j = 0; j < 8; j++) st->x[j] = 0.5 + acc[j] * 1e-3;
    }
    st->sink += st->x[0];
    return units * 8 * (st->terms - 1);
}

static void poly_thread_teardown(struct stressor *s, void *ts) { (void)s; free(ts); }

const struct kernel_ops kernel_fp_poly = {
    .name = "fp_poly", .thread_setup = poly_thread_setup, .step = poly_step,
    .thread_teardown = poly_thread_teardown,
};

/* page_fault_churn: memory allocation churn as an allocator-heavy service causes it: each
 * unit drops one 4 KiB page of a per-thread region (MADV_DONTNEED, so the kernel frees
 * it) and touches it again, which takes a page fault that allocates and zeroes a fresh
 * page. Huge pages are refused for the region (MADV_NOHUGEPAGE), or one fault would
 * cover 512 pages. Moves minor faults/s, page allocator and zeroing work, and the
 * kernel's share of CPU time. One unit = one page fault; bytes = 4096 per fault. */
#define _GNU_SOURCE
#include "../stressor.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BATCH 16   /* pages dropped per madvise call (one call per page would time the syscall) */

struct pf_state { uint8_t *p; uint64_t pages, next; };

static void *pf_thread_setup(struct stressor *s, int thread, char *err) {
    (void)thread;
    uint64_t region;
    if (param_u64(s, "region_bytes", 4ull << 20, &region, err)) return NULL;
    struct pf_state *st = calloc(1, sizeof *st);
    st->pages = region / 4096 / BATCH * BATCH;
    if (st->pages < BATCH) st->pages = BATCH;
    st->p = mmap(NULL, st->pages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (st->p == MAP_FAILED) {
        snprintf(err, ERRLEN, "%s: cannot map %llu KiB: %s", s->name, (unsigned long long)(st->pages * 4), strerror(errno));
        free(st);
        return NULL;
    }
    madvise(st->p, st->pages * 4096, MADV_NOHUGEPAGE);
    for (uint64_t i = 0; i < st->pages; i++) st->p[i * 4096] = 1;
    return st;
}

static uint64_t pf_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    (void)s; (void)deadline_ns;
    struct pf_state *st = ts;
    uint64_t done = 0;
    while (done < units) {
        uint8_t *b = st->p + st->next * 4096;
        madvise(b, BATCH * 4096, MADV_DONTNEED);
        uint64_t n = units - done < BATCH ? units - done : BATCH;
        /* a write fault: a fresh zeroed page (a read fault would map the shared zero page) */
        for (uint64_t i = 0; i < n; i++) ((volatile uint8_t *)b)[i * 4096] = (uint8_t)i;
        done += n;
        st->next += BATCH;
        if (st->next >= st->pages) st->next = 0;
    }
    *bytes += done * 4096;
    return done;
}

static void pf_thread_resident(struct stressor *s, void *ts, int resident) {
    (void)s;
    struct pf_state *st = ts;
    if (!resident) {
        madvise(st->p, st->pages * 4096, MADV_DONTNEED);
        return;
    }
    for (uint64_t i = 0; i < st->pages; i++) st->p[i * 4096] = 1;
}

static void pf_thread_teardown(struct stressor *s, void *ts) {
    (void)s;
    struct pf_state *st = ts;
    munmap(st->p, st->pages * 4096);
    free(st);
}

const struct kernel_ops kernel_page_fault_churn = {
    .name = "page_fault_churn", .thread_setup = pf_thread_setup, .step = pf_step,
    .thread_teardown = pf_thread_teardown, .thread_resident = pf_thread_resident,
};

/* State shared by the file-based disk kernels. The read kernels (seq read, random read,
 * readahead) share one filled, unlinked data file, each through its own descriptor
 * (O_DIRECT or buffered); the write kernels get a file of their own. */
#ifndef MIMESYS_DISK_IO_H
#define MIMESYS_DISK_IO_H
#include "stressor.h"

struct disk_shared {
    int fd;
    uint64_t file_bytes, io_bytes;
    uint64_t ahead_bytes;  /* readahead: how far ahead of the reader readahead(2) keeps the window */
    int direct, shares_data_file;
};
/* Running estimate of an operation's cost, as TCP estimates its retransmission timeout:
 * a moving mean plus four moving mean deviations, so an operation started only when
 * op_cost_bound() fits before a deadline rarely runs past it. */
struct op_cost { double mean_ns, dev_ns; };
static inline void op_cost_add(struct op_cost *c, uint64_t ns) {
    double x = (double)ns;
    if (c->mean_ns <= 0) { c->mean_ns = x; c->dev_ns = x / 2; return; }
    double d = x > c->mean_ns ? x - c->mean_ns : c->mean_ns - x;
    c->dev_ns = 0.75 * c->dev_ns + 0.25 * d;
    c->mean_ns = 0.875 * c->mean_ns + 0.125 * x;
}
static inline uint64_t op_cost_bound(const struct op_cost *c) { return (uint64_t)(c->mean_ns + 4 * c->dev_ns); }
/* whether an operation started at t is expected to end by deadline_ns (always, before the
 * first one is measured) */
static inline int op_cost_fits(const struct op_cost *c, uint64_t t, uint64_t deadline_ns) {
    return c->mean_ns <= 0 || t + op_cost_bound(c) <= deadline_ns;
}

struct disk_state {
    uint8_t *buf;
    uint64_t pos, lo, hi, x;
    uint64_t since_sync;   /* seq write: bytes written since the last fdatasync */
    uint64_t mark;         /* seq write: start of the synced range not punched yet;
                              readahead: end of the range already read ahead */
    int wrapped;           /* seq write: pos wrapped to lo since the last punch */
    struct op_cost slow;   /* cost of the operation that cannot be cut (a sync, an fallocate cycle) */
    struct op_cost io;     /* synchronous read kernels: one read's cost, so none starts past the deadline */
};

/* fill = 1: read kernels, use (and grow if needed) the shared data file; fill = 0: a sparse
 * file of the variant's own. O_DIRECT when the `direct` parameter asks and the FS allows. */
int disk_setup_file(struct stressor *s, int fill, uint64_t dflt_io, char *err);
void *disk_thread_setup_range(struct stressor *s, int thread, char *err);
void disk_thread_teardown(struct stressor *s, void *ts);
/* kernel_ops.thread_resident: the thread's IO buffer */
void disk_thread_resident(struct stressor *s, void *ts, int resident);
void disk_teardown(struct stressor *s);
uint64_t disk_scratch_bytes(const struct stressor *s);
#endif

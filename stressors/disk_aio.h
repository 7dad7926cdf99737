/* Asynchronous O_DIRECT IO for the queue-depth disk kernels (not a kernel itself): an
 * io_uring driven through its raw system calls (no liburing needed at build time), with
 * a synchronous fallback when the host refuses io_uring (old kernel, io_uring_disabled,
 * seccomp): one IO at a time, reported as a runner `note`. */
#ifndef MIMESYS_DISK_AIO_H
#define MIMESYS_DISK_AIO_H
#include "disk_io.h"

#define MAX_SUBMITTERS 8     /* param `threads`: synchronous submitters per plan thread */

struct aio_shared {
    int fd;                 /* the scratch file, O_DIRECT where the filesystem allows */
    uint64_t file_bytes, io_bytes, depth;
    uint64_t submitters;    /* param `threads` >= 2: that many synchronous submitters per plan
                               thread (the worker and helpers on its CPU) instead of a ring */
    int write, random, direct, uring;
};

struct aio_ring;            /* opaque: disk_aio.c */
struct sync_pool;           /* opaque: disk_aio.c */

struct aio_state {
    struct aio_ring *ring;  /* NULL: synchronous (the fallback, or the submitters' mode) */
    struct sync_pool *pool; /* the helper submitters (param `threads`), or NULL */
    uint8_t *bufs;          /* depth * io_bytes, 4 KiB aligned */
    uint64_t *slot_off;     /* offset of the IO in flight in each slot */
    uint32_t *free_slots, nfree;
    uint64_t inflight, pos, lo, hi, x;
    struct op_cost lat;     /* one IO's latency, submission to completion (mean + deviation) */
    uint64_t seg_deadline, seg_start;   /* the segment being run: IOs left in flight by an earlier
                                           one are reaped without a latency sample */
    uint64_t seg_submitted;             /* IOs submitted in it */
};

/* setup(): a scratch file of file_bytes filled with data (so writes are overwrites of
 * allocated blocks and reads come from the device), O_DIRECT when `direct` asks. */
int aio_setup(struct stressor *s, int write, char *err);
void *aio_thread_setup(struct stressor *s, int thread, char *err);
/* One unit = one IO completed; bytes = bytes completed. */
uint64_t aio_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes);
/* bytes of the IOs in flight (kernel_ops.pending_bytes) */
uint64_t aio_pending_bytes(const struct stressor *s, void *ts);
void aio_thread_teardown(struct stressor *s, void *ts);
/* kernel_ops.thread_resident: the IO buffers of the queue and of the helper submitters */
void aio_thread_resident(struct stressor *s, void *ts, int resident);
/* CPU time of the helper submitters (kernel_ops.helper_cpu_ns) */
uint64_t aio_helper_cpu_ns(void *ts);
void aio_teardown(struct stressor *s);
uint64_t aio_scratch_bytes(const struct stressor *s);
#endif

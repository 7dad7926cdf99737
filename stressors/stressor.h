/* The interface between mimesys-runner and its stressor kernels.
 *
 * A kernel (one file in kernels/) does one kind of work; a catalog variant is a kernel
 * plus fixed parameters (stressors/catalog.toml, passed to the runner inside the compiled
 * schedule as "key=value" lines). The runner calls, for every variant the schedule uses
 * (and only those, so a plan that never runs mem_random_1G never allocates its 1 GiB):
 *
 *   setup()          once, before t0, in the main thread: shared state (big buffers
 *                    shared by all threads, scratch files);
 *   thread_setup()   once per worker thread that uses it, before t0, on that thread's CPU;
 *   step(units, deadline_ns)
 *                    many times: do `units` units of work and return the operations done,
 *                    adding the bytes moved to *bytes. The runner sizes `units` so that one
 *                    step takes about 50 us (and never much more than the time left in the
 *                    segment), which is what lets it stop at a deadline. A kernel whose
 *                    operations differ widely in cost (a 60 us write, a 2 ms fdatasync) must
 *                    not start a long one that cannot end by deadline_ns (CLOCK_MONOTONIC):
 *                    it returns STEP_WAIT instead (once it has reported the work it did),
 *                    and the runner waits out the rest of the segment: a system call
 *                    cannot be cut at the deadline, a wait can. A step whose operations
 *                    all failed (EAGAIN on a full socket) returns 0 and is called again;
 *   thread_teardown(), teardown()  at exit (also on SIGTERM).
 */
#ifndef MIMESYS_STRESSOR_H
#define MIMESYS_STRESSOR_H

#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#define ERRLEN 512

struct runner_env {
    const char *scratch_dir;     /* NULL when not given */
    uint64_t scratch_budget;     /* bytes the IO stressors may place under scratch_dir */
    const char *udp_sink_host;   /* "127.0.0.1" */
    int udp_sink_port;           /* 9 (discard) */
    int nthreads;
};

struct stressor {
    int index;                   /* position in the catalog (plan M axis) */
    char name[64];
    char kernel[64];
    char params[512];            /* "key=value\n" lines */
    const struct kernel_ops *ops;
    const struct runner_env *env;
    void *shared;                /* kernel's shared state, from setup() */
    char note[ERRLEN];           /* a fact worth reporting, e.g. "O_DIRECT refused, buffered" */
    uint64_t pace_Bps;           /* params "pace_Bps": the runner holds each segment of this
                                    variant to this many bytes/s per thread (0 = flat out) */
};

/* step(): nothing more fits before deadline_ns; the runner waits for it (see above) */
#define STEP_WAIT UINT64_MAX

struct kernel_ops {
    const char *name;
    int (*setup)(struct stressor *s, char *err);
    void *(*thread_setup)(struct stressor *s, int thread, char *err);
    uint64_t (*step)(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes);
    void (*thread_teardown)(struct stressor *s, void *ts);
    void (*teardown)(struct stressor *s);
    /* scratch bytes this variant will place under scratch_dir (0 for non-IO kernels) */
    uint64_t (*scratch_bytes)(const struct stressor *s);
    /* 1: step() itself starts no operation that cannot end by deadline_ns (it returns
     * STEP_WAIT), so the runner calls it right up to the deadline instead of rounding the
     * segment to whole units of its average cost: an IO kernel's "unit" includes waits for
     * IOs in flight, and rounding to it would cut segments short by milliseconds */
    int watches_deadline;
    /* bytes started by step() and not yet completed (IOs in flight), or NULL when a step
     * finishes what it starts: the pacer of a paced variant counts them as done, so a
     * queue of IOs cannot carry the variant past its pace */
    uint64_t (*pending_bytes)(const struct stressor *s, void *ts);
    /* 1: variants of this kernel with the same `file_bytes` share one scratch file whatever
     * their other parameters (disk_aio.c), so the scratch budget counts it once */
    int file_by_size;
    /* CPU time (ns) the kernel's helper threads for this worker have used so far, or NULL
     * when it runs none: helpers share the worker's CPU, so the runner counts their time as
     * the worker's (a futex ping-pong keeps its core busy with two threads, each at half) */
    uint64_t (*helper_cpu_ns)(void *ts);
    /* Release (resident = 0) or touch back (1) the thread's bulk buffers (IO buffers, a churned
     * region), keeping every other part of its state (positions, latencies, rings, helpers).
     * The runner releases them at the start of each window the thread does not run the
     * stressor in, so they are held only in the windows that use them, as
     * mimesys/catalog.buffer_of accounts them; NULL: held from setup to the end. IOs in flight
     * keep their pages pinned until they complete, so a release never races the device. */
    void (*thread_resident)(struct stressor *s, void *ts, int resident);
};

/* Set by the runner before each step of a paced variant (pace_Bps > 0): the bytes that
 * step may have started and not completed (its own pending_bytes included) before it must
 * stop starting work; a step may always start one more operation than that, so it never
 * stalls. UINT64_MAX for unpaced variants. Per worker thread. */
extern __thread uint64_t step_pace_allow;

/* kernels.c: the one place that lists every kernel by name */
const struct kernel_ops *find_kernel(const char *name);
void list_kernels(void (*fn)(const char *name));

/* common.c helpers */
/* Integer parameter; accepts plain integers and host cache names "l1d", "l2", "llc",
 * optionally followed by "/N" or "*N" (read from /sys/devices/system/cpu/cpu0/cache). */
int param_u64(const struct stressor *s, const char *key, uint64_t dflt, uint64_t *out, char *err);
int param_bool(const struct stressor *s, const char *key, int dflt);
uint64_t cache_bytes(const char *which);   /* "l1d", "l2", "llc"; 0 if unknown */
void *alloc_touched(size_t bytes, char *err);  /* mmap + touch every page (so RSS shows it) */
void free_touched(void *p, size_t bytes);
/* kernel_ops.thread_resident for one buffer: MADV_DONTNEED its whole pages (0), or fill it
 * with `fill` again (1), which faults them back in */
void buffer_resident(void *p, size_t bytes, int resident, int fill);
/* Create a scratch file of `bytes` under env->scratch_dir and unlink it at once, so it
 * disappears with the process whatever way the process ends (SIGKILL included).
 * fill: 0 = leave sparse, 1 = write real data, fsync and drop it from the page cache.
 * want_direct: try to switch the fd to O_DIRECT; *direct_ok says whether the filesystem
 * accepted (if not, err holds the reason and the fd stays buffered). Returns fd or -1. */
/* Write pseudo-random data to [from, to) of fd, fsync, drop it from the page cache. */
int fill_range(int fd, uint64_t from, uint64_t to, char *err);
int scratch_file(const struct stressor *s, uint64_t bytes, int fill, int want_direct, int *direct_ok,
                 char *err);
static inline uint64_t xorshift64(uint64_t *x) {
    uint64_t v = *x;
    v ^= v << 13; v ^= v >> 7; v ^= v << 17;
    return *x = v;
}
uint64_t now_ns(void);
uint64_t thread_cpu_of(pthread_t t);   /* CPU time of another thread of this process (ns) */

#endif

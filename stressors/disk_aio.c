/* Asynchronous O_DIRECT IO for the queue-depth disk kernels (disk_aio.h). */
#define _GNU_SOURCE
#include "disk_aio.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

struct aio_ring {
    int fd;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
    void *sq_map, *cq_map;
    size_t sq_len, cq_len, sqes_len;
    uint64_t *submit_ns;    /* per slot: when its IO was submitted */
    int bounded_wait;       /* the kernel takes a timeout on io_uring_enter (IORING_FEAT_EXT_ARG) */
};

static int ring_open(struct aio_ring *r, unsigned entries, char *why) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    r->fd = (int)syscall(__NR_io_uring_setup, entries, &p);
    if (r->fd < 0) { snprintf(why, ERRLEN, "io_uring_setup: %s", strerror(errno)); return -1; }
    r->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    r->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
    r->sq_map = mmap(NULL, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    r->cq_map = mmap(NULL, r->cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
    r->sqes = mmap(NULL, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (r->sq_map == MAP_FAILED || r->cq_map == MAP_FAILED || r->sqes == MAP_FAILED) {
        snprintf(why, ERRLEN, "io_uring mmap: %s", strerror(errno));
        close(r->fd);
        return -1;
    }
    char *sq = r->sq_map, *cq = r->cq_map;
    r->sq_head = (unsigned *)(sq + p.sq_off.head); r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask); r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head); r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    r->bounded_wait = (p.features & IORING_FEAT_EXT_ARG) != 0;
    return 0;
}

/* Submit nsub and wait for `want` completions, but not past `until` (CLOCK_MONOTONIC):
 * a device that stalls (this VM's virtio disk has held IOs for half a second) must not hold
 * the worker, and every segment after this one on its thread, past the segment's end. What
 * is still in flight then completes on the device and is reaped by this stressor's next
 * step on the thread (or at teardown). Without the feature, an unbounded wait. */
static int ring_enter_until(struct aio_ring *r, unsigned nsub, unsigned want, uint64_t until) {
    if (!r->bounded_wait)
        return (int)syscall(__NR_io_uring_enter, r->fd, nsub, want, IORING_ENTER_GETEVENTS, NULL, 0);
    uint64_t t = now_ns(), left = until > t ? until - t : 0;
    struct __kernel_timespec ts = {.tv_sec = (long long)(left / 1000000000ull), .tv_nsec = (long long)(left % 1000000000ull)};
    struct io_uring_getevents_arg arg = {.sigmask = 0, .sigmask_sz = 0, .ts = (uint64_t)(uintptr_t)&ts};
    return (int)syscall(__NR_io_uring_enter, r->fd, nsub, want, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
                        &arg, sizeof arg);
}

static void ring_close(struct aio_ring *r) {
    munmap(r->sqes, r->sqes_len); munmap(r->cq_map, r->cq_len); munmap(r->sq_map, r->sq_len);
    close(r->fd);
}

/* Variants with the same file (a paced variant and its base: same kernel, same params)
 * share one scratch file, so its bytes count once against the budget (runner.c dedups
 * them the same way). */
static struct shared_file { int write; uint64_t bytes; int fd, direct, refs; char note[ERRLEN]; } files[16];

static int file_for(struct stressor *s, int write, uint64_t bytes, int want_direct, int *direct, char *err) {
    for (int i = 0; i < 16; i++)
        if (files[i].refs && files[i].write == write && files[i].bytes == bytes) {
            files[i].refs++;
            *direct = files[i].direct;
            return files[i].fd;
        }
    for (int i = 0; i < 16; i++)
        if (!files[i].refs) {
            int fd = scratch_file(s, bytes, 1, want_direct, direct, err);
            if (fd < 0) return -1;
            files[i] = (struct shared_file){.write = write, .bytes = bytes, .fd = fd, .direct = *direct, .refs = 1};
            return fd;
        }
    snprintf(err, ERRLEN, "%s: more than 16 queue-depth scratch files", s->name);
    return -1;
}

static void file_release(int fd) {
    for (int i = 0; i < 16; i++)
        if (files[i].refs && files[i].fd == fd && --files[i].refs == 0) close(fd);
}

int aio_setup(struct stressor *s, int write, char *err) {
    struct aio_shared *sh = calloc(1, sizeof *sh);
    if (param_u64(s, "file_bytes", 64ull << 20, &sh->file_bytes, err) ||
        param_u64(s, "io_bytes", 4096, &sh->io_bytes, err) ||
        param_u64(s, "depth", 1, &sh->depth, err) ||
        param_u64(s, "threads", 0, &sh->submitters, err)) { free(sh); return -1; }
    if (sh->submitters == 1) sh->submitters = 0;
    if (sh->submitters > MAX_SUBMITTERS) {
        snprintf(err, ERRLEN, "%s: threads=%llu above %d", s->name, (unsigned long long)sh->submitters, MAX_SUBMITTERS);
        free(sh);
        return -1;
    }
    if (sh->submitters) sh->depth = sh->submitters;   /* one IO in flight per submitter */
    if (sh->io_bytes < 4096) sh->io_bytes = 4096;
    sh->io_bytes &= ~4095ull;
    if (sh->depth < 1) sh->depth = 1;
    if (sh->depth > 256) { snprintf(err, ERRLEN, "%s: depth=%llu above 256", s->name, (unsigned long long)sh->depth); free(sh); return -1; }
    sh->file_bytes = sh->file_bytes / sh->io_bytes * sh->io_bytes;
    sh->write = write;
    sh->random = param_bool(s, "random", 0);
    int ok = 0;
    char why[ERRLEN] = "";
    sh->fd = file_for(s, write, sh->file_bytes, param_bool(s, "direct", 1), &ok, why);
    if (sh->fd < 0) { snprintf(err, ERRLEN, "%s", why); free(sh); return -1; }
    sh->direct = ok;
    if (!ok)
        snprintf(s->note, ERRLEN, "O_DIRECT refused by the filesystem under %s (%s): buffered IO with "
                 "posix_fadvise(DONTNEED) after each IO instead", s->env->scratch_dir, why);
    if (sh->depth > 1 && !sh->submitters) {
        /* probe io_uring once here, where a note can still be reported before t0 */
        struct aio_ring r;
        if (ring_open(&r, 1, why) == 0) {
            ring_close(&r);
            sh->uring = 1;
        } else {
            size_t n = strlen(s->note);
            snprintf(s->note + n, ERRLEN - n, "%squeue depth %llu not available (%s): synchronous IO, one at a time",
                     n ? "; " : "", (unsigned long long)sh->depth, why);
        }
    }
    s->shared = sh;
    return 0;
}

/* one synchronous IO of io_bytes at off; buffered (no O_DIRECT): pushed out and dropped */
static ssize_t one_io(const struct aio_shared *sh, uint8_t *buf, uint64_t off) {
    ssize_t n = sh->write ? pwrite(sh->fd, buf, sh->io_bytes, (off_t)off) : pread(sh->fd, buf, sh->io_bytes, (off_t)off);
    if (n > 0 && !sh->direct) {
        if (sh->write) sync_file_range(sh->fd, (off_t)off, n, SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
        posix_fadvise(sh->fd, (off_t)off, n, POSIX_FADV_DONTNEED);
    }
    return n;
}

/* ---- several synchronous submitters (param `threads` = N >= 2): the worker and N - 1 helper
 * threads on its CPU each keep one IO in flight with plain pread/pwrite, each in its own part
 * of the thread's slice. On this VM's virtio disk four such submitters (two per CPU) wrote
 * 3.4-3.5 GB/s in three quiet calibrations where io_uring at depth 4 or 16 made 2.2-3.0: the
 * host takes parallel synchronous requests better than one ring's. Helpers sleep outside
 * the worker's segments, start no IO their cost bound says would end past the segment's
 * deadline, and their counts reach the worker's next step. */
struct sync_sub {
    pthread_t tid;
    struct sync_pool *pool;
    uint8_t *buf;
    uint64_t pos, lo, hi;
    struct op_cost lat;
    uint32_t done_gen;       /* the last segment it finished (atomic) */
};

struct sync_pool {
    struct aio_shared *sh;
    uint32_t gen;            /* futex word: bumped to start the helpers on a segment */
    uint64_t until;          /* that segment's deadline */
    int quit, n;             /* n helpers */
    uint64_t ops, bytes;     /* completed by helpers, not collected yet (atomic) */
    struct sync_sub sub[MAX_SUBMITTERS];
};

static void pool_futex_wait(uint32_t *w, uint32_t val) { syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0); }
static void pool_futex_wake(uint32_t *w) { syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0); }

static void *sync_helper(void *arg) {
    struct sync_sub *sub = arg;
    struct sync_pool *p = sub->pool;
    const struct aio_shared *sh = p->sh;
    uint32_t seen = 0;
    for (;;) {
        uint32_t g;
        while ((g = __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE)) == seen && !__atomic_load_n(&p->quit, __ATOMIC_RELAXED))
            pool_futex_wait(&p->gen, seen);
        if (__atomic_load_n(&p->quit, __ATOMIC_RELAXED)) return NULL;
        seen = g;
        uint64_t until = __atomic_load_n(&p->until, __ATOMIC_RELAXED);
        for (;;) {
            uint64_t t = now_ns();
            if (t >= until || !op_cost_fits(&sub->lat, t, until) || __atomic_load_n(&p->quit, __ATOMIC_RELAXED)) break;
            uint64_t off = sub->pos;
            sub->pos = sub->pos + sh->io_bytes >= sub->hi ? sub->lo : sub->pos + sh->io_bytes;
            ssize_t n = one_io(sh, sub->buf, off);
            op_cost_add(&sub->lat, now_ns() - t);
            if (n > 0) {
                __atomic_add_fetch(&p->bytes, (uint64_t)n, __ATOMIC_RELAXED);
                __atomic_add_fetch(&p->ops, 1, __ATOMIC_RELAXED);
            }
        }
        __atomic_store_n(&sub->done_gen, g, __ATOMIC_RELEASE);
    }
}

static void pool_stop(struct sync_pool *p) {
    __atomic_store_n(&p->quit, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&p->gen, 1, __ATOMIC_RELEASE);
    pool_futex_wake(&p->gen);
    for (int i = 0; i < p->n; i++) {
        pthread_join(p->sub[i].tid, NULL);
        free(p->sub[i].buf);
    }
    free(p);
}

/* the helpers' part of the thread's slice [lo, hi): the worker keeps the first of n + 1 parts */
static struct sync_pool *pool_start(struct stressor *s, struct aio_state *st, char *err) {
    struct aio_shared *sh = s->shared;
    struct sync_pool *p = calloc(1, sizeof *p);
    p->sh = sh;
    uint64_t ios = (st->hi - st->lo) / sh->io_bytes, parts = sh->submitters, per = ios / parts ? ios / parts : 1;
    for (uint64_t i = 1; i < parts; i++) {
        struct sync_sub *sub = &p->sub[p->n];
        sub->pool = p;
        sub->lo = st->lo + ((i * per) % (ios ? ios : 1)) * sh->io_bytes;
        sub->hi = sub->lo + per * sh->io_bytes > st->hi ? st->hi : sub->lo + per * sh->io_bytes;
        sub->pos = sub->lo;
        if (posix_memalign((void **)&sub->buf, 4096, sh->io_bytes)) {
            snprintf(err, ERRLEN, "%s: cannot allocate a helper's IO buffer", s->name);
            pool_stop(p);
            return NULL;
        }
        memset(sub->buf, 0x5A, sh->io_bytes);
        /* created from the pinned worker: same CPU, same nice, signals blocked */
        if (pthread_create(&sub->tid, NULL, sync_helper, sub)) {
            snprintf(err, ERRLEN, "%s: cannot create a helper thread: %s", s->name, strerror(errno));
            free(sub->buf);
            pool_stop(p);
            return NULL;
        }
        p->n++;
    }
    st->hi = st->lo + per * sh->io_bytes > st->hi ? st->hi : st->lo + per * sh->io_bytes;   /* the worker's part */
    return p;
}

static void pool_collect(struct sync_pool *p, uint64_t *ops, uint64_t *bytes) {
    *ops += __atomic_exchange_n(&p->ops, 0, __ATOMIC_RELAXED);
    *bytes += __atomic_exchange_n(&p->bytes, 0, __ATOMIC_RELAXED);
}

uint64_t aio_helper_cpu_ns(void *ts) {
    struct sync_pool *p = ((struct aio_state *)ts)->pool;
    uint64_t ns = 0;
    for (int i = 0; p && i < p->n; i++) ns += thread_cpu_of(p->sub[i].tid);
    return ns;
}

void *aio_thread_setup(struct stressor *s, int thread, char *err) {
    struct aio_shared *sh = s->shared;
    struct aio_state *st = calloc(1, sizeof *st);
    if (posix_memalign((void **)&st->bufs, 4096, sh->depth * sh->io_bytes)) {
        snprintf(err, ERRLEN, "%s: cannot allocate %llu IO buffers", s->name, (unsigned long long)sh->depth);
        free(st);
        return NULL;
    }
    memset(st->bufs, 0x5A, sh->depth * sh->io_bytes);
    st->slot_off = calloc(sh->depth, sizeof *st->slot_off);
    st->free_slots = calloc(sh->depth, sizeof *st->free_slots);
    for (uint32_t i = 0; i < sh->depth; i++) st->free_slots[st->nfree++] = (uint32_t)(sh->depth - 1 - i);
    /* each thread owns a slice, so concurrent sequential streams stay sequential */
    uint64_t ios = sh->file_bytes / sh->io_bytes, n = (uint64_t)s->env->nthreads, per = ios / n ? ios / n : 1;
    st->lo = ((uint64_t)thread % n) * per * sh->io_bytes;
    st->hi = st->lo + per * sh->io_bytes > sh->file_bytes ? sh->file_bytes : st->lo + per * sh->io_bytes;
    st->pos = st->lo;
    st->x = 0xA5F1523D09ull + (uint64_t)thread;
    if (sh->submitters) {
        st->pool = pool_start(s, st, err);
        if (!st->pool) { free(st->bufs); free(st->slot_off); free(st->free_slots); free(st); return NULL; }
        st->pos = st->lo;
    }
    if (sh->uring) {
        struct aio_ring *r = calloc(1, sizeof *r);
        char why[ERRLEN];
        unsigned entries = 1;
        while (entries < sh->depth) entries <<= 1;
        if (ring_open(r, entries, why)) {
            snprintf(err, ERRLEN, "%s: thread %d: io_uring: %s", s->name, thread, why);
            free(r);
            return NULL;
        } else {
            r->submit_ns = calloc(sh->depth, sizeof *r->submit_ns);
            st->ring = r;
        }
    }
    return st;
}

static uint64_t next_off(struct aio_shared *sh, struct aio_state *st) {
    if (sh->random) return (xorshift64(&st->x) % (sh->file_bytes / sh->io_bytes)) * sh->io_bytes;
    uint64_t off = st->pos;
    st->pos += sh->io_bytes;
    if (st->pos >= st->hi) st->pos = st->lo;
    return off;
}

static void lat_add(struct aio_state *st, uint64_t ns) { op_cost_add(&st->lat, ns); }

/* an IO submitted at t is expected to complete by the deadline (cautious bound, as TCP's RTO) */
static int fits(const struct aio_state *st, uint64_t t, uint64_t deadline_ns) {
    return op_cost_fits(&st->lat, t, deadline_ns);
}

static uint64_t sync_step(struct aio_shared *sh, struct aio_state *st, uint64_t units, uint64_t deadline_ns,
                          uint64_t *bytes) {
    uint64_t ops = 0;
    for (uint64_t u = 0; u < units; u++) {
        uint64_t t = now_ns();
        if (!fits(st, t, deadline_ns)) return ops ? ops : STEP_WAIT;
        if (u && u * sh->io_bytes > step_pace_allow) break;   /* paced: the runner waits */
        ssize_t n = one_io(sh, st->bufs, next_off(sh, st));
        lat_add(st, now_ns() - t);
        if (n > 0) {
            *bytes += (uint64_t)n;
            ops++;
        }
    }
    return ops;
}

/* The submitters' mode: a new segment wakes the helpers up to its deadline; the worker does
 * its own IOs as sync_step, and once none fits it waits (up to the deadline) for the
 * helpers to finish theirs, so the segment's counts are its own. */
static uint64_t pool_step(struct aio_shared *sh, struct aio_state *st, uint64_t units, uint64_t deadline_ns,
                          uint64_t *bytes) {
    struct sync_pool *p = st->pool;
    if (__atomic_load_n(&p->until, __ATOMIC_RELAXED) != deadline_ns) {
        __atomic_store_n(&p->until, deadline_ns, __ATOMIC_RELAXED);
        __atomic_add_fetch(&p->gen, 1, __ATOMIC_RELEASE);
        pool_futex_wake(&p->gen);
    }
    uint64_t ops = 0;
    pool_collect(p, &ops, bytes);
    for (uint64_t u = 0; u < units; u++) {
        uint64_t t = now_ns();
        if (!fits(st, t, deadline_ns)) {
            uint32_t g = __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE);
            for (int i = 0; i < p->n; i++)
                while (__atomic_load_n(&p->sub[i].done_gen, __ATOMIC_ACQUIRE) != g && now_ns() < deadline_ns) {
                    struct timespec nap = {0, 50000};
                    nanosleep(&nap, NULL);
                }
            pool_collect(p, &ops, bytes);
            return ops ? ops : STEP_WAIT;
        }
        ssize_t n = one_io(sh, st->bufs, next_off(sh, st));
        lat_add(st, now_ns() - t);
        if (n > 0) {
            *bytes += (uint64_t)n;
            ops++;
        }
    }
    pool_collect(p, &ops, bytes);
    return ops;
}

/* Keep up to `depth` IOs in flight, but submit one only when its expected latency ends
 * before the deadline; once nothing more fits, wait for what is in flight, so a segment
 * leaves (almost) nothing running into the next one — up to the deadline: an IO the device
 * holds past it stays in flight rather than holding the thread (ring_enter_until). */
uint64_t aio_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    struct aio_shared *sh = s->shared;
    struct aio_state *st = ts;
    struct aio_ring *r = st->ring;
    if (st->pool) return pool_step(sh, st, units, deadline_ns, bytes);
    if (!r) return sync_step(sh, st, units, deadline_ns, bytes);
    if (st->seg_deadline != deadline_ns) {
        /* a segment in which nothing fitted: the estimate halves, or one long stall measured
         * would keep the variant idle for the rest of the run (nothing submitted, no new sample) */
        if (st->seg_deadline && !st->seg_submitted) { st->lat.mean_ns /= 2; st->lat.dev_ns /= 2; }
        st->seg_deadline = deadline_ns;
        st->seg_start = now_ns();
        st->seg_submitted = 0;
    }
    uint64_t ops = 0;
    while (ops < units) {
        uint64_t t = now_ns();
        unsigned tail = *r->sq_tail, nsub = 0;
        int room = t < deadline_ns && fits(st, t, deadline_ns);   /* (an empty estimate always fits) */
        /* a paced variant starts an IO only while those in flight are within what the pace
         * allows (plus this one), so a queue cannot run ahead of the pace by its depth */
        while (room && st->nfree && (st->inflight + nsub) * sh->io_bytes <= step_pace_allow) {
            uint32_t slot = st->free_slots[--st->nfree];
            unsigned idx = (tail + nsub) & *r->sq_mask;
            struct io_uring_sqe *sqe = &r->sqes[idx];
            memset(sqe, 0, sizeof *sqe);
            sqe->opcode = sh->write ? IORING_OP_WRITE : IORING_OP_READ;
            sqe->fd = sh->fd;
            sqe->off = st->slot_off[slot] = next_off(sh, st);
            sqe->addr = (uint64_t)(uintptr_t)(st->bufs + (uint64_t)slot * sh->io_bytes);
            sqe->len = (uint32_t)sh->io_bytes;
            sqe->user_data = slot;
            r->sq_array[idx] = idx;
            r->submit_ns[slot] = t;
            nsub++;
        }
        if (nsub) __atomic_store_n(r->sq_tail, tail + nsub, __ATOMIC_RELEASE);
        st->inflight += nsub;
        st->seg_submitted += nsub;
        if (!st->inflight) return ops ? ops : STEP_WAIT;
        /* nothing more fits: drain (all in flight); else wait for one completion */
        unsigned want = room ? 1 : (unsigned)st->inflight;
        if (ring_enter_until(r, nsub, want, deadline_ns) < 0 && errno != EINTR && errno != ETIME) {
            return ops ? ops : STEP_WAIT;   /* the runner waits out the segment */
        }
        unsigned head = *r->cq_head, ctail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
        uint64_t t2 = now_ns();
        for (; head != ctail; head++) {
            struct io_uring_cqe *cqe = &r->cqes[head & *r->cq_mask];
            uint32_t slot = (uint32_t)cqe->user_data;
            /* an IO left in flight by an earlier segment completed while the thread ran other
             * work: its submit-to-reap time is not the device's latency, and a sample of seconds
             * would keep every later IO from fitting in a segment */
            if (r->submit_ns[slot] >= st->seg_start) lat_add(st, t2 - r->submit_ns[slot]);
            if (cqe->res > 0) {
                *bytes += (uint64_t)cqe->res;
                ops++;
                if (!sh->direct) posix_fadvise(sh->fd, (off_t)st->slot_off[slot], cqe->res, POSIX_FADV_DONTNEED);
            }
            st->free_slots[st->nfree++] = slot;
            st->inflight--;
        }
        __atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
        if (!room && (!st->inflight || t2 >= deadline_ns)) break;
    }
    return ops;
}

uint64_t aio_pending_bytes(const struct stressor *s, void *ts) {
    const struct aio_shared *sh = s->shared;
    return ((const struct aio_state *)ts)->inflight * sh->io_bytes;
}

void aio_thread_resident(struct stressor *s, void *ts, int resident) {
    const struct aio_shared *sh = s->shared;
    struct aio_state *st = ts;
    buffer_resident(st->bufs, sh->depth * sh->io_bytes, resident, 0x5A);
    /* the helpers stop at each segment's deadline (pool_step); one's IO still running then
     * keeps its pages pinned until it completes */
    for (int i = 0; st->pool && i < st->pool->n; i++) buffer_resident(st->pool->sub[i].buf, sh->io_bytes, resident, 0x5A);
}

void aio_thread_teardown(struct stressor *s, void *ts) {
    struct aio_state *st = ts;
    if (st->pool) pool_stop(st->pool);
    if (st->ring) {
        /* the buffers belong to IOs still in flight until they complete */
        while (st->inflight) {
            if (syscall(__NR_io_uring_enter, st->ring->fd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0 && errno != EINTR) break;
            unsigned head = *st->ring->cq_head, tail = __atomic_load_n(st->ring->cq_tail, __ATOMIC_ACQUIRE);
            st->inflight -= tail - head;
            __atomic_store_n(st->ring->cq_head, tail, __ATOMIC_RELEASE);
        }
        ring_close(st->ring);
        free(st->ring->submit_ns);
        free(st->ring);
    }
    free(st->bufs); free(st->slot_off); free(st->free_slots); free(st);
    (void)s;
}

void aio_teardown(struct stressor *s) {
    struct aio_shared *sh = s->shared;
    if (!sh) return;
    file_release(sh->fd);   /* unlinked at creation: the last close frees its blocks */
    free(sh);
}

uint64_t aio_scratch_bytes(const struct stressor *s) {
    uint64_t b = 0;
    char err[ERRLEN];
    param_u64(s, "file_bytes", 64ull << 20, &b, err);
    return b;
}

/* Host peak probes (`mimesys-runner --probe`): each resource's capacity measured by code
 * that is NOT a catalog kernel, so a gap in the catalog cannot hide itself (calibration
 * compares the best the catalog reaches with these; agentd/calibrator.py, "reach").
 * Other mechanisms than the kernels' as well as theirs, and the best of all: unpinned threads
 * doing plain synchronous O_DIRECT pread/pwrite (the queue depth is the thread count), Linux
 * native AIO (io_submit) from one thread or from each CPU's thread, and a ring of its own
 * through io_uring from each CPU's thread (the catalog's queue-depth kernels' submission and
 * all-threads shape, added after the catalog's writers went up to 1.8x (bytes) and 3x (IOPS)
 * past a probe without them); glibc memcpy and a streaming-store copy on every CPU rather than the
 * STREAM triad; separate sender and receiver threads as well as the kernel's one-thread shape
 * (with a paired shape alone, the catalog's stream went 3.9x past the probe on a 2-vCPU VM).
 *
 * Output, one line per probe (stdout):  peak METRIC VALUE DETAIL...
 *   disk.write_Bps  sequential 1 or 4 MiB O_DIRECT overwrites, 4, 8, 16 or 32 in flight, by
 *                   threads, by native AIO from one thread, or with that many in flight from
 *                   each of n threads (n = CPUs) by native AIO or io_uring: 32 shapes
 *   disk.read_Bps   sequential 1 or 4 MiB O_DIRECT reads, same shapes
 *   disk.read_iops  random 4 KiB O_DIRECT reads, 32, 64 or 128 in flight (12 shapes)
 *   disk.write_iops random 4 KiB O_DIRECT overwrites, same
 *   mem.bw_Bps      one thread per CPU over 2 x 128 MiB: glibc memcpy, a copy loop, a read sum
 *                   or a streaming-store copy (x86-64), bytes read + written
 *   net.lo_Bps      TCP over 127.0.0.1, payload bytes: 1, n or 2n sender/receiver pairs,
 *                   64 KiB, 256 KiB or 1 MiB sends, or n threads each sending to and draining its
 *                   own connection without blocking (on a small VM the wake-ups between
 *                   paired threads cost more than the copies)
 * Disk and loopback: all shapes run once for half of --probe-seconds (screening), the 4 best run
 * again for --probe-seconds, and the peak is the best of those second runs (CONFIRM below:
 * the best of many short runs on a shared host is mostly its luckiest).
 * After each peak, `shapes METRIC I,J,...` names the shapes run again (their indices in the order
 * this probe generates them on this host). `--probe-shapes "METRIC=I,J,...;METRIC=..."` runs just
 * those for --probe-seconds, without the screening: a calibration probes the host again after
 * each reach run, and which shapes a device likes best does not change between minutes as its
 * figures do (agentd/calibrator.py). A metric left out is screened as usual.
 * A probe that cannot run prints `peak METRIC nan REASON`. With MIMESYS_PROBE_VERBOSE set in
 * the environment every run's figure goes to stderr (`shape|again METRIC VALUE DETAIL`). The
 * disk probes use one unlinked scratch file under --scratch-dir (counted against
 * --scratch-budget). */
#define _GNU_SOURCE
#include "stressor.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#include <string.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <unistd.h>

struct pjob {
    int fd, write, random;
    uint64_t io, lo, hi, deadline, bytes, ops, x;
    uint8_t *buf, *buf2;
    size_t len;
    const char *err;
};

static void *disk_worker(void *arg) {
    struct pjob *j = arg;
    uint64_t pos = j->lo, nios = (j->hi - j->lo) / j->io;
    /* The deadline is checked before every IO: with 32 threads of 4 MiB each IO waits for the
     * others' (~70 ms on the 2-vCPU VM), so a batch of IOs between checks ran a 0.01-s shape
     * for half a second. A clock read is nothing beside a system call. */
    while (now_ns() < j->deadline) {
        uint64_t off = j->random ? j->lo + (xorshift64(&j->x) % nios) * j->io : pos;
        ssize_t n = j->write ? pwrite(j->fd, j->buf, j->io, (off_t)off) : pread(j->fd, j->buf, j->io, (off_t)off);
        if (n <= 0) { j->err = strerror(n < 0 ? errno : EIO); return NULL; }
        j->bytes += (uint64_t)n;
        j->ops++;
        if (!j->random && (pos += j->io) >= j->hi) pos = j->lo;
    }
    return NULL;
}

/* One shape: `threads` threads doing synchronous IO of `io` bytes for `seconds`; returns
 * bytes/s (or IOs/s with iops), or -1 with the reason in why. */
static double run_disk(int fd, uint64_t file, int write, int random, uint64_t io, int threads, double seconds,
                       int iops, char *why) {
    struct pjob *j = calloc((size_t)threads, sizeof *j);
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    uint64_t slice = file / (uint64_t)threads / io * io, t0 = now_ns(), deadline = t0 + (uint64_t)(seconds * 1e9);
    int started = 0;
    for (int i = 0; i < threads; i++) {
        j[i] = (struct pjob){.fd = fd, .write = write, .random = random, .io = io, .deadline = deadline,
                             .lo = random ? 0 : (uint64_t)i * slice, .hi = random ? file / io * io : (uint64_t)(i + 1) * slice,
                             .x = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1)};
        if (posix_memalign((void **)&j[i].buf, 4096, io)) { snprintf(why, ERRLEN, "out of memory"); break; }
        memset(j[i].buf, 0x3C, io);
        if (pthread_create(&t[i], NULL, disk_worker, &j[i])) { snprintf(why, ERRLEN, "cannot create thread"); free(j[i].buf); break; }
        started++;
    }
    uint64_t bytes = 0, ops = 0;
    const char *err = NULL;
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        bytes += j[i].bytes; ops += j[i].ops;
        if (j[i].err) err = j[i].err;
        free(j[i].buf);
    }
    double s = (double)(now_ns() - t0) / 1e9;
    free(j); free(t);
    if (err) snprintf(why, ERRLEN, "%s", err);
    if (err || started < threads) return -1;
    return iops ? (double)ops / s : (double)bytes / s;
}

/* One shape with Linux native AIO (io_submit, not io_uring: the catalog's kernels use
 * io_uring): one thread keeping `depth` IOs in flight for `seconds`. */
static double run_aio_range(int fd, uint64_t lo, uint64_t hi, int write, int random, uint64_t io, int depth,
                            uint64_t deadline, uint64_t *bytes_out, uint64_t *ops_out, char *why) {
    aio_context_t ctx = 0;
    if (syscall(SYS_io_setup, depth, &ctx)) { snprintf(why, ERRLEN, "io_setup: %s", strerror(errno)); return -1; }
    struct iocb *cbs = calloc((size_t)depth, sizeof *cbs), **ptrs = calloc((size_t)depth, sizeof *ptrs);
    struct io_event *ev = calloc((size_t)depth, sizeof *ev);
    uint8_t *bufs = NULL;
    double out = -1;
    if (posix_memalign((void **)&bufs, 4096, (size_t)depth * io)) { snprintf(why, ERRLEN, "out of memory"); goto done; }
    memset(bufs, 0x3C, (size_t)depth * io);
    uint64_t x = 0x2545F4914F6CDD1Dull ^ lo, pos = lo, nios = (hi - lo) / io, bytes = 0, ops = 0;
    for (int i = 0; i < depth; i++) {
        cbs[i].aio_fildes = (uint32_t)fd;
        cbs[i].aio_lio_opcode = write ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD;
        cbs[i].aio_buf = (uint64_t)(uintptr_t)(bufs + (size_t)i * io);
        cbs[i].aio_nbytes = io;
        cbs[i].aio_data = (uint64_t)i;
        ptrs[i] = &cbs[i];
    }
    int inflight = 0, tosubmit = depth;
    for (;;) {
        for (int i = 0; i < tosubmit; i++) {
            struct iocb *cb = ptrs[i];
            cb->aio_offset = (int64_t)(random ? lo + (xorshift64(&x) % nios) * io : pos);
            if (!random && (pos += io) >= lo + nios * io) pos = lo;
        }
        if (tosubmit) {
            long n = syscall(SYS_io_submit, ctx, (long)tosubmit, ptrs);
            if (n != tosubmit) { snprintf(why, ERRLEN, "io_submit: %s", n < 0 ? strerror(errno) : "short"); break; }
            inflight += tosubmit;
        }
        if (now_ns() >= deadline) break;
        long got = syscall(SYS_io_getevents, ctx, 1L, (long)depth, ev, NULL);
        if (got < 0) { if (errno == EINTR) { tosubmit = 0; continue; } snprintf(why, ERRLEN, "io_getevents: %s", strerror(errno)); break; }
        tosubmit = 0;
        for (long i = 0; i < got; i++) {
            if (ev[i].res <= 0) { snprintf(why, ERRLEN, "aio: %s", strerror(ev[i].res < 0 ? (int)-ev[i].res : EIO)); got = -1; break; }
            bytes += (uint64_t)ev[i].res;
            ops++;
            ptrs[tosubmit++] = &cbs[ev[i].data];
        }
        inflight -= (int)(got > 0 ? got : 0);
        if (got < 0) break;
    }
    while (inflight > 0) {   /* the buffers belong to the IOs in flight until they complete */
        long got = syscall(SYS_io_getevents, ctx, 1L, (long)depth, ev, NULL);
        if (got <= 0 && errno != EINTR) break;
        if (got > 0) inflight -= (int)got;
    }
    *bytes_out = bytes;
    *ops_out = ops;
    if (!why[0]) out = 0;
done:
    syscall(SYS_io_destroy, ctx);
    free(bufs); free(cbs); free(ptrs); free(ev);
    return out;
}

/* The same with io_uring (the catalog's queue-depth kernels submit this way; this is a
 * separate, minimal ring: raw system calls, no SQPOLL, one enter per batch). Returns 0, or -1
 * with the reason in why. */
static double run_uring_range(int fd, uint64_t lo, uint64_t hi, int write, int random, uint64_t io, int depth,
                              uint64_t deadline, uint64_t *bytes_out, uint64_t *ops_out, char *why) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    unsigned entries = 1;
    while (entries < (unsigned)depth) entries <<= 1;
    int rfd = (int)syscall(__NR_io_uring_setup, entries, &p);
    if (rfd < 0) { snprintf(why, ERRLEN, "io_uring_setup: %s", strerror(errno)); return -1; }
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned),
           cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe),
           sqe_len = p.sq_entries * sizeof(struct io_uring_sqe);
    char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, rfd, IORING_OFF_SQ_RING);
    char *cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, rfd, IORING_OFF_CQ_RING);
    struct io_uring_sqe *sqes = mmap(NULL, sqe_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, rfd,
                                     IORING_OFF_SQES);
    uint8_t *bufs = NULL;
    double out = -1;
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) {
        snprintf(why, ERRLEN, "io_uring mmap: %s", strerror(errno));
        goto done;
    }
    if (posix_memalign((void **)&bufs, 4096, (size_t)depth * io)) { snprintf(why, ERRLEN, "out of memory"); goto done; }
    memset(bufs, 0x3C, (size_t)depth * io);
    unsigned *sq_tail = (unsigned *)(sq + p.sq_off.tail), *sq_mask = (unsigned *)(sq + p.sq_off.ring_mask),
             *sq_array = (unsigned *)(sq + p.sq_off.array), *cq_head = (unsigned *)(cq + p.cq_off.head),
             *cq_tail = (unsigned *)(cq + p.cq_off.tail), *cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    uint64_t x = 0x2545F4914F6CDD1Dull ^ lo, pos = lo, nios = (hi - lo) / io, bytes = 0, ops = 0;
    int *free_slot = calloc((size_t)depth, sizeof *free_slot), nfree = depth, inflight = 0;
    for (int i = 0; i < depth; i++) free_slot[i] = i;
    for (;;) {
        unsigned tail = *sq_tail, n = 0;
        while (nfree && now_ns() < deadline) {
            int slot = free_slot[--nfree];
            unsigned idx = (tail + n) & *sq_mask;
            struct io_uring_sqe *e = &sqes[idx];
            memset(e, 0, sizeof *e);
            e->opcode = write ? IORING_OP_WRITE : IORING_OP_READ;
            e->fd = fd;
            e->off = random ? lo + (xorshift64(&x) % nios) * io : pos;
            if (!random && (pos += io) >= lo + nios * io) pos = lo;
            e->addr = (uint64_t)(uintptr_t)(bufs + (size_t)slot * io);
            e->len = (uint32_t)io;
            e->user_data = (uint64_t)slot;
            sq_array[idx] = idx;
            n++;
        }
        if (n) __atomic_store_n(sq_tail, tail + n, __ATOMIC_RELEASE);
        inflight += (int)n;
        if (!inflight) break;
        if (syscall(__NR_io_uring_enter, rfd, n, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0 && errno != EINTR) {
            snprintf(why, ERRLEN, "io_uring_enter: %s", strerror(errno));
            break;
        }
        unsigned head = *cq_head, ct = __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE);
        for (; head != ct; head++) {
            struct io_uring_cqe *c = &cqes[head & *cq_mask];
            if (c->res <= 0 && !why[0]) snprintf(why, ERRLEN, "io_uring: %s", strerror(c->res < 0 ? -c->res : EIO));
            if (c->res > 0) { bytes += (uint64_t)c->res; ops++; }
            free_slot[nfree++] = (int)c->user_data;
            inflight--;
        }
        __atomic_store_n(cq_head, head, __ATOMIC_RELEASE);
        if (why[0]) deadline = 0;   /* stop submitting; drain what is in flight */
    }
    free(free_slot);
    *bytes_out = bytes;
    *ops_out = ops;
    if (!why[0]) out = 0;
done:
    if (sqes != MAP_FAILED) munmap(sqes, sqe_len);
    if (cq != MAP_FAILED) munmap(cq, cq_len);
    if (sq != MAP_FAILED) munmap(sq, sq_len);
    close(rfd);
    free(bufs);
    return out;
}

struct aio_job { int fd, write, random, depth, uring; uint64_t lo, hi, io, deadline, bytes, ops; char why[ERRLEN]; };

static void *aio_worker(void *arg) {
    struct aio_job *j = arg;
    (j->uring ? run_uring_range : run_aio_range)(j->fd, j->lo, j->hi, j->write, j->random, j->io, j->depth, j->deadline,
                                                 &j->bytes, &j->ops, j->why);
    return NULL;
}

/* Native AIO from `threads` threads (each its own context and `depth` IOs in flight; its own
 * slice of the file when sequential): on a host with few CPUs one submitting thread can be
 * the limit (a random 4 KiB IO costs a system call and an interrupt), as the catalog's
 * all-threads queue-depth runs show. */
static double run_aio(int fd, uint64_t file, int write, int random, uint64_t io, int depth, int threads,
                      double seconds, int iops, int uring, char *why) {
    struct aio_job *j = calloc((size_t)threads, sizeof *j);
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    uint64_t slice = file / (uint64_t)threads / io * io, t0 = now_ns(), deadline = t0 + (uint64_t)(seconds * 1e9);
    int started = 0;
    for (int i = 0; i < threads; i++) {
        j[i] = (struct aio_job){.fd = fd, .write = write, .random = random, .depth = depth, .io = io, .uring = uring,
                                .lo = random ? 0 : (uint64_t)i * slice,
                                .hi = random ? file / io * io : (uint64_t)(i + 1) * slice, .deadline = deadline};
        if (pthread_create(&t[i], NULL, aio_worker, &j[i])) { snprintf(why, ERRLEN, "cannot create thread"); break; }
        started++;
    }
    uint64_t bytes = 0, ops = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        bytes += j[i].bytes; ops += j[i].ops;
        if (j[i].why[0]) snprintf(why, ERRLEN, "%s", j[i].why);
    }
    double s = (double)(now_ns() - t0) / 1e9;
    free(j); free(t);
    if (why[0] || started < threads) return -1;
    return iops ? (double)ops / s : (double)bytes / s;
}

/* Screening and confirmation. A shared host's disk moves by tens of percent from one half
 * second to the next, so the best of 24 short runs is mostly the luckiest one (on the
 * 2-vCPU VM one shape read 2.6 GB/s while its neighbours made 1.0-1.4): the shapes are
 * screened, then the CONFIRM best run again and the peak is the best of those runs, as the
 * catalog side's figure in a reach run is the best of its two best variants on one thread
 * and on all threads (four runs, agentd/calibrator.py). */
#define CONFIRM 4
struct shape { double v; int n, how, id; uint64_t io; };

/* --probe-shapes, parsed once by probe_shapes_parse before any probe runs: per metric of
 * PROBE_METRICS, the shape indices given (n 0: screen them all) */
#define MAX_GIVEN 16
static const char *const PROBE_METRICS[] = {"disk.write_Bps", "disk.read_Bps", "disk.read_iops", "disk.write_iops",
                                            "mem.bw_Bps", "net.lo_Bps"};
#define N_PROBE_METRICS (sizeof PROBE_METRICS / sizeof *PROBE_METRICS)
static struct { int n; long idx[MAX_GIVEN]; } g_given[N_PROBE_METRICS];

/* Each entry METRIC=I[,J...] names a metric this file probes and 1..MAX_GIVEN indices. */
int probe_shapes_parse(const char *spec, char *err) {
    for (const char *p = spec; *p;) {
        const char *eq = strchr(p, '='), *end = strchr(p, ';');
        if (!end) end = p + strlen(p);
        size_t m = 0;
        while (eq && eq < end && m < N_PROBE_METRICS &&
               !(strlen(PROBE_METRICS[m]) == (size_t)(eq - p) && !strncmp(p, PROBE_METRICS[m], (size_t)(eq - p))))
            m++;
        if (!eq || eq >= end || m == N_PROBE_METRICS) {
            snprintf(err, ERRLEN, "--probe-shapes: \"%.*s\" is not METRIC=I,J,... with a probed metric", (int)(end - p), p);
            return 0;
        }
        int n = 0;
        for (const char *q = eq + 1; q < end; n++) {
            char *after;
            long v = strtol(q, &after, 10);
            if (after == q || v < 0 || v > 1000 || (after < end && *after != ',') || n == MAX_GIVEN) {
                snprintf(err, ERRLEN, "--probe-shapes: \"%.*s\": expected 1 to %d shape indices, comma-separated",
                         (int)(end - p), p, MAX_GIVEN);
                return 0;
            }
            g_given[m].idx[n] = v;
            q = after < end ? after + 1 : after;
        }
        if (!n) {
            snprintf(err, ERRLEN, "--probe-shapes: \"%.*s\" names no shape", (int)(end - p), p);
            return 0;
        }
        g_given[m].n = n;
        p = *end ? end + 1 : end;
    }
    return 1;
}

/* The shapes --probe-shapes gives for `metric` into out[] (their count; 0: screen them all), or -1
 * with why[] where one is not among this host's n shapes of it. */
static int given_shapes(const char *metric, const struct shape *all, int n, struct shape *out, char *why) {
    for (size_t m = 0; m < N_PROBE_METRICS; m++) {
        if (strcmp(PROBE_METRICS[m], metric)) continue;
        for (int k = 0; k < g_given[m].n; k++) {
            long v = g_given[m].idx[k];
            if (v >= n) {
                snprintf(why, ERRLEN, "--probe-shapes: shape %ld is not one of this host's %d %s shapes", v, n, metric);
                return -1;
            }
            out[k] = all[v];
        }
        return g_given[m].n;
    }
    return 0;
}

static void print_shapes(const char *metric, const struct shape *sh, int n) {
    printf("shapes %s", metric);
    for (int i = 0; i < n; i++) printf("%c%d", i ? ',' : ' ', sh[i].id);
    printf("\n");
}

/* The peak line's account of which runs it is the best of. */
static const char *best_of(char *buf, size_t len, int confirmed, int of, int given) {
    if (given) snprintf(buf, len, "best of %d shapes an earlier probe screened, run again", confirmed);
    else snprintf(buf, len, "best of the %d best of %d shapes run again", confirmed, of);
    return buf;
}

static int by_value(const void *a, const void *b) {
    double x = ((const struct shape *)a)->v, y = ((const struct shape *)b)->v;
    return (x < y) - (x > y);
}

static double disk_shape(const struct shape *sh, int fd, uint64_t file, int write, int random, double seconds,
                         int iops, int cpus, char *why) {
    why[0] = 0;
    return sh->how == 0 ? run_disk(fd, file, write, random, sh->io, sh->n, seconds, iops, why)
                        : run_aio(fd, file, write, random, sh->io, sh->n, sh->how == 1 ? 1 : cpus, seconds, iops,
                                  sh->how == 3, why);
}

/* The best of several shapes, printed as one peak line: every shape runs for half of
 * `seconds` (screening), the CONFIRM best for `seconds` again, and the best of those is the
 * peak. Shapes: the same number in flight by synchronous threads, from one thread through
 * native AIO, that many from each CPU's thread through native AIO, and that many from each
 * CPU's thread through io_uring (the catalog's all-threads queue-depth shape and submission:
 * the probe takes the best of every way, so a mechanism the catalog uses cannot pass for
 * more than the host's peak, and one it lacks still shows as a reach below 1). */
static void disk_peak(const char *metric, int fd, uint64_t file, int write, int random, const int *threads, int nt,
                      const uint64_t *ios, int ni, double seconds, int cpus) {
    static const char *how[] = {"threads, synchronous", "one thread, native AIO",
                                "native AIO, that many on each of %d threads", "io_uring, that many on each of %d threads"};
    static const char *tag[] = {"sync threads", "aio x 1", "aio x cpus", "uring x cpus"};
    const int hows[] = {0, 1, 2, 3};
    struct shape sh[64], top[MAX_GIVEN];
    int n = 0;
    char why[ERRLEN] = "", desc[96], of[96];
    int iops = strstr(metric, "iops") != NULL, verbose = getenv("MIMESYS_PROBE_VERBOSE") != NULL;
    for (int a = 0; a < nt; a++)
        for (int b = 0; b < ni; b++)
            for (int h = 0; h < 4 && n < 64; h++) {
                if (hows[h] == 2 && cpus < 2) continue;   /* the same as one AIO thread */
                sh[n] = (struct shape){.n = threads[a], .io = ios[b], .how = hows[h], .id = n};
                n++;
            }
    int given = given_shapes(metric, sh, n, top, why), nc = given;
    if (given < 0) { printf("peak %s nan %s\n", metric, why); fflush(stdout); return; }
    if (!given) {
        for (int i = 0; i < n; i++) {
            sh[i].v = disk_shape(&sh[i], fd, file, write, random, seconds / 2, iops, cpus, why);
            if (verbose)
                fprintf(stderr, "shape %s %.1f %d x %llu B, %s\n", metric, sh[i].v, sh[i].n,
                        (unsigned long long)sh[i].io, tag[sh[i].how]);
        }
        qsort(sh, (size_t)n, sizeof *sh, by_value);
        while (nc < CONFIRM && nc < n && sh[nc].v > 0) { top[nc] = sh[nc]; nc++; }
    }
    double best = -1;
    int k = 0;
    for (int i = 0; i < nc; i++) {
        double v = disk_shape(&top[i], fd, file, write, random, seconds, iops, cpus, why);
        if (verbose)
            fprintf(stderr, "again %s %.1f %d x %llu B, %s\n", metric, v, top[i].n, (unsigned long long)top[i].io,
                    tag[top[i].how]);
        if (v > best) { best = v; k = i; }
    }
    if (best <= 0) { printf("peak %s nan %s\n", metric, why[0] ? why : "no shape moved any data"); fflush(stdout); return; }
    snprintf(desc, sizeof desc, how[top[k].how], cpus);
    printf("peak %s %.1f %s: %d in flight (%s) x %llu B O_DIRECT %s\n", metric, best,
           best_of(of, sizeof of, nc, n, given), top[k].n, desc, (unsigned long long)top[k].io,
           random ? "random" : "sequential");
    print_shapes(metric, top, nc);
    fflush(stdout);
}

/* mode 0: glibc memcpy (non-temporal stores above its threshold, ERMS or AVX below it, by CPU);
 * 1: a plain 8-byte copy loop; 2: a read-only sum; 3: a copy written with SSE2 streaming stores
 * (x86-64 only: glibc's choice for a 128 MiB copy varies by CPU and version, and on the 2-vCPU
 * VM the catalog's streaming-store copy went 1.2x past the other three). Bytes = bytes read +
 * bytes written, the catalog's convention. */
#define MEM_MODES 4
static void *mem_worker(void *arg) {
    struct pjob *j = arg;
    uint64_t n = j->len / 8, sum = 0;
    uint64_t *a = (uint64_t *)j->buf, *b = (uint64_t *)j->buf2;
    while (now_ns() < j->deadline) {
        if (j->random == 0) {
            memcpy(j->buf2, j->buf, j->len);
            j->bytes += 2 * (uint64_t)j->len;
        } else if (j->random == 1) {
            for (uint64_t i = 0; i < n; i++) b[i] = a[i];
            j->bytes += 2 * (uint64_t)j->len;
        } else if (j->random == 2) {
            for (uint64_t i = 0; i < n; i += 4) sum += a[i] + a[i + 1] + a[i + 2] + a[i + 3];
            j->bytes += (uint64_t)j->len;
        } else {
#if defined(__x86_64__)
            /* 1 MiB at a time so the deadline is checked often */
            for (uint64_t off = 0; off < n && now_ns() < j->deadline; off += 1u << 17) {
                uint64_t end = off + (1u << 17) < n ? off + (1u << 17) : n;
                for (uint64_t i = off; i < end; i += 8) {
                    __m128i x0 = _mm_load_si128((const __m128i *)(a + i)), x1 = _mm_load_si128((const __m128i *)(a + i + 2));
                    __m128i x2 = _mm_load_si128((const __m128i *)(a + i + 4)), x3 = _mm_load_si128((const __m128i *)(a + i + 6));
                    _mm_stream_si128((__m128i *)(b + i), x0);
                    _mm_stream_si128((__m128i *)(b + i + 2), x1);
                    _mm_stream_si128((__m128i *)(b + i + 4), x2);
                    _mm_stream_si128((__m128i *)(b + i + 6), x3);
                }
                _mm_sfence();
                j->bytes += 16 * (end - off);
            }
#else
            break;   /* no streaming stores here: the shape moves nothing and is not the best */
#endif
        }
    }
    j->x = sum;   /* keeps the sum alive */
    return NULL;
}

static double mem_shape(struct pjob *j, pthread_t *t, int threads, int mode, double seconds) {
    uint64_t t0 = now_ns();
    for (int i = 0; i < threads; i++) {
        j[i].deadline = t0 + (uint64_t)(seconds * 1e9);
        j[i].random = mode;
        j[i].bytes = 0;
        pthread_create(&t[i], NULL, mem_worker, &j[i]);
    }
    uint64_t bytes = 0;
    for (int i = 0; i < threads; i++) { pthread_join(t[i], NULL); bytes += j[i].bytes; }
    return (double)bytes / ((double)(now_ns() - t0) / 1e9);
}

/* Every shape for half of `seconds`, the two best again for `seconds`, the peak the best of those
 * (as the disk and loopback probes: not the luckiest of many short runs). */
static void probe_mem(int threads, double seconds) {
    static const char *modes[MEM_MODES] = {"memcpy", "copy loop", "read sum", "streaming-store copy"};
    int verbose = getenv("MIMESYS_PROBE_VERBOSE") != NULL;
    struct pjob *j = calloc((size_t)threads, sizeof *j);
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    size_t len = 128u << 20;   /* 2 x 128 MiB per thread: far past any LLC */
    char err[ERRLEN];
    for (int i = 0; i < threads; i++) {
        j[i].len = len;
        j[i].buf = alloc_touched(len, err);
        j[i].buf2 = alloc_touched(len, err);
        if (!j[i].buf || !j[i].buf2) { printf("peak mem.bw_Bps nan %s\n", err); return; }
    }
    struct shape sh[MEM_MODES], top[MAX_GIVEN];
    char why[ERRLEN] = "", of[96];
    for (int mode = 0; mode < MEM_MODES; mode++) sh[mode] = (struct shape){.id = mode};
    int given = given_shapes("mem.bw_Bps", sh, MEM_MODES, top, why), nc = given;
    if (given < 0) printf("peak mem.bw_Bps nan %s\n", why);
    if (!given) {
        for (int mode = 0; mode < MEM_MODES; mode++) {
            sh[mode].v = mem_shape(j, t, threads, mode, seconds / 2);
            if (verbose) fprintf(stderr, "shape mem.bw_Bps %.1f %d threads %s\n", sh[mode].v, threads, modes[mode]);
        }
        qsort(sh, MEM_MODES, sizeof *sh, by_value);
        for (nc = 0; nc < 2; nc++) top[nc] = sh[nc];
    }
    double best = 0;
    int k = 0;
    for (int i = 0; i < nc; i++) {
        double v = mem_shape(j, t, threads, top[i].id, seconds);
        if (verbose) fprintf(stderr, "again mem.bw_Bps %.1f %d threads %s\n", v, threads, modes[top[i].id]);
        if (v > best) { best = v; k = i; }
    }
    for (int i = 0; i < threads; i++) { free_touched(j[i].buf, len); free_touched(j[i].buf2, len); }
    if (given >= 0) {
        printf("peak mem.bw_Bps %.1f %s: %d threads %s over 2 x 128 MiB each, bytes read + written\n", best,
               best_of(of, sizeof of, nc, MEM_MODES, given), threads, modes[top[k].id]);
        print_shapes("mem.bw_Bps", top, nc);
    }
    fflush(stdout);
    free(j); free(t);
}

static void *lo_sender(void *arg) {
    struct pjob *j = arg;
    while (now_ns() < j->deadline) {
        ssize_t n = send(j->fd, j->buf, j->len, MSG_NOSIGNAL);
        if (n <= 0) break;
        j->bytes += (uint64_t)n;
    }
    shutdown(j->fd, SHUT_WR);
    return NULL;
}

static void *lo_receiver(void *arg) {
    struct pjob *j = arg;
    ssize_t n;
    while ((n = recv(j->fd, j->buf, j->len, 0)) > 0) j->bytes += (uint64_t)n;
    return NULL;
}

static double lo_pairs(int pairs, size_t msg, double seconds, char *err) {
    struct pjob *j = calloc((size_t)pairs * 2, sizeof *j);
    pthread_t *t = calloc((size_t)pairs * 2, sizeof *t);
    uint64_t deadline = now_ns() + (uint64_t)(seconds * 1e9), t0 = now_ns();
    for (int i = 0; i < pairs; i++) {
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t alen = sizeof addr;
        int lst = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int tx = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lst < 0 || tx < 0 || bind(lst, (struct sockaddr *)&addr, sizeof addr) || listen(lst, 1) ||
            getsockname(lst, (struct sockaddr *)&addr, &alen) || connect(tx, (struct sockaddr *)&addr, sizeof addr)) {
            snprintf(err, ERRLEN, "loopback socket: %s", strerror(errno));
            return -1;
        }
        int rx = accept4(lst, NULL, NULL, SOCK_CLOEXEC);
        close(lst);
        j[2 * i] = (struct pjob){.fd = tx, .len = msg, .deadline = deadline};
        j[2 * i + 1] = (struct pjob){.fd = rx, .len = 1 << 20, .deadline = deadline};
        j[2 * i].buf = malloc(msg);
        j[2 * i + 1].buf = malloc(1 << 20);
        memset(j[2 * i].buf, 0x42, msg);
    }
    for (int i = 0; i < 2 * pairs; i++) pthread_create(&t[i], NULL, i % 2 ? lo_receiver : lo_sender, &j[i]);
    uint64_t bytes = 0;
    for (int i = 0; i < 2 * pairs; i++) {
        pthread_join(t[i], NULL);
        if (i % 2) bytes += j[i].bytes;
        close(j[i].fd);
        free(j[i].buf);
    }
    double s = (double)(now_ns() - t0) / 1e9;
    free(j); free(t);
    return (double)bytes / s;
}

/* One thread sends to and drains its own connection without blocking: no wake-ups between
 * threads (which dominate on hosts with few CPUs). */
static void *lo_self(void *arg) {
    struct pjob *j = arg;
    int tx = j->fd, rx = (int)j->x;
    while (now_ns() < j->deadline) {
        ssize_t n = send(tx, j->buf, j->len, MSG_DONTWAIT | MSG_NOSIGNAL);
        ssize_t r;
        while ((r = recv(rx, j->buf2, 1 << 20, MSG_DONTWAIT)) > 0) j->bytes += (uint64_t)r;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;
    }
    return NULL;
}

static double lo_self_threads(int threads, size_t msg, double seconds, char *err) {
    struct pjob *j = calloc((size_t)threads, sizeof *j);
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    uint64_t deadline = now_ns() + (uint64_t)(seconds * 1e9), t0 = now_ns();
    int ok = 1;
    for (int i = 0; i < threads && ok; i++) {
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t alen = sizeof addr;
        int lst = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int tx = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lst < 0 || tx < 0 || bind(lst, (struct sockaddr *)&addr, sizeof addr) || listen(lst, 1) ||
            getsockname(lst, (struct sockaddr *)&addr, &alen) || connect(tx, (struct sockaddr *)&addr, sizeof addr)) {
            snprintf(err, ERRLEN, "loopback socket: %s", strerror(errno));
            ok = 0;
            break;
        }
        int rx = accept4(lst, NULL, NULL, SOCK_CLOEXEC);
        close(lst);
        j[i] = (struct pjob){.fd = tx, .x = (uint64_t)rx, .len = msg, .deadline = deadline,
                             .buf = malloc(msg), .buf2 = malloc(1 << 20)};
        memset(j[i].buf, 0x42, msg);
    }
    if (!ok) return -1;
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, lo_self, &j[i]);
    uint64_t bytes = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        bytes += j[i].bytes;
        close(j[i].fd); close((int)j[i].x);
        free(j[i].buf); free(j[i].buf2);
    }
    double s = (double)(now_ns() - t0) / 1e9;
    free(j); free(t);
    return (double)bytes / s;
}

static double lo_shape(const struct shape *sh, double seconds, char *err) {
    return sh->how ? lo_self_threads(sh->n, sh->io, seconds, err) : lo_pairs(sh->n, sh->io, seconds, err);
}

static void probe_lo(int cpus, double seconds) {
    char err[ERRLEN] = "", of[96];
    int verbose = getenv("MIMESYS_PROBE_VERBOSE") != NULL, n = 0;
    struct shape sh[16], top[MAX_GIVEN];
    const int pairs[] = {1, cpus, 2 * cpus}, selfs[] = {1, cpus};
    const size_t msgs[] = {64u << 10, 256u << 10, 1u << 20};
    for (int how = 0; how < 2; how++)
        for (int a = 0; a < (how ? 2 : 3); a++) {
            int t = how ? selfs[a] : pairs[a];
            if (a && t == (how ? selfs[a - 1] : pairs[a - 1])) continue;
            for (int b = 0; b < 3; b++, n++) sh[n] = (struct shape){.n = t, .io = msgs[b], .how = how, .id = n};
        }
    int given = given_shapes("net.lo_Bps", sh, n, top, err), nc = given;
    if (given < 0) { printf("peak net.lo_Bps nan %s\n", err); return; }
    if (!given) {
        for (int i = 0; i < n; i++) {
            sh[i].v = lo_shape(&sh[i], seconds / 2, err);
            if (sh[i].v < 0) { printf("peak net.lo_Bps nan %s\n", err); return; }
            if (verbose) fprintf(stderr, "shape net.lo_Bps %.1f %d %s x %zu B\n", sh[i].v, sh[i].n,
                                 sh[i].how ? "self" : "pairs", (size_t)sh[i].io);
        }
        qsort(sh, (size_t)n, sizeof *sh, by_value);
        for (nc = 0; nc < CONFIRM && nc < n; nc++) top[nc] = sh[nc];
    }
    double best = -1;
    int k = 0;
    for (int i = 0; i < nc; i++) {
        double v = lo_shape(&top[i], seconds, err);
        if (verbose) fprintf(stderr, "again net.lo_Bps %.1f %d %s x %zu B\n", v, top[i].n, top[i].how ? "self" : "pairs",
                             (size_t)top[i].io);
        if (v > best) { best = v; k = i; }
    }
    if (best < 0) { printf("peak net.lo_Bps nan %s\n", err); return; }
    best_of(of, sizeof of, nc, n, given);
    if (top[k].how)
        printf("peak net.lo_Bps %.1f %s: %d thread(s) each sending to and draining its own connection, %zu B sends\n",
               best, of, top[k].n, (size_t)top[k].io);
    else
        printf("peak net.lo_Bps %.1f %s: %d sender/receiver thread pairs, %zu B sends\n", best, of, top[k].n,
               (size_t)top[k].io);
    print_shapes("net.lo_Bps", top, nc);
    fflush(stdout);
}

int run_probes(const struct runner_env *env, const char *which, double seconds) {
    int cpus = get_nprocs();
    int all = !strcmp(which, "all");
    if (all || !strcmp(which, "mem")) probe_mem(cpus, seconds);
    if (all || !strcmp(which, "net")) probe_lo(cpus, seconds);
    if (all || !strcmp(which, "disk")) {
        static const char *metrics[] = {"disk.write_Bps", "disk.read_Bps", "disk.read_iops", "disk.write_iops"};
        uint64_t file = 512ull << 20;
        if (file > env->scratch_budget) file = env->scratch_budget / (1 << 20) * (1 << 20);
        struct statvfs vs;
        if (!env->scratch_dir || statvfs(env->scratch_dir, &vs) || (uint64_t)vs.f_bavail * vs.f_frsize < file + (256ull << 20)) {
            const char *why = !env->scratch_dir ? "no --scratch-dir" : "not enough free room under --scratch-dir";
            for (int i = 0; i < 4; i++) printf("peak %s nan %s\n", metrics[i], why);
            return 0;
        }
        struct stressor s = {.env = env};
        snprintf(s.name, sizeof s.name, "probe");
        char err[ERRLEN] = "";
        int direct = 0, fd = file >= (16u << 20) ? scratch_file(&s, file, 1, 1, &direct, err) : -1;
        if (fd < 0 || !direct) {
            const char *why = file < (16u << 20) ? "scratch budget below 16 MiB" : err[0] ? err : "O_DIRECT refused";
            for (int i = 0; i < 4; i++) printf("peak %s nan %s\n", metrics[i], why);
            if (fd >= 0) close(fd);
            return 0;
        }
        /* the best of a few shapes: which one a device likes best differs by device */
        static const int seq_threads[] = {4, 8, 16, 32}, rand_threads[] = {32, 64, 128};
        static const uint64_t seq_io[] = {1 << 20, 4 << 20}, rand_io[] = {4096};
        disk_peak("disk.write_Bps", fd, file, 1, 0, seq_threads, 4, seq_io, 2, seconds, cpus);
        disk_peak("disk.read_Bps", fd, file, 0, 0, seq_threads, 4, seq_io, 2, seconds, cpus);
        disk_peak("disk.read_iops", fd, file, 0, 1, rand_threads, 3, rand_io, 1, seconds, cpus);
        disk_peak("disk.write_iops", fd, file, 1, 1, rand_threads, 3, rand_io, 1, seconds, cpus);
        close(fd);
    }
    return 0;
}

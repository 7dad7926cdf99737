/* mimesys-runner: executes a compiled schedule (written by agentd/schedule.py, whose
 * docstring documents the binary format) on pinned threads with absolute deadlines.
 *
 *   mimesys-runner --schedule FILE|- [--cpus LIST] [--scratch-dir DIR] [--scratch-budget BYTES]
 *                  [--udp-sink HOST:PORT] [--start-delay-ms N] [--nice N]
 *                  [--memory-budget BYTES] [--memory-margin BYTES] [--oom-score-adj N]
 *                  [--placement pinned|free|yield]
 *   mimesys-runner --list-kernels
 *   mimesys-runner --probe all|disk|mem|net [--probe-seconds S] [--probe-shapes SPEC] [--scratch-dir DIR]
 *                  [--scratch-budget B]
 *                  (host peaks by code that is not a catalog kernel: probe.c)
 *
 * Privileges and memory. Right after parsing its arguments the runner drops every
 * capability (bounding, ambient, effective, permitted, inheritable; the agent's CAP_PERFMON
 * is not for it) and sets no_new_privs; it raises its own oom_score_adj (1000 by default) so
 * that under memory pressure the kernel kills the runner, not the application under test.
 * --memory-budget caps its private writable memory (RLIMIT_DATA: stressor buffers are
 * refused at allocation, before they are touched); after setup, before t0, it refuses to
 * start if MemAvailable is below --memory-margin.
 *
 * Timing. Executed window i starts at exactly t0 + i*W on CLOCK_MONOTONIC (absolute, so
 * lateness in one window never shifts the next). The schedule stores the warm-up and the plan
 * windows once; the runner repeats the plan windows `repetitions` times itself. Within a
 * window each worker thread runs its segments in the compiled order (the warm-up and the first
 * repetition) or in one drawn from (seed, window, thread) (later repetitions); a segment ends at min(its start + duration, window
 * end); work is done in steps sized to ~50 us (adapted per thread and stressor from the
 * measured step time, and shrunk to the time left), each followed by a clock read; the
 * rest of the window sleeps (pthread_cond_timedwait on CLOCK_MONOTONIC, absolute); a held
 * window sleeps before its compute tail instead, which ends the window ("The hold").
 *
 * Output: line records on stdout, flushed as they happen (agentd/runner.py parses them):
 *   info KEY VALUE...                          facts about the host/setup (and, last, "info yielded")
 *   note STRESSOR TEXT...                      e.g. "O_DIRECT refused ... buffered"
 *   ready T0_NS WINDOW_NS WINDOWS THREADS STRESSORS
 *   start I REP WIN PLANNED_NS OBSERVED_NS     at each window boundary
 *   seg I THREAD STRESSOR PLANNED_NS RAN_NS OPS BYTES      after the window, per segment (PLANNED_NS:
 *                                              as compiled, or a held compute tail as sized)
 *   thread I THREAD START_NS END_NS CPU_NS     actual wake-up, last work, thread CPU time
 *   done I REP WIN PLANNED_NS END_NS HELD_B    closes window I's records (END_NS: last work
 *                                              done; the last window's record waits for its
 *                                              planned end, so it always spans W; HELD_B: the
 *                                              memory held in it, "Memory held" below)
 *   exit done|stopped|error DETAIL...
 *   error MESSAGE                              setup failed / refused (also on stderr)
 * REP is -1 for warm-up windows. Exit status: 0 done, 4 stopped by a signal,
 * 2 usage, 3 refused or setup failed, 5 failed while running.
 *
 * Placement. pinned (the default): each worker runs on its CPU only. free: the scheduler moves
 * the workers among --cpus, as it moves an application's threads (no hold: no worker has a core
 * of its own). yield: pinned, except that a worker kept waiting on its run queue for more than
 * YIELD_WAIT_SHARE of a YIELD_CHECK_NS stretch (someone else on the host wants that CPU) may run
 * on any of --cpus until its next window, which starts pinned again. Alone on the host a yield
 * replay is a pinned one (its per-core split and hold intact); next to a busy neighbour its threads
 * leave the neighbour's CPU as the scheduler's load balancing moves a real workload's.
 *
 * Life cycle. PR_SET_PDEATHSIG(SIGTERM) ties the runner to its parent; SIGTERM, SIGINT
 * and SIGHUP stop every thread within one work step (~100 us) and exit. Scratch files are
 * unlinked the moment they are created, so they vanish with the process however it ends.
 */
#define _GNU_SOURCE
#include "stressor.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define MAGIC "MIMSCHD4"
#define SCHEDULE_VERSION 4
#define HOLD_NONE 0xFFFFFFFFu       /* a thread-window with no core busy fraction to hold */
#define RING 64                     /* windows a worker may run ahead of the printer */
#define STEP_TARGET_NS 50000ull     /* aim for 50 us of work between clock reads */

enum { EXIT_DONE = 0, EXIT_USAGE = 2, EXIT_REFUSED = 3, EXIT_STOPPED = 4, EXIT_FAILED = 5 };

struct seg { uint16_t stressor; uint64_t dur_ns; };
struct seg_result { uint16_t stressor; uint64_t planned, ran, ops, bytes; };
struct win_result { uint64_t start, end, cpu; int nseg; struct seg_result *segs; };

/* The file holds S = warmup + T stored windows (the warm-up copies, then the T plan windows
 * once); the runner executes E = warmup + repetitions * T windows, repeating the plan windows
 * itself, so a long repetition costs neither compile time nor schedule bytes. */
struct schedule {
    uint32_t M, K, T, reps, warmup, S, E;
    uint64_t window_ns, seed;
    uint64_t held_max;               /* the most memory any window holds (bytes) */
    uint64_t *held;                  /* [S] memory to hold in each stored window (bytes) */
    struct stressor *stressors;      /* [M] */
    int32_t *rep, *win;              /* [S] as stored: -1 / 0 and the plan window */
    uint32_t *seg_off;               /* [S*K] index into segs */
    uint16_t *seg_n;                 /* [S*K] */
    uint16_t *tail_n;                /* [S*K] the last tail_n segments: compute the hold may trim */
    uint32_t *hold;                  /* [S*K] core busy to hold, parts per million, or HOLD_NONE */
    struct seg *segs;
    uint8_t *used;                   /* [K*M] thread k uses stressor m */
};

struct adapt { uint64_t units; double ns_per_unit; };

struct worker {
    int k, cpu;
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;               /* with mu: window sleeps */
    pthread_cond_t gcv;              /* with g.mu: start signal, printer progress */
    void **ts;                       /* [M] per-thread kernel state */
    uint8_t *resident;               /* [M] its bulk buffers are resident (kernel_ops.thread_resident) */
    uint8_t *runs;                   /* [M] scratch: runs in the current window */
    uint16_t *order;                 /* [max segments]: this window's run order */
    int statfd;                      /* /proc/stat, for the hold (-1: not readable, no hold) */
    int selfstatfd;                  /* /proc/thread-self/stat, the worker's own ticks (-1: count all) */
    int schedfd;                     /* --placement yield: /proc/thread-self/schedstat, or -1 */
    int widened;                     /* --placement yield: may run on any of --cpus this window */
    uint64_t yq_t, yq_wait, yq_help; /* --placement yield: last check's clock, run-queue wait and
                                        the runner's own other threads' CPU (own_cpu_ns), ns */
    uint64_t yielded;                /* windows in which it left its CPU */
    char *statbuf;
    size_t statcap;
    struct adapt *adapt;             /* [M] */
    double post_frac;                /* the hold's estimate of core busy that lands after its reading */
    int held_last;                   /* the last window was held: learn from it at the next one's start */
    int64_t held_from[3];            /* its core_time at its start */
    double held_sized;               /* its busy fraction as the reading + its sized tail put it */
    struct {                         /* the held window's IO segment now running (run_segment) */
        uint32_t hold;               /* HOLD_NONE: not a held window's IO */
        const int64_t *at_start;     /* the window's core_time at its start [3] */
        uint64_t io_after_ns;        /* IO planned after this segment, before the tail */
        uint64_t win_end;
    } held_io;
    struct win_result ring[RING];
    uint64_t done;                   /* windows finished (guarded by g.mu) */
    char err[ERRLEN];
};

static struct {
    struct schedule sch;
    struct runner_env env;
    struct worker *w;
    int *cpus, ncpus;
    pthread_mutex_t mu;              /* guards done/printed/ready counters */
    pthread_cond_t cv;               /* main waits here for workers; workers for the printer */
    pthread_condattr_t cattr;
    int ready, failed, go;
    int nice;                        /* --nice: worker threads' nice value (0 = inherit) */
    int free_placement;              /* --placement free: each worker may run on any of --cpus */
    int yield_placement;             /* --placement yield: pinned until kept waiting ("Placement") */
    int parent_statfd;               /* /proc/<parent>/stat: the agent's CPU is the replay's, or -1 */
    clockid_t main_clock;            /* the main thread's CPU clock (it sets the memory held) */
    int main_clock_ok;
    uint64_t printed;
    uint64_t t0;
    volatile sig_atomic_t stop_sig;
    int stop;                        /* read with __atomic in the hot loop */
} g;

static void out(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

static void die(int code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("error %s\n", msg);
    fflush(stdout);
    fprintf(stderr, "mimesys-runner: %s\n", msg);
    exit(code);
}

/* Allocations are checked: the sizes come from the schedule and, past --memory-budget, the
 * kernel says no (RLIMIT_DATA); a NULL written through would be a crash, not an error line. */
static void *xcalloc(size_t n, size_t size, const char *what) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) die(EXIT_REFUSED, "out of memory for %s (%zu x %zu bytes)", what, n, size);
    return p;
}

static void *xreallocarray(void *old, size_t n, size_t size, const char *what) {
    void *p = size && n > SIZE_MAX / size ? NULL : realloc(old, n * size);
    if (!p) die(EXIT_REFUSED, "out of memory for %s (%zu x %zu bytes)", what, n, size);
    return p;
}

static int stopping(void) { return __atomic_load_n(&g.stop, __ATOMIC_RELAXED); }

static struct timespec ts_of(uint64_t ns) {
    struct timespec t = {.tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull)};
    return t;
}

static uint64_t thread_cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* CPU time of the helper threads the worker's kernels run on its CPU (futex partner,
 * contending spinners): a window's CPU is the worker's and theirs, what its core showed. */
static uint64_t helpers_cpu_ns(const struct worker *w) {
    const struct schedule *s = &g.sch;
    uint64_t ns = 0;
    for (uint32_t m = 0; m < s->M; m++) {
        const struct stressor *st = &s->stressors[m];
        if (w->ts[m] && st->ops->helper_cpu_ns) ns += st->ops->helper_cpu_ns(w->ts[m]);
    }
    return ns;
}

/* Sleep until an absolute CLOCK_MONOTONIC deadline, or until a stop is requested. */
static void sleep_until(pthread_mutex_t *mu, pthread_cond_t *cv, uint64_t deadline) {
    struct timespec ts = ts_of(deadline);
    pthread_mutex_lock(mu);
    while (!stopping() && now_ns() < deadline)
        if (pthread_cond_timedwait(cv, mu, &ts) == ETIMEDOUT) break;
    pthread_mutex_unlock(mu);
}

/* ---------------------------------------------------------------- schedule */

/* params without their pace_Bps line (the agent appends it to paced variants) */
static void strip_pace(const char *params, char *out, size_t cap) {
    size_t n = 0;
    const char *p = params;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) + 1 : strlen(p);
        if (strncmp(p, "pace_Bps=", 9) && n + len < cap) { memcpy(out + n, p, len); n += len; }
        p += len;
    }
    while (n && out[n - 1] == '\n') n--;
    out[n] = 0;
}

struct reader { const uint8_t *p, *end; const char *path; };

static void need(struct reader *r, size_t n, const char *what) {
    if ((size_t)(r->end - r->p) < n) die(EXIT_USAGE, "%s: truncated schedule while reading %s", r->path, what);
}
static uint16_t rd16(struct reader *r, const char *w) { uint16_t v; need(r, 2, w); memcpy(&v, r->p, 2); r->p += 2; return v; }
static uint32_t rd32(struct reader *r, const char *w) { uint32_t v; need(r, 4, w); memcpy(&v, r->p, 4); r->p += 4; return v; }
static uint64_t rd64(struct reader *r, const char *w) { uint64_t v; need(r, 8, w); memcpy(&v, r->p, 8); r->p += 8; return v; }
static void rdstr(struct reader *r, char *dst, size_t cap, const char *w) {
    uint16_t n = rd16(r, w);
    need(r, n, w);
    if (n >= cap) die(EXIT_USAGE, "%s: %s too long (%u bytes)", r->path, w, n);
    memcpy(dst, r->p, n);
    dst[n] = 0;
    r->p += n;
}

static void load_schedule(const char *path) {
    /* "-" = stdin: the agent pipes the schedule in, so no file is left behind if it dies */
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) die(EXIT_USAGE, "%s: cannot open schedule: %s", path, strerror(errno));
    size_t cap = 1 << 20, size = 0, got;
    uint8_t *buf = xreallocarray(NULL, cap, 1, "the schedule");
    while ((got = fread(buf + size, 1, cap - size, f)) > 0) {
        size += got;
        if (size == cap) buf = xreallocarray(buf, cap *= 2, 1, "the schedule");
    }
    if (ferror(f)) die(EXIT_USAGE, "%s: read error: %s", path, strerror(errno));
    if (f != stdin) fclose(f);
    if (!strcmp(path, "-")) path = "schedule on stdin";
    struct reader r = {buf, buf + size, path};
    struct schedule *s = &g.sch;

    need(&r, 8, "magic");
    if (memcmp(r.p, MAGIC, 8)) die(EXIT_USAGE, "%s: not a mimesys compiled schedule (bad magic)", path);
    r.p += 8;
    uint32_t version = rd32(&r, "version");
    if (version != SCHEDULE_VERSION)
        die(EXIT_USAGE, "%s: schedule version %u, this runner reads %d", path, version, SCHEDULE_VERSION);
    s->M = rd32(&r, "M"); s->K = rd32(&r, "K"); s->T = rd32(&r, "T");
    s->reps = rd32(&r, "repetitions"); s->warmup = rd32(&r, "warmup_windows");
    s->window_ns = rd64(&r, "window_ns"); s->seed = rd64(&r, "seed");
    s->S = rd32(&r, "stored windows");
    rd32(&r, "reserved");
    s->held_max = rd64(&r, "memory held at most");
    if (!s->M || !s->K || !s->T || !s->reps || s->K > 4096 || s->M > 4096)
        die(EXIT_USAGE, "%s: bad sizes M=%u K=%u T=%u repetitions=%u", path, s->M, s->K, s->T, s->reps);
    if ((uint64_t)s->warmup + s->T != s->S)
        die(EXIT_USAGE, "%s: %u stored windows, expected warmup %u + T %u", path, s->S, s->warmup, s->T);
    if ((uint64_t)s->warmup + (uint64_t)s->reps * s->T > UINT32_MAX)
        die(EXIT_USAGE, "%s: %u repetitions of %u windows is too many", path, s->reps, s->T);
    s->E = s->warmup + s->reps * s->T;
    if (s->window_ns < 1000000ull) die(EXIT_USAGE, "%s: window %llu ns is below 1 ms", path, (unsigned long long)s->window_ns);

    s->stressors = xcalloc(s->M, sizeof *s->stressors, "the stressor table");
    for (uint32_t m = 0; m < s->M; m++) {
        struct stressor *st = &s->stressors[m];
        st->index = (int)m;
        rdstr(&r, st->name, sizeof st->name, "stressor name");
        rdstr(&r, st->kernel, sizeof st->kernel, "kernel name");
        rdstr(&r, st->params, sizeof st->params, "params");
        st->ops = find_kernel(st->kernel);
        if (!st->ops) die(EXIT_USAGE, "%s: stressor %s names kernel %s, which this runner does not have "
                          "(mimesys-runner --list-kernels)", path, st->name, st->kernel);
        st->env = &g.env;
        char err[ERRLEN];
        if (param_u64(st, "pace_Bps", 0, &st->pace_Bps, err)) die(EXIT_USAGE, "%s: %s", path, err);
    }
    s->rep = xcalloc(s->S, sizeof *s->rep, "the windows");
    s->held = xcalloc(s->S, sizeof *s->held, "the windows");
    s->win = xcalloc(s->S, sizeof *s->win, "the windows");
    s->seg_off = xcalloc((size_t)s->S * s->K, sizeof *s->seg_off, "the thread-windows");
    s->seg_n = xcalloc((size_t)s->S * s->K, sizeof *s->seg_n, "the thread-windows");
    s->tail_n = xcalloc((size_t)s->S * s->K, sizeof *s->tail_n, "the thread-windows");
    s->hold = xcalloc((size_t)s->S * s->K, sizeof *s->hold, "the thread-windows");
    s->used = xcalloc((size_t)s->K * s->M, 1, "the stressors used");
    size_t segcap = 1024, n = 0;
    s->segs = xreallocarray(NULL, segcap, sizeof *s->segs, "the segments");
    for (uint32_t i = 0; i < s->S; i++) {
        s->rep[i] = (int32_t)rd32(&r, "window repetition");
        s->win[i] = (int32_t)rd32(&r, "window index");
        int32_t want_rep = i < s->warmup ? -1 : 0, want_win = i < s->warmup ? (int32_t)i : (int32_t)(i - s->warmup);
        if (s->rep[i] != want_rep || s->win[i] != want_win)
            die(EXIT_USAGE, "%s: stored window %u is (repetition %d, window %d), expected (%d, %d)", path, i,
                s->rep[i], s->win[i], want_rep, want_win);
        s->held[i] = rd64(&r, "memory held");
        if (s->held[i] > s->held_max)
            die(EXIT_USAGE, "%s: stored window %u holds %llu bytes of memory, over the header's most, %llu", path, i,
                (unsigned long long)s->held[i], (unsigned long long)s->held_max);
        for (uint32_t k = 0; k < s->K; k++) {
            uint16_t ns = rd16(&r, "segment count");
            uint16_t nt = rd16(&r, "tail count");
            uint32_t hold = rd32(&r, "core busy to hold");
            uint64_t sum = 0;
            if (nt > ns) die(EXIT_USAGE, "%s: stored window %u thread %u: tail of %u segments > %u segments", path, i, k, nt, ns);
            if (hold != HOLD_NONE && hold > 1000000u)
                die(EXIT_USAGE, "%s: stored window %u thread %u: core busy to hold %u ppm > 1000000", path, i, k, hold);
            s->seg_off[(size_t)i * s->K + k] = (uint32_t)n;
            s->seg_n[(size_t)i * s->K + k] = ns;
            s->tail_n[(size_t)i * s->K + k] = nt;
            s->hold[(size_t)i * s->K + k] = hold;
            for (uint16_t j = 0; j < ns; j++) {
                if (n == segcap) { segcap *= 2; s->segs = xreallocarray(s->segs, segcap, sizeof *s->segs, "the segments"); }
                uint16_t m = rd16(&r, "segment stressor");
                uint64_t d = rd64(&r, "segment duration");
                if (m >= s->M) die(EXIT_USAGE, "%s: stored window %u thread %u: stressor index %u >= M=%u", path, i, k, m, s->M);
                /* checked before it is added: a sum that wraps past 2^64 would pass the window check */
                if (d > s->window_ns - sum)
                    die(EXIT_USAGE, "%s: stored window %u (plan window %d) thread %u: segments sum to more than the "
                        "window %llu ns", path, i, s->win[i], k, (unsigned long long)s->window_ns);
                sum += d;
                s->segs[n++] = (struct seg){m, d};
                if (d || j >= ns - nt) s->used[(size_t)k * s->M + m] = 1;   /* a tail may be a 0 ns reserve */
            }
        }
    }
    if (r.p != r.end) die(EXIT_USAGE, "%s: %ld trailing bytes after the last window", path, (long)(r.end - r.p));
    free(buf);
}

/* A paced variant has its base's kernel and params plus pace_Bps, and the queue-depth kernels
 * share a file among variants of the same file_bytes (file_by_size): the kernels share such
 * variants' scratch files (disk_aio.c), so the budget counts the file once. */
static int same_file_as_earlier(const struct schedule *s, const uint8_t *used, uint32_t m) {
    char a[sizeof s->stressors[0].params], b[sizeof a];
    for (uint32_t j = 0; j < m; j++) {
        if (!used[j] || strcmp(s->stressors[j].kernel, s->stressors[m].kernel)) continue;
        if (s->stressors[m].ops->file_by_size) {
            uint64_t x = 0, y = 0;
            char err[ERRLEN];
            if (!param_u64(&s->stressors[j], "file_bytes", 64ull << 20, &x, err) &&
                !param_u64(&s->stressors[m], "file_bytes", 64ull << 20, &y, err) && x == y) return 1;
            continue;
        }
        strip_pace(s->stressors[j].params, a, sizeof a);
        strip_pace(s->stressors[m].params, b, sizeof b);
        if (!strcmp(a, b)) return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- repetitions */

/* Executed window i -> its stored window, repetition and plan window. */
static uint32_t stored_of(const struct schedule *s, uint32_t i) {
    return i < s->warmup ? i : s->warmup + (i - s->warmup) % s->T;
}
static int32_t rep_of(const struct schedule *s, uint32_t i) {
    return i < s->warmup ? -1 : (int32_t)((i - s->warmup) / s->T);
}

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The order thread k runs window i's segments in: as stored for the warm-up and the first
 * repetition (the compiler drew it from the seed); every later repetition draws its own from
 * (seed, i, k), so repetitions differ in order but not in durations, as they always have. The
 * compute tail stays last (shuffled among itself): the hold trims it. */
static void window_order(const struct schedule *s, uint32_t i, uint32_t k, int nseg, int ntail, uint16_t *order) {
    for (int j = 0; j < nseg; j++) order[j] = (uint16_t)j;
    if (rep_of(s, i) < 1) return;
    uint64_t x = splitmix64(s->seed ^ splitmix64(((uint64_t)i << 16) ^ k)) | 1;
    int lo[2] = {0, nseg - ntail}, hi[2] = {nseg - ntail, nseg};
    for (int part = 0; part < 2; part++)
        for (int j = hi[part] - 1; j > lo[part]; j--) {
            int r = lo[part] + (int)(xorshift64(&x) % (uint64_t)(j - lo[part] + 1));
            uint16_t tmp = order[j]; order[j] = order[r]; order[r] = tmp;
        }
}

/* A thread's or a process's user time (all its threads) in USER_HZ ticks, from its stat file in
 * /proc (field 14; the command name before it may hold spaces and parentheses). */
static int user_ticks(int fd, unsigned long long *ticks) {
    char buf[1024];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    if (!p) return -1;
    unsigned long long ut;
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu", &ut) != 1) return -1;
    *ticks = ut;
    return 0;
}

/* The core's busy time and the wall time now, in ns, as the agent's cpu sampler counts them
 * (agentd/samplers/cpu.py): busy = wall time − (idle + iowait + steal) of /proc/stat's line cpuN,
 * read against CLOCK_MONOTONIC. The kernel accounts idle and iowait exactly (NO_HZ idle
 * accounting: the idle loop's own entry and exit times) but user/system/irq/softirq by sampling
 * at each tick, and the tick misses work that runs between ticks: iperf3 pacing 2 Gbit/s over
 * loopback ran 1.1 s of 10 (its threads' schedstat) where the busy fields counted 0.05 s and
 * wall − idle counted 1.2 s. IO stressors are such work too: short bursts between waits.
 *
 * The third figure is the core's time in other programs' own code (ns, "Other tenants"): its
 * sampled user and nice time less the worker's own sampled user time (the same ticks charge
 * both), its helper threads' CPU and the user time of the runner's parent, the agent, wherever it
 * ran (its threads move among the CPUs; the targets were recorded with an agent sampling them, so
 * its CPU is the replay's: counted as another tenant's, inverse's replays alone on the host followed
 * their targets' per-core CPU 0.013 off, DTW on the target's scale, 0.034 on a mix whose core 0 was
 * 0.17 busy, where the old hold had them 0.005 and 0.006 off; bench/results/fidelity/
 * other-tenants-2026-12-07). Only user time: the kernel's time on this core is the
 * workload's as much as anyone's (its IO is dispatched and completed by kernel threads and
 * softirqs, 0.14-0.20 of the core in bench/hold.py's serve mix), and the kernel cannot say
 * whose. The hold leaves it out (core_since). */
static int core_time(struct worker *w, int64_t at[3]) {
    ssize_t n = pread(w->statfd, w->statbuf, w->statcap - 1, 0);
    if (n <= 0) return -1;
    int64_t t = (int64_t)now_ns();
    w->statbuf[n] = 0;
    char key[24];
    int klen = snprintf(key, sizeof key, "\ncpu%d ", w->cpu);
    const char *p = strstr(w->statbuf, key);
    if (!p) return -1;
    unsigned long long v[8] = {0};
    if (sscanf(p + klen, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
               &v[7]) != 8)
        return -1;
    int64_t tick_ns = 1000000000ll / sysconf(_SC_CLK_TCK);     /* USER_HZ: /proc/stat's unit */
    at[0] = t - (int64_t)(v[3] + v[4] + v[7]) * tick_ns;
    at[1] = t;
    at[2] = 0;
    unsigned long long own = 0, agent = 0;
    if (w->selfstatfd >= 0 && !user_ticks(w->selfstatfd, &own)) {
        if (g.parent_statfd >= 0 && user_ticks(g.parent_statfd, &agent)) agent = 0;
        at[2] = ((int64_t)(v[0] + v[1]) - (int64_t)own - (int64_t)agent) * tick_ns - (int64_t)helpers_cpu_ns(w);
    }
    return 0;
}

/* The hold: a thread-window whose plan names the busy fraction of its core runs its
 * non-compute segments (IO, network, ...; their CPU depends on how the device answers), then
 * sizes its compute tail to what the core still needs for its busy share of the window (core_time)
 * to reach the target by the window's end (the rest of the window counts in full: compute and
 * sleep are), within the time left. Returns the tail's ns; *sized_frac: the busy fraction the
 * reading and that tail add up to.
 *
 * The tail follows the reading even where the two differ by less than a counter unit (10 ms):
 * the reading is floored, but so is the sampler's count at the window's end, and the unit's
 * fraction the reading misses is the same fraction the sampler's floor takes off, so the
 * window's busy count comes out unbiased, as a thread-window of compute alone does; dropping
 * such corrections keeps the planner's error below a unit in every held window (simulated tick
 * accounting: 0.0048 vs 0.0040 mean |error|; measured on this host alone, no difference:
 * bench/results/fidelity/hold-late-2026-11-27).
 *
 * Other tenants. The busy fraction held is the workload's: the time other programs spend in
 * their own code on the core (an application the replay runs next to; core_time) is left out, so
 * a replay does not back off by whatever its neighbour computes there (a saturated PostgreSQL
 * next to it: inverse's replays took 18 points less of its throughput than the mixes they
 * replay, 8 without the hold, bench/results/colocation-floor). The kernel's time on the core
 * stays counted, a neighbour's syscalls and softirqs too (PostgreSQL under select-only pgbench:
 * user 55 %, system 29 %, softirq 16 % of the CPUs): the workload's own IO runs there as well.
 *
 * CPU the core spends after the reading that is not the tail (the writeback and completions of
 * the window's writes, softirqs; or less than counted, to steal) is outside what
 * the reading sees. The worker learns it: at the next window's start it compares the held
 * window's busy fraction with *sized_frac and keeps a running mean (post_frac) that the next
 * sizing leaves room for, so a host whose IO costs CPU after the fact does not overshoot every
 * held window by it. */
/* Where the tail runs: last in the window, after the idle time, not straight after the IO. The
 * IO's own aftermath (completions, softirqs, writeback the kernel runs on this core) lands in
 * the idle time before the tail, where the second reading sees it and the tail yields to it,
 * instead of after the tail, where only post_frac's running mean could allow for it. The guard
 * leaves the tail room for a late wake-up. */
#define HOLD_LATE_GUARD_NS 3000000ull
#define HOLD_LEARN 0.2               /* weight of one window in post_frac (about five windows) */
#define HOLD_POST_MAX 0.25           /* |post_frac| at most: one odd window cannot starve the tail */

/* Other programs' time below this share of the wall time is the host's own background (the
 * agent and the host's daemons; the daemons took at most 2.1 % of the CPUs in any 5-s interval of
 * 40 colocation runs, bench/results/colocation-floor) and the tick's noise (its unit, 10 ms, is
 * 1 % of a 1-s window), and counts as it always has: the targets the plans follow were recorded
 * with it. */
#define OTHER_TENANTS_MIN 0.05

/* Between two core_time readings: the core's busy time less other tenants' (ns), and the wall time. */
static void busy_between(const int64_t a[3], const int64_t b[3], double *busy_ns, double *total_ns) {
    double other = (double)(b[2] - a[2]), busy = (double)(b[0] - a[0]), total = (double)(b[1] - a[1]);
    if (other > OTHER_TENANTS_MIN * total) busy -= other;
    *busy_ns = busy > 0 ? busy : 0;
    *total_ns = total;
}

/* busy_between from at_start to now, and one counter unit's ns; -1: unreadable. */
static int core_since(struct worker *w, const int64_t at_start[3], double *busy_ns, double *total_ns, double *tick_ns) {
    int64_t now[3];
    if (core_time(w, now)) return -1;
    *tick_ns = 1e9 / (double)sysconf(_SC_CLK_TCK);
    busy_between(at_start, now, busy_ns, total_ns);
    return 0;
}

static uint64_t hold_tail_ns(struct worker *w, uint32_t hold, const int64_t at_start[3], uint64_t tail_ns,
                             uint64_t left_ns, double *sized_frac) {
    double busy_ns, total_ns, tick_ns;
    *sized_frac = NAN;
    if (core_since(w, at_start, &busy_ns, &total_ns, &tick_ns)) return tail_ns;
    double span = total_ns + (double)left_ns;
    if (span <= 0) return tail_ns;
    double want = ((double)hold / 1e6 - w->post_frac) * span - busy_ns;
    if (want < 0) want = 0;
    if (want > (double)left_ns) want = (double)left_ns;
    *sized_frac = (busy_ns + want) / span;
    return (uint64_t)want;
}

/* CPU first: a held window whose IO so far cost the core less than the planner expected may
 * need a longer tail than the time its remaining IO leaves. Before each later non-compute
 * segment the runner estimates the core's busy rate during the IO so far (from the window's
 * start) and, if the remaining IO at that rate plus the tail the target then needs would not
 * fit before the window's end, shortens the remaining IO (returns the factor its planned
 * durations are run at) so that it does. Less than two ticks of IO so far say too little of
 * the rate; a shortfall under one tick is left alone. */
static double hold_io_scale(struct worker *w, uint32_t hold, const int64_t at_start[3], uint64_t io_left_ns,
                            uint64_t left_ns) {
    double busy_ns, total_ns, tick_ns;
    if (!io_left_ns || core_since(w, at_start, &busy_ns, &total_ns, &tick_ns) || total_ns < 2 * tick_ns) return 1.0;
    double rate = busy_ns / total_ns, R = (double)io_left_ns, L = (double)left_ns;
    if (rate >= 1) return 1.0;
    double need = ((double)hold / 1e6 - w->post_frac) * (total_ns + L) - busy_ns;   /* busy still to add */
    double short_ns = need - rate * R - (L - R);          /* the tail it leaves minus the time left for it */
    if (short_ns < tick_ns) return 1.0;
    double f = (L - need) / (R * (1 - rate));
    return f < 0 ? 0 : f > 1 ? 1 : f;
}

/* The same check during a held window's IO segment, every HOLD_RECHECK_NS: the rate the
 * window's IO costs the core is known better as it runs, and a later segment may cost less per
 * second than the first (4 KiB random reads, then 1 MiB sequential ones: decided only at the
 * segment's start, the tail landed 0.07-0.08 short of a 0.75 target). Returns the segment's
 * deadline, brought forward by what the remaining IO must give up. */
#define HOLD_RECHECK_NS 20000000ull

static uint64_t hold_io_recheck(struct worker *w, uint64_t t, uint64_t deadline) {
    uint64_t rest = deadline - t, win_end = w->held_io.win_end;
    double f = hold_io_scale(w, w->held_io.hold, w->held_io.at_start, rest + w->held_io.io_after_ns,
                             win_end > t ? win_end - t : 0);
    return f < 1.0 ? t + (uint64_t)((double)rest * f) : deadline;
}

/* At a window's start, what the last (held) window's core did after its reading. */
static void hold_learn(struct worker *w, const int64_t now[3]) {
    double busy, total;
    busy_between(w->held_from, now, &busy, &total);
    if (total <= 0 || !isfinite(w->held_sized)) return;
    double post = busy / total - w->held_sized;
    w->post_frac += HOLD_LEARN * (post - w->post_frac);
    if (w->post_frac > HOLD_POST_MAX) w->post_frac = HOLD_POST_MAX;
    if (w->post_frac < -HOLD_POST_MAX) w->post_frac = -HOLD_POST_MAX;
}

/* ---------------------------------------------------------------- workers */

/* Run one stressor until `deadline` (or stop); returns the ns it ran. */
/* --placement yield ("Placement"). The stretch is several scheduler slices long: a neighbour that
 * wants the CPU keeps the worker waiting in every slice, while the host's own short bursts (a
 * kworker draining per-CPU lists as the memory held grows, the agent reading the runner's events)
 * last a few ms. Alone on the host a replay left its CPU in a mean 2.8-3.9 of 16 thread-windows
 * over 2-ms stretches, 0.8-1.0 over 16 ms (bench/yield_alone.py), and a pinned neighbour busy
 * half of each 0.1-2 ms still moves it in every window. */
#define YIELD_CHECK_NS 16000000ull
#define YIELD_WAIT_SHARE 0.25

static uint64_t run_queue_wait_ns(struct worker *w) {
    char buf[96];
    ssize_t n = pread(w->schedfd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    unsigned long long on_cpu = 0, wait = 0;
    return sscanf(buf, "%llu %llu", &on_cpu, &wait) == 2 ? (uint64_t)wait : 0;
}

static void set_placement(struct worker *w, int anywhere) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (anywhere)
        for (int c = 0; c < g.ncpus; c++) CPU_SET(g.cpus[c], &set);
    else
        CPU_SET(w->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);   /* checked at setup */
}

/* CPU of the runner's own threads that may run on a worker's CPU: its kernels' helper threads
 * and the main thread (which touches the pages of the memory held as it grows, up to hundreds of
 * MiB at a window's start). */
static uint64_t own_cpu_ns(const struct worker *w) {
    uint64_t ns = helpers_cpu_ns(w);
    struct timespec ts;
    if (g.main_clock_ok && !clock_gettime(g.main_clock, &ts))
        ns += (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    return ns;
}

/* a worker waiting on its CPU's run queue for more than YIELD_WAIT_SHARE of the last
 * YIELD_CHECK_NS leaves it for the rest of the window. The runner's own threads share its CPU
 * by design (cpu_contend_2x's second thread, a futex partner) or now and then (the main thread
 * growing the memory held): the wait they cause is the plan's, not a neighbour's, so their CPU
 * in the interval (the most wait they can have caused) does not count. Counted, replays alone
 * on the host left their CPUs in most windows: the recording's per-core CPU went 0.043 -> 0.106
 * of its range off with helper threads, 0.031 -> 0.119 on sort_xz with its memory held. */
static void yield_check(struct worker *w, uint64_t t) {
    if (w->widened || w->schedfd < 0 || t - w->yq_t < YIELD_CHECK_NS) return;
    uint64_t wait = run_queue_wait_ns(w), help = own_cpu_ns(w);
    double foreign = (double)(wait - w->yq_wait) - (double)(help - w->yq_help);
    if (foreign > YIELD_WAIT_SHARE * (double)(t - w->yq_t)) {
        set_placement(w, 1);
        w->widened = 1;
        w->yielded++;
    }
    w->yq_t = t;
    w->yq_wait = wait;
    w->yq_help = help;
}

static uint64_t run_segment(struct worker *w, struct stressor *st, uint64_t deadline,
                            uint64_t *ops, uint64_t *bytes) {
    struct adapt *a = &w->adapt[st->index];
    void *ts = w->ts[st->index];
    uint64_t start = now_ns(), t = start, bytes0 = *bytes, held_check = start;
    while (t < deadline && !stopping()) {
        uint64_t left = deadline - t, n = a->units;
        if (a->ns_per_unit > 0 && !st->ops->watches_deadline) {
            uint64_t fit = (uint64_t)((double)left / a->ns_per_unit);
            if (fit < n) n = fit;
            if (n == 0) {
                /* less than one unit of time left: stop if that is closer to the deadline */
                if ((double)left < a->ns_per_unit / 2) break;
                n = 1;
            }
        }
        step_pace_allow = UINT64_MAX;
        if (st->pace_Bps) {
            /* what the pace allows to be in flight now beyond what has completed */
            double due_bytes = (double)(t - start) * (double)st->pace_Bps / 1e9;
            double done_bytes = (double)(*bytes - bytes0);
            step_pace_allow = due_bytes > done_bytes ? (uint64_t)(due_bytes - done_bytes) : 0;
        }
        uint64_t done = st->ops->step(st, ts, n, deadline, bytes);
        if (done == STEP_WAIT) {
            /* nothing fits before the deadline: wait there, awake to a stop request, and
             * keep the estimate of a unit's cost as it was */
            sleep_until(&w->mu, &w->cv, deadline);
            t = now_ns();
            break;
        }
        uint64_t t2 = now_ns();
        if (g.yield_placement) yield_check(w, t2);
        if (w->held_io.hold != HOLD_NONE && t2 - held_check >= HOLD_RECHECK_NS && t2 < deadline) {
            deadline = hold_io_recheck(w, t2, deadline);
            held_check = t2;
        }
        *ops += done;
        /* a kernel that stops itself at the deadline may do fewer than n: cost per op done */
        double per = (double)(t2 - t) / (double)(st->ops->watches_deadline && done ? done : n);
        /* a step that took far longer than usual was most likely preempted: let it move
         * the estimate only a little, or the end-of-segment rounding would cut short */
        double wgt = a->ns_per_unit > 0 && per > 4 * a->ns_per_unit ? 0.02 : 0.25;
        a->ns_per_unit = a->ns_per_unit > 0 ? (1 - wgt) * a->ns_per_unit + wgt * per : per;
        double want = (double)STEP_TARGET_NS / (a->ns_per_unit > 1 ? a->ns_per_unit : 1);
        a->units = want < 1 ? 1 : want > (1 << 24) ? (1 << 24) : (uint64_t)want;
        t = t2;
        if (st->pace_Bps) {
            /* paced variant: once ahead of pace_Bps since the segment began, wait until the
             * bytes done or in flight are due (each step is ~50 us of work, so the rate is steady far
             * below the 100 ms a sampler sees) */
            uint64_t started = *bytes - bytes0 + (st->ops->pending_bytes ? st->ops->pending_bytes(st, ts) : 0);
            uint64_t due = start + (uint64_t)((double)started * 1e9 / (double)st->pace_Bps) + 1;
            if (due > t) {
                sleep_until(&w->mu, &w->cv, due < deadline ? due : deadline);
                t = now_ns();
            }
        }
    }
    return t - start;
}

/* A stressor's per-thread buffers are held in the windows this thread runs it in, and no
 * other: at a window's start those of stressors it does not run there are released, those it
 * runs touched back (kernel_ops.thread_resident). Held from setup to the end, a sort's plan of
 * ten disk variants, each run in a few windows, kept ~60 MiB of IO buffers through every
 * window in which its target rested. */
static void window_residency(struct worker *w, uint32_t i) {
    const struct schedule *s = &g.sch;
    uint32_t stored = stored_of(s, i);
    size_t base = s->seg_off[(size_t)stored * s->K + w->k];
    int nseg = s->seg_n[(size_t)stored * s->K + w->k];
    memset(w->runs, 0, s->M);
    for (int j = 0; j < nseg; j++) w->runs[s->segs[base + j].stressor] = 1;
    for (uint32_t m = 0; m < s->M; m++) {
        struct stressor *st = &s->stressors[m];
        if (!w->ts[m] || !st->ops->thread_resident || w->runs[m] == w->resident[m]) continue;
        st->ops->thread_resident(st, w->ts[m], w->runs[m]);
        w->resident[m] = w->runs[m];
    }
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct schedule *s = &g.sch;
    char err[ERRLEN] = "";
    prctl(PR_SET_TIMERSLACK, 1ul);   /* wake at the deadline, not up to 50 us after it */
    int fail = 0;
    if (g.nice && setpriority(PRIO_PROCESS, (id_t)gettid(), g.nice)) {
        snprintf(w->err, ERRLEN, "thread %d: cannot set nice %d: %s", w->k, g.nice, strerror(errno));
        fail = 1;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    if (g.free_placement)
        for (int c = 0; c < g.ncpus; c++) CPU_SET(g.cpus[c], &set);
    else
        CPU_SET(w->cpu, &set);
    if (!fail && pthread_setaffinity_np(pthread_self(), sizeof set, &set)) {
        snprintf(w->err, ERRLEN, "thread %d: cannot %s CPU %d (not allowed or offline)", w->k,
                 g.free_placement ? "run on the --cpus set with" : "pin to", w->cpu);
        fail = 1;
    }
    if (!fail && g.yield_placement && (w->schedfd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) < 0) {
        snprintf(w->err, ERRLEN, "thread %d: --placement yield needs /proc/thread-self/schedstat: %s", w->k,
                 strerror(errno));
        fail = 1;
    }
    if (!fail && w->statfd >= 0) w->selfstatfd = open("/proc/thread-self/stat", O_RDONLY | O_CLOEXEC);
    /* per-thread kernel state, only for the stressors this thread uses, before t0 */
    for (uint32_t m = 0; m < s->M && !fail; m++) {
        w->adapt[m].units = 1;
        if (!s->used[(size_t)w->k * s->M + m]) continue;
        struct stressor *st = &s->stressors[m];
        if (st->ops->thread_setup) {
            w->ts[m] = st->ops->thread_setup(st, w->k, err);
            if (!w->ts[m]) {
                snprintf(w->err, ERRLEN, "thread %d: %s", w->k, err[0] ? err : st->name);
                fail = 1;
            }
            w->resident[m] = 1;
        }
    }
    if (!fail && s->E) window_residency(w, 0);   /* before t0: only window 0's buffers held */
    pthread_mutex_lock(&g.mu);
    if (fail) g.failed = 1; else g.ready++;
    pthread_cond_broadcast(&g.cv);
    while (!g.go && !g.stop) pthread_cond_wait(&w->gcv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    if (fail || stopping()) return NULL;

    for (uint32_t i = 0; i < s->E && !stopping(); i++) {
        /* never overwrite a result the printer has not written out yet */
        pthread_mutex_lock(&g.mu);
        while (i >= g.printed + RING && !g.stop) pthread_cond_wait(&w->gcv, &g.mu);
        pthread_mutex_unlock(&g.mu);
        uint64_t win_start = g.t0 + (uint64_t)i * s->window_ns, win_end = win_start + s->window_ns;
        sleep_until(&w->mu, &w->cv, win_start);
        if (stopping()) break;
        if (i) window_residency(w, i);
        struct win_result *res = &w->ring[i % RING];
        if (w->widened) {
            /* it left its CPU last window: pinned again, and the hold learns nothing from a
             * window whose time was not all on its core */
            set_placement(w, 0);
            w->widened = 0;
            w->held_last = 0;
        }
        if (w->schedfd >= 0) {
            w->yq_t = now_ns();
            w->yq_wait = run_queue_wait_ns(w);
            w->yq_help = own_cpu_ns(w);
        }
        uint64_t cpu0 = thread_cpu_ns() + helpers_cpu_ns(w), t = now_ns();
        res->start = t;
        uint32_t stored = stored_of(s, i);
        size_t base = s->seg_off[(size_t)stored * s->K + w->k];
        int nseg = s->seg_n[(size_t)stored * s->K + w->k];
        int ntail = s->tail_n[(size_t)stored * s->K + w->k];
        uint32_t hold = s->hold[(size_t)stored * s->K + w->k];
        int64_t at_start[3] = {0, 0, 0};
        int ticks = (hold != HOLD_NONE || w->held_last) && w->statfd >= 0 && w->statbuf && !core_time(w, at_start);
        if (w->held_last) {
            if (ticks) hold_learn(w, at_start);
            w->held_last = 0;
        }
        if (hold != HOLD_NONE && (!ticks || ntail == 0 || ntail == nseg)) hold = HOLD_NONE;
        window_order(s, i, (uint32_t)w->k, nseg, ntail, w->order);
        res->nseg = 0;
        uint64_t tail_planned = 0, tail_sized = 0;
        double io_scale = 1.0;
        for (int j = 0; j < nseg; j++) {
            struct seg *sg = &s->segs[base + w->order[j]];
            struct seg_result *sr = &res->segs[res->nseg++];
            *sr = (struct seg_result){.stressor = sg->stressor, .planned = sg->dur_ns};
            if (hold != HOLD_NONE && j > 0 && j < nseg - ntail) {
                uint64_t io_left = 0;
                for (int q = j; q < nseg - ntail; q++) io_left += s->segs[base + w->order[q]].dur_ns;
                io_scale = hold_io_scale(w, hold, at_start, io_left, win_end > t ? win_end - t : 0);
            }
            if (hold != HOLD_NONE && j == nseg - ntail) {
                for (int q = j; q < nseg; q++) tail_planned += s->segs[base + w->order[q]].dur_ns;
                tail_sized = hold_tail_ns(w, hold, at_start, tail_planned, win_end > t ? win_end - t : 0,
                                          &w->held_sized);
                if (tail_sized && t + tail_sized + HOLD_LATE_GUARD_NS < win_end) {
                    /* the tail ends the window: wait, then read again and size it from there */
                    sleep_until(&w->mu, &w->cv, win_end - tail_sized - HOLD_LATE_GUARD_NS);
                    t = now_ns();
                    tail_sized = hold_tail_ns(w, hold, at_start, tail_planned, win_end > t ? win_end - t : 0,
                                              &w->held_sized);
                }
                w->held_last = 1;
                memcpy(w->held_from, at_start, sizeof at_start);
            }
            uint64_t dur = sg->dur_ns;
            if (j < nseg - ntail && io_scale != 1.0) dur = (uint64_t)((double)dur * io_scale);
            if (hold != HOLD_NONE && j >= nseg - ntail && tail_sized != tail_planned)
                /* the tail's segments share its sized time as they share its planned time (a
                 * reserve, planned at 0 ns, in equal parts) */
                dur = tail_planned ? (uint64_t)((double)sg->dur_ns * (double)tail_sized / (double)tail_planned)
                                   : tail_sized / (uint64_t)ntail;
            sr->planned = dur;   /* what the runner set out to run: a held tail as sized */
            if (!dur || stopping()) continue;
            uint64_t deadline = t + dur < win_end ? t + dur : win_end;
            w->held_io.hold = HOLD_NONE;
            if (hold != HOLD_NONE && j < nseg - ntail) {
                uint64_t io_after = 0;
                for (int q = j + 1; q < nseg - ntail; q++) io_after += s->segs[base + w->order[q]].dur_ns;
                w->held_io.hold = hold;
                w->held_io.at_start = at_start;
                w->held_io.io_after_ns = (uint64_t)((double)io_after * io_scale);
                w->held_io.win_end = win_end;
            }
            sr->ran = run_segment(w, &s->stressors[sg->stressor], deadline, &sr->ops, &sr->bytes);
            w->held_io.hold = HOLD_NONE;
            t = now_ns();
        }
        res->end = t;
        res->cpu = thread_cpu_ns() + helpers_cpu_ns(w) - cpu0;
        pthread_mutex_lock(&g.mu);
        w->done = i + 1;
        pthread_cond_broadcast(&g.cv);
        pthread_mutex_unlock(&g.mu);
    }
    return NULL;
}

/* ---------------------------------------------------------------- signals */

static void request_stop(void) {
    __atomic_store_n(&g.stop, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&g.mu);
    pthread_cond_broadcast(&g.cv);
    for (uint32_t k = 0; g.w && k < g.sch.K; k++) pthread_cond_broadcast(&g.w[k].gcv);
    pthread_mutex_unlock(&g.mu);
    for (uint32_t k = 0; g.w && k < g.sch.K; k++) {
        pthread_mutex_lock(&g.w[k].mu);
        pthread_cond_broadcast(&g.w[k].cv);
        pthread_mutex_unlock(&g.w[k].mu);
    }
}

static void *signal_main(void *arg) {
    sigset_t *set = arg;
    int sig;
    if (sigwait(set, &sig) == 0) {
        g.stop_sig = sig;
        request_stop();
    }
    return NULL;
}

/* ---------------------------------------------------------------- main */

static void print_kernel(const char *name) { printf("%s\n", name); }
int run_probes(const struct runner_env *env, const char *which, double seconds);  /* probe.c */
int probe_shapes_parse(const char *spec, char *err);   /* probe.c: --probe-shapes, for run_probes */

static void parse_cpus(const char *text) {
    g.cpus = xcalloc(4096, sizeof *g.cpus, "--cpus");
    const char *p = text;
    while (*p) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p) die(EXIT_USAGE, "--cpus %s: expected a list like 0-3,6", text);
        if (*end == '-') { p = end + 1; hi = strtol(p, &end, 10); if (end == p) die(EXIT_USAGE, "--cpus %s: bad range", text); }
        if (lo < 0 || hi < lo || hi >= 4096) die(EXIT_USAGE, "--cpus %s: bad range %ld-%ld", text, lo, hi);
        for (long c = lo; c <= hi && g.ncpus < 4096; c++) g.cpus[g.ncpus++] = (int)c;
        p = end;
        if (*p == ',') p++;
        else if (*p) die(EXIT_USAGE, "--cpus %s: unexpected %c", text, *p);
    }
    if (!g.ncpus) die(EXIT_USAGE, "--cpus is empty");
}

static void usage(void) {
    fprintf(stderr, "usage: mimesys-runner --schedule FILE [--cpus LIST] [--scratch-dir DIR] "
                    "[--scratch-budget BYTES] [--udp-sink HOST:PORT] [--start-delay-ms N] [--nice N]\n"
                    "                      [--memory-budget BYTES] [--memory-margin BYTES] [--oom-score-adj N]\n"
                    "                      [--placement pinned|free|yield]\n"
                    "       mimesys-runner --list-kernels\n"
                    "       mimesys-runner --probe all|disk|mem|net [--probe-seconds S] [--probe-shapes SPEC]\n"
                    "                      [--scratch-dir DIR] [--scratch-budget B]\n");
    exit(EXIT_USAGE);
}

/* Drop every capability and gain none later. A negative --nice needs CAP_SYS_NICE, so the
 * process nice value is set first; worker threads inherit it. */
static void drop_privileges(int oom_score_adj) {
    if (g.nice < 0) setpriority(PRIO_PROCESS, 0, g.nice);   /* a failure is reported per thread later */
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[16];
        int n = snprintf(buf, sizeof buf, "%d", oom_score_adj);
        if (write(fd, buf, (size_t)n) != n) { /* lowering needs CAP_SYS_RESOURCE: keep what we have */ }
        close(fd);
    }
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    for (int c = 0; c < 64; c++) prctl(PR_CAPBSET_DROP, c, 0, 0, 0);   /* EPERM unprivileged, EINVAL past the last */
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capset, &h, d)) die(EXIT_REFUSED, "cannot drop capabilities: %s", strerror(errno));
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) die(EXIT_REFUSED, "cannot set no_new_privs: %s", strerror(errno));
}

/* A "Key:   N kB" line of a /proc file, in bytes; 0 if absent. */
static uint64_t proc_kb(const char *path, const char *key) {
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    char line[256];
    uint64_t v = 0;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') { v = strtoull(line + n + 1, NULL, 10) << 10; break; }
    fclose(f);
    return v;
}

/* Memory held (agentd/schedule.py): one private anonymous mapping of the schedule's largest
 * footprint, reserved before t0 so that --memory-budget refuses it at setup, not mid-run. At
 * each window's start the main thread grows the held part by writing a byte into each new page
 * (the kernel backs a page on its first write) or shrinks it with MADV_DONTNEED (the pages go
 * back to the host at once). Held pages are not touched again: a resident page stays resident
 * unless the host swaps, as an application's idle heap would. Growth stops short of leaving the
 * host less than --memory-margin available; the `done` record says what was held. */
static struct { uint8_t *base; size_t cap, cur, page; uint64_t margin; int noted; } g_held;

static size_t round_page(uint64_t bytes, size_t page) { return (size_t)(bytes / page * page); }

static void held_reserve(uint64_t most, uint64_t margin, uint64_t memory_budget) {
    g_held.page = (size_t)sysconf(_SC_PAGESIZE);
    g_held.margin = margin;
    g_held.cap = round_page(most, g_held.page);
    if (!g_held.cap) return;
    void *p = mmap(NULL, g_held.cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        if (memory_budget && errno == ENOMEM)
            die(EXIT_REFUSED, "cannot reserve %llu MiB of memory to hold: over --memory-budget %llu MiB",
                (unsigned long long)(g_held.cap >> 20), (unsigned long long)(memory_budget >> 20));
        die(EXIT_REFUSED, "cannot reserve %llu MiB of memory to hold: %s", (unsigned long long)(g_held.cap >> 20),
            strerror(errno));
    }
    g_held.base = p;
}

/* Hold `want` bytes (rounded down to pages) from now on; returns the bytes held. */
static uint64_t held_set(uint64_t want) {
    size_t target = round_page(want, g_held.page);
    if (target > g_held.cap) target = g_held.cap;
    if (target > g_held.cur) {
        uint64_t avail = proc_kb("/proc/meminfo", "MemAvailable");
        uint64_t room = avail > g_held.margin ? avail - g_held.margin : 0;
        if (avail && target - g_held.cur > room) {
            size_t cut = g_held.cur + round_page(room, g_held.page);
            if (!g_held.noted) {
                out("note memory-held held %llu MiB of %llu MiB planned: the host keeps its %llu MiB margin\n",
                    (unsigned long long)(cut >> 20), (unsigned long long)(target >> 20),
                    (unsigned long long)(g_held.margin >> 20));
                g_held.noted = 1;
            }
            target = cut;
        }
        for (size_t off = g_held.cur; off < target; off += g_held.page) g_held.base[off] = 1;
    } else if (target < g_held.cur) {
        madvise(g_held.base + target, g_held.cur - target, MADV_DONTNEED);
    }
    g_held.cur = target;
    return target;
}

/* The command line, as main's phases use it. */
struct args {
    const char *sched_path, *cpus, *sink, *probe, *probe_shapes;
    long start_delay_ms;
    uint64_t memory_budget, memory_margin;   /* memory_budget 0 = no budget */
    int oom_score_adj;
    double probe_s;
};

static void parse_args(int argc, char **argv, struct args *a) {
    *a = (struct args){.sink = "127.0.0.1:9", .start_delay_ms = 30, .memory_margin = 256ull << 20,
                       .oom_score_adj = 1000, .probe_s = 1.0};
    g.env.scratch_budget = 2ull << 30;
    static struct option opts[] = {
        {"schedule", required_argument, 0, 's'}, {"cpus", required_argument, 0, 'c'},
        {"scratch-dir", required_argument, 0, 'd'}, {"scratch-budget", required_argument, 0, 'b'},
        {"udp-sink", required_argument, 0, 'u'}, {"start-delay-ms", required_argument, 0, 'w'},
        {"nice", required_argument, 0, 'n'}, {"list-kernels", no_argument, 0, 'l'}, {"help", no_argument, 0, 'h'},
        {"memory-budget", required_argument, 0, 'm'}, {"memory-margin", required_argument, 0, 'M'},
        {"oom-score-adj", required_argument, 0, 'o'}, {"placement", required_argument, 0, 'P'},
        {"probe", required_argument, 0, 'p'}, {"probe-seconds", required_argument, 0, 'S'},
        {"probe-shapes", required_argument, 0, 'H'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': a->sched_path = optarg; break;
        case 'c': a->cpus = optarg; break;
        case 'd': g.env.scratch_dir = optarg; break;
        case 'b': g.env.scratch_budget = strtoull(optarg, NULL, 10); break;
        case 'u': a->sink = optarg; break;
        case 'w': a->start_delay_ms = strtol(optarg, NULL, 10); break;
        case 'n': g.nice = atoi(optarg); break;
        case 'l': list_kernels(print_kernel); exit(0);
        case 'm': a->memory_budget = strtoull(optarg, NULL, 10); break;
        case 'M': a->memory_margin = strtoull(optarg, NULL, 10); break;
        case 'o': a->oom_score_adj = atoi(optarg); break;
        case 'P':
            g.free_placement = g.yield_placement = 0;
            if (!strcmp(optarg, "free")) g.free_placement = 1;
            else if (!strcmp(optarg, "yield")) g.yield_placement = 1;
            else if (strcmp(optarg, "pinned")) die(EXIT_USAGE, "--placement %s: expected pinned, free or yield", optarg);
            break;
        case 'p': a->probe = optarg; break;
        case 'S': a->probe_s = strtod(optarg, NULL); break;
        case 'H': a->probe_shapes = optarg; break;
        default: usage();
        }
    }
    if (!a->sched_path && !a->probe) usage();
    if (a->oom_score_adj < -1000 || a->oom_score_adj > 1000)
        die(EXIT_USAGE, "--oom-score-adj %d outside [-1000, 1000]", a->oom_score_adj);
}

/* --probe: measure the host's devices instead of running a schedule */
static int run_probe(const struct args *a) {
    const char *probe = a->probe;
    if (strcmp(probe, "all") && strcmp(probe, "disk") && strcmp(probe, "mem") && strcmp(probe, "net"))
        die(EXIT_USAGE, "--probe %s: expected all, disk, mem or net", probe);
    if (!(a->probe_s > 0 && a->probe_s <= 30)) die(EXIT_USAGE, "--probe-seconds must be in (0, 30]");
    char err[ERRLEN];
    if (a->probe_shapes && !probe_shapes_parse(a->probe_shapes, err)) die(EXIT_USAGE, "%s", err);
    signal(SIGPIPE, SIG_IGN);
    return run_probes(&g.env, probe, a->probe_s);
}

/* UDP sink "host:port" ([v6]:port accepted) */
static void set_udp_sink(const char *sink) {
    static char host[256];
    const char *colon = strrchr(sink, ':');
    if (!colon || colon == sink) die(EXIT_USAGE, "--udp-sink %s: expected HOST:PORT", sink);
    snprintf(host, sizeof host, "%.*s", (int)(colon - sink), sink);
    if (host[0] == '[') { memmove(host, host + 1, strlen(host)); host[strcspn(host, "]")] = 0; }
    g.env.udp_sink_host = host;
    g.env.udp_sink_port = atoi(colon + 1);
    if (g.env.udp_sink_port <= 0 || g.env.udp_sink_port > 65535) die(EXIT_USAGE, "--udp-sink %s: bad port", sink);
}

/* --cpus, or every CPU this process may run on */
static void choose_cpus(const char *cpus) {
    if (cpus) { parse_cpus(cpus); return; }
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    g.cpus = xcalloc(CPU_SETSIZE, sizeof *g.cpus, "the CPU list");
    for (int i = 0; i < CPU_SETSIZE; i++) if (CPU_ISSET(i, &set)) g.cpus[g.ncpus++] = i;
}

/* the memory budget: private writable memory from here on (stressor buffers, thread
 * stacks) is capped by the kernel at allocation time, before anything is touched */
static void set_memory_budget(uint64_t memory_budget, uint64_t memory_margin) {
    uint64_t avail0 = proc_kb("/proc/meminfo", "MemAvailable");
    if (avail0 && avail0 < memory_margin)
        die(EXIT_REFUSED, "the host has %llu MiB available, under the memory margin of %llu MiB",
            (unsigned long long)(avail0 >> 20), (unsigned long long)(memory_margin >> 20));
    if (memory_budget) {
        /* what is mapped now (the schedule, libc) + per thread its stack and a malloc arena's first heap */
        uint64_t base = proc_kb("/proc/self/status", "VmData") + (uint64_t)(g.sch.K + 2) * (9ull << 20) + (32ull << 20);
        struct rlimit rl = {base + memory_budget, base + memory_budget};
        if (setrlimit(RLIMIT_DATA, &rl)) die(EXIT_REFUSED, "cannot set the memory budget: %s", strerror(errno));
    }
}

/* which stressors does the schedule use at all? only those are set up */
static uint8_t *stressors_used(void) {
    const struct schedule *s = &g.sch;
    uint8_t *used = xcalloc(s->M, 1, "the stressors used");
    for (uint32_t k = 0; k < s->K; k++)
        for (uint32_t m = 0; m < s->M; m++) used[m] |= s->used[(size_t)k * s->M + m];
    return used;
}

/* the scratch budget and the disk's free room, before anything is written: the bytes needed */
static uint64_t check_scratch(const uint8_t *used) {
    struct schedule *s = &g.sch;
    uint64_t scratch = 0;
    for (uint32_t m = 0; m < s->M; m++)
        if (used[m] && s->stressors[m].ops->scratch_bytes && !same_file_as_earlier(s, used, m))
            scratch += s->stressors[m].ops->scratch_bytes(&s->stressors[m]);
    if (!scratch) return 0;
    if (!g.env.scratch_dir) die(EXIT_REFUSED, "the schedule uses disk stressors; give --scratch-dir");
    struct stat sb;
    if (stat(g.env.scratch_dir, &sb) || !S_ISDIR(sb.st_mode))
        die(EXIT_REFUSED, "--scratch-dir %s is not a directory", g.env.scratch_dir);
    if (scratch > g.env.scratch_budget)
        die(EXIT_REFUSED, "disk stressors need %llu MiB of scratch space, over --scratch-budget %llu MiB",
            (unsigned long long)(scratch >> 20), (unsigned long long)(g.env.scratch_budget >> 20));
    struct statvfs vs;
    if (statvfs(g.env.scratch_dir, &vs)) die(EXIT_REFUSED, "statvfs %s: %s", g.env.scratch_dir, strerror(errno));
    uint64_t avail = (uint64_t)vs.f_bavail * vs.f_frsize, margin = scratch / 10 > (256ull << 20) ? scratch / 10 : 256ull << 20;
    if (avail < scratch + margin)
        die(EXIT_REFUSED, "%s has %llu MiB free; disk stressors need %llu MiB plus %llu MiB margin",
            g.env.scratch_dir, (unsigned long long)(avail >> 20), (unsigned long long)(scratch >> 20),
            (unsigned long long)(margin >> 20));
    return scratch;
}

/* signals: one thread waits for them; every other thread has them blocked */
static void start_signal_thread(void) {
    static sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM); sigaddset(&sigs, SIGINT); sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    pthread_t sig_tid;
    pthread_create(&sig_tid, NULL, signal_main, &sigs);
    pthread_detach(sig_tid);
}

/* the lock and the conditions (on the monotonic clock) the workers and the printer share */
static void init_shared_sync(void) {
    pthread_condattr_init(&g.cattr);
    pthread_condattr_setclock(&g.cattr, CLOCK_MONOTONIC);
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, &g.cattr);
    prctl(PR_SET_TIMERSLACK, 1ul);
}

static void print_host_info(uint64_t scratch) {
    const struct schedule *s = &g.sch;
    out("info cpus");
    for (uint32_t k = 0; k < s->K; k++) out(" %d", g.cpus[k % (uint32_t)g.ncpus]);
    out("\ninfo cache l1d=%llu l2=%llu llc=%llu\n", (unsigned long long)cache_bytes("l1d"),
        (unsigned long long)cache_bytes("l2"), (unsigned long long)cache_bytes("llc"));
    __builtin_cpu_init();
    out("info avx2 %d\ninfo scratch_bytes %llu\n", __builtin_cpu_supports("avx2") ? 1 : 0, (unsigned long long)scratch);
    fflush(stdout);
}

/* shared state (big shared buffers, scratch files) of used stressors; a failed setup
 * tears down the ones before it and refuses the run */
static void setup_stressors(const uint8_t *used, uint64_t memory_budget) {
    struct schedule *s = &g.sch;
    for (uint32_t m = 0; m < s->M && !stopping(); m++) {
        struct stressor *st = &s->stressors[m];
        char err[ERRLEN] = "";
        if (used[m] && st->ops->setup && st->ops->setup(st, err)) {
            for (uint32_t j = 0; j < m; j++)
                if (used[j] && s->stressors[j].ops->teardown) s->stressors[j].ops->teardown(&s->stressors[j]);
            if (memory_budget && strstr(err, strerror(ENOMEM)))
                die(EXIT_REFUSED, "%s (over --memory-budget %llu MiB)", err, (unsigned long long)(memory_budget >> 20));
            die(EXIT_REFUSED, "%s", err);
        }
        if (st->note[0]) { out("note %s %s\n", st->name, st->note); fflush(stdout); }
    }
}

/* one worker thread per plan thread, each pinned to its CPU (or, --placement free, let the
 * scheduler move it among --cpus, as it moves an application's threads); then whether the
 * plan's core busy targets can be held (pinned workers read their core's /proc/stat line; a
 * free worker has no core of its own to hold, so it runs its compute as compiled) */
static void start_workers(void) {
    const struct schedule *s = &g.sch;
    g.w = xcalloc(s->K, sizeof *g.w, "the workers");
    uint32_t max_seg = 0;
    for (size_t i = 0; i < (size_t)s->S * s->K; i++) if (s->seg_n[i] > max_seg) max_seg = s->seg_n[i];
    for (uint32_t k = 0; k < s->K; k++) {
        struct worker *w = &g.w[k];
        w->k = (int)k;
        w->cpu = g.cpus[k % (uint32_t)g.ncpus];
        pthread_mutex_init(&w->mu, NULL);
        pthread_cond_init(&w->cv, &g.cattr);
        pthread_cond_init(&w->gcv, &g.cattr);
        w->ts = xcalloc(s->M, sizeof *w->ts, "a worker's stressor state");
        w->resident = xcalloc(s->M, 1, "a worker's stressor state");
        w->runs = xcalloc(s->M, 1, "a worker's stressor state");
        w->adapt = xcalloc(s->M, sizeof *w->adapt, "a worker's stressor state");
        w->order = xcalloc(max_seg, sizeof *w->order, "a worker's segment order");
        /* the per-cpu lines come first in /proc/stat: enough for the lines up to this CPU's */
        w->statcap = ((size_t)w->cpu + 3) * 256;
        w->statbuf = malloc(w->statcap);
        w->statfd = g.free_placement ? -1 : open("/proc/stat", O_RDONLY | O_CLOEXEC);
        w->schedfd = -1;                 /* opened by the worker itself (thread-self) */
        w->selfstatfd = -1;              /* the same */
        w->held_io.hold = HOLD_NONE;
        for (int r = 0; r < RING; r++) w->ring[r].segs = xcalloc(max_seg, sizeof(struct seg_result), "a worker's results");
        if (pthread_create(&w->tid, NULL, worker_main, w)) die(EXIT_FAILED, "cannot create thread %u", k);
    }
    int readable = 1;
    for (uint32_t k = 0; k < s->K; k++) readable &= g.w[k].statfd >= 0 && g.w[k].statbuf != NULL;
    out("info hold %s\n", g.free_placement ? "off (--placement free: no worker has a core of its own)"
                          : readable ? "proc-stat" : "unavailable (/proc/stat not readable)");
    fflush(stdout);
}

/* wait until every worker is pinned and set up, then fix t0 and let them go; 1 if a worker
 * failed or the host was left under the memory margin (mem_err says so) */
static int release_workers(uint64_t memory_margin, long start_delay_ms, char mem_err[ERRLEN]) {
    const struct schedule *s = &g.sch;
    pthread_mutex_lock(&g.mu);
    while (g.ready + g.failed < (int)s->K && !g.failed && !g.stop) pthread_cond_wait(&g.cv, &g.mu);
    int failed = g.failed;
    if (!failed && !g.stop) {
        /* every buffer is touched now: leave the margin to the rest of the host */
        uint64_t avail = proc_kb("/proc/meminfo", "MemAvailable");
        if (avail && avail < memory_margin) {
            snprintf(mem_err, ERRLEN, "after setting up its stressors the host has %llu MiB available, "
                     "under the memory margin of %llu MiB", (unsigned long long)(avail >> 20),
                     (unsigned long long)(memory_margin >> 20));
            failed = g.failed = 1;
        }
    }
    if (!failed && !g.stop) {
        g.t0 = now_ns() + (uint64_t)start_delay_ms * 1000000ull;
        g.go = 1;
    }
    for (uint32_t k = 0; k < s->K; k++) pthread_cond_broadcast(&g.w[k].gcv);
    pthread_mutex_unlock(&g.mu);
    return failed;
}

/* How the run ended: the exit status and the "exit WHY DETAIL" record. */
struct outcome { int code; const char *why; char detail[ERRLEN]; };

static void refuse(struct outcome *o, const char *mem_err) {
    const struct schedule *s = &g.sch;
    snprintf(o->detail, sizeof o->detail, "%s", mem_err);
    for (uint32_t k = 0; k < s->K && !o->detail[0]; k++)
        if (g.w[k].err[0]) { snprintf(o->detail, sizeof o->detail, "%s", g.w[k].err); break; }
    request_stop();
    out("error %s\n", o->detail);
    fprintf(stderr, "mimesys-runner: %s\n", o->detail);
    o->code = EXIT_REFUSED;
    o->why = "error";
}

/* stdout flushed; where it is closed the run fails and stops (0) */
static int flushed(struct outcome *o) {
    if (!fflush(stdout)) return 1;
    o->code = EXIT_FAILED;
    o->why = "error";
    snprintf(o->detail, sizeof o->detail, "stdout closed");
    request_stop();
    return 0;
}

/* until every worker is past window i (or the run stops) */
static void wait_window_done(uint32_t i) {
    const struct schedule *s = &g.sch;
    pthread_mutex_lock(&g.mu);
    for (;;) {
        uint32_t k = 0;
        while (k < s->K && g.w[k].done > i) k++;
        if (k == s->K || g.stop) break;
        pthread_cond_wait(&g.cv, &g.mu);
    }
    pthread_mutex_unlock(&g.mu);
}

/* window i's seg, thread and done records, then its ring slots handed back to the workers */
static void print_window(uint32_t i, uint64_t planned, uint64_t held) {
    const struct schedule *s = &g.sch;
    uint64_t end = 0;
    for (uint32_t k = 0; k < s->K; k++) {
        struct win_result *res = &g.w[k].ring[i % RING];
        for (int j = 0; j < res->nseg; j++) {
            struct seg_result *sr = &res->segs[j];
            out("seg %u %u %u %llu %llu %llu %llu\n", i, k, sr->stressor, (unsigned long long)sr->planned,
                (unsigned long long)sr->ran, (unsigned long long)sr->ops, (unsigned long long)sr->bytes);
        }
        out("thread %u %u %llu %llu %llu\n", i, k, (unsigned long long)res->start,
            (unsigned long long)res->end, (unsigned long long)res->cpu);
        if (res->end > end) end = res->end;
    }
    out("done %u %d %d %llu %llu %llu\n", i, rep_of(s, i), s->win[stored_of(s, i)], (unsigned long long)planned,
        (unsigned long long)end, (unsigned long long)held);
    pthread_mutex_lock(&g.mu);
    g.printed = i + 1;
    for (uint32_t k = 0; k < s->K; k++) pthread_cond_broadcast(&g.w[k].gcv);
    pthread_mutex_unlock(&g.mu);
}

/* the window loop: each window started on time, the memory held set, its records printed
 * once every worker is done with it */
static void run_windows(struct outcome *o) {
    const struct schedule *s = &g.sch;
    out("ready %llu %llu %u %u %u\n", (unsigned long long)g.t0, (unsigned long long)s->window_ns, s->E, s->K, s->M);
    fflush(stdout);
    for (uint32_t i = 0; i < s->E && !stopping(); i++) {
        uint64_t planned = g.t0 + (uint64_t)i * s->window_ns;
        sleep_until(&g.mu, &g.cv, planned);
        if (stopping()) break;
        out("start %u %d %d %llu %llu\n", i, rep_of(s, i), s->win[stored_of(s, i)], (unsigned long long)planned,
            (unsigned long long)now_ns());
        if (!flushed(o)) break;
        uint64_t held = held_set(s->held[stored_of(s, i)]);
        wait_window_done(i);
        if (stopping()) break;
        /* the last window lasts its full W too (samplers measure it up to its end) */
        if (i + 1 == s->E) sleep_until(&g.mu, &g.cv, planned + s->window_ns);
        if (stopping()) break;
        print_window(i, planned, held);
        if (!flushed(o)) break;
    }
    request_stop();
}

static void teardown_stressors(const uint8_t *used) {
    struct schedule *s = &g.sch;
    for (uint32_t k = 0; k < s->K; k++)
        for (uint32_t m = 0; m < s->M; m++)
            if (g.w[k].ts[m] && s->stressors[m].ops->thread_teardown) s->stressors[m].ops->thread_teardown(&s->stressors[m], g.w[k].ts[m]);
    for (uint32_t m = 0; m < s->M; m++)
        if (used[m] && s->stressors[m].ops->teardown) s->stressors[m].ops->teardown(&s->stressors[m]);
}

int main(int argc, char **argv) {
    /* die with the parent: SIGTERM takes the normal stop path (threads end, files go) */
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) return EXIT_STOPPED;   /* the parent died before prctl took effect */

    struct args a;
    parse_args(argc, argv, &a);
    drop_privileges(a.oom_score_adj);
    if (a.probe) return run_probe(&a);
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    signal(SIGPIPE, SIG_IGN);
    set_udp_sink(a.sink);

    load_schedule(a.sched_path);
    g.env.nthreads = (int)g.sch.K;
    choose_cpus(a.cpus);
    set_memory_budget(a.memory_budget, a.memory_margin);
    held_reserve(g.sch.held_max, a.memory_margin, a.memory_budget);
    g.main_clock_ok = !pthread_getcpuclockid(pthread_self(), &g.main_clock);
    uint8_t *used = stressors_used();
    uint64_t scratch = check_scratch(used);

    start_signal_thread();
    init_shared_sync();
    print_host_info(scratch);
    setup_stressors(used, a.memory_budget);
    char ppath[64];
    snprintf(ppath, sizeof ppath, "/proc/%d/stat", (int)getppid());
    g.parent_statfd = open(ppath, O_RDONLY | O_CLOEXEC);
    start_workers();

    struct outcome o = {EXIT_DONE, "done", ""};
    char mem_err[ERRLEN] = "";
    if (release_workers(a.memory_margin, a.start_delay_ms, mem_err)) refuse(&o, mem_err);
    else if (!stopping()) run_windows(&o);
    if (g.stop_sig && o.code == EXIT_DONE) {
        o.code = EXIT_STOPPED;
        o.why = "stopped";
        snprintf(o.detail, sizeof o.detail, "%s", strsignal(g.stop_sig));
    }
    for (uint32_t k = 0; k < g.sch.K; k++) pthread_join(g.w[k].tid, NULL);
    if (g.yield_placement) {
        /* thread-windows in which a worker left its CPU (the "Placement" note) */
        uint64_t yielded = 0;
        for (uint32_t k = 0; k < g.sch.K; k++) yielded += g.w[k].yielded;
        out("info yielded %llu of %llu thread-windows\n", (unsigned long long)yielded,
            (unsigned long long)g.sch.E * g.sch.K);
    }
    out("exit %s %s\n", o.why, o.detail);
    fflush(stdout);
    /* Stopped by a signal: scratch files are already unlinked and the kernel frees memory
     * faster than per-buffer teardown would, so leave at once (the 50 ms stop budget). */
    if (o.code == EXIT_STOPPED) _exit(o.code);
    teardown_stressors(used);
    return o.code;
}

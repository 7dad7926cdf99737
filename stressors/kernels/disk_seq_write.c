/* disk_seq_write: sequential buffered writes to a scratch file (wrapping inside the
 * thread's slice, so the footprint never exceeds file_bytes) with fdatasync every
 * sync_every_bytes, which forces the data to the device; what was synced an interval ago
 * is punched out behind the writer (like a log being consumed), so the file keeps only a
 * few MiB of blocks and releasing it at exit stays fast. One unit = one write, plus the
 * sync when one is due; bytes = bytes written.
 *
 * A sync (with its punch) costs ~30x a write and varies 3x, so it is only started when a
 * cautious bound on its measured cost fits before the deadline. When one is due and does
 * not fit, the step returns STEP_WAIT and the runner waits for the deadline instead of
 * writing on: the sync opens the next segment, and every sync still covers
 * sync_every_bytes (writing on would pile up dirty data for one long sync later, a pattern
 * this variant does not stand for). */
#define _GNU_SOURCE
#include "../disk_io.h"
#include <fcntl.h>
#include <unistd.h>
#include <linux/falloc.h>

static int sw_setup(struct stressor *s, char *err) { return disk_setup_file(s, 0, 1 << 20, err); }

static void punch(int fd, uint64_t from, uint64_t to) {
    if (to > from)
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(to - from));
}

/* fdatasync, then punch out everything synced except the last interval behind pos */
static void sync_and_punch(struct disk_shared *sh, struct disk_state *st, uint64_t sync_every) {
    uint64_t t0 = now_ns();
    fdatasync(sh->fd);
    st->since_sync = 0;
    if (st->wrapped) {
        punch(sh->fd, st->mark, st->hi);
        st->mark = st->lo;
        st->wrapped = 0;
    }
    uint64_t keep_from = st->pos >= st->lo + sync_every ? st->pos - sync_every : st->lo;
    if (keep_from > st->mark) {
        punch(sh->fd, st->mark, keep_from);
        st->mark = keep_from;
    }
    op_cost_add(&st->slow, now_ns() - t0);
}

static uint64_t sw_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    struct disk_shared *sh = s->shared;
    struct disk_state *st = ts;
    uint64_t ops = 0, sync_every = 0;
    char err[ERRLEN];
    param_u64(s, "sync_every_bytes", 8 << 20, &sync_every, err);
    for (uint64_t u = 0; u < units; u++) {
        if (st->since_sync >= sync_every) {
            if (now_ns() + op_cost_bound(&st->slow) > deadline_ns)
                return ops ? ops : STEP_WAIT;  /* report the writes first: the runner times them */
            sync_and_punch(sh, st, sync_every);
        }
        ssize_t n = pwrite(sh->fd, st->buf, sh->io_bytes, (off_t)st->pos);
        if (n > 0) { *bytes += (uint64_t)n; ops++; st->since_sync += (uint64_t)n; }
        st->pos += sh->io_bytes;
        if (st->pos >= st->hi) { st->pos = st->lo; st->wrapped = 1; }
    }
    return ops;
}

const struct kernel_ops kernel_disk_seq_write = {
    .name = "disk_seq_write", .setup = sw_setup, .thread_setup = disk_thread_setup_range, .step = sw_step,
    .thread_teardown = disk_thread_teardown, .thread_resident = disk_thread_resident, .teardown = disk_teardown, .scratch_bytes = disk_scratch_bytes,
    .watches_deadline = 1,
};

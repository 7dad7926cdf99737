/* disk_seq_write: sequential buffered writes to a scratch file (wrapping inside the
 * thread's slice, so the footprint never exceeds file_bytes) with fdatasync every
 * sync_every_bytes, which forces the data to the device; data synced an interval ago is
 * punched out behind the writer. One unit = one write; bytes = bytes written. */
#define _GNU_SOURCE
#include "../disk_io.h"
#include <fcntl.h>
#include <unistd.h>
#include <linux/falloc.h>

static int sw_setup(struct stressor *s, char *err) { return disk_setup_file(s, 0, 1 << 20, err); }

static uint64_t sw_step(struct stressor *s, void *ts, uint64_t units, uint64_t *bytes) {
    struct disk_shared *sh = s->shared;
    struct disk_state *st = ts;
    uint64_t ops = 0, sync_every = 0;
    char err[ERRLEN];
    param_u64(s, "sync_every_bytes", 8 << 20, &sync_every, err);
    for (uint64_t u = 0; u < units; u++) {
        ssize_t n = pwrite(sh->fd, st->buf, sh->io_bytes, (off_t)st->pos);
        if (n > 0) { *bytes += (uint64_t)n; ops++; st->since_sync += (uint64_t)n; }
        st->pos += sh->io_bytes;
        if (st->pos >= st->hi) st->pos = st->lo;
        if (st->since_sync >= sync_every) {
            fdatasync(sh->fd);
            st->since_sync = 0;
            /* punch out what was synced one interval ago: the file keeps only a few MiB of
             * blocks (like a log being consumed), so releasing it at exit stays fast */
            if (st->pos >= st->lo + 2 * sync_every)
                fallocate(sh->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                          (off_t)(st->pos - 2 * sync_every), (off_t)sync_every);
            else if (st->pos == st->lo && st->hi - st->lo >= 2 * sync_every)
                fallocate(sh->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                          (off_t)(st->hi - 2 * sync_every), (off_t)(2 * sync_every));
        }
    }
    return ops;
}

const struct kernel_ops kernel_disk_seq_write = {
    .name = "disk_seq_write", .setup = sw_setup, .thread_setup = disk_thread_setup_range, .step = sw_step,
    .thread_teardown = disk_thread_teardown, .teardown = disk_teardown, .scratch_bytes = disk_scratch_bytes,
};

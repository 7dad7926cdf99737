/* disk_seq_read: sequential reads of a scratch file, O_DIRECT where the filesystem allows
 * (otherwise buffered reads followed by posix_fadvise(DONTNEED), and the runner reports the
 * fallback). One unit = one read of io_bytes; one op = one read; bytes = bytes read. */
#define _GNU_SOURCE
#include "../disk_io.h"
#include <fcntl.h>
#include <unistd.h>

static int sr_setup(struct stressor *s, char *err) { return disk_setup_file(s, 1, 1 << 20, err); }

static uint64_t sr_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    struct disk_shared *sh = s->shared;
    struct disk_state *st = ts;
    uint64_t ops = 0;
    for (uint64_t u = 0; u < units; u++) {
        uint64_t t = now_ns();
        if (!op_cost_fits(&st->io, t, deadline_ns)) return ops ? ops : STEP_WAIT;
        ssize_t n = pread(sh->fd, st->buf, sh->io_bytes, (off_t)st->pos);
        op_cost_add(&st->io, now_ns() - t);
        if (n > 0) {
            *bytes += (uint64_t)n;
            ops++;
            if (!sh->direct) posix_fadvise(sh->fd, (off_t)st->pos, n, POSIX_FADV_DONTNEED);
        }
        st->pos += sh->io_bytes;
        if (st->pos >= st->hi) st->pos = st->lo;
    }
    return ops;
}

const struct kernel_ops kernel_disk_seq_read = {
    .name = "disk_seq_read", .setup = sr_setup, .thread_setup = disk_thread_setup_range, .step = sr_step,
    .thread_teardown = disk_thread_teardown, .thread_resident = disk_thread_resident, .teardown = disk_teardown, .scratch_bytes = disk_scratch_bytes,
    .watches_deadline = 1,
};

/* disk_rand_read: random aligned reads (4 KiB) of a scratch file, O_DIRECT where allowed
 * (else buffered + DONTNEED, reported). One unit = one read; bytes = bytes read. */
#define _GNU_SOURCE
#include "../disk_io.h"
#include <fcntl.h>
#include <unistd.h>

static int rr_setup(struct stressor *s, char *err) { return disk_setup_file(s, 1, 4096, err); }

static uint64_t rr_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    struct disk_shared *sh = s->shared;
    struct disk_state *st = ts;
    uint64_t ops = 0, nios = sh->file_bytes / sh->io_bytes;
    for (uint64_t u = 0; u < units; u++) {
        uint64_t t = now_ns();
        if (!op_cost_fits(&st->io, t, deadline_ns)) return ops ? ops : STEP_WAIT;
        off_t off = (off_t)((xorshift64(&st->x) % nios) * sh->io_bytes);
        ssize_t n = pread(sh->fd, st->buf, sh->io_bytes, off);
        op_cost_add(&st->io, now_ns() - t);
        if (n > 0) {
            *bytes += (uint64_t)n;
            ops++;
            if (!sh->direct) posix_fadvise(sh->fd, off, n, POSIX_FADV_DONTNEED);
        }
    }
    return ops;
}

const struct kernel_ops kernel_disk_rand_read = {
    .name = "disk_rand_read", .setup = rr_setup, .thread_setup = disk_thread_setup_range, .step = rr_step,
    .thread_teardown = disk_thread_teardown, .thread_resident = disk_thread_resident, .teardown = disk_teardown, .scratch_bytes = disk_scratch_bytes,
    .watches_deadline = 1,
};

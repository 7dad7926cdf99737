/* disk_readahead: buffered sequential reads that trigger the kernel's readahead; each
 * range is dropped from the page cache after it is read (posix_fadvise DONTNEED), so the
 * next pass reads from the device again. One unit = one read; bytes = bytes read. */
#define _GNU_SOURCE
#include "../disk_io.h"
#include <fcntl.h>
#include <unistd.h>

static int ra_setup(struct stressor *s, char *err) { return disk_setup_file(s, 1, 128 << 10, err); }

static uint64_t rdah_step(struct stressor *s, void *ts, uint64_t units, uint64_t *bytes) {
    struct disk_shared *sh = s->shared;
    struct disk_state *st = ts;
    uint64_t ops = 0;
    for (uint64_t u = 0; u < units; u++) {
        if (st->pos == st->lo)  /* new pass: nothing of this slice may be cached */
            posix_fadvise(sh->fd, (off_t)st->lo, (off_t)(st->hi - st->lo), POSIX_FADV_DONTNEED);
        ssize_t n = pread(sh->fd, st->buf, sh->io_bytes, (off_t)st->pos);
        if (n > 0) {
            *bytes += (uint64_t)n;
            ops++;
            posix_fadvise(sh->fd, (off_t)st->pos, n, POSIX_FADV_DONTNEED);
        }
        st->pos += sh->io_bytes;
        if (st->pos >= st->hi) st->pos = st->lo;
    }
    return ops;
}

const struct kernel_ops kernel_disk_readahead = {
    .name = "disk_readahead", .setup = ra_setup, .thread_setup = disk_thread_setup_range, .step = rdah_step,
    .thread_teardown = disk_thread_teardown, .teardown = disk_teardown, .scratch_bytes = disk_scratch_bytes,
};

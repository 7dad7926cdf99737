/* disk_readahead: buffered sequential reads kept ahead_bytes ahead by readahead(2), which
 * fills the page cache asynchronously through the kernel's readahead path; each range is
 * dropped from the page cache after it is read (posix_fadvise DONTNEED), so the next pass
 * reads from the device again. One unit = one read (plus the readahead that keeps the
 * window full); bytes = bytes read.
 *
 * The file's heuristic readahead is switched off (POSIX_FADV_RANDOM) and the window is the
 * variant's own: with the host's read_ahead_kb (8 MiB on some virtual disks) a miss would
 * be one synchronous multi-MiB read that no deadline can cut, and two threads reading their
 * own slices through one file would confuse the heuristic's single per-file state. */
#define _GNU_SOURCE
#include "../disk_io.h"
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int ra_setup(struct stressor *s, char *err) {
    uint64_t ahead;
    if (param_u64(s, "ahead_bytes", 1 << 20, &ahead, err)) return -1;
    if (disk_setup_file(s, 1, 128 << 10, err)) return -1;
    struct disk_shared *sh = s->shared;
    int rc = posix_fadvise(sh->fd, 0, 0, POSIX_FADV_RANDOM);
    if (rc) {
        snprintf(err, ERRLEN, "%s: posix_fadvise(RANDOM) under %s: %s", s->name, s->env->scratch_dir, strerror(rc));
        return -1;
    }
    sh->ahead_bytes = ahead < sh->io_bytes ? sh->io_bytes : ahead;
    return 0;
}

static uint64_t rdah_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    struct disk_shared *sh = s->shared;
    struct disk_state *st = ts;
    uint64_t ops = 0;
    for (uint64_t u = 0; u < units; u++) {
        uint64_t t = now_ns();
        if (!op_cost_fits(&st->io, t, deadline_ns)) return ops ? ops : STEP_WAIT;
        if (st->pos == st->lo) {  /* new pass: nothing of this slice may be cached */
            posix_fadvise(sh->fd, (off_t)st->lo, (off_t)(st->hi - st->lo), POSIX_FADV_DONTNEED);
            st->mark = st->lo;
        }
        uint64_t want = st->pos + sh->ahead_bytes < st->hi ? st->pos + sh->ahead_bytes : st->hi;
        if (want > st->mark) {
            readahead(sh->fd, (off64_t)st->mark, (size_t)(want - st->mark));
            st->mark = want;
        }
        ssize_t n = pread(sh->fd, st->buf, sh->io_bytes, (off_t)st->pos);
        if (n > 0) {
            *bytes += (uint64_t)n;
            ops++;
            posix_fadvise(sh->fd, (off_t)st->pos, n, POSIX_FADV_DONTNEED);
        }
        op_cost_add(&st->io, now_ns() - t);
        st->pos += sh->io_bytes;
        if (st->pos >= st->hi) st->pos = st->lo;
    }
    return ops;
}

const struct kernel_ops kernel_disk_readahead = {
    .name = "disk_readahead", .setup = ra_setup, .thread_setup = disk_thread_setup_range, .step = rdah_step,
    .thread_teardown = disk_thread_teardown, .thread_resident = disk_thread_resident, .teardown = disk_teardown, .scratch_bytes = disk_scratch_bytes,
    .watches_deadline = 1,
};

/* disk_fallocate: allocate an extent with fallocate(), commit it with fdatasync (a journal
 * write), then punch it out again (FALLOC_FL_PUNCH_HOLE): file-system allocator and journal
 * load with little data movement. One unit = one allocate+sync+punch cycle;
 * bytes = extent bytes allocated. A cycle cannot be cut, so it is only started when a
 * cautious bound on its measured cost fits before the deadline. */
#define _GNU_SOURCE
#include "../disk_io.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <linux/falloc.h>

static int fa_setup(struct stressor *s, char *err) {
    uint64_t extent;
    if (param_u64(s, "extent_bytes", 4 << 20, &extent, err)) return -1;
    if (disk_setup_file(s, 0, extent, err)) return -1;
    struct disk_shared *sh = s->shared;
    /* probe once so a file system without punch-hole support is reported at start-up */
    if (fallocate(sh->fd, 0, 0, 4096) || fallocate(sh->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096)) {
        snprintf(err, ERRLEN, "%s: fallocate/punch-hole not supported under %s", s->name, s->env->scratch_dir);
        return -1;
    }
    return 0;
}

static uint64_t fa_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    struct disk_shared *sh = s->shared;
    struct disk_state *st = ts;
    uint64_t ops = 0;
    for (uint64_t u = 0; u < units; u++) {
        uint64_t t0 = now_ns();
        if (t0 + op_cost_bound(&st->slow) > deadline_ns) return ops ? ops : STEP_WAIT;
        if (fallocate(sh->fd, 0, (off_t)st->pos, (off_t)sh->io_bytes) == 0) {
            fdatasync(sh->fd);
            fallocate(sh->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)st->pos, (off_t)sh->io_bytes);
            *bytes += sh->io_bytes;
            ops++;
            op_cost_add(&st->slow, now_ns() - t0);
        }
        st->pos += sh->io_bytes;
        if (st->pos >= st->hi) st->pos = st->lo;
    }
    return ops;
}

const struct kernel_ops kernel_disk_fallocate = {
    .name = "disk_fallocate", .setup = fa_setup, .thread_setup = disk_thread_setup_range, .step = fa_step,
    .thread_teardown = disk_thread_teardown, .thread_resident = disk_thread_resident, .teardown = disk_teardown, .scratch_bytes = disk_scratch_bytes,
    .watches_deadline = 1,
};

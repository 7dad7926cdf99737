/* pagecache_rw: buffered IO that lives in the page cache, as a service with a hot working
 * file does: 1 MiB-class writes and re-reads over a scratch file small enough to stay
 * cached, no fsync, so the data reaches the disk only through the kernel's own writeback.
 * Moves the page cache (mem.cache_B grows by the file), dirty pages and memory copies,
 * not the device at the moment of the call. The file is the variant's own, sparse,
 * unlinked at creation (its dirty pages are dropped, never written, when the runner
 * exits). One unit = one read or write of io_bytes (read_percent of them reads, in a
 * fixed interleave); bytes = bytes read + written. */
#define _GNU_SOURCE
#include "../disk_io.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int pc_setup(struct stressor *s, char *err) { return disk_setup_file(s, 0, 1 << 20, err); }

static uint64_t pc_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    struct disk_shared *sh = s->shared;
    struct disk_state *st = ts;
    uint64_t ops = 0, read_pct = 50;
    char err[ERRLEN];
    param_u64(s, "read_percent", 50, &read_pct, err);
    for (uint64_t u = 0; u < units; u++) {
        /* reads only once the slice has been written once: they must hit cached data */
        int rd = st->wrapped && (xorshift64(&st->x) % 100) < read_pct;
        ssize_t n = rd ? pread(sh->fd, st->buf, sh->io_bytes, (off_t)st->pos)
                       : pwrite(sh->fd, st->buf, sh->io_bytes, (off_t)st->pos);
        if (n > 0) { *bytes += (uint64_t)n; ops++; }
        st->pos += sh->io_bytes;
        if (st->pos >= st->hi) { st->pos = st->lo; st->wrapped = 1; }
    }
    return ops;
}

const struct kernel_ops kernel_pagecache_rw = {
    .name = "pagecache_rw", .setup = pc_setup, .thread_setup = disk_thread_setup_range, .step = pc_step,
    .thread_teardown = disk_thread_teardown, .thread_resident = disk_thread_resident, .teardown = disk_teardown, .scratch_bytes = disk_scratch_bytes,
};

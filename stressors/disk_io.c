/* Helpers for the disk kernels (not a kernel itself): scratch file, per-thread ranges. */
#define _GNU_SOURCE
#include "disk_io.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct { int fd, refs; uint64_t bytes; } data_file = {-1, 0, 0};

int disk_setup_file(struct stressor *s, int fill, uint64_t dflt_io, char *err) {
    struct disk_shared *sh = calloc(1, sizeof *sh);
    if (param_u64(s, "file_bytes", 64ull << 20, &sh->file_bytes, err) ||
        param_u64(s, "io_bytes", dflt_io, &sh->io_bytes, err)) { free(sh); return -1; }
    if (sh->io_bytes < 4096) sh->io_bytes = 4096;
    sh->io_bytes &= ~4095ull;
    sh->file_bytes = sh->file_bytes / sh->io_bytes * sh->io_bytes;
    int want_direct = param_bool(s, "direct", 0), ok = 0;
    char why[ERRLEN] = "";
    if (!fill) {
        sh->fd = scratch_file(s, sh->file_bytes, 0, want_direct, &ok, why);
        if (sh->fd < 0) { snprintf(err, ERRLEN, "%s", why); free(sh); return -1; }
    } else {
        if (data_file.fd < 0) {
            data_file.fd = scratch_file(s, sh->file_bytes, 1, 0, NULL, why);
            if (data_file.fd < 0) { snprintf(err, ERRLEN, "%s", why); free(sh); return -1; }
            data_file.bytes = sh->file_bytes;
        } else if (sh->file_bytes > data_file.bytes) {
            if (fill_range(data_file.fd, data_file.bytes, sh->file_bytes, why)) {
                snprintf(err, ERRLEN, "%s: growing the data file: %s", s->name, why);
                free(sh);
                return -1;
            }
            data_file.bytes = sh->file_bytes;
        }
        data_file.refs++;
        sh->shares_data_file = 1;
        /* a descriptor of its own (own flags) on the unlinked file, via /proc/self/fd */
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", data_file.fd);
        sh->fd = -1;
        if (want_direct) {
            sh->fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
            if (sh->fd >= 0) ok = 1;
            else snprintf(why, sizeof why, "%s", strerror(errno));
        }
        if (sh->fd < 0) sh->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (sh->fd < 0) {
            snprintf(err, ERRLEN, "%s: reopening the data file: %s", s->name, strerror(errno));
            free(sh);
            return -1;
        }
    }
    sh->direct = ok;
    if (want_direct && !ok)
        snprintf(s->note, ERRLEN, "O_DIRECT refused by the filesystem under %s (%s): buffered IO with "
                 "posix_fadvise(DONTNEED) after each read instead", s->env->scratch_dir, why);
    s->shared = sh;
    return 0;
}

void *disk_thread_setup_range(struct stressor *s, int thread, char *err) {
    struct disk_shared *sh = s->shared;
    struct disk_state *st = calloc(1, sizeof *st);
    if (posix_memalign((void **)&st->buf, 4096, sh->io_bytes)) {
        snprintf(err, ERRLEN, "%s: cannot allocate IO buffer", s->name);
        return NULL;
    }
    memset(st->buf, 0x5A, sh->io_bytes);
    /* each thread owns a contiguous slice, so concurrent sequential streams stay sequential */
    uint64_t ios = sh->file_bytes / sh->io_bytes, n = (uint64_t)s->env->nthreads;
    uint64_t per = ios / n ? ios / n : 1;
    st->lo = ((uint64_t)thread % n) * per * sh->io_bytes;
    st->hi = st->lo + per * sh->io_bytes;
    if (st->hi > sh->file_bytes) st->hi = sh->file_bytes;
    st->pos = st->mark = st->lo;
    st->x = 0x51ED270B2A1ull + (uint64_t)thread;
    return st;
}

void disk_thread_resident(struct stressor *s, void *ts, int resident) {
    const struct disk_shared *sh = s->shared;
    buffer_resident(((struct disk_state *)ts)->buf, sh->io_bytes, resident, 0x5A);
}

void disk_thread_teardown(struct stressor *s, void *ts) {
    (void)s;
    struct disk_state *st = ts;
    free(st->buf);
    free(st);
}

void disk_teardown(struct stressor *s) {
    struct disk_shared *sh = s->shared;
    if (!sh) return;
    close(sh->fd);   /* the file was unlinked at creation: the last close frees its blocks */
    if (sh->shares_data_file && --data_file.refs == 0) {
        close(data_file.fd);
        data_file.fd = -1;
    }
    free(sh);
}

uint64_t disk_scratch_bytes(const struct stressor *s) {
    uint64_t b = 0;
    char err[ERRLEN];
    param_u64(s, "file_bytes", 128ull << 20, &b, err);
    return b;
}

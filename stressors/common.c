/* Helpers shared by the kernels: parameters, host cache sizes, memory, scratch files. */
#define _GNU_SOURCE
#include "stressor.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t thread_cpu_of(pthread_t t) {
    clockid_t clk;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &clk) || clock_gettime(clk, &ts)) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int read_sys(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    if (!fgets(buf, (int)n, f)) { fclose(f); return -1; }
    fclose(f);
    buf[strcspn(buf, "\n")] = 0;
    return 0;
}

/* Sizes like "32K", "1024K", "32M" as the kernel writes them in cache/index<N>/size. */
static uint64_t parse_size(const char *t) {
    char *end;
    uint64_t v = strtoull(t, &end, 10);
    if (*end == 'K') v <<= 10;
    else if (*end == 'M') v <<= 20;
    else if (*end == 'G') v <<= 30;
    return v;
}

uint64_t cache_bytes(const char *which) {
    uint64_t l1d = 0, l2 = 0, llc = 0;
    int llc_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[128], level[16], type[32], size[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (read_sys(path, level, sizeof level)) break;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (read_sys(path, type, sizeof type)) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (read_sys(path, size, sizeof size)) continue;
        int lv = atoi(level);
        uint64_t sz = parse_size(size);
        if (!strcmp(type, "Instruction")) continue;
        if (lv == 1) l1d = sz;
        if (lv == 2) l2 = sz;
        if (lv >= llc_level) { llc_level = lv; llc = sz; }
    }
    if (!strcmp(which, "l1d")) return l1d;
    if (!strcmp(which, "l2")) return l2;
    if (!strcmp(which, "llc")) return llc;
    return 0;
}

static const char *param_raw(const struct stressor *s, const char *key, char *val, size_t n) {
    size_t klen = strlen(key);
    const char *p = s->params;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > klen && !strncmp(p, key, klen) && p[klen] == '=') {
            size_t vl = len - klen - 1;
            if (vl >= n) vl = n - 1;
            memcpy(val, p + klen + 1, vl);
            val[vl] = 0;
            return val;
        }
        p += len + (eol ? 1 : 0);
    }
    return NULL;
}

int param_u64(const struct stressor *s, const char *key, uint64_t dflt, uint64_t *out, char *err) {
    char val[128];
    if (!param_raw(s, key, val, sizeof val)) { *out = dflt; return 0; }
    char *end;
    uint64_t v;
    if (isdigit((unsigned char)val[0])) {
        v = strtoull(val, &end, 10);
    } else {
        char name[16] = {0};
        size_t i = 0;
        while (val[i] && isalnum((unsigned char)val[i]) && i < sizeof name - 1) { name[i] = val[i]; i++; }
        v = cache_bytes(name);
        if (!v) {
            snprintf(err, ERRLEN, "%s: parameter %s=%s: host cache size %s not found under "
                     "/sys/devices/system/cpu/cpu0/cache", s->name, key, val, name);
            return -1;
        }
        end = val + i;
        if (*end == '/' || *end == '*') {
            char op = *end;
            uint64_t f = strtoull(end + 1, &end, 10);
            if (!f) { snprintf(err, ERRLEN, "%s: parameter %s=%s: bad factor", s->name, key, val); return -1; }
            v = op == '/' ? v / f : v * f;
        }
    }
    if (*end) {
        snprintf(err, ERRLEN, "%s: parameter %s=%s is not an integer or cache name", s->name, key, val);
        return -1;
    }
    *out = v;
    return 0;
}

int param_bool(const struct stressor *s, const char *key, int dflt) {
    char val[32];
    if (!param_raw(s, key, val, sizeof val)) return dflt;
    return !strcmp(val, "1") || !strcmp(val, "true");
}

void *alloc_touched(size_t bytes, char *err) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        snprintf(err, ERRLEN, "cannot allocate %zu MiB: %s", bytes >> 20, strerror(errno));
        return NULL;
    }
    /* Big buffers (the memory-class stressors) ask for transparent huge pages: their cost
     * is DRAM traffic either way, and 2 MiB pages make setup and, above all, release fast
     * (unmapping 1 GiB of 4 KiB pages takes ~0.1 s, past the 50 ms stop budget). */
    if (bytes >= (64u << 20)) madvise(p, bytes, MADV_HUGEPAGE);
    /* touch every page now (before t0) so page faults never eat into a timed segment */
    for (size_t off = 0; off < bytes; off += 4096) ((volatile char *)p)[off] = 1;
    return p;
}

void free_touched(void *p, size_t bytes) {
    if (p) munmap(p, bytes);
}

void buffer_resident(void *p, size_t bytes, int resident, int fill) {
    if (!p || !bytes) return;
    if (resident) {
        memset(p, fill, bytes);
        return;
    }
    /* only the whole pages inside the buffer: a partial page may hold the allocator's data */
    uintptr_t lo = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, hi = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

int fill_range(int fd, uint64_t from, uint64_t to, char *err) {
    size_t chunk = 1 << 20;
    char *buf = malloc(chunk);
    uint64_t x = 0x9E3779B97F4A7C15ull ^ from;
    for (size_t i = 0; i < chunk / 8; i++) ((uint64_t *)buf)[i] = xorshift64(&x);
    for (uint64_t off = from; off < to; off += chunk) {
        size_t n = to - off < chunk ? (size_t)(to - off) : chunk;
        if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n) {
            snprintf(err, ERRLEN, "%s", strerror(errno));
            free(buf);
            return -1;
        }
    }
    free(buf);
    fsync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  /* later reads go to the device */
    return 0;
}

int scratch_file(const struct stressor *s, uint64_t bytes, int fill, int want_direct, int *direct_ok, char *err) {
    if (!s->env->scratch_dir) {
        snprintf(err, ERRLEN, "%s: disk stressor needs --scratch-dir", s->name);
        return -1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/.mimesys-%d-%s", s->env->scratch_dir, (int)getpid(), s->name);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, ERRLEN, "%s: cannot create scratch file %s: %s", s->name, path, strerror(errno));
        return -1;
    }
    unlink(path);  /* the space lives exactly as long as the fd, i.e. this process */
    if (fill) {
        if (fill_range(fd, 0, bytes, err)) {
            char why[ERRLEN];
            snprintf(why, sizeof why, "%s: writing scratch file: %s", s->name, err);
            snprintf(err, ERRLEN, "%s", why);
            close(fd);
            return -1;
        }
    } else if (ftruncate(fd, (off_t)bytes)) {
        snprintf(err, ERRLEN, "%s: sizing scratch file: %s", s->name, strerror(errno));
        close(fd);
        return -1;
    }
    if (direct_ok) *direct_ok = 0;
    if (want_direct) {
        int fl = fcntl(fd, F_GETFL);
        if (fcntl(fd, F_SETFL, fl | O_DIRECT) == 0) {
            if (direct_ok) *direct_ok = 1;
        } else {
            /* the filesystem refuses O_DIRECT (tmpfs, some FUSE): the caller says so */
            snprintf(err, ERRLEN, "%s", strerror(errno));
        }
    }
    return fd;
}

__thread uint64_t step_pace_allow = UINT64_MAX;

/* The one place that lists every kernel by name (catalog.toml refers to these names). */
#include <string.h>
#include "stressor.h"

#define KERNELS(X) X(int_crc32) X(fp_poly) X(simd_dist) X(zstd_compress) X(memcpy) X(pointer_chase) \
    X(stream_triad) X(stream_read) X(stream_copy) X(random_access) X(hashmap_insert) X(disk_seq_read) X(disk_seq_write)              \
    X(disk_rand_read) X(disk_fallocate) X(disk_readahead) X(tcp_loopback) X(udp_sink) X(disk_qd_read) X(disk_qd_write) X(pagecache_rw)         \
    X(page_fault_churn) X(cpu_contend) X(futex_pingpong)

#define DECLARE(k) extern const struct kernel_ops kernel_##k;
KERNELS(DECLARE)
#define ENTRY(k) &kernel_##k,
static const struct kernel_ops *const all_kernels[] = {KERNELS(ENTRY)};

const struct kernel_ops *find_kernel(const char *name) {
    for (size_t i = 0; i < sizeof all_kernels / sizeof *all_kernels; i++)
        if (!strcmp(all_kernels[i]->name, name)) return all_kernels[i];
    return NULL;
}

void list_kernels(void (*fn)(const char *name)) {
    for (size_t i = 0; i < sizeof all_kernels / sizeof *all_kernels; i++) fn(all_kernels[i]->name);
}

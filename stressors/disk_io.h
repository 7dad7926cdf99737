/* State shared by the file-based disk kernels. The read kernels (seq read, random read,
 * readahead) share one filled, unlinked data file, each through its own descriptor
 * (O_DIRECT or buffered); the write kernels get a file of their own. */
#ifndef MIMESYS_DISK_IO_H
#define MIMESYS_DISK_IO_H
#include "stressor.h"

struct disk_shared { int fd; uint64_t file_bytes, io_bytes; int direct, shares_data_file; };
struct disk_state { uint8_t *buf; uint64_t pos, lo, hi, since_sync, x; };

/* fill = 1: read kernels, use (and grow if needed) the shared data file; fill = 0: a sparse
 * file of the variant's own. O_DIRECT when the `direct` parameter asks and the FS allows. */
int disk_setup_file(struct stressor *s, int fill, uint64_t dflt_io, char *err);
void *disk_thread_setup_range(struct stressor *s, int thread, char *err);
void disk_thread_teardown(struct stressor *s, void *ts);
void disk_teardown(struct stressor *s);
uint64_t disk_scratch_bytes(const struct stressor *s);
#endif

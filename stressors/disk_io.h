/* State shared by the file-based disk kernels: one unlinked scratch file per variant. */
#ifndef MIMESYS_DISK_IO_H
#define MIMESYS_DISK_IO_H
#include "stressor.h"

struct disk_shared { int fd; uint64_t file_bytes, io_bytes; int direct; };
struct disk_state { uint8_t *buf; uint64_t pos, lo, hi, since_sync, x; };

/* setup for the read kernels: a filled scratch file, O_DIRECT when asked and allowed */
int disk_setup_file(struct stressor *s, int fill, uint64_t dflt_io, char *err);
void *disk_thread_setup_range(struct stressor *s, int thread, char *err);
void disk_thread_teardown(struct stressor *s, void *ts);
void disk_teardown(struct stressor *s);
uint64_t disk_scratch_bytes(const struct stressor *s);
#endif

/* disk_qd_write: O_DIRECT overwrites of a filled scratch file (no allocation, no journal:
 * the data goes straight to the device) with up to `depth` in flight through io_uring,
 * sequential in the thread's slice (a bulk loader, a WAL at 1 MiB) or `random` 4 KiB (a
 * database's page writes). Without io_uring: one synchronous write at a time, in a note;
 * without O_DIRECT: buffered writes pushed out with sync_file_range, also in a note.
 * One unit = one write completed; bytes = bytes written. Machinery in disk_aio.c. */
#include "../disk_aio.h"

static int qw_setup(struct stressor *s, char *err) { return aio_setup(s, 1, err); }

const struct kernel_ops kernel_disk_qd_write = {
    .name = "disk_qd_write", .setup = qw_setup, .thread_setup = aio_thread_setup, .step = aio_step,
    .thread_teardown = aio_thread_teardown, .thread_resident = aio_thread_resident, .teardown = aio_teardown, .scratch_bytes = aio_scratch_bytes,
    .watches_deadline = 1, .pending_bytes = aio_pending_bytes, .file_by_size = 1,
    .helper_cpu_ns = aio_helper_cpu_ns,
};

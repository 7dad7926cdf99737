/* disk_qd_read: O_DIRECT reads with up to `depth` in flight through io_uring (sequential in
 * the thread's slice, or `random` over the file), the way a database or a backup reads;
 * without io_uring it falls back to one synchronous read at a time and says so in a note.
 * One unit = one read completed; bytes = bytes read. Machinery in disk_aio.c. */
#include "../disk_aio.h"

static int qr_setup(struct stressor *s, char *err) { return aio_setup(s, 0, err); }

const struct kernel_ops kernel_disk_qd_read = {
    .name = "disk_qd_read", .setup = qr_setup, .thread_setup = aio_thread_setup, .step = aio_step,
    .thread_teardown = aio_thread_teardown, .thread_resident = aio_thread_resident, .teardown = aio_teardown, .scratch_bytes = aio_scratch_bytes,
    .watches_deadline = 1, .pending_bytes = aio_pending_bytes, .file_by_size = 1,
    .helper_cpu_ns = aio_helper_cpu_ns,
};

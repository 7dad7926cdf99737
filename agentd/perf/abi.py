"""Kernel ABI of perf_event_open(2), as ctypes: constants, struct perf_event_attr, ioctl and
syscall numbers. Definitions only — the logic that uses them is in events.py.

Values are transcribed from include/uapi/linux/perf_event.h (Linux 6.x) and the per-arch
unistd tables; the layout idea (ABI module apart from logic) follows Intel's
workload-collocation-agent (wca/perf_const.py). No code was copied.
"""

from __future__ import annotations

import ctypes
import platform

# -- perf_event_open syscall number, per architecture (arch/*/include/uapi/asm/unistd*.h,
#    or the generic table for the newer ports). x86-only numbers are a known trap.
SYSCALL_NR = {
    "x86_64": 298,
    "i386": 336, "i686": 336,
    "aarch64": 241, "arm64": 241,
    "armv7l": 364, "armv6l": 364,
    "riscv64": 241,
    "loongarch64": 241,
    "ppc64": 319, "ppc64le": 319,
    "s390x": 331,
    "mips64": 5296,  # n64 ABI
}


def syscall_nr(machine: str | None = None) -> int:
    m = machine or platform.machine()
    try:
        return SYSCALL_NR[m]
    except KeyError:
        raise OSError(38, f"perf_event_open syscall number unknown for architecture {m!r}") from None


# -- perf_type_id
PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_TYPE_TRACEPOINT = 2
PERF_TYPE_HW_CACHE = 3
PERF_TYPE_RAW = 4
PERF_TYPE_BREAKPOINT = 5

# -- perf_hw_id (PERF_TYPE_HARDWARE configs)
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_COUNT_HW_INSTRUCTIONS = 1
PERF_COUNT_HW_CACHE_REFERENCES = 2
PERF_COUNT_HW_CACHE_MISSES = 3
PERF_COUNT_HW_BRANCH_INSTRUCTIONS = 4
PERF_COUNT_HW_BRANCH_MISSES = 5
PERF_COUNT_HW_BUS_CYCLES = 6
PERF_COUNT_HW_REF_CPU_CYCLES = 9

# -- perf_sw_ids (PERF_TYPE_SOFTWARE configs)
PERF_COUNT_SW_CPU_CLOCK = 0
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_COUNT_SW_PAGE_FAULTS = 2
PERF_COUNT_SW_CONTEXT_SWITCHES = 3
PERF_COUNT_SW_CPU_MIGRATIONS = 4
PERF_COUNT_SW_PAGE_FAULTS_MIN = 5
PERF_COUNT_SW_PAGE_FAULTS_MAJ = 6
PERF_COUNT_SW_DUMMY = 9

# -- PERF_TYPE_HW_CACHE config = id | (op << 8) | (result << 16)
PERF_COUNT_HW_CACHE_LL = 2
PERF_COUNT_HW_CACHE_OP_READ = 0
PERF_COUNT_HW_CACHE_RESULT_ACCESS = 0
PERF_COUNT_HW_CACHE_RESULT_MISS = 1

# -- perf_event_read_format
PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
PERF_FORMAT_ID = 1 << 2
PERF_FORMAT_GROUP = 1 << 3
PERF_FORMAT_LOST = 1 << 4

# -- perf_event_attr.flags bits (the C bitfield, in declaration order)
ATTR_DISABLED = 1 << 0
ATTR_INHERIT = 1 << 1
ATTR_PINNED = 1 << 2
ATTR_EXCLUSIVE = 1 << 3
ATTR_EXCLUDE_USER = 1 << 4
ATTR_EXCLUDE_KERNEL = 1 << 5
ATTR_EXCLUDE_HV = 1 << 6
ATTR_EXCLUDE_IDLE = 1 << 7

# -- perf_event_open flags
PERF_FLAG_FD_NO_GROUP = 1 << 0
PERF_FLAG_FD_OUTPUT = 1 << 1
PERF_FLAG_PID_CGROUP = 1 << 2
PERF_FLAG_FD_CLOEXEC = 1 << 3

PERF_IOC_FLAG_GROUP = 1


# -- ioctl numbers: _IO/_IOR('$', nr, ...). The direction bits sit at different places on
#    powerpc/mips/sparc than on the generic layout (include/uapi/asm-generic/ioctl.h).
def _ioc(direction: int, typ: int, nr: int, size: int, machine: str | None = None) -> int:
    m = machine or platform.machine()
    if m.startswith(("ppc", "mips", "sparc")):
        dirs = {"none": 1, "read": 2, "write": 4}
        sizebits = 13
    else:
        dirs = {"none": 0, "read": 2, "write": 1}
        sizebits = 14
    dirshift = 16 + sizebits
    return (dirs[direction] << dirshift) | (size << 16) | (typ << 8) | nr


_MAGIC = ord("$")
PERF_EVENT_IOC_ENABLE = _ioc("none", _MAGIC, 0, 0)
PERF_EVENT_IOC_DISABLE = _ioc("none", _MAGIC, 1, 0)
PERF_EVENT_IOC_RESET = _ioc("none", _MAGIC, 3, 0)
PERF_EVENT_IOC_ID = _ioc("read", _MAGIC, 7, 8)  # _IOR('$', 7, __u64 *)


class perf_event_attr(ctypes.Structure):
    """struct perf_event_attr up to PERF_ATTR_SIZE_VER8 (136 bytes). Kernels that know a
    smaller struct accept it as long as the bytes they do not know are zero."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),   # union with sample_freq
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),           # the bitfield: ATTR_* above
        ("wakeup_events", ctypes.c_uint32),   # union with wakeup_watermark
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),         # union with bp_addr, kprobe_func, uprobe_path
        ("config2", ctypes.c_uint64),         # union with bp_len, kprobe_addr, probe_offset
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
        ("aux_sample_size", ctypes.c_uint32),
        ("reserved_3", ctypes.c_uint32),
        ("sig_data", ctypes.c_uint64),
        ("config3", ctypes.c_uint64),
    ]


PERF_ATTR_SIZE_VER8 = 136
assert ctypes.sizeof(perf_event_attr) == PERF_ATTR_SIZE_VER8, ctypes.sizeof(perf_event_attr)

"""What each stressor does to the simulated host, per thread running it for a whole window.

The figures are plausible orders of magnitude for a small x86 server (4 cores, one
DDR4 channel pair, one SATA SSD, a 10 GbE NIC), chosen so that the simulated metric
space has the shapes a real host has: memory bandwidth that saturates, LLC misses that
depend on who else is polluting the cache, disk threads that wait instead of computing.
They are NOT measurements of any host; the simulated host is labelled as such.
DRAM bytes per LLC miss differ by access pattern (read-only chase 64 B, streaming with
write-back ~94 B, dirty random read-modify-write ~128 B, DMA reads that bypass the LLC), so
memory bandwidth and LLC misses are related but not one line.

A profile is looked up by the catalog entry's kernel name; a kernel this table does not
know gets its resource class's profile, so a catalog that grows keeps simulating.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

GB = 1e9
MB = 1e6


@dataclass(frozen=True)
class StressorProfile:
    cpu: float = 1.0              # CPU-busy fraction while scheduled (the rest waits on IO)
    mem_Bps: float = 0.0          # DRAM traffic demanded at full speed
    llc_miss_per_s: float = 0.0   # LLC misses at full speed, warm cache, no contention
    llc_sensitive: float = 0.0    # extra misses/s when its LLC working set is evicted or cold
    llc_polluter: float = 0.0     # how strongly it evicts others' LLC lines (0..1 per thread)
    disk_read_Bps: float = 0.0    # demanded device read bandwidth
    disk_write_Bps: float = 0.0   # demanded device write bandwidth
    io_bytes: float = 1 * MB      # bytes per IO request (IOPS = bytes / io_bytes)
    write_lag: float = 0.0        # fraction of this window's writes the kernel flushes next window
    lo_Bps: float = 0.0           # loopback bytes per second (counted as both tx and rx on lo)
    nic_tx_Bps: float = 0.0       # bytes sent out of the physical NIC
    packet_bytes: float = 1500.0
    resident_B: float = 0.0       # memory it holds while it runs on a thread
    shared_resident_B: float = 0.0  # memory it holds once, however many threads run it
    page_cache_B: float = 0.0     # page cache its files occupy
    mem_pressure: float = 0.0     # PSI memory 'some' contribution (page faults, reclaim)


KERNEL_PROFILES: dict[str, StressorProfile] = {
    "int_crc32": StressorProfile(llc_miss_per_s=0.02 * MB),
    "fp_poly": StressorProfile(llc_miss_per_s=0.01 * MB),
    "simd_dist": StressorProfile(mem_Bps=0.05 * GB, llc_miss_per_s=0.05 * MB),
    "zstd_compress": StressorProfile(mem_Bps=0.25 * GB, llc_miss_per_s=1.5 * MB, llc_sensitive=1.0 * MB,
                                     llc_polluter=0.1, resident_B=8 * MB),
    "memcpy": StressorProfile(mem_Bps=0.02 * GB, llc_miss_per_s=0.05 * MB, llc_sensitive=0.5 * MB,
                              llc_polluter=0.05),
    "pointer_chase": StressorProfile(mem_Bps=0.15 * GB, llc_miss_per_s=1.0 * MB, llc_sensitive=13 * MB,
                                     llc_polluter=0.3, resident_B=16 * MB),
    "stream_triad": StressorProfile(mem_Bps=7.5 * GB, llc_miss_per_s=80 * MB, llc_polluter=1.0,
                                    resident_B=256 * 2**20, mem_pressure=0.01),
    "stream_read": StressorProfile(mem_Bps=9.0 * GB, llc_miss_per_s=140 * MB, llc_polluter=1.0,
                                   resident_B=256 * 2**20, mem_pressure=0.01),
    "stream_copy": StressorProfile(mem_Bps=8.5 * GB, llc_miss_per_s=130 * MB, llc_polluter=1.0,
                                   resident_B=256 * 2**20, mem_pressure=0.01),
    "random_access": StressorProfile(mem_Bps=2.4 * GB, llc_miss_per_s=19 * MB, llc_polluter=0.8,
                                     shared_resident_B=1 * 2**30, mem_pressure=0.03),
    "hashmap_insert": StressorProfile(mem_Bps=1.6 * GB, llc_miss_per_s=12 * MB, llc_polluter=0.6,
                                      llc_sensitive=4 * MB, shared_resident_B=512 * 2**20, mem_pressure=0.05),
    "disk_seq_read": StressorProfile(cpu=0.12, mem_Bps=0.45 * GB, disk_read_Bps=480 * MB, io_bytes=1 * 2**20,
                                     llc_miss_per_s=0.5 * MB, page_cache_B=0.0),
    "disk_seq_write": StressorProfile(cpu=0.3, mem_Bps=0.6 * GB, disk_write_Bps=380 * MB, io_bytes=1 * 2**20,
                                      write_lag=0.15, llc_miss_per_s=1.0 * MB, page_cache_B=64 * MB),
    "disk_rand_read": StressorProfile(cpu=0.18, mem_Bps=0.06 * GB, disk_read_Bps=60 * MB, io_bytes=4096,
                                      llc_miss_per_s=0.3 * MB),
    "disk_fallocate": StressorProfile(cpu=0.5, disk_write_Bps=6 * MB, io_bytes=16384, write_lag=0.6,
                                      llc_miss_per_s=0.2 * MB),
    "disk_readahead": StressorProfile(cpu=0.35, mem_Bps=0.7 * GB, disk_read_Bps=350 * MB, io_bytes=128 * 1024,
                                      llc_miss_per_s=2.0 * MB, llc_polluter=0.2, page_cache_B=256 * 2**20),
    "tcp_loopback": StressorProfile(cpu=1.0, mem_Bps=1.2 * GB, lo_Bps=2.2 * GB, packet_bytes=65536,
                                    llc_miss_per_s=4 * MB, llc_polluter=0.3, resident_B=4 * MB),
    "udp_sink": StressorProfile(cpu=0.85, mem_Bps=0.2 * GB, nic_tx_Bps=0.45 * GB, packet_bytes=1442,
                                llc_miss_per_s=0.8 * MB),
    "disk_qd_read": StressorProfile(cpu=0.2, mem_Bps=1.0 * GB, disk_read_Bps=1.2 * GB, io_bytes=1 * 2**20,
                                    llc_miss_per_s=0.5 * MB),
    "disk_qd_write": StressorProfile(cpu=0.2, mem_Bps=0.9 * GB, disk_write_Bps=1.0 * GB, io_bytes=1 * 2**20,
                                     llc_miss_per_s=0.5 * MB),
    "pagecache_rw": StressorProfile(cpu=1.0, mem_Bps=3.0 * GB, disk_write_Bps=40 * MB, io_bytes=1 * 2**20,
                                    write_lag=0.9, llc_miss_per_s=8 * MB, llc_polluter=0.6,
                                    page_cache_B=256 * 2**20),
    "page_fault_churn": StressorProfile(cpu=1.0, mem_Bps=1.5 * GB, llc_miss_per_s=3 * MB, llc_polluter=0.2,
                                        resident_B=4 * 2**20, mem_pressure=0.02),
    "cpu_contend": StressorProfile(llc_miss_per_s=0.02 * MB),
    "futex_pingpong": StressorProfile(cpu=0.9, llc_miss_per_s=0.01 * MB),
}

CLASS_PROFILES: dict[str, StressorProfile] = {
    "cpu": KERNEL_PROFILES["int_crc32"],
    "cache": KERNEL_PROFILES["pointer_chase"],
    "memory": KERNEL_PROFILES["random_access"],
    "disk": KERNEL_PROFILES["disk_seq_read"],
    "network": KERNEL_PROFILES["tcp_loopback"],
}


_RATES = ("mem_Bps", "llc_miss_per_s", "disk_read_Bps", "disk_write_Bps", "lo_Bps", "nic_tx_Bps")


# A loopback send costs about this long however small it is (syscall + softirq on both ends):
# below 64 KiB the message rate, not the byte rate, is the limit.
LOOPBACK_SEND_S = 2.5e-6


def profile_for(kernel: str, resource_class: str, pace: float | None = None,
                params: dict | None = None) -> StressorProfile:
    """`pace`: a rate-limited variant's fraction of its base: its rates scale, its CPU too
    (it sleeps between paced steps). `params`: the variant's own; a TCP loopback variant with
    small messages sends one packet per message at a message rate the send cost bounds."""
    p = KERNEL_PROFILES.get(kernel) or CLASS_PROFILES.get(resource_class) or StressorProfile()
    msg = (params or {}).get("message_bytes")
    if kernel == "tcp_loopback" and msg and msg < p.packet_bytes:
        p = replace(p, lo_Bps=min(p.lo_Bps, msg / LOOPBACK_SEND_S), packet_bytes=float(msg),
                    mem_Bps=p.mem_Bps * msg / p.packet_bytes)
    if pace is None:
        return p
    return replace(p, cpu=p.cpu * pace, **{f: getattr(p, f) * pace for f in _RATES})

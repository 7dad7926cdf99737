"""The simulated host as a pure function: (composition, previous state) -> (metrics, new state).

    model = SimModel.from_catalog(load_catalog(), SimParams(n_cpus=4))
    state = model.idle_state()
    values, state = model.step(a, state, rng)          # a: float [M, K], values: float32 [N]
    obs, state = model.simulate(plan_compositions, state, rng)   # [T, M, K] -> [T, N]

Nothing here touches the host or the clock; the only randomness is the numpy Generator the
caller passes, so the same (a, state, rng seed) gives the same window. The simulated host
is for tests, algorithm work and controller load tests. Its numbers are never measurements.

What makes it more than a linear map (so that collection, training and alignment meet the
problems a real host poses):
- saturation: DRAM bandwidth, the disk (bandwidth and IOPS, with a read/write mixing
  penalty), loopback and NIC throughput saturate smoothly (x -> P (1 - exp(-x / P)));
- cross-stressor contention: streaming stressors evict the LLC working sets of
  cache-sensitive ones (more misses, more DRAM traffic), DRAM saturation slows memory
  stressors and TCP copies, a saturated disk makes IO threads wait instead of compute;
- state carried from the previous window: LLC warmth per stressor (a cold working set
  costs a burst of misses), memory traffic a window leaves behind (dirty lines written
  back, reclaim, page migration) that loads DRAM and the LLC in the next one, TCP
  connection warmth (cwnd ramp), writes the kernel defers to the next window, page cache
  that persists, and a thermal budget that lowers clock speed after sustained load.
  Their size follows what the MIMESYS paper measured on real hosts (§6.4: the same
  composition after another one vs after an idle window moves LLC misses by 136 % and
  memory bandwidth by 95 % at the 90th percentile); bench/sim_state_effect.py measures
  the same statistic here;
- noise: multiplicative log-normal per metric, plus a small additive floor.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from ..metrics import Availability, MetricSpec
from .profiles import StressorProfile, profile_for
from .sensors import Sensors

SOURCE = "sim"
PMU_REASON = "simulated host configured without a PMU (pmu = false)"


@dataclass(frozen=True)
class SimParams:
    """The simulated machine. Peaks are the saturation points of the smooth limiters."""

    n_cpus: int = 4
    mem_peak_Bps: float = 14e9
    disk_read_peak_Bps: float = 540e6
    disk_write_peak_Bps: float = 450e6
    disk_iops_peak: float = 40_000.0
    lo_peak_Bps: float = 6e9
    nic_peak_Bps: float = 1.18e9           # 10 GbE payload
    mem_total_B: float = 16 * 2**30
    base_used_B: float = 1.2 * 2**30
    base_cache_B: float = 1.5 * 2**30
    background_cpu: float = 0.01           # per core: the OS and the agent itself
    noise: float = 0.02                    # sigma of the multiplicative log-normal noise
    mem_residue: float = 0.25              # share of a window's DRAM traffic that lands in the next
    pmu: bool = True                       # mem.bw_Bps and llc.miss_per_s available

    def __post_init__(self):
        if not 1 <= int(self.n_cpus) <= 4096:
            raise ValueError(f"n_cpus must be in 1..4096, got {self.n_cpus}")
        if self.noise < 0:
            raise ValueError(f"noise must be >= 0, got {self.noise}")

    def fingerprint(self) -> dict:
        """The simulated hardware: equal params give equal fingerprints (the seed is not hardware)."""
        return {"simulated": True, "cpu_model": "mimesys simulated host", "cores": int(self.n_cpus),
                "threads": int(self.n_cpus), "memory_B": int(self.mem_total_B), "pmu": bool(self.pmu),
                "disks": [{"name": "simdisk0", "read_peak_Bps": self.disk_read_peak_Bps,
                           "write_peak_Bps": self.disk_write_peak_Bps, "iops_peak": self.disk_iops_peak}],
                "nics": [{"name": "simeth0", "peak_Bps": self.nic_peak_Bps}],
                "mem_peak_Bps": self.mem_peak_Bps, "kernel": "simulated"}

    def calibration(self) -> dict:
        """Peak metric values (what `calibrate` would measure on a real host), by metric name."""
        return {"simulated": True, "peaks": {
            "mem.bw_Bps": self.mem_peak_Bps, "disk.read_Bps": self.disk_read_peak_Bps,
            "disk.write_Bps": self.disk_write_peak_Bps, "net.tx_Bps": self.nic_peak_Bps,
            "net.rx_Bps": self.nic_peak_Bps,
            "net.lo.tx_Bps": self.lo_peak_Bps, "net.lo.rx_Bps": self.lo_peak_Bps,
            "llc.miss_per_s": 130e6 * self.n_cpus / 4, "cpu.util": 1.0}}


@dataclass(frozen=True)
class SimState:
    """What one window leaves behind for the next."""

    llc_warm: np.ndarray            # float64 [M]: how much of each stressor's LLC working set is resident
    tcp_warm: float = 0.0           # 0 = no connection, 1 = cwnd fully open
    pending_write_B: float = 0.0    # deferred writes the kernel flushes next window
    extra_cache_B: float = 0.0      # page cache above the base, decays slowly
    heat: float = 0.0               # thermal load 0..1 (lowers clock speed)
    mem_residue_Bps: float = 0.0    # DRAM traffic the previous window left behind


def schema(n_cpus: int, pmu: bool = True) -> list[MetricSpec]:
    """The simulated host's metric schema, named as the real host's samplers name them."""
    def spec(name, unit, av=Availability.AVAILABLE, reason=""):
        return MetricSpec(name, unit, av, reason, SOURCE)
    out = [spec(f"cpu.util.core{i}", "fraction") for i in range(n_cpus)] + [spec("cpu.util", "fraction")]
    out += [spec("disk.read_Bps", "B/s"), spec("disk.write_Bps", "B/s"), spec("disk.read_iops", "1/s"),
            spec("disk.write_iops", "1/s"), spec("disk.busy", "fraction")]
    out += [spec("mem.used_B", "B"), spec("mem.cache_B", "B")]
    out += [spec(f"net.{k}", u) for k, u in (("rx_Bps", "B/s"), ("tx_Bps", "B/s"), ("rx_pps", "1/s"),
                                             ("tx_pps", "1/s"))]
    out += [spec(f"net.lo.{k}", u) for k, u in (("rx_Bps", "B/s"), ("tx_Bps", "B/s"), ("rx_pps", "1/s"),
                                                ("tx_pps", "1/s"))]
    pmu_av = Availability.AVAILABLE if pmu else Availability.UNSUPPORTED
    out += [spec("mem.bw_Bps", "B/s", pmu_av, "" if pmu else PMU_REASON),
            spec("llc.miss_per_s", "1/s", pmu_av, "" if pmu else PMU_REASON)]
    out += [spec(f"psi.{r}.{k}", "fraction") for r, k in (("cpu", "some"), ("io", "some"), ("io", "full"),
                                                          ("memory", "some"), ("memory", "full"))]
    return out


def _saturate(demand: float, peak: float) -> float:
    return peak * -np.expm1(-demand / peak) if demand > 0 else 0.0


def _llc(f: np.ndarray, active: np.ndarray, c: dict, state: SimState) -> tuple[np.ndarray, np.ndarray]:
    """LLC: polluters evict everyone's working set; a cold set costs a burst of misses.
    f [M] thread-windows per stressor -> (extra misses [M], the next window's warmth [M])."""
    own = f * c["llc_polluter"]
    pollution = -np.expm1(-(own.sum() - own) / 1.2)     # [M]: what the others evict
    cold = 1.0 - state.llc_warm
    extra_miss = f * c["llc_sensitive"] * (pollution + 0.5 * cold * (1.0 - pollution))
    llc_warm = np.where(active, (1.0 - pollution) * np.minimum(1.0, f / 0.25) + 0.0,
                        state.llc_warm * 0.3 * (1.0 - pollution))
    llc_warm = np.clip(np.maximum(llc_warm, state.llc_warm * 0.5 * active), 0.0, 1.0)
    return extra_miss, llc_warm


def _dram(f: np.ndarray, c: dict, p: SimParams, speed: float, extra_miss: np.ndarray,
          state: SimState) -> tuple[float, float, float]:
    """DRAM: demand (incl. the misses contention adds) saturates smoothly. The residue of the
    previous window competes for DRAM like any other demand. -> (bandwidth, the share of the
    demand served, LLC misses per second)."""
    mem_demand = (f * c["mem_Bps"] * speed).sum() + extra_miss.sum() * 64.0 + state.mem_residue_Bps
    mem_bw = _saturate(mem_demand, p.mem_peak_Bps)
    s_mem = mem_bw / mem_demand if mem_demand > 0 else 1.0
    mem_share = c["mem_Bps"] / (c["mem_Bps"] + 1e9)
    progress = s_mem ** mem_share                       # [M] memory-bound stressors slow down
    llc_miss = (f * c["llc_miss_per_s"] * progress * speed).sum() + extra_miss.sum() + \
        state.mem_residue_Bps * s_mem / 128.0          # migration reads miss; write-backs do not
    return mem_bw, s_mem, llc_miss


class _Disk(NamedTuple):
    R: float          # read B/s asked
    W: float          # write B/s reaching the device (deferred writes included)
    iops_r: float
    iops_w: float
    s_disk: float     # the share of the asked IO the device serves
    busy: float       # its busy fraction
    pending: float    # bytes the kernel defers to the next window


def _disk(f: np.ndarray, c: dict, p: SimParams, state: SimState, window_s: float) -> _Disk:
    """Disk: one device, bandwidth + IOPS limits, mixing penalty, deferred writes."""
    rd = f * c["disk_read_Bps"]
    wr_now = f * c["disk_write_Bps"]
    R = rd.sum()
    W = (wr_now * (1.0 - c["write_lag"])).sum() + state.pending_write_B / window_s
    iops_r = (rd / c["io_bytes"]).sum()
    iops_w = (wr_now * (1.0 - c["write_lag"]) / c["io_bytes"]).sum() + \
        (state.pending_write_B / window_s) / (256 * 1024)
    load = R / p.disk_read_peak_Bps + W / p.disk_write_peak_Bps + (iops_r + iops_w) / p.disk_iops_peak
    load += 0.6 * min(R / p.disk_read_peak_Bps, W / p.disk_write_peak_Bps)
    s_disk = float(-np.expm1(-load) / load) if load > 0 else 1.0
    disk_busy = float(-np.expm1(-1.3 * load))
    pending = (wr_now * c["write_lag"]).sum() * window_s + 0.3 * W * (1.0 - s_disk) * window_s
    return _Disk(R, W, iops_r, iops_w, s_disk, disk_busy, pending)


def _cpu(a: np.ndarray, c: dict, s_disk: float) -> tuple[np.ndarray, np.ndarray]:
    """CPU: IO stressors compute only while their IO completes; the rest waits.
    a [M, K] -> (busy [K], waiting on IO [K]) per thread's core."""
    is_io = (c["disk_read_Bps"] + c["disk_write_Bps"]) > 0
    u = np.where(is_io, c["cpu"] * (0.35 + 0.65 * s_disk), c["cpu"])       # [M]
    busy_k = (a * u[:, None]).sum(axis=0)                                 # [K]
    wait_k = (a * ((1.0 - u) * is_io)[:, None]).sum(axis=0)               # [K]
    return busy_k, wait_k


class _Network(NamedTuple):
    lo_Bps: float
    lo_pkt: float       # loopback packets per byte
    tcp_warm: float     # the next window's TCP warmth
    nic_tx: float
    nic_pkt: float      # NIC packets per byte
    softirq: float      # cores' worth of softirq, spread over all cores


def _network(f: np.ndarray, c: dict, p: SimParams, state: SimState, s_mem: float, speed: float) -> _Network:
    """Network: loopback TCP (cwnd warm-up, copies contend for DRAM) and the NIC."""
    tcp_f = (f * (c["lo_Bps"] > 0)).sum()
    lo_demand = (f * c["lo_Bps"]).sum() * (0.55 + 0.45 * state.tcp_warm) * (0.4 + 0.6 * s_mem) * speed
    lo_Bps = _saturate(lo_demand, p.lo_peak_Bps)
    lo_pkt = float((f * c["lo_Bps"] / c["packet_bytes"]).sum() / max((f * c["lo_Bps"]).sum(), 1e-9))
    tcp_warm = min(1.0, tcp_f / 0.5) if tcp_f > 0 else state.tcp_warm * 0.2
    nic_demand = (f * c["nic_tx_Bps"]).sum() * speed
    nic_tx = _saturate(nic_demand, p.nic_peak_Bps)
    nic_pkt = float((f * c["nic_tx_Bps"] / c["packet_bytes"]).sum() / max(nic_demand / speed, 1e-9)) \
        if nic_demand > 0 else 0.0
    softirq = 0.12 * lo_Bps / 2.2e9 + 0.08 * nic_tx / 0.45e9
    return _Network(lo_Bps, lo_pkt, tcp_warm, nic_tx, nic_pkt, softirq)


def _pressure(f: np.ndarray, c: dict, cores: np.ndarray, busy_k: np.ndarray, wait_k: np.ndarray,
              softirq: float, s_mem: float) -> tuple[float, float, float, float]:
    """Pressure (fractions of the window) -> (cpu some, io some, io full, memory some)."""
    io_some = float(1.0 - np.prod(1.0 - np.clip(wait_k, 0, 1)))
    io_full = io_some * float(wait_k.sum() / max((busy_k + wait_k).sum(), 1e-9))
    cpu_some = 0.002 + 0.3 * max(0.0, float(cores.mean()) - 0.9) + 0.02 * softirq
    mem_some = float(np.clip((f * c["mem_pressure"]).sum() * (1.0 + 4.0 * (1.0 - s_mem)), 0.0, 1.0))
    return cpu_some, io_some, io_full, mem_some


def _window(a: np.ndarray, state: SimState, c: dict, p: SimParams, window_s: float,
            held_B: float) -> tuple[np.ndarray, SimState]:
    """The host in one window, as it is rather than as it is seen: a [M, K] (checked) ->
    (true values float64 [N] in schema() order, the state for the next window)."""
    f = a.sum(axis=1)                                   # [M] thread-windows per stressor
    active = f > 1e-6
    threads_on = (a > 1e-6).sum(axis=1)                 # [M] threads running each stressor

    # Thermal budget: sustained load lowers the clock a little, for every stressor.
    busy_share = float(a.sum()) / p.n_cpus
    speed = 1.0 - 0.08 * state.heat
    heat = 0.75 * state.heat + 0.25 * busy_share

    extra_miss, llc_warm = _llc(f, active, c, state)
    mem_bw, s_mem, llc_miss = _dram(f, c, p, speed, extra_miss, state)
    disk = _disk(f, c, p, state, window_s)
    busy_k, wait_k = _cpu(a, c, disk.s_disk)
    net = _network(f, c, p, state, s_mem, speed)

    cores = np.full(p.n_cpus, p.background_cpu + net.softirq / p.n_cpus)
    cores[: a.shape[1]] += busy_k
    cores = np.clip(cores, 0.0, 1.0)

    # Memory footprint and page cache.
    used = p.base_used_B + (c["resident_B"] * threads_on).sum() + (c["shared_resident_B"] * active).sum() \
        + float(held_B)
    extra_cache = max(state.extra_cache_B * 0.9, float((c["page_cache_B"] * active).sum()))
    extra_cache += disk.pending

    cpu_some, io_some, io_full, mem_some = _pressure(f, c, cores, busy_k, wait_k, net.softirq, s_mem)
    s_disk, nic_tx, lo_Bps = disk.s_disk, net.nic_tx, net.lo_Bps
    values = [*cores, cores.mean(),
              disk.R * s_disk, disk.W * s_disk, disk.iops_r * s_disk, disk.iops_w * s_disk, disk.busy,
              used, p.base_cache_B + extra_cache,
              20e3 + 0.02 * nic_tx, nic_tx + 15e3,
              150.0 + (0.02 * nic_tx / 1500 if nic_tx else 0.0), (nic_tx * net.nic_pkt) + 120.0,
              lo_Bps, lo_Bps, lo_Bps * net.lo_pkt, lo_Bps * net.lo_pkt,
              mem_bw + 0.15e9, llc_miss + 0.2e6,
              cpu_some, io_some, io_full, mem_some, 0.3 * mem_some]
    new_state = SimState(llc_warm=llc_warm, tcp_warm=float(net.tcp_warm), pending_write_B=float(disk.pending),
                         extra_cache_B=float(extra_cache * 0.999), heat=float(heat),
                         mem_residue_Bps=float(p.mem_residue * mem_bw))
    return np.asarray(values, dtype=np.float64), new_state


@dataclass(frozen=True)
class SimModel:
    """Per-stressor coefficient vectors (length M, catalog order) plus the machine."""

    names: tuple[str, ...]
    params: SimParams
    coef: dict = field(repr=False)      # StressorProfile field -> float64 [M]

    @classmethod
    def from_profiles(cls, names, profiles: list[StressorProfile], params: SimParams) -> "SimModel":
        fields = StressorProfile.__dataclass_fields__
        coef = {f: np.array([getattr(p, f) for p in profiles], dtype=np.float64) for f in fields}
        return cls(tuple(names), params, coef)

    @classmethod
    def from_catalog(cls, catalog, params: SimParams | None = None) -> "SimModel":
        profiles = [profile_for(s.kernel, s.resource_class, s.pace["fraction"] if s.pace else None, s.params)
                    for s in catalog.stressors]
        return cls.from_profiles(catalog.names, profiles, params or SimParams())

    @property
    def M(self) -> int:
        return len(self.names)

    def schema(self) -> list[MetricSpec]:
        return schema(self.params.n_cpus, self.params.pmu)

    def idle_state(self) -> SimState:
        return SimState(llc_warm=np.zeros(self.M))

    # ------------------------------------------------------------------------------------
    def step(self, a: np.ndarray, state: SimState, rng: np.random.Generator,
             window_s: float = 1.0, held_B: float = 0.0) -> tuple[np.ndarray, SimState]:
        """One window. a: float [M, K] fractions (K <= n_cpus; threads map to cores 0..K-1);
        held_B: the memory the plan holds resident in it (Plan.mem_held_B).

        Returns (values float32 [N] in schema() order, the state for the next window)."""
        p, c = self.params, self.coef
        a = np.asarray(a, dtype=np.float64)
        if a.ndim != 2 or a.shape[0] != self.M or a.shape[1] > p.n_cpus:
            raise ValueError(f"composition must be [M={self.M}, K<={p.n_cpus}], got {a.shape}")
        values, new_state = _window(a, state, c, p, window_s, held_B)
        return self._sensors().read(values, rng).astype(np.float32), new_state

    def simulate(self, compositions: np.ndarray, state: SimState | None,
                 rng: np.random.Generator, window_s: float = 1.0) -> tuple[np.ndarray, SimState]:
        """A chain of windows. compositions: [T, M, K] -> (values float32 [T, N], final state)."""
        state = state or self.idle_state()
        out = np.empty((len(compositions), self._sensors().N), dtype=np.float32)
        for t, a in enumerate(compositions):
            out[t], state = self.step(a, state, rng, window_s)
        return out, state

    def _sensors(self) -> Sensors:
        """What the host's samplers report (sensors.py); made once (the dataclass is frozen)."""
        sensors = self.__dict__.get("_sensors_made")
        if sensors is None:
            sensors = Sensors.for_schema(self.schema(), self.params.noise, self.params.pmu)
            object.__setattr__(self, "_sensors_made", sensors)
        return sensors


def idle_decay(state: SimState, idle_windows: float) -> SimState:
    """The state after the host sat idle for `idle_windows` windows (between runs)."""
    k = float(max(idle_windows, 0.0))
    return replace(state, llc_warm=state.llc_warm * 0.3 ** k, tcp_warm=state.tcp_warm * 0.2 ** k,
                   pending_write_B=state.pending_write_B * (0.0 if k >= 1 else 1.0 - k),
                   extra_cache_B=state.extra_cache_B * 0.9 ** k, heat=state.heat * 0.75 ** k,
                   mem_residue_Bps=state.mem_residue_Bps * 0.3 ** k)

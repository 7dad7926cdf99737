"""Activity resources: what a plan may never add where its target was idle.

A resource here is something an application next to the replay feels and a person reading an
overlay sees: disk reads, disk writes, loopback traffic, traffic on a real interface. Each is
observed by a family of cause metrics, its bytes and operations:

    disk.read    disk.read_Bps, disk.read_iops (and per-device disk.<dev>.read_*)
    disk.write   disk.write_Bps, disk.write_iops (and per-device disk.<dev>.write_*)
    net.lo       net.lo.*
    net.nic      net.rx_*, net.tx_* (and per-interface net.<if>.rx_*/tx_*)

Derived signals (disk busy fraction, PSI, host-wide CPU) are not resources: they follow from
causes, and chasing them with whatever stressor moves them invents the wrong operation.

A target leaves resource r idle in window t when every cause metric of r it has is within the
host's idle level plus noise (the forward model's idle profile where there is one, with a
floor per unit). A stressor drives r when its kernel does r's operation (KERNEL_DRIVES), or
when the host's solo profile saw it add more than that noise to r's metrics. The rule every
planner keeps — a constraint, not a penalty: no stressor that drives r runs in a window where
the target left r idle (`allowed`, `guard_plan`).

A resource is busy in a window when any of its cause metrics is, so a target that made 30 small
journal writes a second (0.1 MB/s: its bytes idle, its operations not) may get a writer there.
Where a planner has the host's solo profile, each idle byte rate is also held within its
noise: the stressors that drive its bytes are scaled down until their predicted bytes fit
(`cap_quiet_metrics`) — measured: a plan ran 1 GB/s of direct writes in windows where the
target wrote 0.1 MB/s in 30 operations.
"""

from __future__ import annotations

import numpy as np

from .hostpaths import HostPaths

RESOURCES = ("disk.read", "disk.write", "net.lo", "net.nic")

# The operation each kernel performs, so a planner without a forward model knows it too.
KERNEL_DRIVES: dict[str, tuple[str, ...]] = {
    "disk_seq_read": ("disk.read",), "disk_rand_read": ("disk.read",), "disk_readahead": ("disk.read",),
    "disk_qd_read": ("disk.read",),
    "disk_seq_write": ("disk.write",), "disk_fallocate": ("disk.write",), "disk_qd_write": ("disk.write",),
    # its dirty pages are written back by the kernel whatever the stressor does
    "pagecache_rw": ("disk.write",),
    "tcp_loopback": ("net.lo",), "udp_sink": ("net.lo",),
}

# Kernels whose operation reaches the resource later, when the kernel writes back dirty pages
# (vm.dirty_expire_centisecs, 30 s by default, then the flusher's next wake-up): measured on this
# host, 0.6 s of page-cache writes put 134 MB on the disk 5-7 windows after the target's writes
# had stopped. They may run only where the resource stays busy over that whole horizon.
KERNEL_DELAYED: dict[str, tuple[str, ...]] = {"pagecache_rw": ("disk.write",)}


def writeback_horizon_s(hp: HostPaths | None = None) -> float:
    """Seconds after which dirty pages are surely on the disk: dirty_expire + dirty_writeback
    (35 s with the kernel's defaults, and where /proc/sys/vm cannot be read)."""
    hp = hp or HostPaths.from_env()

    def centisecs(name: str, default: int) -> int:
        try:
            return max(0, int(hp.p(f"sys/vm/{name}").read_text().strip()))
        except (OSError, ValueError):
            return default
    return (centisecs("dirty_expire_centisecs", 3000) + centisecs("dirty_writeback_centisecs", 500)) / 100.0


# Below these a cause metric counts as idle whatever the profile says: the host's own background
# (journal commits, the agent's monitor stream) is not activity a person would see.
IDLE_FLOOR = {"B/s": 512 * 1024.0, "1/s": 16.0}


def resource_of(name: str) -> str | None:
    """The resource a cause metric observes, or None (derived signals, CPU, memory, ...)."""
    parts = name.split(".")
    if len(parts) < 2:
        return None
    field = parts[-1]
    if parts[0] == "disk":
        if field.startswith("read_"):
            return "disk.read"
        if field.startswith("write_"):
            return "disk.write"
        return None
    if parts[0] == "net":
        if parts[1] == "lo":
            return "net.lo"
        if field.startswith(("rx_", "tx_")):
            return "net.nic"
    return None


def idle_margins(names: list[str], units: list[str], noise: np.ndarray | None = None) -> np.ndarray:
    """[N] how far above the host's idle level a cause metric may be and still be idle: the
    larger of its measured noise and the unit's floor (inf for metrics that observe no resource)."""
    noise = np.zeros(len(names)) if noise is None else np.nan_to_num(np.asarray(noise, np.float64))
    return np.array([max(float(noise[n]), IDLE_FLOOR.get(unit, 0.0)) if resource_of(name) is not None else np.inf
                     for n, (name, unit) in enumerate(zip(names, units))])


def idle_thresholds(names: list[str], units: list[str], idle: np.ndarray | None = None,
                    noise: np.ndarray | None = None) -> np.ndarray:
    """[N] the level at or below which each cause metric is idle: idle level + margin."""
    idle = np.zeros(len(names)) if idle is None else np.nan_to_num(np.asarray(idle, np.float64))
    return idle + idle_margins(names, units, noise)


def idle_windows(values: np.ndarray, names: list[str], thresholds: np.ndarray) -> dict[str, np.ndarray]:
    """values [T, N] (NaN = not measured) -> {resource: bool [T]} for every resource the target
    measures: True where each of its cause metrics is at or below its threshold."""
    out: dict[str, np.ndarray] = {}
    for r in RESOURCES:
        idx = [n for n, name in enumerate(names) if resource_of(name) == r and np.isfinite(values[:, n]).any()]
        if not idx:
            continue
        v = values[:, idx]
        out[r] = np.all(~np.isfinite(v) | (v <= thresholds[idx]), axis=1)
    return out


def stressor_drives(kernels: list[str | None], *, response: np.ndarray | None = None,
                    names: list[str] | None = None, margins: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """{resource: bool [M]}: the stressors that drive each resource, by their kernel and, where a
    solo profile is given (response [M, N] above idle over `names`), by what it measured there
    beyond the metric's idle margin."""
    out = {r: np.array([r in KERNEL_DRIVES.get(k or "", ()) for k in kernels], bool) for r in RESOURCES}
    if response is not None and names is not None and margins is not None:
        for n, name in enumerate(names):
            r = resource_of(name)
            if r is not None and np.isfinite(margins[n]):
                out[r] = out[r] | (np.asarray(response[:, n]) > margins[n])
    return out


def stressor_delays(kernels: list[str | None]) -> dict[str, np.ndarray]:
    """{resource: bool [M]}: the stressors whose effect on the resource lands later (KERNEL_DELAYED)."""
    return {r: np.array([r in KERNEL_DELAYED.get(k or "", ()) for k in kernels], bool) for r in RESOURCES}


def quiet_ahead(quiet: np.ndarray, horizon: int) -> np.ndarray:
    """bool [T]: some window in [t, t + horizon] is quiet (the plan's end bounds it: the runner's
    scratch files die with it, their dirty pages unwritten)."""
    c = np.concatenate([[0], np.cumsum(quiet.astype(np.int64))])
    T = len(quiet)
    end = np.minimum(np.arange(T) + horizon + 1, T)
    return c[end] - c[:T] > 0


def allowed(idle: dict[str, np.ndarray], drives: dict[str, np.ndarray], T: int, M: int,
            delayed: dict[str, np.ndarray] | None = None, horizon: int = 0) -> np.ndarray:
    """bool [T, M]: stressor m may run in window t unless it drives a resource idle there — or,
    for a stressor in `delayed`, idle anywhere in the `horizon` windows after t."""
    ok = np.ones((T, M), bool)
    for r, quiet in idle.items():
        ok &= ~(quiet[:, None] & drives[r][None, :])
        if delayed is not None and horizon > 0 and delayed[r].any():
            ok &= ~(quiet_ahead(quiet, horizon)[:, None] & delayed[r][None, :])
    return ok


def writeback_windows(window_s: float) -> int:
    return int(np.ceil(writeback_horizon_s() / max(float(window_s), 1e-3)))


def guard_compositions(compositions: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, int]:
    """compositions [T, M, K] with every entry the rule forbids set to 0 -> (guarded, entries
    removed). The thread simply idles for that share of the window."""
    removed = int(((compositions > 0) & ~ok[:, :, None]).sum())
    return compositions * ok[:, :, None], removed


def catalog_kernels(names: list[str]) -> list[str | None]:
    """Each stressor's kernel in this agent's catalog (None where it lists no such name, or where
    there is no catalog beside this code: the profile, if any, decides alone)."""
    from .catalog import load_catalog
    try:
        kernel_of = {st.name: st.kernel for st in load_catalog().stressors}
    except Exception:
        kernel_of = {}
    return [kernel_of.get(n) for n in names]


def cap_quiet_metrics(compositions: np.ndarray, values: np.ndarray, names: list[str], units: list[str],
                      idle: np.ndarray, margins: np.ndarray, response: np.ndarray,
                      min_share: float = 0.005) -> tuple[np.ndarray, int]:
    """compositions [T', M, K] (T' ≥ T), target values [T, N] -> (capped, entries changed).
    In each window where a byte rate of a resource (disk read or write bytes, loopback or NIC
    bytes) is at or below the target's idle + margin, the stressors whose solo response on it
    exceeds the margin are scaled together so that their predicted sum (first order: Σ share ×
    response) stays within the margin; a share left below `min_share` (5 ms of a 1 s window:
    less than a stressor runs as planned) is dropped. Bytes only: operations follow from the
    bytes and their block size (a target writing 1 MiB blocks at 5 a second has idle
    operations and busy bytes, and the writer that moves those bytes must stay)."""
    return _cap_bytes(compositions, values, names, units, idle, margins, response, min_share, quiet_only=True)


def cap_to_target(compositions: np.ndarray, values: np.ndarray, names: list[str], units: list[str],
                  idle: np.ndarray, margins: np.ndarray, response: np.ndarray,
                  min_share: float = 0.005) -> tuple[np.ndarray, int]:
    """`cap_quiet_metrics` in every window, busy ones too: the stressors driving a byte rate are
    scaled so that what they add stays within the target's own level above idle plus the
    margin. A planner that does not fit magnitudes itself (a generator's sample) may not write
    1-2 GB/s where the target wrote 20 MB/s."""
    return _cap_bytes(compositions, values, names, units, idle, margins, response, min_share, quiet_only=False)


def _cap_bytes(compositions, values, names, units, idle, margins, response, min_share, *, quiet_only):
    a = np.array(compositions, np.float64)
    T = min(values.shape[0], a.shape[0])
    before = a.copy()
    for n, (name, unit) in enumerate(zip(names, units)):
        if resource_of(name) is None or unit != "B/s" or not np.isfinite(margins[n]):
            continue
        r = np.asarray(response[:, n], np.float64)
        drivers = np.flatnonzero(r > margins[n])
        if drivers.size == 0:
            continue
        v = values[:T, n]
        known = np.isfinite(v)
        limit = np.full(T, float(margins[n]))
        if quiet_only:
            known &= v <= idle[n] + margins[n]
        else:
            limit += np.clip(np.nan_to_num(v - idle[n]), 0.0, None)
        added = a[:T, drivers].sum(axis=2) @ r[drivers]                 # [T]
        over = np.flatnonzero(known & (added > limit))
        if over.size:
            f = limit[over] / added[over]
            a[over[:, None], drivers[None, :]] *= f[:, None, None]
    small = (a > 0) & (a < min_share) & (before >= min_share)
    a[small] = 0.0
    return a, int((np.abs(a - before) > 1e-9).sum())


def guard_plan(plan, trace, *, first=None):
    """A plan with the rule applied against its target trace -> (plan, entries removed).
    `first` (a forward model's FirstOrder, when the planner has one) gives the host's idle level,
    noise and solo responses; without it the unit floors and the kernels decide."""
    from dataclasses import replace

    kernels = catalog_kernels(plan.catalog_names)
    if first is not None and list(first.catalog_names) == list(plan.catalog_names):
        names, units = list(first.metric_names), list(first.units)
        margins = idle_margins(names, units, first.noise)
        thresholds = first.idle + margins
        drives = stressor_drives(kernels, response=first.response, names=names, margins=margins)
    else:
        names = list(trace.names)
        units = [m.unit for m in trace.metrics]
        thresholds = idle_thresholds(names, units)
        drives = stressor_drives(kernels)
    T = min(plan.T, trace.T)
    values = trace.select(names)[:T]
    ok = np.ones((plan.T, len(plan.catalog_names)), bool)
    ok[:T] = allowed(idle_windows(values, names, thresholds), drives, T, len(plan.catalog_names),
                     stressor_delays(kernels), writeback_windows(plan.window_s))
    comps, removed = guard_compositions(np.asarray(plan.compositions), ok)
    capped = 0
    if first is not None and list(first.catalog_names) == list(plan.catalog_names):
        comps, capped = cap_quiet_metrics(comps, values, names, units, np.asarray(first.idle, np.float64), margins,
                                          first.response)
    prov = {**plan.provenance, "activity_guard": {"entries_removed": removed, "entries_capped": capped}}
    return replace(plan, compositions=comps.astype(np.float32), provenance=prov), removed


class GuardedPlanner:
    """Any planner behind the rule: its plans never run a stressor that drives a resource in a
    window where the target left that resource idle. Everything else is the planner's own.
    `finish(plan, trace, first=)`, when given, completes every guarded plan the same way
    (the registry's: the memory its target held, planners/memory.py)."""

    def __init__(self, inner, first=None, finish=None):
        self.inner, self.first, self.finish = inner, first, finish

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate(self, trace, *, seed: int = 0, progress=None):
        kw = {"progress": progress} if progress is not None else {}
        plan, _ = guard_plan(self.inner.generate(trace, seed=seed, **kw), trace, first=self.first)
        return plan if self.finish is None else self.finish(plan, trace, first=self.first)

"""Map an imported trace onto a target host: core count, capacity, and the host's metric schema.

A trace recorded on a 20-core server cannot be replayed as-is on a 2-core VM. This module
makes the translation explicit, and every step lands in the ImportReport.

Target host (`HostProfile`): from an agent's `/v1/info` (`HostProfile.from_info`, fetched by
controller/fleet/) or from a saved JSON file (`HostProfile.from_file`: a saved /v1/info
answer, a bare fingerprint, or the agent's calibration file, read with mimesys.calibration.read:
its `peaks` and the length of its `cpus` list). Fields used:
- CPUs: the number of `cpu.util.core<i>` metrics in `schema`; else `max_threads`; else the
  fingerprint's `cpu.logical_cpus` (real hosts) or `threads` (the simulated host).
- Peaks (metric name -> value, e.g. {"mem.bw_Bps": 1.4e10}): `calibration.host_peaks` (the
  host's capacity measured by probes that are not catalog stressors), else `calibration.peaks` (what the
  agent's calibration reports, by metric name), then the fingerprint's `calibrated_peaks`
  (agentd/fingerprint.with_calibration); `--target-peak METRIC=VALUE` overrides.
- Schema: `schema` (MetricSpec dicts with availability), when present.

Core mapping (S source cores -> K target cores), `core_strategy`:
- `preserve-total`: the total CPU demand D_t = sum_i u_i,t (in cores) is preserved and spread
  evenly: every target core gets min(D_t / K, 1). Demand above K cores cannot run on the
  target; it is capped and the report says how many windows were capped and how many
  core-seconds were lost. With S <= K the same rule spreads the demand over all K cores.
- `busiest`: keep the K source cores with the highest mean utilization over the trace, in
  their original order, each as it was (per-core shape preserved); the other cores' demand is
  dropped and reported. With S <= K the S cores map 1:1 and target cores S..K-1 read 0 (the
  source had no such core, so nothing ran there).
- A trace with only `cpu.util` (Alibaba, Bitbrains: no per-core data) gives every target core
  D_t / K with D_t = cpu.util × S when the source's core count is known (host_fingerprint
  `cpus`), else cpu.util itself on every core (the same fraction of the machine).
`cpu.util` is recomputed as the mean of the target cores.

Capacity normalization (for B/s and 1/s metrics with a peak on both sides): x × target_peak /
source_peak, so a window at 40 % of the source's memory bandwidth lands at 40 % of the
target's. Source peaks come from `--source-peak METRIC=VALUE` or the trace's
host_fingerprint `calibrated_peaks`; without one the metric keeps its absolute values and the
report says so, with the number of windows above the target's peak. Memory held in bytes
(`mem.used_B`, `mem.cache_B`) scales the same way by installed memory: x × target total /
source total (fingerprints' `memory.total_B`, or Bitbrains' `mem_total_B`), so a 128 GiB
server's page cache does not become an unreachable target on a 24 GiB host; without both
totals the values are kept and the report says so. Capacity fractions from
importers (`mem.bw_frac`, `net.rx_frac`, `net.tx_frac`) become B/s as fraction × target peak.

Schema: with a target schema, the output has exactly the target's metrics in its order (a
target with a single disk or NIC also gets the totals under that device's names, e.g.
disk.vda.write_Bps = disk.write_Bps); a
target metric the trace lacks is NaN (reported as missing), a trace metric the target lacks
is dropped (reported), and the target's availability (unsupported, with its reason) is kept.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mimesys.calibration import capacity_peaks
from mimesys.errors import ConfigError, TraceError
from mimesys.metrics import MetricSpec
from mimesys.trace import Trace

from .importers.base import ImportReport, unit_for

CORE_STRATEGIES = ("preserve-total", "busiest")
_CORE = re.compile(r"^cpu\.util\.core(\d+)$")
# capacity fractions from importers -> the absolute metric they are a fraction of
FRACTION_OF = {"mem.bw_frac": "mem.bw_Bps", "net.rx_frac": "net.rx_Bps", "net.tx_frac": "net.tx_Bps"}
SCALABLE_UNITS = ("B/s", "1/s")
MEMORY_BYTES = ("mem.used_B", "mem.cache_B")


def _mem_total(fp: dict) -> float | None:
    total = (fp.get("memory") or {}).get("total_B") or fp.get("mem_total_B")
    return float(total) if isinstance(total, (int, float)) and total > 0 else None


@dataclass(frozen=True)
class HostProfile:
    cpus: int
    peaks: dict = field(default_factory=dict)
    schema: tuple[MetricSpec, ...] | None = None
    fingerprint: dict = field(default_factory=dict)
    origin: str = ""
    simulated: bool = False

    @classmethod
    def from_info(cls, info: dict, origin: str = "agent") -> "HostProfile":
        """From an agent's /v1/info answer (or a saved copy of it)."""
        fp = info.get("fingerprint") or {}
        schema = None
        if isinstance(info.get("schema"), list):
            schema = tuple(MetricSpec.from_dict(d) for d in info["schema"])
        cores = [m for m in (schema or ()) if _CORE.match(m.name)]
        cpus = len(cores) or info.get("max_threads") or (fp.get("cpu") or {}).get("logical_cpus") or fp.get("threads")
        if not cpus:
            raise ConfigError(f"{origin}: cannot tell the host's CPU count (no cpu.util.core<i> in schema, "
                              f"no max_threads, no fingerprint cpu.logical_cpus)")
        peaks = {}
        peaks.update(fp.get("calibrated_peaks") or {})
        # the host's capacity: independent host peaks where calibration probed them, else
        # what the catalog reached (mimesys.calibration.capacity_peaks)
        peaks.update(capacity_peaks(info.get("calibration") or {}))
        # Memory held and page cache: their full scale is the installed memory.
        total = (fp.get("memory") or {}).get("total_B")
        if isinstance(total, (int, float)) and total > 0:
            for gauge in ("mem.used_B", "mem.cache_B"):
                peaks.setdefault(gauge, float(total))
        peaks = {str(k): float(v) for k, v in peaks.items() if isinstance(v, (int, float)) and v > 0}
        return cls(int(cpus), peaks, schema, fp, origin, bool(info.get("simulated") or fp.get("simulated")))

    @classmethod
    def from_file(cls, path: Path | str) -> "HostProfile":
        """A saved /v1/info answer, or a bare fingerprint (then no schema is known)."""
        try:
            doc = json.loads(Path(path).read_text())
        except OSError as e:
            raise ConfigError(f"{path}: cannot read host file: {e.strerror}") from None
        except ValueError as e:
            raise ConfigError(f"{path}: not JSON: {e}") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: expected a JSON object (a /v1/info answer or a host fingerprint)")
        if doc.get("format") == "mimesys.calibration":
            from mimesys import calibration
            doc = calibration.read(path)   # the core's reader validates the file
            return cls.from_info({"calibration": doc, "fingerprint": doc.get("host") or {},
                                  "max_threads": len(doc.get("cpus") or []) or None}, origin=str(path))
        info = doc if ("fingerprint" in doc or "schema" in doc) else {"fingerprint": doc}
        return cls.from_info(info, origin=str(path))

    def with_peaks(self, overrides: dict) -> "HostProfile":
        return HostProfile(self.cpus, {**self.peaks, **overrides}, self.schema, self.fingerprint, self.origin,
                           self.simulated)


@dataclass(frozen=True)
class MappingOptions:
    core_strategy: str = "preserve-total"
    source_peaks: dict = field(default_factory=dict)   # metric -> peak on the source host

    def __post_init__(self):
        if self.core_strategy not in CORE_STRATEGIES:
            raise ConfigError(f"unknown core strategy {self.core_strategy!r}; known: {', '.join(CORE_STRATEGIES)}")


def parse_peaks(items: tuple[str, ...] | list[str], what: str = "peak") -> dict:
    """`["mem.bw_Bps=1.4e10", ...]` -> {"mem.bw_Bps": 1.4e10}; a clear error otherwise."""
    out = {}
    for it in items:
        name, sep, val = it.partition("=")
        try:
            v = float(val)
        except ValueError:
            v = float("nan")
        if not sep or not name or not np.isfinite(v) or v <= 0:
            raise ConfigError(f"{what} {it!r}: expected METRIC=VALUE with a positive number, e.g. mem.bw_Bps=1.4e10")
        out[name.strip()] = v
    return out


def _cores(trace: Trace) -> list[tuple[int, int]]:
    """(core number, column) of the trace's per-core metrics, in core order."""
    out = [(int(m.group(1)), j) for j, n in enumerate(trace.names) if (m := _CORE.match(n))]
    return sorted(out)


def map_cores(trace: Trace, K: int, strategy: str, report: ImportReport) -> np.ndarray:
    """Per-core utilization on the target, float64 [T, K] (NaN where the source had none)."""
    T = trace.T
    cores = _cores(trace)
    if not cores:
        if "cpu.util" not in trace.names:
            report.missing.append(("cpu.util.core<i>", "the trace has no CPU utilization"))
            return np.full((T, K), np.nan)
        u = trace.column("cpu.util").astype(np.float64)
        S = trace.host_fingerprint.get("cpus")
        if isinstance(S, int) and S > 0:
            demand = u * S
            out = np.minimum(demand / K, 1.0)
            _report_cap(demand, K, trace.window_s, report)
            report.map(f"cpu.util x {S} source cores", f"cpu.util.core0..{K - 1} = min(demand / {K}, 1) each")
        else:
            out = u
            report.map("cpu.util (no per-core data, source core count unknown)",
                       f"cpu.util.core0..{K - 1} = cpu.util each (same fraction of the machine)")
        return np.repeat(out[:, None], K, axis=1)
    src = trace.values[:, [j for _, j in cores]].astype(np.float64)   # [T, S]
    S = src.shape[1]
    if strategy == "preserve-total":
        demand = np.nansum(src, axis=1)
        demand[np.isnan(src).all(axis=1)] = np.nan
        out = np.minimum(demand / K, 1.0)
        _report_cap(demand, K, trace.window_s, report)
        report.map(f"cpu.util.core0..{S - 1} ({S} source cores, preserve-total)",
                   f"cpu.util.core0..{K - 1} = min(sum / {K}, 1) each")
        return np.repeat(out[:, None], K, axis=1)
    # busiest
    if S <= K:
        out = np.zeros((trace.T, K))
        out[:, :S] = src
        report.map(f"cpu.util.core0..{S - 1} ({S} source cores, busiest)",
                   f"cpu.util.core0..{S - 1} one to one" + (f"; cores {S}..{K - 1} idle (0)" if K > S else ""))
        return out
    mean = np.nan_to_num(np.nanmean(np.where(np.isnan(src), np.nan, src), axis=0), nan=-1.0)
    keep = sorted(np.argsort(-mean, kind="stable")[:K])
    out = src[:, keep]
    lost = np.nansum(np.delete(src, keep, axis=1)) * trace.window_s
    kept_ids = [cores[i][0] for i in keep]
    report.map(f"source cores {kept_ids} (the {K} busiest by mean utilization)", f"cpu.util.core0..{K - 1} in that order")
    report.drop(f"{S - K} other source cores", f"busiest strategy: their demand ({lost:.1f} core-seconds) has no target core")
    return out


def _report_cap(demand: np.ndarray, K: int, window_s: float, report: ImportReport) -> None:
    over = np.nan_to_num(demand - K, nan=0.0)
    n = int((over > 1e-9).sum())
    if n:
        report.scaled.append(("cpu demand", f"capped at {K} cores in {n} windows; {over[over > 0].sum() * window_s:.1f} "
                                            f"core-seconds above the target's capacity were dropped"))


def _fill_single_device(cols: dict, target_names: list[str], report: ImportReport) -> None:
    """A target with exactly one disk (or one NIC besides loopback) gets the trace's totals under
    that device's per-device names too: on such a host the device IS the total."""
    for kind in ("disk", "net"):
        devs = sorted({n.split(".")[1] for n in target_names
                       if n.startswith(kind + ".") and n.count(".") == 2 and n.split(".")[1] != "lo"})
        if len(devs) != 1:
            continue
        dev = devs[0]
        for n in target_names:
            parts = n.split(".")
            if len(parts) == 3 and parts[0] == kind and parts[1] == dev and n not in cols:
                total = f"{kind}.{parts[2]}"
                if total in cols:
                    cols[n] = cols[total]
                    report.map(total, f"{n} (the target's only {'disk' if kind == 'disk' else 'NIC'})")


def map_trace(trace: Trace, target: HostProfile, options: MappingOptions = MappingOptions(),
              report: ImportReport | None = None) -> Trace:
    """The trace as the target host should see it (see module docstring)."""
    report = report if report is not None else ImportReport()
    K = target.cpus
    T = trace.T
    cols: dict[str, np.ndarray] = {}
    specs: dict[str, MetricSpec] = {}
    per_core = map_cores(trace, K, options.core_strategy, report)
    for k in range(K):
        cols[f"cpu.util.core{k}"] = per_core[:, k]
    with np.errstate(all="ignore"):
        cols["cpu.util"] = np.nanmean(per_core, axis=1) if not np.isnan(per_core).all() else np.full(T, np.nan)
    src_peaks = {**(trace.host_fingerprint.get("calibrated_peaks") or {}), **options.source_peaks}
    for j, m in enumerate(trace.metrics):
        name = m.name
        if _CORE.match(name) or name == "cpu.util":
            continue
        x = trace.values[:, j].astype(np.float64)
        if name in FRACTION_OF:
            absolute = FRACTION_OF[name]
            peak = target.peaks.get(absolute)
            if peak is None:
                report.drop(name, f"a fraction of the source's capacity; the target has no calibrated peak for {absolute}")
                continue
            if absolute in trace.names:
                report.drop(name, f"{absolute} is in the trace itself")
                continue
            cols[absolute] = x * peak
            specs[absolute] = MetricSpec(absolute, unit_for(absolute), source=m.source)
            report.scaled.append((absolute, f"= {name} x target peak {peak:.4g}"))
            continue
        cols[name] = x
        specs[name] = m
        if name in MEMORY_BYTES:
            tm, sm = _mem_total(target.fingerprint), _mem_total(trace.host_fingerprint)
            if tm and sm:
                cols[name] = x * (tm / sm)
                report.scaled.append((name, f"x {tm / sm:.4g} (target memory {tm:.4g} B / source memory {sm:.4g} B)"))
            else:
                report.scaled.append((name, "not scaled: installed memory unknown on the "
                                            f"{'target' if not tm else 'source'} host"))
            continue
        if m.unit in SCALABLE_UNITS and target.peaks.get(name):
            tp = target.peaks[name]
            sp = src_peaks.get(name)
            if sp:
                cols[name] = x * (tp / sp)
                report.scaled.append((name, f"x {tp / sp:.4g} (target peak {tp:.4g} / source peak {sp:.4g})"))
            else:
                n_over = int(np.nansum(x > tp))
                report.scaled.append((name, f"not scaled: source peak unknown (--source-peak {name}=VALUE); "
                                            f"{n_over} of {T} windows exceed the target's peak {tp:.4g}"))
    # the target's schema decides the output columns
    if target.schema is not None:
        _fill_single_device(cols, [s.name for s in target.schema], report)
        out_specs = list(target.schema)
        values = np.full((T, len(out_specs)), np.nan, dtype=np.float32)
        for j, s in enumerate(out_specs):
            if s.name in cols:
                values[:, j] = cols[s.name]
                if not s.available:
                    report.note(f"{s.name} is {s.availability.value} on the target ({s.reason}); the target value "
                                f"is kept, but the host cannot measure whether a replay reaches it")
            else:
                report.missing.append((s.name, "not in the source trace"))
        for name in cols:
            if name not in {s.name for s in out_specs}:
                report.drop(name, "the target host's schema has no such metric")
    else:
        names = [f"cpu.util.core{k}" for k in range(K)] + ["cpu.util"] + \
                [n for n in cols if not _CORE.match(n) and n != "cpu.util"]
        out_specs = [specs.get(n) or MetricSpec(n, unit_for(n), source=f"mapped:{trace.provenance.get('source_format', '')}")
                     for n in names]
        values = np.stack([cols[n] for n in names], axis=1).astype(np.float32)
    if np.isinf(values).any():
        raise TraceError("mapping produced an infinite value (a zero peak?)")
    src_util = trace.column("cpu.util") if "cpu.util" in trace.names else np.full(1, np.nan)
    prov = {**trace.provenance, "source_host_fingerprint": trace.host_fingerprint,
            "source_cpu_util_mean": float(np.nanmean(src_util)) if np.isfinite(src_util).any() else None,
            "mapped_onto": {"origin": target.origin, "cpus": K,
                                                "core_strategy": options.core_strategy,
                                                "target_peaks": target.peaks, "source_peaks": src_peaks}}
    return Trace(values=values, metrics=out_specs, window_s=trace.window_s, window_start_ns=trace.window_start_ns,
                 host_fingerprint=target.fingerprint, provenance=prov, simulated=False)

"""Memory bandwidth: DRAM traffic from the memory controllers' uncore counters, or from
resctrl memory-bandwidth monitoring (MBM).

Metrics: ``mem.bw_Bps`` (read + write), ``mem.bw_read_Bps``, ``mem.bw_write_Bps``.

Sources, first available wins (``source = "auto"``; or name one):
- ``imc``: Intel ``uncore_imc_<n>`` PMUs under /sys/bus/event_source/devices. Their
  ``events/cas_count_read`` / ``cas_count_write`` aliases (client parts: ``data_reads`` /
  ``data_writes``) give the encoding; ``.scale`` × ``.unit`` give bytes per count (server
  parts: 6.103515625e-5 MiB = 64 B, one cache line per CAS). Opened on the CPUs in the
  PMU's ``cpumask`` (one per socket), one read+write group per PMU and socket.
- ``umc``: AMD ``amd_umc_<n>`` PMUs (Linux ≥ 6.9, Zen 4+). sysfs gives only the fields
  (event, rdwrmask), so the CAS-command event is encoded here: event=0x0a, rdwrmask=1
  (reads) / 2 (writes), 64 B per command — as in AMD's PPR and perf's own event tables.
  ``amd_df`` (data fabric) exposes no sysfs events and its DRAM-beat encodings differ per
  family, so it is named in the reason but not used.
- ``resctrl``: /sys/fs/resctrl/mon_data/mon_L3_*/mbm_total_bytes (the root group, i.e.
  everything), summed over L3 domains. MBM counts total bytes only, so the read/write split
  is unsupported with that source.
On a VM none of these exist and all three metrics are unsupported with each source's reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from mimesys.metrics import Availability

from ..perf.events import PerfEventError, PerfPermissionError
from ..perf.pmu import PmuFormatError, devices_dir, encode, list_pmus, load_pmu, resolve_event
from .base import NoData, Raw, Sampler
from .perfgroups import GroupSet, derive_rates
from .registry import register

METRICS = ("mem.bw_Bps", "mem.bw_read_Bps", "mem.bw_write_Bps")
IMC_EVENT_PAIRS = (("cas_count_read", "cas_count_write"), ("data_reads", "data_writes"))
UMC_CAS = ({"event": 0x0A, "rdwrmask": 1}, {"event": 0x0A, "rdwrmask": 2})
CACHE_LINE_B = 64
SOURCES = ("auto", "imc", "umc", "resctrl")


@dataclass(frozen=True)
class MemBwOptions:
    source: str = "auto"  # auto | imc | umc | resctrl

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"source {self.source!r} is not one of {', '.join(SOURCES)}")


class _Unavailable(Exception):
    def __init__(self, reason: str, availability: Availability = Availability.UNSUPPORTED):
        super().__init__(reason)
        self.availability = availability


class MemBandwidthSampler(Sampler):
    name = "mem_bw"
    Options = MemBwOptions

    def probe(self):
        self._groups = GroupSet()
        self._resctrl: ResctrlMbm | None = None
        self.source = ""
        order = ("imc", "umc", "resctrl") if self.options.source == "auto" else (self.options.source,)
        reasons, denied = [], False
        for src in order:
            try:
                getattr(self, f"_open_{src}")()
            except _Unavailable as e:
                self._groups.close()
                reasons.append(str(e))
                denied |= e.availability is Availability.PERMISSION_DENIED
                continue
            self.source = src
            if src == "resctrl":
                return [self.spec("mem.bw_Bps", "B/s")] + [
                    self.unavailable(m, "B/s", "resctrl MBM counts total bytes only (no read/write split)")
                    for m in METRICS[1:]]
            return [self.spec(m, "B/s") for m in METRICS]
        av = Availability.PERMISSION_DENIED if denied else Availability.UNSUPPORTED
        return [self.unavailable(m, "B/s", "; ".join(reasons), av) for m in METRICS]

    # -- sources ---------------------------------------------------------------
    def _open_imc(self):
        names = list_pmus(self.hp, "uncore_imc")
        if not names:
            raise _Unavailable(f"no uncore_imc PMU in {devices_dir(self.hp)}")
        for name in names:
            try:
                pmu = load_pmu(self.hp, name)
                pair = next(((r, w) for r, w in IMC_EVENT_PAIRS if (pmu.path / "events" / r).exists()), None)
                if pair is None:
                    continue  # e.g. uncore_imc_free_running_* beside the per-channel PMUs
                rd, wr = (resolve_event(self.hp, pmu, e) for e in pair)
            except PmuFormatError as e:
                raise _Unavailable(f"uncore_imc: {e}") from None
            scales = [ev.bytes_per_count for ev in (rd, wr)]
            if None in scales:
                raise _Unavailable(f"{name}: {pair[0]} unit {rd.unit!r} is not a byte unit")
            self._add_group(pmu.cpus or (0,), [rd.spec, wr.spec], scales)
        if not self._groups.open_groups:
            raise _Unavailable(f"uncore_imc PMUs ({', '.join(names)}) have none of the events "
                               + ", ".join("/".join(p) for p in IMC_EVENT_PAIRS))

    def _open_umc(self):
        names = list_pmus(self.hp, "amd_umc")
        if not names:
            df = list_pmus(self.hp, "amd_df")
            extra = f" ({df[0]} is present, but its DRAM events are family-specific and not in sysfs)" if df else ""
            raise _Unavailable(f"no amd_umc PMU in {devices_dir(self.hp)}{extra}")
        for name in names:
            try:
                pmu = load_pmu(self.hp, name)
                rd, wr = (encode(pmu, terms, n) for terms, n in zip(UMC_CAS, ("umc_cas_cmd.rd", "umc_cas_cmd.wr")))
            except PmuFormatError as e:
                raise _Unavailable(f"amd_umc: {e}") from None
            self._add_group(pmu.cpus or (0,), [rd, wr], [CACHE_LINE_B, CACHE_LINE_B])

    def _add_group(self, cpus, events, scales):
        try:
            self._groups.add(cpus, events, ["mem.bw_read_Bps", "mem.bw_write_Bps"], scales)
        except PerfEventError as e:
            av = Availability.PERMISSION_DENIED if isinstance(e, PerfPermissionError) else Availability.UNSUPPORTED
            raise _Unavailable(str(e), av) from None

    def _open_resctrl(self):
        self._resctrl = ResctrlMbm(self.hp)

    # -- the sampler contract ---------------------------------------------------
    def read(self) -> Raw:
        if self.source == "resctrl":
            return self._resctrl.read()
        return self._groups.read()

    @staticmethod
    def derive(prev: Raw, cur: Raw, elapsed_s: float) -> dict[str, float]:
        out = {}
        if any(k.startswith("resctrl.") for k in cur):
            deltas = [cur[k] - prev[k] for k in cur if k.startswith("resctrl.") and k in prev]
            if deltas and min(deltas) >= 0:  # MBM counters wrap (~2^24 chunks): skip such windows
                out["mem.bw_Bps"] = sum(deltas) / elapsed_s
            return out
        out = derive_rates(prev, cur, elapsed_s)
        if "mem.bw_read_Bps" in out and "mem.bw_write_Bps" in out:
            out["mem.bw_Bps"] = out["mem.bw_read_Bps"] + out["mem.bw_write_Bps"]
        return out

    def close(self):
        if getattr(self, "_groups", None):
            self._groups.close()



class ResctrlMbm:
    """Memory bandwidth from resctrl's MBM counters (mon_data/mon_L3_*/mbm_total_bytes): total
    bytes per L3 domain, no read/write split. Raises _Unavailable when this host has none."""

    def __init__(self, hp):
        root = hp.s("fs/resctrl")
        mon = root / "mon_data"
        if not mon.is_dir():
            raise _Unavailable(f"resctrl not mounted at {root} (no {mon})")
        files = sorted(mon.glob("mon_L3_*/mbm_total_bytes"))
        if not files:
            raise _Unavailable(f"{mon}: no mon_L3_*/mbm_total_bytes (MBM not supported by this CPU)")
        self.files = [(f.parent.name, f) for f in files]
        try:
            self.read()
        except OSError as e:
            raise _Unavailable(f"{files[0]}: {e.strerror or e}") from None

    def read(self) -> dict:
        raw = {}
        for domain, f in self.files:
            text = f.read_text().strip()
            if not text.isdigit():  # "Unavailable" / "Error": the RMID's counter is not valid now
                raise NoData(f"{f}: {text}")
            raw[f"resctrl.{domain}"] = int(text)
        return raw


register(MemBandwidthSampler)

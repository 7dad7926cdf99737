"""Dynamic PMUs from sysfs (/sys/bus/event_source/devices/<pmu>): type, cpumask, the event
aliases under events/ and the field layout under format/, turned into EventSpecs.

The files follow Documentation/ABI/testing/sysfs-bus-event_source-devices-{format,events}:

    format/umask            "config:8-15"            (a field: which attr bits it occupies;
    format/event            "config:0-7,21"           ranges are filled low bits first)
    events/cas_count_read   "event=0x04,umask=0x03"  (terms; a bare term means =1)
    events/cas_count_read.scale  "6.103515625e-5"    (multiply the count by this ...)
    events/cas_count_read.unit   "MiB"                (... to get this unit)
    cpumask                 "0,18"                    (open uncore events on these CPUs only)

Parsing is pure over a HostPaths tree, so an Intel host's uncore_imc PMUs can be tested
from a hand-written fixture tree on a machine that has none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mimesys.hostpaths import HostPaths, parse_cpu_list
from .events import EventSpec

_UNIT_BYTES = {"B": 1, "Bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 1000, "MB": 10**6,
               "GB": 10**9}


class PmuFormatError(ValueError):
    """A sysfs format/event file does not parse; the message names the file."""


@dataclass(frozen=True)
class PmuEvent:
    """A sysfs event alias resolved to attr fields, with its scale to real units."""

    pmu: str
    name: str
    spec: EventSpec
    scale: float = 1.0   # count × scale = amount in `unit`
    unit: str = ""

    @property
    def bytes_per_count(self) -> float | None:
        """scale × unit in bytes, or None when the unit is not a byte unit."""
        u = _UNIT_BYTES.get(self.unit)
        return None if u is None else self.scale * u


@dataclass(frozen=True)
class Pmu:
    name: str
    type: int
    cpus: tuple[int, ...]   # from cpumask; empty = any CPU (core PMUs)
    path: Path


def devices_dir(hp: HostPaths) -> Path:
    return hp.s("bus/event_source/devices")


def list_pmus(hp: HostPaths, prefix: str) -> list[str]:
    """PMU names starting with prefix, in natural order (uncore_imc_2 before uncore_imc_10)."""
    d = devices_dir(hp)
    try:
        names = [p.name for p in d.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return []
    return sorted(names, key=lambda n: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", n)])


def load_pmu(hp: HostPaths, name: str) -> Pmu:
    path = devices_dir(hp) / name
    try:
        typ = int((path / "type").read_text().strip())
    except (OSError, ValueError) as e:
        raise PmuFormatError(f"{path / 'type'}: {e}") from None
    cpus: tuple[int, ...] = ()
    cm = path / "cpumask"
    if cm.exists():
        try:
            cpus = tuple(parse_cpu_list(cm.read_text()))
        except ValueError as e:
            raise PmuFormatError(f"{cm}: {e}") from None
    return Pmu(name, typ, cpus, path)


def parse_format(text: str, where: str = "format") -> tuple[str, list[tuple[int, int]]]:
    """'config:0-7,21' -> ('config', [(0, 7), (21, 21)])."""
    m = re.fullmatch(r"\s*(config[0-9]?)\s*:\s*([0-9,\-\s]+)", text)
    if not m:
        raise PmuFormatError(f"{where}: cannot parse {text.strip()!r} (expected e.g. 'config:0-7')")
    ranges = []
    for part in m.group(2).split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        ranges.append((int(lo), int(hi or lo)))
    return m.group(1), ranges


def place_bits(value: int, ranges: list[tuple[int, int]], where: str = "field") -> int:
    """Spread value's low bits over the field's bit ranges, lowest range first (as perf does)."""
    out, shift_in = 0, 0
    for lo, hi in ranges:
        width = hi - lo + 1
        out |= ((value >> shift_in) & ((1 << width) - 1)) << lo
        shift_in += width
    if value >> shift_in:
        raise PmuFormatError(f"{where}: value {value:#x} does not fit in {shift_in} bits")
    return out


def parse_terms(text: str, where: str = "event") -> list[tuple[str, int]]:
    """'event=0x04,umask=0x03,edge' -> [('event', 4), ('umask', 3), ('edge', 1)]."""
    terms = []
    for term in text.strip().split(","):
        term = term.strip()
        if not term:
            continue
        key, eq, val = term.partition("=")
        try:
            terms.append((key.strip(), int(val.strip(), 0) if eq else 1))
        except ValueError:
            raise PmuFormatError(f"{where}: bad term {term!r}") from None
    return terms


def resolve_event(hp: HostPaths, pmu: Pmu, event: str) -> PmuEvent:
    """events/<event> (+ .scale, .unit) of a PMU -> PmuEvent with the attr's config words."""
    ev_path = pmu.path / "events" / event
    try:
        text = ev_path.read_text()
    except OSError as e:
        raise PmuFormatError(f"{ev_path}: {e.strerror or e}") from None
    configs = {"config": 0, "config1": 0, "config2": 0}
    for key, val in parse_terms(text, str(ev_path)):
        if key in configs:  # a raw 'config=0x...' term needs no format file
            configs[key] |= val
            continue
        fmt_path = pmu.path / "format" / key
        try:
            word, ranges = parse_format(fmt_path.read_text(), str(fmt_path))
        except OSError as e:
            raise PmuFormatError(f"{ev_path}: term {key!r} has no {fmt_path} ({e.strerror or e})") from None
        if word not in configs:
            raise PmuFormatError(f"{fmt_path}: {word} is not supported (config, config1, config2 are)")
        configs[word] |= place_bits(val, ranges, f"{ev_path} term {key}")
    scale, unit = 1.0, ""
    sp, up = pmu.path / "events" / f"{event}.scale", pmu.path / "events" / f"{event}.unit"
    if sp.exists():
        try:
            scale = float(sp.read_text().strip())
        except ValueError:
            raise PmuFormatError(f"{sp}: not a number: {sp.read_text().strip()!r}") from None
    if up.exists():
        unit = up.read_text().strip()
    spec = EventSpec(f"{pmu.name}/{event}/", pmu.type, configs["config"], configs["config1"], configs["config2"])
    return PmuEvent(pmu.name, event, spec, scale, unit)


def encode(pmu: Pmu, terms: dict[str, int], name: str) -> EventSpec:
    """An event that sysfs does not alias (e.g. AMD UMC CAS commands) from its format fields."""
    configs = {"config": 0, "config1": 0, "config2": 0}
    for key, val in terms.items():
        fmt_path = pmu.path / "format" / key
        try:
            word, ranges = parse_format(fmt_path.read_text(), str(fmt_path))
        except OSError as e:
            raise PmuFormatError(f"{pmu.name}: no format field {key!r} ({fmt_path}: {e.strerror or e})") from None
        configs[word] |= place_bits(val, ranges, f"{pmu.name} {key}")
    return EventSpec(f"{pmu.name}/{name}/", pmu.type, configs["config"], configs["config1"], configs["config2"])

"""The stressor catalog: named stressor variants in plan order, versioned by a content hash.

The hash covers the canonical JSON of the entries (name, kernel, class, params) in
order, not the file's bytes: comments and formatting may change, semantics may not.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from .config import check_known, read_toml
from .errors import CatalogError, ConfigError

RESOURCE_CLASSES = ("cpu", "cache", "memory", "disk", "network")


def default_catalog_path() -> Path:
    """The catalog shipped with the code: packaged copy first, then the source tree."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "data" / "catalog.toml", here.parent / "stressors" / "catalog.toml",
                      Path("/usr/share/mimesys/catalog.toml")):
        if candidate.is_file():
            return candidate
    raise CatalogError("no stressor catalog found (looked in mimesys/data, stressors/, /usr/share/mimesys)")


class Buffers(NamedTuple):
    """The buffers a stressor allocates and touches (buffer_of)."""
    bytes: float       # 0 below 1 MiB
    shared: bool       # once for the whole run (a shared working set), else once per thread
    windowed: bool     # held only in the windows a thread runs it, else from setup to the end


def buffer_of(params: dict) -> Buffers:
    """The buffers a stressor with these params allocates and touches, if at least 1 MiB
    (smaller ones, and sizes named after a cache level, count as 0): a numeric working_set_bytes /
    table_bytes, once for the whole run if shared (set up before the first window), else once per
    thread that runs it, held from setup to the end; or per thread, an IO stressor's buffers
    (io_bytes for each IO in flight, depth of them, plus one per extra submitter thread:
    stressors/disk_aio.c, disk_io.c) and a churned region (region_bytes), which the runner holds
    only in the windows that thread runs the stressor (their kernels' thread_resident,
    stressors/stressor.h; runner.c, window_residency). Measured: a plan's disk variants at depth
    4-32 held 82 MiB this way, in every window of its replay, while the runner kept them from
    setup to the end. Scratch files are on disk, not in memory."""
    def number(key):
        v = params.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0
    size = number("working_set_bytes") or number("table_bytes")
    if size:
        return Buffers(size if size >= (1 << 20) else 0.0, bool(params.get("shared", True)), False)
    io = number("io_bytes")
    per_thread = io * (max(1.0, number("depth")) + max(0.0, number("threads") - 1)) + number("region_bytes")
    held = per_thread if per_thread >= (1 << 20) else 0.0
    return Buffers(held, False, held > 0)


@dataclass(frozen=True)
class Stressor:
    name: str
    kernel: str
    resource_class: str
    description: str
    params: dict = field(default_factory=dict)
    # rate-limited variant: {"base": name, "fraction": f}; run at f × the base's calibrated
    # one-thread bytes/s on each thread (the agent resolves the rate, the runner paces)
    pace: dict | None = None

    def canonical(self) -> dict:
        out = {"name": self.name, "kernel": self.kernel, "class": self.resource_class,
               "params": self.params}
        if self.pace is not None:
            out["pace"] = self.pace
        return out


@dataclass(frozen=True)
class Catalog:
    stressors: tuple[Stressor, ...]
    path: Path | None = None

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.stressors]

    @property
    def hash(self) -> str:
        blob = json.dumps([s.canonical() for s in self.stressors], sort_keys=True,
                          separators=(",", ":")).encode()
        return "sha256:" + hashlib.sha256(blob).hexdigest()

    def __len__(self) -> int:
        return len(self.stressors)

    def index(self, name: str) -> int:
        for i, s in enumerate(self.stressors):
            if s.name == name:
                return i
        raise CatalogError(f"unknown stressor {name!r}; known: {', '.join(self.names)}")

    def paced(self) -> list[int]:
        """Indices of the rate-limited variants."""
        return [i for i, s in enumerate(self.stressors) if s.pace is not None]

    def by_class(self, resource_class: str) -> list[int]:
        return [i for i, s in enumerate(self.stressors) if s.resource_class == resource_class]

    def to_dict(self) -> dict:
        return {"hash": self.hash, "stressors": [
            {**s.canonical(), "description": s.description} for s in self.stressors]}


CATALOG_KEYS = ("schema_version", "stressor")
STRESSOR_KEYS = ("name", "kernel", "class", "description", "params", "pace")


def _refuse_unknown(table: dict, valid: tuple[str, ...], where: str) -> None:
    try:
        check_known(table, valid, where)
    except ConfigError as e:
        raise CatalogError(str(e)) from None


def load_catalog(path: Path | str | None = None) -> Catalog:
    path = Path(path) if path else default_catalog_path()
    try:
        doc = read_toml(path, "catalog")
    except ConfigError as e:
        raise CatalogError(str(e)) from None
    _refuse_unknown(doc, CATALOG_KEYS, str(path))
    entries = doc.get("stressor")
    if not isinstance(entries, list) or not entries:
        raise CatalogError(f"{path}: no [[stressor]] entries")
    seen: set[str] = set()
    out = []
    for i, e in enumerate(entries):
        where = f"{path}: stressor #{i + 1}"
        _refuse_unknown(e, STRESSOR_KEYS, where)   # a misspelt key would otherwise be dropped unseen
        for key in ("name", "kernel", "class", "description"):
            if not isinstance(e.get(key), str) or not e[key]:
                raise CatalogError(f"{where}: missing or empty {key!r}")
        if e["class"] not in RESOURCE_CLASSES:
            raise CatalogError(f"{where} ({e['name']}): class {e['class']!r} not one of {RESOURCE_CLASSES}")
        if e["name"] in seen:
            raise CatalogError(f"{where}: duplicate name {e['name']!r}")
        seen.add(e["name"])
        pace = _pace(e, where, {s.name: s for s in out})
        out.append(Stressor(e["name"], e["kernel"], e["class"], e["description"], dict(e.get("params", {})), pace))
    return Catalog(tuple(out), path)


def _pace(e: dict, where: str, earlier: dict[str, Stressor]) -> dict | None:
    """A paced variant's `pace` table: its base comes earlier, runs the same kernel with the
    same params (only the rate differs), is not paced itself; 0 < fraction < 1."""
    pace = e.get("pace")
    if pace is None:
        return None
    where = f"{where} ({e['name']})"
    if not isinstance(pace, dict) or set(pace) != {"base", "fraction"}:
        raise CatalogError(f"{where}: pace must be {{ base = NAME, fraction = F }}, got {pace!r}")
    base, frac = pace["base"], pace["fraction"]
    if base not in earlier:
        raise CatalogError(f"{where}: pace base {base!r} is not a stressor listed before it")
    b = earlier[base]
    if b.pace is not None:
        raise CatalogError(f"{where}: pace base {base!r} is itself paced")
    if b.kernel != e["kernel"] or b.params != dict(e.get("params", {})):
        raise CatalogError(f"{where}: kernel and params must equal those of its pace base {base!r}")
    if not isinstance(frac, (int, float)) or isinstance(frac, bool) or not 0 < frac < 1:
        raise CatalogError(f"{where}: pace fraction {frac!r} must be a number in (0, 1)")
    if "pace_Bps" in b.params:
        raise CatalogError(f"{where}: pace_Bps is set by the agent, not the catalog")
    return {"base": base, "fraction": float(frac)}

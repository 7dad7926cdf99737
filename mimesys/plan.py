"""Plan: a workload as stressor compositions, float32 [T, M, K], plus metadata.

a[t, m, k] is the fraction of window t that stressor m runs on thread k; each thread's
column sums to at most 1 and the remainder is idle. Optionally, core_busy_target[t, k] is the
busy fraction the plan aims thread k's core at in window t (NaN: none); the runner holds it
by sizing the thread's compute (agentd/schedule.py, "The hold"). Optionally, mem_held_B[t] is
the memory the plan holds resident in window t, beside what its stressors' buffers take (the
runner keeps that footprint from the window's start: a neighbour feels memory held first, as
page cache evicted and reclaim). On disk (HDF5):

    /compositions       float32 [T, M, K]
    /core_busy_target   float32 [T, K], optional
    /mem_held_B         float64 [T], optional
    attrs: format="mimesys.plan", schema_version, window_s, catalog_hash,
           catalog_names (JSON list), seed, provenance (JSON), host_fingerprint (JSON)
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from .catalog import Catalog
from .errors import PlanError, ValidationError
from .h5io import atomic_h5, get_json, get_str, set_json
from .untrusted import MAX_DEPTH_METADATA, H5Limits, array_from_wire, array_to_wire, check_depth, open_h5, read_array

FORMAT = "mimesys.plan"
SCHEMA_VERSION = 1
# A thread's fractions may sum to 1 + this (float32 rounding of fractions that add to 1).
SUM_TOLERANCE = 1e-5
MAX_WINDOWS = 7 * 24 * 3600  # a week of 1 s windows: bounds what a request may ask the agent to hold
# What a plan file from outside may declare: /compositions (and /core_busy_target), at most 1 GiB.
PLAN_LIMITS = H5Limits(max_dataset_bytes=1 << 30, max_total_bytes=1 << 30)
# Memory a plan may name for one window at all (16 TiB); the agent also checks its own budget.
MAX_HELD_B = float(1 << 44)


@dataclass
class Plan:
    compositions: np.ndarray  # float32 [T, M, K]
    catalog_names: list[str]
    catalog_hash: str
    window_s: float = 1.0
    seed: int = 0
    provenance: dict = field(default_factory=dict)
    host_fingerprint: dict = field(default_factory=dict)
    core_busy_target: np.ndarray | None = None  # float32 [T, K], NaN = no target
    mem_held_B: np.ndarray | None = None        # float64 [T], bytes held resident in each window

    @property
    def T(self) -> int:
        return int(self.compositions.shape[0])

    @property
    def M(self) -> int:
        return int(self.compositions.shape[1])

    @property
    def K(self) -> int:
        return int(self.compositions.shape[2])

    @classmethod
    def from_catalog(cls, compositions, catalog: Catalog, **kw) -> "Plan":
        return cls(np.asarray(compositions, dtype=np.float32), catalog.names, catalog.hash, **kw)

    def freeze(self) -> "Plan":
        """Make the compositions read-only, so a validation result can be kept: RunManager
        validates once (off the event loop) and the backend and compiler ask again for free."""
        self.compositions.flags.writeable = False
        for extra in (self.core_busy_target, self.mem_held_B):
            if extra is not None:
                extra.flags.writeable = False
        return self

    def validate(self, catalog: Catalog | None = None, *, max_threads: int | None = None) -> "Plan":
        """Raise PlanError naming the first offending window/thread/stressor."""
        a = self.compositions
        key = (id(a), id(self.core_busy_target), id(self.mem_held_B), catalog.hash if catalog is not None else None,
               tuple(self.catalog_names), self.catalog_hash, float(self.window_s))
        if isinstance(a, np.ndarray) and not a.flags.writeable and self.__dict__.get("_validated") == key:
            if max_threads is not None and a.shape[2] > max_threads:   # cheap: not cached
                raise PlanError(f"plan has {a.shape[2]} threads but this host has {max_threads} CPUs")
            return self
        self._validate(catalog, max_threads=max_threads)
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            self.__dict__["_validated"] = key
        return self

    def _validate(self, catalog: Catalog | None, *, max_threads: int | None) -> None:
        a = self.compositions
        if not isinstance(a, np.ndarray) or a.ndim != 3:
            raise PlanError(f"compositions must be a 3-D array [T, M, K], got shape {getattr(a, 'shape', None)}")
        if a.dtype != np.float32:
            raise PlanError(f"compositions must be float32, got {a.dtype}")
        T, M, K = a.shape
        if T == 0 or K == 0:
            raise PlanError(f"empty plan: shape {a.shape}")
        if T > MAX_WINDOWS:
            raise PlanError(f"plan has {T} windows; at most {MAX_WINDOWS} allowed")
        if not (0.01 <= float(self.window_s) <= 3600):
            raise PlanError(f"window_s={self.window_s} outside [0.01, 3600]")
        if max_threads is not None and K > max_threads:
            raise PlanError(f"plan has {K} threads but this host has {max_threads} CPUs")
        if len(self.catalog_names) != M:
            raise PlanError(f"shape mismatch: compositions have M={M} stressors, catalog_names lists "
                            f"{len(self.catalog_names)}")
        if catalog is not None:
            known = set(catalog.names)
            for m, name in enumerate(self.catalog_names):
                if name not in known:
                    raise PlanError("unknown stressor (not in this agent's catalog)", stressor=name)
            if self.catalog_names != catalog.names:
                m = next(i for i, (x, y) in enumerate(zip(self.catalog_names, catalog.names)) if x != y) \
                    if len(self.catalog_names) == len(catalog.names) else min(len(self.catalog_names), len(catalog.names))
                raise PlanError(f"catalog order differs from this agent's at position {m} "
                                f"(plan {len(self.catalog_names)} stressors, agent {len(catalog.names)}); "
                                f"regenerate the plan for catalog {catalog.hash}")
            if self.catalog_hash != catalog.hash:
                raise PlanError(f"catalog hash {self.catalog_hash} does not match this agent's {catalog.hash}")
        bad = ~np.isfinite(a)
        if bad.any():
            t, m, k = map(int, np.argwhere(bad)[0])
            # Indices only, never the value: a value may be bytes the sender should not see.
            raise PlanError("non-finite value", window=t, thread=k, stressor=self.catalog_names[m])
        bad = (a < 0) | (a > 1)
        if bad.any():
            t, m, k = map(int, np.argwhere(bad)[0])
            raise PlanError("value outside [0, 1]", window=t, thread=k,
                            stressor=self.catalog_names[m])
        sums = a.astype(np.float64).sum(axis=1)  # [T, K]
        bad = sums > 1 + SUM_TOLERANCE
        if bad.any():
            t, k = map(int, np.argwhere(bad)[0])
            raise PlanError("thread's fractions sum to more than 1", window=t, thread=k)
        b = self.core_busy_target
        if b is not None:
            if not isinstance(b, np.ndarray) or b.dtype != np.float32 or b.shape != (T, K):
                raise PlanError(f"core_busy_target must be float32 [T, K] = [{T}, {K}], got "
                                f"{getattr(b, 'dtype', type(b).__name__)} {getattr(b, 'shape', None)}")
            bad = np.isinf(b) | (b < 0) | (b > 1)
            if bad.any():
                t, k = map(int, np.argwhere(bad)[0])
                raise PlanError("core busy target outside [0, 1] (NaN: none)", window=t, thread=k)
        h = self.mem_held_B
        if h is not None:
            if not isinstance(h, np.ndarray) or h.dtype != np.float64 or h.shape != (T,):
                raise PlanError(f"mem_held_B must be float64 [T] = [{T}], got "
                                f"{getattr(h, 'dtype', type(h).__name__)} {getattr(h, 'shape', None)}")
            bad = ~np.isfinite(h) | (h < 0) | (h > MAX_HELD_B)
            if bad.any():
                raise PlanError(f"memory held outside [0, {MAX_HELD_B:.0f}] bytes", window=int(np.argmax(bad)))
        return self

    @property
    def held_max_B(self) -> float:
        """The most memory any window holds (0 without mem_held_B)."""
        return float(self.mem_held_B.max()) if self.mem_held_B is not None and self.mem_held_B.size else 0.0

    # -- the wire: raw arrays, nothing to interpret ----------------------------
    WIRE_FIELDS = ("compositions", "catalog_names", "catalog_hash", "window_s", "seed", "provenance",
                   "host_fingerprint", "core_busy_target", "mem_held_B")

    def to_wire(self) -> dict:
        out = {"compositions": array_to_wire(self.compositions, "<f4"), "catalog_names": list(self.catalog_names),
               "catalog_hash": self.catalog_hash, "window_s": float(self.window_s), "seed": int(self.seed),
               "provenance": self.provenance, "host_fingerprint": self.host_fingerprint}
        if self.core_busy_target is not None:
            out["core_busy_target"] = array_to_wire(self.core_busy_target, "<f4")
        if self.mem_held_B is not None:
            out["mem_held_B"] = array_to_wire(self.mem_held_B, "<f8")
        return out

    @classmethod
    def from_wire(cls, obj, where: str = "plan", *, max_threads: int | None = None,
                  max_elements: int = 1 << 28) -> "Plan":
        """A plan sent as a map of plain fields, /compositions as {shape, dtype: "<f4", bytes}."""
        if not isinstance(obj, dict):
            raise PlanError(f"{where}: expected a map, got {type(obj).__name__}")
        unknown = sorted(str(k) for k in obj if k not in cls.WIRE_FIELDS)
        if unknown:
            raise PlanError(f"{where}: unknown field(s) {unknown}; valid: {', '.join(cls.WIRE_FIELDS)}")
        for name in ("compositions", "catalog_names", "catalog_hash"):
            if name not in obj:
                raise PlanError(f"{where}: missing field {name!r}")
        limits = {0: MAX_WINDOWS} | ({2: max_threads} if max_threads else {})
        shape = obj["compositions"].get("shape") if isinstance(obj["compositions"], dict) else None
        if max_threads and isinstance(shape, list) and len(shape) == 3 and isinstance(shape[2], int) \
                and shape[2] > max_threads:
            raise PlanError(f"{where}: {shape[2]} threads; this host runs at most {max_threads} (its CPU limit)")
        try:
            a = array_from_wire(obj["compositions"], f"{where}.compositions", ndim=3, dtype="<f4",
                                max_elements=max_elements, axis_limits=limits)
        except PlanError:
            raise
        except ValidationError as e:
            raise PlanError(str(e)) from None
        busy = None
        if obj.get("core_busy_target") is not None:
            try:
                busy = array_from_wire(obj["core_busy_target"], f"{where}.core_busy_target", ndim=2, dtype="<f4",
                                       max_elements=max_elements,
                                       axis_limits={0: MAX_WINDOWS} | ({1: max_threads} if max_threads else {}))
            except ValidationError as e:
                raise PlanError(str(e)) from None
        held = None
        if obj.get("mem_held_B") is not None:
            try:
                held = array_from_wire(obj["mem_held_B"], f"{where}.mem_held_B", ndim=1, dtype="<f8",
                                       max_elements=max_elements, axis_limits={0: MAX_WINDOWS})
            except ValidationError as e:
                raise PlanError(str(e)) from None
        names, chash = obj["catalog_names"], obj["catalog_hash"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise PlanError(f"{where}.catalog_names: expected a list of names")
        if not isinstance(chash, str):
            raise PlanError(f"{where}.catalog_hash: expected a string")
        window_s, seed = obj.get("window_s", 1.0), obj.get("seed", 0)
        if isinstance(window_s, bool) or not isinstance(window_s, (int, float)) or not np.isfinite(window_s):
            raise PlanError(f"{where}.window_s: expected a finite number")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 64:
            raise PlanError(f"{where}.seed: expected an integer in [0, 2^64)")
        prov, fp = obj.get("provenance", {}), obj.get("host_fingerprint", {})
        if not isinstance(prov, dict) or not isinstance(fp, dict):
            raise PlanError(f"{where}: provenance and host_fingerprint must be maps")
        try:
            check_depth(prov, f"{where}.provenance", MAX_DEPTH_METADATA)
            check_depth(fp, f"{where}.host_fingerprint", MAX_DEPTH_METADATA)
        except ValidationError as e:
            raise PlanError(str(e)) from None
        return cls(a, names, chash, window_s=float(window_s), seed=seed, provenance=prov, host_fingerprint=fp,
                   core_busy_target=busy, mem_held_B=held)

    # -- HDF5 -----------------------------------------------------------------
    def write(self, path: Path | str) -> None:
        with atomic_h5(path) as f:
            self._write_into(f)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        with h5py.File(buf, "w") as f:
            self._write_into(f)
        return buf.getvalue()

    def _write_into(self, f: h5py.File) -> None:
        f.create_dataset("compositions", data=np.asarray(self.compositions, np.float32),
                         compression="gzip", compression_opts=4, shuffle=True)
        f.attrs["format"] = FORMAT
        f.attrs["schema_version"] = SCHEMA_VERSION
        f.attrs["window_s"] = float(self.window_s)
        f.attrs["catalog_hash"] = self.catalog_hash
        f.attrs["seed"] = int(self.seed)
        set_json(f.attrs, "catalog_names", list(self.catalog_names))
        set_json(f.attrs, "provenance", self.provenance)
        set_json(f.attrs, "host_fingerprint", self.host_fingerprint)
        if self.core_busy_target is not None:
            f.create_dataset("core_busy_target", data=np.asarray(self.core_busy_target, np.float32),
                             compression="gzip", compression_opts=4, shuffle=True)
        if self.mem_held_B is not None:
            f.create_dataset("mem_held_B", data=np.asarray(self.mem_held_B, np.float64),
                             compression="gzip", compression_opts=4, shuffle=True)

    @classmethod
    def read(cls, path: Path | str, *, limits: H5Limits = PLAN_LIMITS) -> "Plan":
        return cls._open(path, str(path), limits)

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "request body", *, limits: H5Limits = PLAN_LIMITS,
                   max_threads: int | None = None) -> "Plan":
        return cls._open(data, where, limits, max_threads)

    @classmethod
    def _open(cls, source, where: str, limits: H5Limits, max_threads: int | None = None) -> "Plan":
        """Every plan file is from outside (the wire, a released workload): checked before reading."""
        try:
            with open_h5(source, where, limits, kind="HDF5 plan") as f:
                ds = f.get("compositions")
                # Before anything is decompressed: a few KiB of gzip may declare 100000 threads.
                if max_threads and isinstance(ds, h5py.Dataset) and ds.ndim == 3 and ds.shape[2] > max_threads:
                    raise PlanError(f"{where}: {ds.shape[2]} threads; this host runs at most {max_threads} (its CPU limit)")
                return cls._read_from(f, where)
        except PlanError:
            raise
        except ValidationError as e:
            raise PlanError(str(e)) from None
        except (OSError, KeyError, ValueError, TypeError) as e:
            raise PlanError(f"{where}: not a readable HDF5 plan: {type(e).__name__}") from None

    @classmethod
    def _read_from(cls, f: h5py.File, where: str) -> "Plan":
        if get_str(f.attrs, "format") != FORMAT:
            raise PlanError(f"{where}: attribute format={get_str(f.attrs, 'format')!r}, expected {FORMAT!r}")
        version = int(f.attrs.get("schema_version", 0))
        if version < 1 or version > SCHEMA_VERSION:
            raise PlanError(f"{where}: plan schema_version {version} not supported (this build reads 1..{SCHEMA_VERSION})")
        if "compositions" not in f:
            raise PlanError(f"{where}: no /compositions dataset")
        ds = f["compositions"]
        if not isinstance(ds, h5py.Dataset):
            raise PlanError(f"{where}: /compositions is not a dataset")
        if ds.ndim != 3:
            raise PlanError(f"{where}: /compositions must be [T, M, K], got shape {ds.shape}")
        if ds.shape[0] > MAX_WINDOWS:
            raise PlanError(f"{where}: plan has {ds.shape[0]} windows; at most {MAX_WINDOWS} allowed")
        names = get_json(f.attrs, "catalog_names", where=where)   # ValidationError naming the attribute
        provenance = get_json(f.attrs, "provenance", {}, where=where)
        fingerprint = get_json(f.attrs, "host_fingerprint", {}, where=where)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise PlanError(f"{where}: attribute catalog_names must be a JSON list of names")
        seed = _scalar_attr(f, "seed", 0, int, where)
        busy = None
        if "core_busy_target" in f:
            bds = f["core_busy_target"]
            if not isinstance(bds, h5py.Dataset) or bds.ndim != 2 or bds.shape != (ds.shape[0], ds.shape[2]):
                raise PlanError(f"{where}: /core_busy_target must be [T, K] = [{ds.shape[0]}, {ds.shape[2]}], got "
                                f"{getattr(bds, 'shape', 'a group')}")
            busy = np.asarray(read_array(bds, where), dtype=np.float32)
        held = None
        if "mem_held_B" in f:
            hds = f["mem_held_B"]
            if not isinstance(hds, h5py.Dataset) or hds.shape != (ds.shape[0],):
                raise PlanError(f"{where}: /mem_held_B must be [T] = [{ds.shape[0]}], got "
                                f"{getattr(hds, 'shape', 'a group')}")
            held = np.asarray(read_array(hds, where), dtype=np.float64)
        if not 0 <= seed < 1 << 64:   # as on the wire (from_wire); the schedule stores it as a u64
            raise PlanError(f"{where}: attribute seed must be an integer in [0, 2^64)")
        return cls(
            compositions=np.asarray(read_array(ds, where), dtype=np.float32),
            catalog_names=names,
            catalog_hash=get_str(f.attrs, "catalog_hash", ""),
            window_s=_scalar_attr(f, "window_s", 1.0, float, where),
            seed=seed,
            provenance=provenance or {},
            host_fingerprint=fingerprint or {},
            core_busy_target=busy,
            mem_held_B=held,
        )


def _scalar_attr(f: h5py.File, key: str, default, kind, where: str):
    raw = f.attrs.get(key, default)
    try:
        value = kind(np.asarray(raw).item())
    except (TypeError, ValueError, OverflowError):
        raise PlanError(f"{where}: attribute {key} must be a number") from None
    if kind is float and not np.isfinite(value):
        raise PlanError(f"{where}: attribute {key} must be finite")
    return value

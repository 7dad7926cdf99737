"""Plan: a workload as stressor compositions, float32 [T, M, K], plus metadata.

a[t, m, k] is the fraction of window t that stressor m runs on thread k; each thread's
column sums to at most 1 and the remainder is idle. On disk (HDF5):

    /compositions   float32 [T, M, K]
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
from .errors import PlanError
from .h5io import atomic_h5, get_json, get_str, set_json

FORMAT = "mimesys.plan"
SCHEMA_VERSION = 1
# A thread's fractions may sum to 1 + this (float32 rounding of fractions that add to 1).
SUM_TOLERANCE = 1e-5
MAX_WINDOWS = 7 * 24 * 3600  # a week of 1 s windows: bounds what a request may ask the agent to hold


@dataclass
class Plan:
    compositions: np.ndarray  # float32 [T, M, K]
    catalog_names: list[str]
    catalog_hash: str
    window_s: float = 1.0
    seed: int = 0
    provenance: dict = field(default_factory=dict)
    host_fingerprint: dict = field(default_factory=dict)

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

    def validate(self, catalog: Catalog | None = None, *, max_threads: int | None = None) -> "Plan":
        """Raise PlanError naming the first offending window/thread/stressor."""
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
            raise PlanError(f"non-finite value {a[t, m, k]}", window=t, thread=k, stressor=self.catalog_names[m])
        bad = (a < 0) | (a > 1)
        if bad.any():
            t, m, k = map(int, np.argwhere(bad)[0])
            raise PlanError(f"value {a[t, m, k]:.6g} outside [0, 1]", window=t, thread=k,
                            stressor=self.catalog_names[m])
        sums = a.astype(np.float64).sum(axis=1)  # [T, K]
        bad = sums > 1 + SUM_TOLERANCE
        if bad.any():
            t, k = map(int, np.argwhere(bad)[0])
            raise PlanError(f"thread's fractions sum to {sums[t, k]:.6g} > 1", window=t, thread=k)
        return self

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

    @classmethod
    def read(cls, path: Path | str) -> "Plan":
        try:
            with h5py.File(path, "r") as f:
                return cls._read_from(f, str(path))
        except OSError as e:
            raise PlanError(f"{path}: not a readable HDF5 plan: {e}") from e

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "request body") -> "Plan":
        try:
            with h5py.File(io.BytesIO(data), "r") as f:
                return cls._read_from(f, where)
        except OSError as e:
            raise PlanError(f"{where}: not a readable HDF5 plan: {e}") from e

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
        if ds.ndim != 3:
            raise PlanError(f"{where}: /compositions must be [T, M, K], got shape {ds.shape}")
        if ds.shape[0] > MAX_WINDOWS:
            raise PlanError(f"{where}: plan has {ds.shape[0]} windows; at most {MAX_WINDOWS} allowed")
        try:
            names = get_json(f.attrs, "catalog_names")
            provenance = get_json(f.attrs, "provenance", {})
            fingerprint = get_json(f.attrs, "host_fingerprint", {})
        except ValueError as e:
            raise PlanError(f"{where}: malformed JSON attribute: {e}") from e
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise PlanError(f"{where}: attribute catalog_names must be a JSON list of names")
        return cls(
            compositions=np.asarray(ds[()], dtype=np.float32) if ds.dtype != np.float32 else ds[()],
            catalog_names=names,
            catalog_hash=get_str(f.attrs, "catalog_hash", ""),
            window_s=float(f.attrs.get("window_s", 1.0)),
            seed=int(f.attrs.get("seed", 0)),
            provenance=provenance or {},
            host_fingerprint=fingerprint or {},
        )

"""The training dataset: profiled transitions (a_{t-1}, a_t, o_{t-1}, o_t) as HDF5.

On disk (the contract in docs/design.md "Formats"):

    /prev_action  float32 [S, M, K]   composition of the previous window
    /action       float32 [S, M, K]   composition of the window measured in /obs
    /prev_obs     float32 [S, N]      metrics of the previous window (mean over repetitions)
    /obs          float32 [S, N]      metrics of this window (mean over repetitions)
    /obs_spread   float32 [S, N]      max - min of /obs over the repetitions (0 with one)
    /round        int32 [S]           optional: collection round that produced the sample (−1: taught)
    /source       uint8 [S]           optional: 0 measured, 1 taught by the forward model (controller/teach.py)
    attrs: format="mimesys.dataset", schema_version, metrics (JSON MetricSpec list),
           catalog_names (JSON), catalog_hash, host_fingerprint (JSON), window_s,
           simulated (bool), provenance (JSON)

A dataset is bound to one host fingerprint (the campaign refuses to mix hosts unless told
to). `simulated` is True when any sample came from a simulated host; nothing built on
such a dataset may present its figures as measured.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import h5py
import numpy as np

from mimesys.errors import ValidationError
from mimesys.h5io import atomic_h5, get_json, get_str, set_json
from mimesys.metrics import MetricSpec
from mimesys.untrusted import H5Limits, open_h5, read_array

FORMAT = "mimesys.dataset"
SCHEMA_VERSION = 1
ARRAYS = ("prev_action", "action", "prev_obs", "obs", "obs_spread")
# As read: every array becomes float32 (round int32, source uint8), so a file's uint8 arrays are
# counted at 4 bytes a value, not at the size the file declares.
READ_AS = {**{name: np.float32 for name in ARRAYS}, "round": np.int32, "source": np.uint8}
DATASET_LIMITS = H5Limits(max_dataset_bytes=4 << 30, max_total_bytes=16 << 30)


class DatasetError(ValidationError):
    """A dataset file is malformed or inconsistent; the message names the file and field."""


@contextlib.contextmanager
def open_dataset(path: Path | str, limits: H5Limits = DATASET_LIMITS) -> Iterator[h5py.File]:
    """A dataset file opened the way plans and traces are (mimesys.untrusted.open_h5): datasets
    are handed between operators, so links other than hard links, external storage, virtual
    layouts and declared sizes past `limits` are refused before a byte of data is read, and so
    are the arrays this module reads once widened to what they are read as (READ_AS)."""
    where = str(path)
    with open_h5(path, where, limits, kind="mimesys dataset") as f:
        total = 0
        for name, dtype in READ_AS.items():
            ds = f.get(name)
            if not isinstance(ds, h5py.Dataset):
                continue
            nbytes = int(ds.size or 0) * np.dtype(dtype).itemsize
            total += nbytes
            if nbytes > limits.max_dataset_bytes or total > limits.max_total_bytes:
                raise DatasetError(f"{where}: /{name} of shape {ds.shape} is {nbytes} bytes once read as "
                                   f"{np.dtype(dtype).name}; at most {limits.max_dataset_bytes} per array and "
                                   f"{limits.max_total_bytes} together")
        yield f


def read_checked(f: h5py.File, name: str, where: str) -> np.ndarray:
    """One array of a file opened by open_dataset, as READ_AS says."""
    ds = f[name]
    if not isinstance(ds, h5py.Dataset):
        raise DatasetError(f"{where}: /{name} is not a dataset")
    return np.asarray(read_array(ds, where), READ_AS[name])


@dataclass
class Dataset:
    prev_action: np.ndarray     # float32 [S, M, K]
    action: np.ndarray          # float32 [S, M, K]
    prev_obs: np.ndarray        # float32 [S, N]
    obs: np.ndarray             # float32 [S, N]
    obs_spread: np.ndarray      # float32 [S, N]
    metrics: list[MetricSpec]
    catalog_names: list[str]
    catalog_hash: str
    window_s: float = 1.0
    host_fingerprint: dict = field(default_factory=dict)
    simulated: bool = False
    provenance: dict = field(default_factory=dict)
    round: np.ndarray | None = None   # int32 [S]
    source: np.ndarray | None = None  # uint8 [S]: 0 measured, 1 taught (controller/teach.py); None: all measured

    @property
    def S(self) -> int:
        return int(self.action.shape[0])

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.metrics]

    def validate(self, where: str = "dataset") -> "Dataset":
        S = self.action.shape[0] if self.action.ndim == 3 else -1
        if self.action.ndim != 3:
            raise DatasetError(f"{where}: /action must be [S, M, K], got shape {self.action.shape}")
        if self.prev_action.shape != self.action.shape:
            raise DatasetError(f"{where}: /prev_action shape {self.prev_action.shape} != /action {self.action.shape}")
        N = len(self.metrics)
        for name in ("prev_obs", "obs", "obs_spread"):
            arr = getattr(self, name)
            if arr.shape != (S, N):
                raise DatasetError(f"{where}: /{name} shape {arr.shape}, expected ({S}, {N}) "
                                   f"(S samples x N={N} metrics)")
        if len(self.catalog_names) != self.action.shape[1]:
            raise DatasetError(f"{where}: catalog_names lists {len(self.catalog_names)} stressors, "
                               f"/action has M={self.action.shape[1]}")
        if self.round is not None and self.round.shape != (S,):
            raise DatasetError(f"{where}: /round shape {self.round.shape}, expected ({S},)")
        if self.source is not None and (self.source.shape != (S,) or (self.source > 1).any()):
            raise DatasetError(f"{where}: /source must be ({S},) values 0 (measured) or 1 (taught), "
                               f"got shape {self.source.shape}")
        for name in ("prev_action", "action"):
            arr = getattr(self, name)
            bad = ~np.isfinite(arr) | (arr < 0) | (arr > 1)
            if bad.any():
                s, m, k = map(int, np.argwhere(bad)[0])
                raise DatasetError(f"{where}: /{name}[{s}] stressor {self.catalog_names[m]!r} thread {k}: "
                                   f"value {arr[s, m, k]} outside [0, 1]")
        for name in ("prev_obs", "obs", "obs_spread"):
            arr = getattr(self, name)
            if np.isinf(arr).any():
                s, n = map(int, np.argwhere(np.isinf(arr))[0])
                raise DatasetError(f"{where}: /{name}[{s}] metric {self.names[n]!r} is infinite")
        return self

    # -- HDF5 -----------------------------------------------------------------------------
    def write(self, path: Path | str) -> None:
        """Atomic: a crash leaves the old file (or none), never half of this one."""
        self.validate(str(path))
        with atomic_h5(path) as f:
            for name in ARRAYS:
                f.create_dataset(name, data=np.asarray(getattr(self, name), np.float32),
                                 compression="gzip", compression_opts=4, shuffle=True)
            if self.round is not None:
                f.create_dataset("round", data=np.asarray(self.round, np.int32))
            if self.source is not None:
                f.create_dataset("source", data=np.asarray(self.source, np.uint8))
            f.attrs["format"] = FORMAT
            f.attrs["schema_version"] = SCHEMA_VERSION
            f.attrs["window_s"] = float(self.window_s)
            f.attrs["simulated"] = bool(self.simulated)
            f.attrs["catalog_hash"] = self.catalog_hash
            set_json(f.attrs, "metrics", [m.to_dict() for m in self.metrics])
            set_json(f.attrs, "catalog_names", list(self.catalog_names))
            set_json(f.attrs, "host_fingerprint", self.host_fingerprint)
            set_json(f.attrs, "provenance", self.provenance)

    @classmethod
    def read(cls, path: Path | str) -> "Dataset":
        where = str(path)
        try:
            with open_dataset(path) as f:
                fmt = get_str(f.attrs, "format")
                if fmt != FORMAT:
                    raise DatasetError(f"{where}: attribute format={fmt!r}, expected {FORMAT!r}")
                version = int(f.attrs.get("schema_version", 0))
                if not 1 <= version <= SCHEMA_VERSION:
                    raise DatasetError(f"{where}: dataset schema_version {version} not supported "
                                       f"(this build reads 1..{SCHEMA_VERSION})")
                for name in ARRAYS:
                    if name not in f:
                        raise DatasetError(f"{where}: no /{name} dataset")
                arrays = {name: read_checked(f, name, where) for name in ARRAYS}
                ds = cls(**arrays,
                         metrics=[MetricSpec.from_dict(d) for d in get_json(f.attrs, "metrics", [], where=where)],
                         catalog_names=list(get_json(f.attrs, "catalog_names", [], where=where)),
                         catalog_hash=get_str(f.attrs, "catalog_hash", ""),
                         window_s=float(f.attrs.get("window_s", 1.0)),
                         host_fingerprint=get_json(f.attrs, "host_fingerprint", {}, where=where) or {},
                         simulated=bool(f.attrs.get("simulated", False)),
                         provenance=get_json(f.attrs, "provenance", {}, where=where) or {},
                         round=read_checked(f, "round", where) if "round" in f else None,
                         source=read_checked(f, "source", where) if "source" in f else None)
        except DatasetError:
            raise
        except ValidationError as e:     # the gate's refusals (UntrustedFileError), JSON attributes
            raise DatasetError(str(e)) from None
        except (OSError, KeyError, ValueError, TypeError) as e:
            raise DatasetError(f"{where}: not a readable mimesys dataset: {e}") from e
        return ds.validate(where)

    def summary(self) -> dict:
        """What `mimesys dataset info` prints: sizes, provenance and per-metric ranges."""
        ranges = {}
        for j, m in enumerate(self.metrics):
            col = self.obs[:, j]
            ok = np.isfinite(col)
            ranges[m.name] = None if not ok.any() else {
                "min": float(col[ok].min()), "max": float(col[ok].max()), "mean": float(col[ok].mean()),
                "unit": m.unit}
        return {"samples": self.S, "stressors": len(self.catalog_names), "threads": int(self.action.shape[2]),
                "metrics": len(self.metrics), "window_s": self.window_s, "simulated": self.simulated,
                "catalog_hash": self.catalog_hash, "host": self.host_fingerprint.get("cpu_model", ""),
                "rounds": None if self.round is None or not self.S else int(self.round.max()) + 1,
                "taught_samples": 0 if self.source is None else int((self.source == 1).sum()),
                "provenance": self.provenance, "ranges": ranges}


def samples_from_chain(compositions: np.ndarray, obs_reps: np.ndarray) -> tuple[np.ndarray, ...]:
    """One executed chain -> its transitions.

    compositions: [L, M, K]; obs_reps: [R, L, N] (window t of repetition r).
    Returns (prev_action [L-1, M, K], action [L-1, M, K], prev_obs [L-1, N], obs [L-1, N],
    obs_spread [L-1, N]) for the windows t = 1..L-1, obs being the mean over repetitions and
    spread max - min over repetitions of window t (NaN-aware).
    """
    compositions = np.asarray(compositions, np.float32)
    obs_reps = np.asarray(obs_reps, np.float32)
    with np.errstate(invalid="ignore"), _quiet_nan_warnings():
        mean = np.nanmean(obs_reps, axis=0)              # [L, N]
        spread = np.nanmax(obs_reps, axis=0) - np.nanmin(obs_reps, axis=0)
    return (compositions[:-1], compositions[1:], mean[:-1], mean[1:], spread[1:])


class _quiet_nan_warnings:
    """All-NaN columns (unsupported metrics) are expected; their mean is NaN, silently."""

    def __enter__(self):
        import warnings
        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


def simulated_dataset(n_chains: int, chain_len: int = 16, *, repetitions: int = 3, n_cpus: int = 4,
                      seed: int = 0, catalog=None, window_s: float = 1.0, hold_max: int = 1) -> Dataset:
    """A dataset from the simulated host, without HTTP: random sparse compositions chained
    and run through mimesys.sim.model with `repetitions` noisy repetitions per chain.
    hold_max > 1 holds each composition for 1..hold_max windows (uniform), as a campaign
    with CampaignConfig.hold_max does.

    For model and alignment development only; the result is marked simulated=True.
    Returns n_chains * (chain_len - 1) samples.
    """
    from mimesys.catalog import load_catalog
    from mimesys.sim.model import SimModel, SimParams
    from .compositions import random_compositions

    catalog = catalog or load_catalog()
    params = SimParams(n_cpus=n_cpus)
    model = SimModel.from_catalog(catalog, params)
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(n_chains):
        comps = random_compositions(rng, chain_len, len(catalog), n_cpus)
        if hold_max > 1:
            comps = np.repeat(comps, rng.integers(1, hold_max + 1, chain_len), axis=0)[:chain_len]
        reps = []
        state = model.idle_state()
        for _r in range(repetitions):
            obs, state = model.simulate(comps, state, rng, window_s)
            reps.append(obs)
        parts.append(samples_from_chain(comps, np.stack(reps)))
    cols = [np.concatenate(x) for x in zip(*parts)]
    fp = params.fingerprint()
    fp["catalog_hash"] = catalog.hash
    return Dataset(*cols, metrics=model.schema(), catalog_names=catalog.names, catalog_hash=catalog.hash,
                   window_s=window_s, host_fingerprint=fp, simulated=True,
                   provenance={"source": "controller.dataset.simulated_dataset", "seed": seed,
                               "n_chains": n_chains, "chain_len": chain_len, "repetitions": repetitions,
                               "hold_max": hold_max})

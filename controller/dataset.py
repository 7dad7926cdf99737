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

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mimesys.metrics import MetricSpec

from . import dataset_h5
from .dataset_h5 import DatasetError


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

    # -- HDF5 (controller/dataset_h5.py) ----------------------------------------------
    def write(self, path: Path | str) -> None:
        """Atomic: a crash leaves the old file (or none), never half of this one."""
        dataset_h5.write(self.validate(str(path)), path)

    @classmethod
    def read(cls, path: Path | str) -> "Dataset":
        return cls(**dataset_h5.read_fields(path)).validate(str(path))

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

"""The dataset baselines the planners are compared with (the MIMESYS paper §7.2), behind the
Generator interface of every planner (mimesys/planners/base.py), registered as kinds of the
planner registry by controller/baselines/__init__.py (spec `KIND:DATASET`).

- nearest: for each target window, the composition of the dataset sample whose measured
  metrics are closest (search-based baseline).
- knn: the inverse-distance-weighted mean of the k = 100 nearest samples' compositions
  (linear interpolation between profiled compositions).
- single: one stressor (by default the catalog's first memory stressor, as the paper's
  Fleetbench memory baseline) on every thread, its duty cycle per thread equal to the
  target's utilization of that thread's core.

Distances are taken in the model's normalized metric space (controller/model/layout.py:
log1p for rates and bytes, then z-scores fitted on the dataset), so bytes per second do not
drown fractions. A metric the target lacks altogether is left out of the distance; a NaN in
some windows is set to the dataset mean there, as the model does; the plan's provenance says
which. None of these is state-aware: each window is chosen on its own.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from mimesys.catalog import load_catalog
from mimesys.errors import ConfigError, ValidationError
from mimesys.plan import Plan
from mimesys.planners.base import project_to_valid, target_matrix
from mimesys.planners.registry import kinds, load_planner
from mimesys.trace import Trace

from ..model.data import TrainingData, load_training_data
from ..model.layout import MetricLayout, Normalizer
from . import BASELINE_GROUP as GROUP

KINDS = tuple(kinds(group=GROUP))    # registered by controller/baselines/__init__.py before this module loads


def _neighbour_index(k: int, z: np.ndarray):
    # scikit-learn loads here, for the neighbour searches alone: `single` on a test host does
    # not carry it into the memory its replays measure
    from sklearn.neighbors import NearestNeighbors

    return NearestNeighbors(n_neighbors=k).fit(z)


class _DatasetBaseline:
    """Shared by nearest and knn: the dataset's (metrics, composition) pairs and a neighbour index."""

    name = "baseline"

    def __init__(self, data: TrainingData, k: int):
        self.data = data
        self.metric_names = [m.name for m in data.metrics]
        self.normalizer = Normalizer.fit(data.samples.obs, data.metrics, MetricLayout.build(self.metric_names, data.threads))
        self.actions = data.samples.action                                     # [S, M, K]
        self.k = min(k, len(self.actions))
        self.z_dataset = self._z(data.samples.obs)                             # [S, N]
        self.index = _neighbour_index(self.k, self.z_dataset)

    def _z(self, values: np.ndarray) -> np.ndarray:
        return np.nan_to_num(self.normalizer.normalize(values), nan=0.0)

    def _choose(self, dist: np.ndarray, idx: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def generate(self, trace: Trace, *, seed: int = 0, progress=None) -> Plan:
        _check_window(trace, self.data.window_s)
        values, report = target_matrix(trace, self.metric_names)
        if not np.isfinite(values).any():
            raise ValidationError(f"the trace has none of the dataset's metrics ({', '.join(self.metric_names)})")
        # A metric the trace lacks altogether is left out of the distance (a search over the
        # rest), not filled in: the mean would pull every match towards average samples.
        seen = np.isfinite(values).any(axis=0)
        index = self.index if seen.all() else _neighbour_index(self.k, self.z_dataset[:, seen])
        dist, idx = index.kneighbors(self._z(values)[:, seen])
        comps = project_to_valid(self._choose(dist, idx))
        if progress is not None:
            progress(trace.T, trace.T)
        return _plan(comps, self.data, seed, self.name, trace, report, {"k": self.k, "dataset": self.data.path})


class NearestNeighbour(_DatasetBaseline):
    name = "nearest"

    def __init__(self, data: TrainingData):
        super().__init__(data, k=1)

    def _choose(self, dist, idx):
        return self.actions[idx[:, 0]]


class KnnInterpolation(_DatasetBaseline):
    name = "knn"

    def __init__(self, data: TrainingData, k: int = 100):
        super().__init__(data, k=k)

    def _choose(self, dist, idx):
        w = 1.0 / np.maximum(dist, 1e-6)                                       # [T, k]
        w /= w.sum(axis=1, keepdims=True)
        return np.einsum("tj,tjmk->tmk", w, self.actions[idx])


class SingleStressor:
    """One stressor on every thread, duty cycle = the target's per-core utilization."""

    name = "single"

    def __init__(self, catalog_names: list[str], catalog_hash: str, threads: int, *, stressor: str | None = None,
                 resource_class_of: dict[str, str] | None = None, window_s: float = 1.0,
                 host_fingerprint: dict | None = None):
        if stressor is None:
            mem = [n for n in catalog_names if (resource_class_of or {}).get(n) == "memory"]
            if not mem:
                raise ConfigError("single-stressor baseline: the catalog has no memory stressor; name one with stressor=")
            stressor = mem[0]
        if stressor not in catalog_names:
            raise ConfigError(f"single-stressor baseline: unknown stressor {stressor!r}; known: {', '.join(catalog_names)}")
        self.stressor, self.m = stressor, catalog_names.index(stressor)
        self.catalog_names, self.catalog_hash, self.threads = list(catalog_names), catalog_hash, int(threads)
        self.window_s, self.host_fingerprint = float(window_s), dict(host_fingerprint or {})

    def generate(self, trace: Trace, *, seed: int = 0, progress=None) -> Plan:
        _check_window(trace, self.window_s)
        names = [f"cpu.util.core{k}" for k in range(self.threads)]
        util = trace.select(names)                                               # [T, K]
        source = "per-core"
        if np.isnan(util).all():
            if "cpu.util" not in trace.names:
                raise ValidationError("single-stressor baseline needs cpu.util.core<k> or cpu.util in the trace")
            util = np.repeat(trace.column("cpu.util")[:, None], self.threads, axis=1)
            source = "cpu.util (no per-core metrics in the trace)"
        filled = int(np.isnan(util).sum())
        util = np.nan_to_num(util, nan=0.0)
        comps = np.zeros((trace.T, len(self.catalog_names), self.threads), np.float32)
        comps[:, self.m, :] = np.clip(util, 0.0, 1.0)
        if progress is not None:
            progress(trace.T, trace.T)
        prov = {"generator": self.name, "stressor": self.stressor, "duty_cycle_from": source,
                "nan_windows_set_idle": filled, "seed": int(seed), "trace_windows": trace.T,
                "trace_simulated": bool(trace.simulated)}
        return Plan(comps, list(self.catalog_names), self.catalog_hash, window_s=self.window_s, seed=int(seed),
                    provenance=prov, host_fingerprint=self.host_fingerprint).validate()


def _check_window(trace: Trace, window_s: float) -> None:
    if trace.T == 0:
        raise ValidationError("trace has no windows")
    if not math.isclose(float(trace.window_s), float(window_s), rel_tol=1e-6):
        raise ValidationError(f"trace windows are {trace.window_s} s but the dataset's are {window_s} s")


def _plan(comps, data: TrainingData, seed, name, trace: Trace, report: dict, extra: dict) -> Plan:
    missing = {n: trace.T for n in report["absent_in_trace"]} | report["nan_windows"]
    prov = {"generator": name, **extra, "dataset_simulated": data.simulated, "seed": int(seed),
            "trace_windows": trace.T, "trace_simulated": bool(trace.simulated),
            "missing_metrics_filled_with_training_mean": missing,
            "ignored_trace_metrics": report["ignored_trace_metrics"]}
    return Plan(np.asarray(comps, np.float32), list(data.catalog_names), data.catalog_hash, window_s=data.window_s,
                seed=int(seed), provenance=prov, host_fingerprint=dict(data.host_fingerprint)).validate()


def _data(dataset: Path | str | TrainingData) -> TrainingData:
    return dataset if isinstance(dataset, TrainingData) else load_training_data(dataset)


def nearest(dataset: Path | str | TrainingData) -> NearestNeighbour:
    return NearestNeighbour(_data(dataset))


def knn(dataset: Path | str | TrainingData, *, k: int = 100) -> KnnInterpolation:
    return KnnInterpolation(_data(dataset), k=int(k))


def single(dataset: Path | str | TrainingData, *, stressor: str | None = None) -> SingleStressor:
    """The single stressor only takes the catalog, thread count and window from the dataset."""
    data = _data(dataset)
    classes = {}
    try:
        classes = {s.name: s.resource_class for s in load_catalog().stressors}
    except ValidationError:
        pass
    if not any(n in classes for n in data.catalog_names):   # no catalog here: guess the class from the name
        classes = {n: re.split(r"[_.]", n)[0].replace("mem", "memory") for n in data.catalog_names}
    return SingleStressor(data.catalog_names, data.catalog_hash, data.threads, stressor=stressor,
                          resource_class_of=classes, window_s=data.window_s, host_fingerprint=data.host_fingerprint)


def from_dataset(kind: str, dataset: Path | str | TrainingData, **kw):
    """`kind` in KINDS -> its planner (behind the activity guard, as every planner of the
    registry) built from the dataset. kw: k (knn), stressor (single)."""
    return load_planner(f"{GROUP}:{kind}", dataset=dataset, **kw)

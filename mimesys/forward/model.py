"""A fitted forward model on disk, and its prediction: first order + learned correction.

Directory layout (written by controller/forward_fit/fit.py)::

    manifest.json     format "mimesys.forward-model", version 1: metric names and units, the
                      per-metric scales, catalog names + hash, threads, window_s, the host
                      fingerprint, the first-order parameters (firstorder.py), the correction's
                      description (graph file, feature layout, which metrics it corrects) and
                      provenance (dataset, profile, code revision, simulated)
    correction.onnx   optional: the ensemble, features [B, F] -> mean [B, N], std [B, N]
                      (residuals in scaled units: (measured − first order) / scale)
    manifest "adaptation"  optional: a model carried to another host (`mimesys forward adapt`):
                      a linear map on the base prediction, adaptation.py; part of `correction()`

The correction's inputs are `features(a, a_prev)`, defined here once and used by the trainer
too, so training and inference cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import manifest
from ..errors import ValidationError
from .adaptation import Adaptation
from .firstorder import FirstOrder
from .firstorder_file import first_order_from_dict, first_order_to_dict

MANIFEST = "manifest.json"
FORMAT = "mimesys.forward-model"
VERSION = 1


def features(first: FirstOrder, scales: np.ndarray, a: np.ndarray, a_prev: np.ndarray) -> np.ndarray:
    """a, a_prev [B, M, K] -> float32 [B, F]: the scaled first-order predictions of both windows,
    both compositions, the stressors' totals over threads and the threads' busy sums."""
    B = a.shape[0]
    f_now = first.predict(a) / scales
    f_prev = first.predict(a_prev) / scales
    return np.concatenate([f_now, f_prev, a.reshape(B, -1), a_prev.reshape(B, -1), a.sum(axis=2), a.sum(axis=1),
                           a_prev.sum(axis=2)], axis=1).astype(np.float32)


def feature_dim(M: int, K: int, N: int) -> int:
    return 2 * N + 2 * M * K + M + K + M


@dataclass
class ForwardModel:
    first: FirstOrder
    scales: np.ndarray                       # [N] full scale per metric (1 for fractions)
    catalog_hash: str
    window_s: float = 1.0
    host_fingerprint: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    simulated: bool = False
    corrected: np.ndarray | None = None      # [N] bool: metrics the correction applies to
    _session: object = None                  # onnxruntime.InferenceSession of correction.onnx
    adaptation: Adaptation | None = None     # carried to another host: applied after the correction

    @property
    def metric_names(self) -> list[str]:
        return self.first.metric_names

    @property
    def catalog_names(self) -> list[str]:
        return self.first.catalog_names

    @property
    def threads(self) -> int:
        return self.first.K

    @property
    def has_correction(self) -> bool:
        return self._session is not None or self.adaptation is not None

    def first_order(self, a: np.ndarray) -> np.ndarray:
        return self.first.predict(a)

    def correction(self, a: np.ndarray, a_prev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """a, a_prev [B, M, K] -> (mean, std) [B, N] in metric units (zeros without a correction)."""
        B = a.shape[0]
        mean = np.zeros((B, self.first.N))
        std = np.zeros((B, self.first.N))
        if self._session is not None:
            m, s = self._session.run(None, {"features": features(self.first, self.scales, a, a_prev)})
            mask = self.corrected if self.corrected is not None else np.ones(self.first.N, bool)
            mean, std = m * self.scales * mask, s * self.scales * mask
        if self.adaptation is not None:
            base = (self.first.predict(a) + mean) / self.scales
            mean = mean + self.adaptation.delta(base, a) * self.scales
        if self.first.host_cpu is not None:
            # a derived metric follows its parts: the cores' corrections, none of its own
            n, cores = self.first.host_cpu
            mean[:, n], std[:, n] = mean[:, cores].mean(axis=1), std[:, cores].mean(axis=1)
        return mean, std

    def predict(self, a: np.ndarray, a_prev: np.ndarray | None = None, *,
                first_order_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """a [B, M, K] (a_prev the same, default idle) -> (prediction [B, N], std [B, N])."""
        a = np.asarray(a, np.float64)
        a_prev = np.zeros_like(a) if a_prev is None else np.asarray(a_prev, np.float64)
        x = self.first.predict(a)
        if first_order_only or not self.has_correction:
            return x, np.zeros_like(x)
        mean, std = self.correction(a, a_prev)
        return self.first.derive(self.first.clip(x + mean)), std

    def predict_plan(self, compositions: np.ndarray, *, first_order_only: bool = False):
        """A plan's compositions [T, M, K] -> (prediction [T, N], std [T, N]), each window
        conditioned on the previous one (idle before the first)."""
        a = np.asarray(compositions, np.float64)
        prev = np.concatenate([np.zeros_like(a[:1]), a[:-1]])
        return self.predict(a, prev, first_order_only=first_order_only)

    # -- file form ------------------------------------------------------------------
    def manifest(self, correction: dict | None = None) -> dict:
        extra = {"adaptation": self.adaptation.to_dict()} if self.adaptation is not None else {}
        return {**extra, "format": FORMAT, "version": VERSION, "catalog_hash": self.catalog_hash,
                "window_s": self.window_s, "threads": self.threads, "metric_names": self.metric_names,
                "units": self.first.units, "scales": self.scales.tolist(), "first_order": first_order_to_dict(self.first),
                "correction": correction, "host_fingerprint": self.host_fingerprint,
                "provenance": self.provenance, "simulated": bool(self.simulated)}


def read_manifest(model_dir: Path | str) -> dict:
    return manifest.read_manifest(model_dir, fmt=FORMAT, version=VERSION, what="forward model",
                                  hint="fit one with `mimesys forward fit`",
                                  required=("catalog_hash", "metric_names", "scales", "first_order", "window_s"))


def load_forward_model(model_dir: Path | str) -> ForwardModel:
    model_dir = Path(model_dir)
    m = read_manifest(model_dir)
    where = str(model_dir / MANIFEST)
    first = first_order_from_dict(m["first_order"], where)
    scales = np.asarray(m["scales"], np.float64)
    if scales.shape != (first.N,) or not np.all(scales > 0):
        raise ValidationError(f"{where}: scales must be {first.N} positive numbers")
    fm = ForwardModel(first, scales, str(m["catalog_hash"]), float(m["window_s"]), dict(m.get("host_fingerprint") or {}),
                      dict(m.get("provenance") or {}), bool(m.get("simulated", False)))
    corr = m.get("correction")
    if corr:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        try:
            fm._session = ort.InferenceSession(str(model_dir / corr["file"]), opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own exception types
            raise ValidationError(f"{model_dir}: cannot load the correction graph: {e}") from e
        fm.corrected = np.array([n in set(corr.get("metrics", [])) for n in first.metric_names])
    if m.get("adaptation"):
        fm.adaptation = Adaptation.from_dict(m["adaptation"], first.N, first.M + first.K, where)
    return fm

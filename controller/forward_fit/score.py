"""How well a forward model predicts measured windows: first order alone vs corrected, per metric
(m3's "approximate model vs corrected model" table, for this host).

Error per sample and metric: relative error |ô − o| / max(|o|, 1 % of the metric's full scale)
(the floor keeps a near-idle metric from dividing by noise), summarized by its median over the
scored samples. Samples: the fit's held-out samples when `dataset` is the file the model was
fitted on (same sha256), else every sample of `dataset`.
"""

from __future__ import annotations

import numpy as np

from mimesys.forward.model import ForwardModel

from ..dataset import Dataset
from ..model.data import file_sha256
from .fit import _select

FLOOR = 0.01   # the correction's gate (fit.py) judges with the same measure


def relative_error(pred: np.ndarray, obs: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return np.abs(pred - obs) / np.maximum(np.abs(obs), FLOOR * scales)


def score(model: ForwardModel, dataset_path) -> dict:
    ds = Dataset.read(dataset_path)
    prov = model.provenance or {}
    if prov.get("dataset_sha256") == file_sha256(dataset_path) and prov.get("heldout_samples"):
        idx = np.asarray(prov["heldout_samples"], int)
        which = f"{len(idx)} held-out samples of the fitting dataset"
    else:
        idx = np.arange(ds.S)
        which = f"all {ds.S} samples (a dataset the model was not fitted on)"
    obs = _select(ds, model.metric_names)[idx]
    a, prev = ds.action[idx].astype(np.float64), ds.prev_action[idx].astype(np.float64)
    first = model.predict(a, prev, first_order_only=True)[0]
    corr, std = model.predict(a, prev)
    e1 = relative_error(first, obs, model.scales)
    e2 = relative_error(corr, obs, model.scales)
    rows = {}
    for j, name in enumerate(model.metric_names):
        ok = np.isfinite(obs[:, j])
        if ok.sum() == 0:
            continue
        rows[name] = {"first_order": float(np.median(e1[ok, j])), "corrected": float(np.median(e2[ok, j])),
                      "corrected_on": bool(model.corrected[j]) if model.corrected is not None else False,
                      "mean_std_scaled": float(np.mean(std[ok, j]) / model.scales[j]), "samples": int(ok.sum())}
    med1 = float(np.median([r["first_order"] for r in rows.values()])) if rows else float("nan")
    med2 = float(np.median([r["corrected"] for r in rows.values()])) if rows else float("nan")
    return {"samples": which, "metrics": rows, "median_first_order": med1, "median_corrected": med2,
            "has_correction": model.has_correction, "simulated": bool(model.simulated or ds.simulated)}


def render(doc: dict) -> str:
    lines = [f"forward-model error on {doc['samples']}" + ("  (SIMULATED)" if doc["simulated"] else ""),
             f"{'metric':32s} {'first order':>12s} {'corrected':>10s}  correction",
             "-" * 70]
    for name, r in doc["metrics"].items():
        lines.append(f"{name:32s} {r['first_order']:12.3f} {r['corrected']:10.3f}  "
                     f"{'on' if r['corrected_on'] else 'off (held-out check)'}")
    lines.append(f"{'median over metrics':32s} {doc['median_first_order']:12.3f} {doc['median_corrected']:10.3f}")
    return "\n".join(lines)

"""The transfer table: host A's forward model carried to host B with n of B's samples.

Inputs (bench/bursts_real.py makes them, all measured on this machine): A's forward model
(OUT/hostA/forward), B's dataset (OUT/hostB/dataset.h5: B's own campaign) and B's held-out real
runs (OUT/hostB/runs: plans/ + executed/, the evaluation's plans run again on B).

For every n in --ns and every repeat (a seeded random subset of n samples from B's fitting
pool; the same subset for every arm), three arms:
- adapted: A's model + the adaptation fitted on the n samples (controller/forward_fit/adapt.py, the
  code of `mimesys forward adapt`);
- scratch: the same k-fold ridge selection fitted on the n samples alone, no base;
- A unadapted: A's model as it is (needs no sample of B);
- A rehosted / adapted, rehosted (when both hosts' calibration.json are in WORK/hostA and
  WORK/hostB): A's first order carried to B by the ratio of the calibrations
  (controller/forward_fit/rehost.py, `forward adapt --calibration`), A's correction on top; then
  no sample of B, or the adaptation fitted on the n samples. The calibration is what every
  host runs before its first plan: it costs no sample of B;
- B profile + fit (context, when B's campaign recorded a solo profile): the product's `forward
  fit` on B — B's own first order from its ~100-window solo profile (not counted in n) plus the
  correction fitted on the n samples.
Errors, on what no arm saw:
- forward: score.py's measure on B's held-out samples (a fixed 20 % of B's dataset): per metric
  the median relative error |ô − o| / max(|o|, 1 % of full scale), median over metrics;
- bursts: each B run's plan predicted by the arm vs the measured run: the capped
  burst-structure error (mimesys/bursts.py), mean over runs, and the MAPE over (resource,
  statistic) cells where both sides are defined. Thresholds: host B's calibrated peaks (the
  host the runs are on), else the measured run's max, the same for every arm.
Means and standard deviations over repeats. Writes transfer.json, transfer_table.md and
transfer.png under --out.

    python bench/transfer.py --work bench-out/bursts --out bench/results/transfer
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mimesys import bursts  # noqa: E402
from mimesys.forward.prediction import model_peaks  # noqa: E402
from mimesys.forward.model import load_forward_model  # noqa: E402
from mimesys.metrics import MetricSpec  # noqa: E402
from mimesys.plan import Plan  # noqa: E402
from mimesys.trace import Trace  # noqa: E402
from controller.dataset import Dataset  # noqa: E402
from controller.forward_fit.adapt import fit_adaptation, fit_scratch, heldout_error  # noqa: E402
from controller.forward_fit.burst_score import eval_runs  # noqa: E402
from controller.forward_fit.fit import _select, holdout_split  # noqa: E402

ARMS = ("adapted", "adapted, rehosted", "scratch", "A unadapted", "A rehosted", "B profile + fit")


def subset(ds, idx, path: Path) -> Path:
    import copy
    sub = copy.copy(ds)
    for f in ("prev_action", "action", "prev_obs", "obs", "obs_spread"):
        setattr(sub, f, getattr(ds, f)[idx])
    if ds.round is not None:
        sub.round = ds.round[idx]
    sub.write(path)
    return path


def fit_with_profile(ds, idx, profile: Path, tmp: Path, tag: str):
    """The product's `forward fit` on B: B's own solo profile (~100 profiled windows, not counted
    in n) as first order + the correction fitted on the n samples (no hold-out inside)."""
    from controller.forward_fit.correction import CorrectionConfig
    from controller.forward_fit.fit import FitOptions, fit
    p = subset(ds, idx, tmp / f"{tag}.h5")
    return fit(p, profile, tmp / tag, FitOptions(holdout=0.0, correction=CorrectionConfig(members=3)), overwrite=True)


def burst_errors(model, runs, peaks) -> tuple[float, float]:
    se, cells = [], []
    for plan, measured in runs:
        pred, _ = model.predict_plan(plan.compositions)
        units = getattr(model, "units", None) or model.first.units
        pt = Trace(pred.astype(np.float32), [MetricSpec(n, u) for n, u in zip(model.metric_names, units)],
                   window_s=plan.window_s)
        names = [n for n in bursts.resource_metrics(measured) if n in model.metric_names]
        # no host peak (IOPS, loopback): the measured run's max, never the arm's own prediction
        fb = bursts.comparison_peaks(measured, [], peaks)
        ms = bursts.trace_burst_stats(measured, peaks=peaks, metrics=names, fallback_peaks=fb)
        ps = bursts.trace_burst_stats(pt, peaks=peaks, metrics=list(ms), fallback_peaks=fb)
        se.append(bursts.structure_error(ms, ps, plan.window_s))
        for r, m in ms.items():
            for stat in bursts.STATS:
                cells.append((r, stat, getattr(m, stat), getattr(ps[r], stat) if r in ps else float("nan")))
    by_cell: dict = {}
    for r, stat, a, b in cells:
        by_cell.setdefault((r, stat), []).append((a, b))
    mapes = [bursts.mape(v) for v in by_cell.values()]
    mapes = [m for m in mapes if np.isfinite(m)]
    return float(np.nanmean(se)) if se else float("nan"), float(np.mean(mapes)) if mapes else float("nan")


def main() -> None:
    args = parse_args()
    if args.plot_only:
        doc = json.loads((args.out / "transfer.json").read_text())
        plot(doc["summary"], args.out / "transfer.png", doc)
        return
    b = HostB.load(args)
    rows = measure_arms(args, b)
    summary = summarize(rows)
    fm, ds, fp_b = b.fm, b.ds, b.ds.host_fingerprint or {}
    doc = {"bench": "transfer", "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "host_A_model": str(args.work / "hostA" / "forward"), "host_B_dataset": str(b.ds_path),
           "host_B_limits": fp_b.get("limits"), "host_A_limits": (fm.host_fingerprint or {}).get("limits"),
           "B_samples": int(ds.S), "B_fit_pool": int(len(b.fit_pool)), "B_heldout_samples": int(len(b.held)),
           "B_runs": len(b.runs), "B_run_windows": int(sum(p.T for p, _ in b.runs)),
           "simulated": bool(ds.simulated or fm.simulated), "summary": summary, "rows": rows}
    write_results(args.out, doc, summary)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("bench-out/bursts"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/transfer"))
    ap.add_argument("--ns", default="10,25,50,200")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--b-dataset", type=Path, default=None,
                    help="B's dataset (default WORK/hostB/dataset.h5; bench/dataset_unfiltered.py makes one with every sample)")
    ap.add_argument("--no-profile-arm", action="store_true", help="Skip the 'B profile + fit' context arm.")
    ap.add_argument("--plot-only", action="store_true", help="Draw OUT/transfer.png again from OUT/transfer.json.")
    return ap.parse_args()


@dataclass
class HostB:
    """Host A's forward model and what host B gives to adapt and judge it: B's dataset (a
    fitting pool and held-out samples) and B's replayed runs with their peaks."""
    fm: object                 # host A's ForwardModel (its adaptation is set arm by arm)
    ds: Dataset
    ds_path: Path
    fit_pool: np.ndarray
    held: np.ndarray
    obs: np.ndarray            # [S, N] in the model's metric order
    A: np.ndarray
    P: np.ndarray
    runs: list
    peaks: dict
    scales: np.ndarray         # [N] A's full scales, which the errors are in

    @classmethod
    def load(cls, args) -> "HostB":
        fm = load_forward_model(args.work / "hostA" / "forward")
        ds_path = args.b_dataset or args.work / "hostB" / "dataset.h5"
        ds = Dataset.read(ds_path)
        fit_pool, held = holdout_split(ds.S, 0.2, args.seed)
        obs = _select(ds, fm.metric_names)
        A, P = ds.action.astype(np.float64), ds.prev_action.astype(np.float64)
        runs = [(Plan.read(p), Trace.read(e)) for _, p, e in eval_runs(args.work / "hostB" / "runs")]
        # thresholds relative to host B's peaks (its calibration), the host the runs are on
        peaks = dict((ds.host_fingerprint or {}).get("calibrated_peaks") or {}) or model_peaks(fm)
        return cls(fm, ds, ds_path, fit_pool, held, obs, A, P, runs, peaks, fm.scales)

    def forward_err(self, model) -> float:
        held = self.held
        return heldout_error(model, self.A[held], self.P[held], self.obs[held], self.scales)["median"]

    def errors(self, model) -> tuple[float, float, float]:
        """(forward held-out error, burst-structure error, burst MAPE %) of a model."""
        return (self.forward_err(model), *burst_errors(model, self.runs, self.peaks))


def measure_arms(args, b: HostB) -> list[dict]:
    """One row per (n samples of B, repeat, arm): each arm's errors after fitting on the same n."""
    import tempfile
    tmpdir = Path(tempfile.mkdtemp(prefix="transfer-"))
    fm = b.fm
    profile_b = args.work / "hostB" / "campaign" / "profile.h5"
    profile_b = profile_b if (profile_b.exists() and not args.no_profile_arm) else None
    base = b.errors(fm)
    moved, moved_base = rehosted(args.work, b)
    rows = []
    for n in [int(x) for x in args.ns.split(",")]:
        if n > len(b.fit_pool):
            print(f"n={n}: only {len(b.fit_pool)} samples in B's fitting pool, skipped", file=sys.stderr)
            continue
        for rep in range(args.repeats):
            idx = np.sort(np.random.default_rng(1000 * n + rep).choice(b.fit_pool, n, replace=False))
            fm.adaptation = None
            fm.adaptation = fit_adaptation(fm, b.A[idx], b.P[idx], b.obs[idx], seed=rep)
            fams = [c["family"] for c in fm.adaptation.info["chosen"].values()]
            ad = b.errors(fm)
            fm.adaptation = None
            sc_model = fit_scratch(fm.metric_names, fm.first.units, b.scales, b.A[idx], b.P[idx], b.obs[idx], seed=rep)
            arms = [("adapted", ad), ("scratch", b.errors(sc_model)), ("A unadapted", base)]
            if moved is not None:
                moved.adaptation = None
                moved.adaptation = fit_adaptation(moved, b.A[idx], b.P[idx], b.obs[idx], seed=rep)
                arms += [("adapted, rehosted", b.errors(moved)), ("A rehosted", moved_base)]
            if profile_b is not None:
                pf = fit_with_profile(b.ds, idx, profile_b, tmpdir, f"n{n}r{rep}")
                arms.append(("B profile + fit", b.errors(pf)))
            for arm, (f, se, mp) in arms:
                rows.append({"n": n, "repeat": rep, "arm": arm, "forward_heldout_error": f, "burst_structure_error": se,
                             "burst_mape_percent": mp,
                             **({"adapted_metrics": sum(f != "base" for f in fams)} if arm == "adapted" else {})})
            print(f"n={n} rep={rep}: " + "  ".join(f"{a} {v[0]:.4f}/{v[1]:.3f}" for a, v in arms), file=sys.stderr,
                  flush=True)
    return rows


def rehosted(work: Path, b: HostB):
    """(A's model moved onto B by the two hosts' calibrations, its errors), or (None, None)
    without both calibration files."""
    cal_a, cal_b = work / "hostA" / "calibration.json", work / "hostB" / "calibration.json"
    if not (cal_a.exists() and cal_b.exists()):
        return None, None
    import copy
    from controller.forward_fit.adapt import rehost_base
    moved = copy.copy(b.fm)
    rehost_report = rehost_base(moved, cal_a, cal_b)
    moved_base = b.errors(moved)
    print(f"rehosted by the calibrations: {json.dumps(rehost_report)[:2000]}", file=sys.stderr)
    return moved, moved_base


def summarize(rows: list[dict]) -> list[dict]:
    """Per (n, arm), in ARMS order: each error's mean and standard deviation over the repeats."""
    table = {}
    for r in rows:
        table.setdefault((r["n"], r["arm"]), []).append(r)
    summary = []
    for (n, arm), rs in sorted(table.items(), key=lambda kv: (kv[0][0], ARMS.index(kv[0][1]))):
        def ms(k):
            v = np.array([x[k] for x in rs], float)
            return float(np.nanmean(v)), float(np.nanstd(v))
        summary.append({"n": n, "arm": arm, "forward": ms("forward_heldout_error"), "burst": ms("burst_structure_error"),
                        "burst_mape": ms("burst_mape_percent"), "repeats": len(rs)})
    return summary


def write_results(out: Path, doc: dict, summary: list[dict]) -> None:
    """OUT/transfer.json, the table (OUT/transfer_table.md, printed too) and OUT/transfer.png."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "transfer.json").write_text(json.dumps(doc, indent=1))
    lines = ["| n | arm | forward held-out error (median rel.) | burst-structure error | burst MAPE % |",
             "|---|---|---|---|---|"]
    for s in summary:
        lines.append(f"| {s['n']} | {s['arm']} | {s['forward'][0]:.4f} ± {s['forward'][1]:.4f} | "
                     f"{s['burst'][0]:.3f} ± {s['burst'][1]:.3f} | {s['burst_mape'][0]:.1f} ± {s['burst_mape'][1]:.1f} |")
    (out / "transfer_table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(summary, out / "transfer.png", doc)


def plot(summary, path: Path, doc) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, label in ((axes[0], "forward", "forward model: held-out median relative error"),
                           (axes[1], "burst", "burst-structure error (held-out runs)")):
        for arm, style in zip(ARMS, ("o-", "D-", "s--", ":", "x:", "^-.")):
            pts = [s for s in summary if s["arm"] == arm]
            if not pts:
                continue
            ns = [s["n"] for s in pts]
            m = np.array([s[key][0] for s in pts])
            e = np.array([s[key][1] for s in pts])
            ax.errorbar(ns, m, yerr=e, fmt=style, capsize=3, label=arm)
        ax.set_xscale("log")
        if key == "forward":
            ax.set_yscale("log")   # scratch sits 10-100x above the others: all of them readable
        ax.set_xlabel("samples of host B")
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    lim = doc.get("host_B_limits") or {}
    fig.suptitle(f"host A's forward model on host B (this machine, {lim.get('cpu_quota_cpus')} CPU quota, "
                 f"block throttles {lim.get('block_throttles')})" + ("  SIMULATED" if doc["simulated"] else ""),
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    main()

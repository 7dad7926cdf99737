"""Training samples taught by the forward model: `mimesys dataset teach DATASET --forward FM`.

A real campaign yields ~1,500 samples an hour of stationary random compositions: the
diffusion model never sees a sequence that looks like an application (phases, bursts, idle
gaps, IO next to compute), nor what a good plan for one is. The forward model is an
accurate, fast simulator of the host and the inverse planner a good teacher, so:

1. target-like traces, in the forward model's metrics:
   - the campaign's own chains (consecutive samples of the dataset, as measured),
   - traces the operator gives (imported or recorded, `--trace`),
   - synthetic phase and burst processes over the host's range: phases of 4-20 windows, each
     steady, bursting (on/off with a period of 2-10 windows), ramping or idle, of 1-3 stressors
     on random threads, predicted by the forward model and given the host's idle noise;
2. each planned by the teacher: the planner the forward model's directory names (the registry's
   kind for a forward model: the forward model inverted), behind the same activity guard as
   every plan it makes for an operator;
3. every window t ≥ 1 becomes a sample (o_t, o_{t−1}, a_{t−1}) → a_t, o being what the model
   will be asked for: the target (`obs="target"`, the teacher's own question and answer), or the
   forward model's prediction of the teacher's plan (`obs="predicted"`, what the plan would
   measure, as a campaign sample is).

The taught samples are appended to the measured ones with `/source` = 1 (measured 0), so
training can weigh them and keep them apart in its held-out split (controller/train.py), and
the dataset's provenance says how many came from where. Nothing taught is a measurement: a
dataset with taught samples says so (`provenance.taught`), and the measured samples stay as
they were.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from mimesys.errors import ValidationError
from mimesys.forward.model import ForwardModel
from mimesys.trace import Trace

from .dataset import Dataset

SOURCE_MEASURED, SOURCE_TAUGHT = 0, 1
KINDS = ("steady", "burst", "ramp", "idle")


@dataclass(frozen=True)
class TeachSettings:
    synthetic: int = 60            # synthetic phase/burst traces
    windows: int = 60              # windows of each synthetic trace
    chains: bool = True            # the campaign's own chains as targets too
    min_chain: int = 4             # shortest chain kept (windows)
    obs: str = "target"            # what a taught sample is conditioned on: "target" | "predicted"
    seed: int = 0

    def __post_init__(self):
        if self.obs not in ("target", "predicted"):
            raise ValidationError(f"teach: obs must be 'target' or 'predicted', got {self.obs!r}")
        if self.synthetic < 0 or self.windows < 2:
            raise ValidationError("teach: synthetic ≥ 0 traces of windows ≥ 2")


def dataset_chains(ds: Dataset, min_len: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The dataset's consecutive samples joined back into chains: [(obs [L, N], actions [L, M, K])],
    a chain continuing while a sample's previous window is the one before it."""
    out, start = [], 0
    for i in range(1, ds.S + 1):
        if i < ds.S and np.allclose(ds.prev_action[i], ds.action[i - 1]) and \
                np.array_equal(np.isnan(ds.prev_obs[i]), np.isnan(ds.obs[i - 1])) and \
                np.allclose(np.nan_to_num(ds.prev_obs[i]), np.nan_to_num(ds.obs[i - 1])):
            continue
        if i - start + 1 >= min_len:
            obs = np.concatenate([ds.prev_obs[start:start + 1], ds.obs[start:i]])
            out.append((obs, np.concatenate([ds.prev_action[start:start + 1], ds.action[start:i]])))
        start = i
    return out


def phase_process(rng: np.random.Generator, T: int, M: int, K: int, usable: np.ndarray) -> np.ndarray:
    """Compositions [T, M, K] of an application-like process: phases of 4-20 windows, each
    steady, bursting, ramping or idle, of 1-3 stressors (from `usable`) on random threads."""
    a = np.zeros((T, M, K))
    t = 0
    while t < T:
        L = int(min(rng.integers(4, 21), T - t))
        kind = rng.choice(KINDS, p=(0.4, 0.3, 0.15, 0.15))
        if kind != "idle":
            comp = np.zeros((M, K))
            for m in rng.choice(usable, size=int(rng.integers(1, 4)), replace=False):
                threads = rng.choice(K, size=int(rng.integers(1, K + 1)), replace=False)
                comp[m, threads] = rng.uniform(0.05, 1.0, len(threads))
            comp /= np.maximum(comp.sum(axis=0, keepdims=True), 1.0)
            level = np.ones(L)
            if kind == "burst":
                period = int(rng.integers(2, 11))
                on = max(1, int(round(period * rng.uniform(0.2, 0.8))))
                level = ((np.arange(L) + int(rng.integers(period))) % period < on).astype(float)
            elif kind == "ramp":
                level = np.linspace(*(rng.uniform(0, 1, 2)), L)
            a[t:t + L] = level[:, None, None] * comp
        t += L
    return a


def synthetic_targets(forward: ForwardModel, n: int, T: int, rng: np.random.Generator) -> list[np.ndarray]:
    """n target traces [T, N] in the forward model's metrics: phase processes predicted by it,
    with the host's idle noise (half-normal above, as idle windows spread) on every metric."""
    first = forward.first
    usable = np.flatnonzero(~first.unobserved())
    noise = first.noise if first.noise is not None else np.zeros(first.N)
    out = []
    for _ in range(n):
        pred, _ = forward.predict_plan(phase_process(rng, T, first.M, first.K, usable))
        jitter = np.abs(rng.standard_normal(pred.shape)) * np.nan_to_num(noise)[None, :]
        out.append(first.derive(first.clip(pred + jitter)))
    return out


def write_traces(values: list[np.ndarray], ds: Dataset, forward: ForwardModel, out: Path) -> list[Path]:
    """Target traces [T, N] in the forward model's metrics -> trace files under out (marked as
    made by the forward model: `provenance.by`, and simulated as far as a measurement goes)."""
    specs = {m.name: m for m in ds.metrics}
    missing = [n for n in forward.metric_names if n not in specs]
    if missing:
        raise ValidationError(f"teach: the dataset has no metric spec for {missing}")
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, v in enumerate(values):
        p = out / f"synthetic-{i:04d}.h5"
        Trace(v.astype(np.float32), [specs[n] for n in forward.metric_names], window_s=forward.window_s,
              simulated=True, provenance={"by": "mimesys.teach.synthetic", "index": i}).write(p)
        paths.append(p)
    return paths


def teach(ds: Dataset, forward_dir: Path | str, *, traces: list[Trace] = (), settings: TeachSettings = TeachSettings(),
          progress: Callable[[str], None] | None = None, synthetic_out: Path | None = None) -> Dataset:
    """The dataset with taught samples appended (see the module docstring). forward_dir: the
    forward model, whose planner (the registry's, by its manifest) teaches. synthetic_out: a
    directory where the synthetic target traces are also written (`synthetic-<i>.h5`, e.g. as
    targets for `mimesys align --forward`)."""
    from mimesys.forward.model import load_forward_model
    from mimesys.planners.registry import load_planner
    forward = load_forward_model(forward_dir)
    teacher = load_planner(forward_dir)
    if list(forward.catalog_names) != list(ds.catalog_names) or forward.threads != ds.action.shape[2]:
        raise ValidationError(f"teach: the forward model ({len(forward.catalog_names)} stressors × {forward.threads} "
                              f"threads) was made for another catalog or host than the dataset "
                              f"({len(ds.catalog_names)} × {ds.action.shape[2]})")
    if ds.source is not None and (ds.source != SOURCE_MEASURED).any():
        raise ValidationError("teach: the dataset already holds taught samples; teach the measured dataset")
    say = progress or (lambda _msg: None)
    rng = np.random.default_rng(settings.seed)
    fnames = list(forward.metric_names)
    missing = [n for n in fnames if n not in ds.names]
    if missing:
        raise ValidationError(f"teach: the forward model predicts {missing}, which the dataset does not measure")
    # dataset metric j <- forward metric cols[j] (−1: the forward model does not predict it)
    cols = np.array([fnames.index(n) if n in fnames else -1 for n in ds.names])
    dcols = np.array([ds.names.index(n) if n in ds.names else -1 for n in fnames])

    targets: list[tuple[str, np.ndarray]] = []
    if settings.chains:
        for obs, _ in dataset_chains(ds, settings.min_chain):
            targets.append(("chain", np.where(dcols >= 0, obs[:, np.maximum(dcols, 0)], np.nan)))
    for tr in traces:
        if not np.isclose(tr.window_s, forward.window_s):
            raise ValidationError(f"teach: a trace has {tr.window_s} s windows, the forward model {forward.window_s} s")
        targets.append(("trace", tr.select(fnames)))
    synthetic = synthetic_targets(forward, settings.synthetic, settings.windows, rng)
    targets += [("synthetic", v) for v in synthetic]
    if synthetic_out is not None:
        write_traces(synthetic, ds, forward, Path(synthetic_out))
    if not targets:
        raise ValidationError("teach: no target traces (no chains in the dataset, no --trace, --synthetic 0)")

    specs = {m.name: m for m in ds.metrics}
    parts, counts = [], {"chain": 0, "trace": 0, "synthetic": 0}
    for i, (kind, values) in enumerate(targets):
        if values.shape[0] < 2 or not np.isfinite(values).any():
            continue
        target = Trace(values.astype(np.float32), [specs[n] for n in fnames], window_s=forward.window_s,
                       simulated=True)
        a = np.asarray(teacher.generate(target, seed=settings.seed + i).compositions, np.float32)
        if settings.obs == "predicted":
            o = forward.predict_plan(a)[0]
        else:
            o = values
        o_ds = np.where(cols >= 0, o[:, np.maximum(cols, 0)], np.nan).astype(np.float32)
        parts.append((a[:-1], a[1:], o_ds[:-1], o_ds[1:]))
        counts[kind] += values.shape[0] - 1
        if (i + 1) % 20 == 0 or i + 1 == len(targets):
            say(f"taught {i + 1}/{len(targets)} target traces ({sum(counts.values())} samples)")
    prev_a, act, prev_o, obs = (np.concatenate(x) for x in zip(*parts))
    source = np.concatenate([np.full(ds.S, SOURCE_MEASURED, np.uint8), np.full(len(act), SOURCE_TAUGHT, np.uint8)])
    prov = {**ds.provenance, "taught": {"measured_samples": int(ds.S), "taught_samples": int(len(act)),
                                        "by_target_kind": counts, "teacher": teacher.name,
                                        "forward_model_provenance": forward.provenance,
                                        "settings": asdict(settings)}}
    return Dataset(np.concatenate([ds.prev_action, prev_a]), np.concatenate([ds.action, act]),
                   np.concatenate([ds.prev_obs, prev_o]), np.concatenate([ds.obs, obs]),
                   np.concatenate([ds.obs_spread, np.zeros_like(obs)]), ds.metrics, ds.catalog_names, ds.catalog_hash,
                   ds.window_s, ds.host_fingerprint, ds.simulated or forward.simulated, prov,
                   None if ds.round is None else np.concatenate([ds.round, np.full(len(act), -1, np.int32)]),
                   source)

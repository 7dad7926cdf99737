"""A TOY dataset for the model room's tests only: a hand-written mapping from
compositions to metrics, NOT a host and NOT the simulated host. It follows the dataset
layout of docs/design.md ("Formats") so training reads it exactly as a collected one.

Toy mapping, K = 2 threads, M = len(catalog): per-core utilization = the thread's busy
fraction; mem.bw_Bps grows with the memory-class stressors' time and, as a stand-in for
state, with the previous window's memory time (so a_{t-1} carries information);
disk.write_Bps with the disk-class stressors' time. One metric is unavailable (NaN).
"""

import json

import h5py
import numpy as np

from mimesys.metrics import Availability, MetricSpec

TOY_METRICS = [
    MetricSpec("cpu.util.core0", "fraction", source="toy"),
    MetricSpec("cpu.util.core1", "fraction", source="toy"),
    MetricSpec("mem.bw_Bps", "B/s", source="toy"),
    MetricSpec("disk.write_Bps", "B/s", source="toy"),
    MetricSpec("llc.miss_per_s", "1/s", Availability.UNSUPPORTED, "no hardware PMU (toy)", "toy"),
]


def toy_obs(a: np.ndarray, a_prev: np.ndarray, mem_rows, disk_rows) -> np.ndarray:
    """a, a_prev [S, M, K] -> obs [S, 5] under the toy mapping."""
    util = a.sum(axis=1)                                        # [S, K]
    mem = a[:, mem_rows].sum(axis=(1, 2)) * (1 + 0.8 * a_prev[:, mem_rows].sum(axis=(1, 2)))
    disk = a[:, disk_rows].sum(axis=(1, 2))
    return np.stack([util[:, 0], util[:, 1], 1e9 * mem + 1e6, 2e8 * disk + 1e4,
                     np.full(len(a), np.nan)], axis=1).astype(np.float32)


def random_compositions(rng, S, M, K) -> np.ndarray:
    """Sparse random compositions: each thread runs 0-2 stressors, total busy ≤ 1."""
    a = np.zeros((S, M, K), np.float32)
    for s in range(S):
        for k in range(K):
            for m in rng.choice(M, size=rng.integers(0, 3), replace=False):
                a[s, m, k] = rng.uniform(0.1, 0.6)
    return a / np.maximum(a.sum(axis=1, keepdims=True), 1.0)


def write_toy_dataset(path, catalog, S=600, K=2, seed=0):
    rng = np.random.default_rng(seed)
    M = len(catalog)
    mem_rows, disk_rows = catalog.by_class("memory"), catalog.by_class("disk")
    chain = random_compositions(rng, S + 1, M, K)               # a chained plan: sample s = (chain[s], chain[s+1])
    prev_a, a = chain[:-1], chain[1:]
    prev_prev = np.concatenate([np.zeros_like(chain[:1]), chain[:-2]])
    prev_obs = toy_obs(prev_a, prev_prev, mem_rows, disk_rows)
    obs = toy_obs(a, prev_a, mem_rows, disk_rows)
    with h5py.File(path, "w") as f:
        for name, x in (("prev_action", prev_a), ("action", a), ("prev_obs", prev_obs), ("obs", obs),
                        ("obs_spread", np.zeros_like(obs))):
            f.create_dataset(name, data=x)
        f.attrs["metrics"] = json.dumps([m.to_dict() for m in TOY_METRICS])
        f.attrs["catalog_names"] = json.dumps(catalog.names)
        f.attrs["catalog_hash"] = catalog.hash
        f.attrs["host_fingerprint"] = json.dumps({"toy": True, "cpus": K})
        f.attrs["window_s"] = 1.0
        f.attrs["simulated"] = True
    return path


def train_toy_model(directory, catalog, *, samples: int, steps: int):
    """A toy dataset under `directory` and a small model trained on it (guidance 2, one CPU
    thread): (dataset path, model directory), for tests that need a trained model file."""
    from controller.model.config import ModelConfig
    from controller.train import TrainConfig, train

    data = write_toy_dataset(directory / "toy.h5", catalog, S=samples)
    train(data, directory / "model", TrainConfig(steps=steps, batch_size=64, warmup_steps=5, cpu_threads=1),
          ModelConfig(guidance=2.0), progress=False)
    return data, directory / "model"


def test_toy_dataset_follows_the_contract_and_loads(tmp_path, catalog):
    from controller.model.data import load_training_data
    data = load_training_data(write_toy_dataset(tmp_path / "toy.h5", catalog, S=50))
    assert len(data.samples) == 50 and data.threads == 2
    assert [m.name for m in data.metrics] == ["cpu.util.core0", "cpu.util.core1", "mem.bw_Bps", "disk.write_Bps"]
    assert "llc.miss_per_s" in data.dropped_metrics and "no hardware PMU" in data.dropped_metrics["llc.miss_per_s"]
    assert data.samples.action.sum(axis=1).max() <= 1 + 1e-5
    train, val = data.split(0.2, seed=1)
    assert len(train) == 40 and len(val) == 10

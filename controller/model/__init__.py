"""The generative model: p(a_t | o_t, a_{t−1}, o_{t−1}) as a conditional diffusion policy.

Layers (after real-stanford/diffusion_policy): `networks` (plain nn.Modules), `policy`
(networks + schedule + normalization: compute_loss, sample, step_log_prob, the last two
guided DDIM in functions beside the class), training in controller/train.py. `layout` decides
which metrics feed which thread; `noise_schedule` holds the cosine noise schedule and the DDIM
step with its log-probability; `checkpoint` the model file; `data` reads training samples.

Importing the package loads nothing: `data` and `layout` serve the dataset baselines
(single, nearest, knn) that `mimesys evaluate` may run on the test host itself, where loading
PyTorch for them would add some 300 MB to the memory every replay there measures. The names
below load their module (and PyTorch) on first use.
"""

import importlib

_EXPORTS = {"load_policy": "checkpoint", "ModelConfig": "config", "Context": "policy", "DiffusionPolicy": "policy",
            "ModelSpec": "policy", "SampleOutput": "policy", "TrainBatch": "policy"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

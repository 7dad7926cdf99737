"""The generative model: p(a_t | o_t, a_{t−1}, o_{t−1}) as a conditional diffusion policy.

Layers (after real-stanford/diffusion_policy): `networks` (plain nn.Modules), `policy`
(networks + schedule + normalization: compute_loss, sample, step_log_prob), training in
controller/train.py. `layout` decides which metrics feed which thread; `schedule` holds
the cosine noise schedule and the DDIM step with its log-probability; `checkpoint` the
model file; `data` reads training samples.
"""

from .checkpoint import load_policy
from .config import ModelConfig
from .policy import Context, DiffusionPolicy, ModelSpec, SampleOutput, TrainBatch

__all__ = ["Context", "DiffusionPolicy", "ModelConfig", "ModelSpec", "SampleOutput", "TrainBatch", "load_policy"]

"""Host samplers: one per file, registered by name in REGISTRY (agentd/samplers/registry.py).

Contract (see docs/design.md, "Samplers ↔ agent", and base.py):
- probe() decides availability once, at start-up, and returns the sampler's MetricSpecs
  (unsupported / permission_denied carry the kernel's reason).
- read() returns raw counters exactly as read (cumulative where the kernel is cumulative),
  or raises NoData for "nothing this tick"; any other exception marks the sampler failing
  for that tick without stopping the others.
- Rates are derived in one pure function per sampler, derive(prev, cur, elapsed_s) -> values,
  used identically by live sampling, recording and replay (samplerset.derive_values).
"""

from .base import NoData, Sampler
from .registry import SamplersConfig, register, sampler_names
from .samplerset import RawSample, SamplerSet, derive_values

__all__ = ["NoData", "RawSample", "Sampler", "SamplerSet", "SamplersConfig", "derive_values", "register",
           "sampler_names"]

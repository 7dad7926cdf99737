"""The planner wing: every way of turning a target trace into a plan, one module per method,
behind one registry.

    registry.py    kinds, specs, help text, load_planner (every planner behind the activity guard)
    base.py        the Generator protocol and the target helpers every planner uses
    diffusion/     the exported diffusion model (ONNX Runtime + a NumPy DDIM sampler: export, DDIM, chain)
    inverse/       the forward model (mimesys/forward/) inverted (solver, segments, CPU first)
    select.py      the diffusion model proposes, the forward model disposes

The controller adds the dataset baselines (controller/baselines/) to the same registry.
"""

from .registry import Kind, guarded, help_text, kinds, load_planner, register, specs_for

__all__ = ["Kind", "guarded", "help_text", "kinds", "load_planner", "register", "specs_for"]

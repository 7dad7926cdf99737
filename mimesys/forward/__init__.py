"""The forward model of a host: what the host will measure when a composition runs.

    ô_t = f(a_t, a_{t−1}) = first_order(a_t) + correction(a_t, a_{t−1})

The idea is m3's (a fast approximate model plus a learned correction of its residual): the
first-order part (`firstorder.py`) is physics read off the host's solo profile — each
stressor's measured response when it runs alone, summed over what runs, per-thread busy time
landing on the thread's core (`cores.py`), saturation at the host's measured capacities and a
contention term for shared resources (`contention.py`); its file form is `firstorder_file.py`; the correction (`model.py`, an ONNX ensemble fitted by the
controller on campaign samples) models what that misses, with a_{t−1} as input so state is
modelled where the host has it, and its ensemble spread is the per-metric uncertainty.

The planners that turn it around (a trace → a plan) live in mimesys/planners/. Everything here is NumPy + ONNX
Runtime: agents load a fitted model without PyTorch. The controller fits it
(controller/forward_fit/).
"""

from .firstorder import FirstOrder
from .model import ForwardModel, load_forward_model

__all__ = ["FirstOrder", "ForwardModel", "load_forward_model"]

"""The controller's side of the planner wing (mimesys/planners/): the dataset baselines, built
from a training dataset (`mimesys dataset build`) with controller code, registered as kinds of
the one planner registry when the controller is imported (controller/__init__.py). Agents
never see them; every caller reaches them by spec (`KIND:DATASET`, or a bare KIND with
`dataset=`), never by name.

    baselines.py   nearest, knn, single (the MIMESYS paper §7.2)
"""

from mimesys.planners.registry import Kind, register

_BASELINES = "controller.planners.baselines"
BASELINE_GROUP = "baseline"

register(Kind("nearest", f"{_BASELINES}:nearest", ("dataset",), "the nearest dataset sample's composition",
              agent=False, group=BASELINE_GROUP))
register(Kind("knn", f"{_BASELINES}:knn", ("dataset",), "the distance-weighted mean of the k nearest",
              options=("k",), agent=False, group=BASELINE_GROUP))
register(Kind("single", f"{_BASELINES}:single", ("dataset",), "one stressor at each core's utilization",
              options=("stressor",), agent=False, group=BASELINE_GROUP))

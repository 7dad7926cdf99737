"""The dataset baselines (the MIMESYS paper §7.2), the controller's side of the planner wing
(mimesys/planners/): built from a training dataset (`mimesys dataset build`) with controller
code, registered as kinds of the one planner registry when the controller is imported
(controller/__init__.py). Agents never see them; every caller reaches them by spec
(`KIND:DATASET`, or a bare KIND with `dataset=`), never by name.

    from_dataset.py   nearest, knn, single
"""

from mimesys.planners.registry import Kind, register

_BASELINES = "controller.baselines.from_dataset"
BASELINE_GROUP = "baseline"

register(Kind("nearest", f"{_BASELINES}:nearest", ("dataset",), "the nearest dataset sample's composition",
              agent=False, group=BASELINE_GROUP))
register(Kind("knn", f"{_BASELINES}:knn", ("dataset",), "the distance-weighted mean of the k nearest",
              options=("k",), agent=False, group=BASELINE_GROUP))
register(Kind("single", f"{_BASELINES}:single", ("dataset",), "one stressor at each core's utilization",
              options=("stressor",), agent=False, group=BASELINE_GROUP, showcase=True))

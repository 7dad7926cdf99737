"""The forward model's predictions of replayed plans against their measured replays (the bench's
replay_prediction_error), for the code this runs under: here, host-wide cpu.util before and
after it was derived from the cores.

    python bench/results/fidelity/host-cpu-2026-11-27/predict.py OUT/LABEL > OUT.json
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from fidelity_real import replay_prediction_error  # noqa: E402

out = Path(sys.argv[1])
r = replay_prediction_error(out / "forward", sorted(out.glob("eval-rep?")))
print(json.dumps({"runs": r["runs"], "median_over_metrics": r["median_over_metrics"],
                  "mean_abs_error_full_scale": r["mean_abs_error_full_scale"]}, indent=1))

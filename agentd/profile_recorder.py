"""The solo profile recorded by `mimesys-agent calibrate`, beside the calibration it ran with.

The calibration measures what each stressor achieves by the runner's own counts; the profile
measures what it does to the host (every metric the samplers read) alone on one thread, on
a second and on every thread (layout: mimesys/solo_profile.py). Recording both in one command
makes them one measurement per host: the agent keeps `profile.h5` in its state directory,
stamped with the host's fingerprint and the catalog's hash, serves it (GET /v1/profile), and a
campaign takes it instead of profiling again (controller/campaign) while both still match.
The plan runs through the host backend exactly as a campaign's would (same samplers, same
window alignment, the host run lock), with the calibration just measured for the paced
variants' rates.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from mimesys.backend import RunOptions
from mimesys.solo_profile import FORMAT, HOLD, profile_plan, provenance
from mimesys.trace import Trace

log = logging.getLogger(__name__)

PROFILE_FILE = "profile.h5"


async def record_profile(backend, calibration: dict, *, hold: int = HOLD, progress=None) -> Trace:
    """Run the solo profile on `backend` (a HostBackend) with `calibration` and return its trace."""
    backend.use_calibration(calibration)
    catalog = backend.catalog
    info = backend.info()
    cores = list(backend.cpus)
    plan = profile_plan(catalog.names, catalog.hash, len(cores), window_s=1.0, hold=hold)
    schema = backend.metric_schema()
    values = np.full((plan.T, len(schema)), np.nan, np.float32)
    starts = np.zeros(plan.T, np.int64)
    t0 = time.monotonic()
    async for w in backend.execute(plan, RunOptions(repetitions=1, warmup_windows=1, record=False, seed=0)):
        values[w.window], starts[w.window] = w.values, w.start_ns
        if progress:
            progress(w.window + 1, plan.T)
    log.info("solo profile: %d windows in %.0f s", plan.T, time.monotonic() - t0)
    prov = provenance([s.canonical() for s in catalog.stressors], catalog.hash, cores, calibration,
                      layout=plan.provenance["layout"], hold=hold, recorded_by="mimesys-agent calibrate")
    prov["calibration_created"] = calibration.get("created")
    return Trace(values, schema, window_s=plan.window_s, window_start_ns=starts, host_fingerprint=info.fingerprint,
                 provenance=prov, simulated=False)


def profile_path(state_dir: Path | str) -> Path:
    return Path(state_dir) / PROFILE_FILE


def stored_profile(state_dir: Path | str | None, catalog, info) -> Trace:
    """The profile `calibrate` left in `state_dir`, if it can stand for this host now: recorded
    with the calibration the agent runs with (info: the backend's BackendInfo), for its catalog,
    on the same hardware. NotFound naming what differs otherwise."""
    from mimesys.errors import NotFound
    from mimesys.hardware import identity_diff

    again = "run `mimesys-agent calibrate` (it records the profile with the calibration)"
    path = profile_path(state_dir) if state_dir is not None else None
    if path is None or not path.is_file():
        raise NotFound(f"no solo profile on this agent: {again}")
    trace = Trace.read(path)
    prov = trace.provenance or {}
    calibration = info.calibration or {}
    if prov.get("by") != FORMAT:
        raise NotFound(f"{path} is not a solo profile: {again}")
    if prov.get("catalog_hash") != catalog.hash:
        raise NotFound(f"the stored solo profile was recorded for another stressor catalog: {again}")
    if not calibration or prov.get("calibration_created") != calibration.get("created"):
        raise NotFound(f"the stored solo profile was recorded with another calibration "
                       f"({prov.get('calibration_created')}, the agent's: {calibration.get('created')}): {again}")
    diff = identity_diff(trace.host_fingerprint, info.fingerprint)
    if diff:
        raise NotFound(f"the stored solo profile was measured on other hardware (fingerprint keys differ: "
                       f"{', '.join(diff)}): {again}")
    return trace


def import_measurement(src: Path | str, state_dir: Path | str, catalog, info) -> tuple[Path, Path]:
    """Install another agent's solo measurement (calibration.json and profile.h5 in `src`, as
    `calibrate` wrote them into its state or the demo keeps them) into `state_dir`, if it was
    measured on this hardware (info: this host's BackendInfo, without a calibration) for this
    catalog, and the two belong together. ValidationError naming what differs otherwise."""
    from mimesys import calibration as calfile
    from mimesys.errors import ValidationError
    from mimesys.hardware import identity_diff

    src = Path(src)
    cal_path, prof_path = src / "calibration.json", src / PROFILE_FILE
    for p in (cal_path, prof_path):
        if not p.is_file():
            raise ValidationError(f"--import {src}: {p.name} not found (a directory holding calibration.json and "
                                  f"{PROFILE_FILE}, as `mimesys-agent calibrate` writes them)")
    doc = calfile.read(cal_path)
    trace = Trace.read(prof_path)
    prov = trace.provenance or {}
    if prov.get("by") != FORMAT:
        raise ValidationError(f"--import {prof_path}: not a solo profile")
    if doc.get("catalog_hash") != catalog.hash or prov.get("catalog_hash") != catalog.hash:
        raise ValidationError(f"--import {src}: measured for another stressor catalog than this agent's "
                              f"({catalog.hash})")
    if prov.get("calibration_created") != doc.get("created"):
        raise ValidationError(f"--import {src}: the profile was recorded with another calibration "
                              f"({prov.get('calibration_created')}) than the one beside it ({doc.get('created')})")
    diff = identity_diff(trace.host_fingerprint, info.fingerprint)
    if diff:
        raise ValidationError(f"--import {src}: measured on other hardware (fingerprint keys differ: "
                              f"{', '.join(diff)}); calibrate this host instead")
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    calfile.write(doc, state_dir / "calibration.json")
    trace.write(profile_path(state_dir))
    return state_dir / "calibration.json", profile_path(state_dir)

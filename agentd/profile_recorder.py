"""The solo profile recorded by `mimesys-agent calibrate`: each stressor alone measured once, for
both the calibration and the profile.

The calibration needs what each stressor achieves by the runner's own counts; the profile needs
what it does to the host (every metric the samplers read) alone on one thread, on a second and
on every thread (layout: mimesys/solo_profile.py). ProfilePass is calibrator.measure's solo pass
that reads both off one run of the profile plan through the host backend (same samplers, same
window alignment, the host run lock as a campaign's runs): the runner's counts in each step's
reading window are the calibration's rates, the sampled windows are the profile. The agent keeps
`profile.h5` in its state directory beside calibration.json, stamped with the host's fingerprint,
the catalog's hash and the calibration's creation time; it serves it (GET /v1/profile) and a
campaign takes it instead of profiling again (controller/campaign) while all three still match.
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


class ProfilePass:
    """calibrator.measure's solo pass that reads each stressor alone once, for both files: the
    paced variants' bases run first (their rates pace the paced variants), then the solo profile
    runs through `backend` with every stressor, and the calibration's one-thread and all-thread
    rates are the runner's counts in the profile's reading windows. `trace` is the profile
    afterwards (its provenance completed by `finish` once the calibration is whole). Where the
    profile cannot hold every stressor (one this host cannot run), the runner's own pass
    measures them and no profile is recorded (`trace` None, `why` says so)."""

    def __init__(self, backend, hold: int = HOLD):
        self.backend, self.hold = backend, hold
        self.trace: Trace | None = None
        self.why = ""

    async def __call__(self, catalog, config, plain, paced, window_s, all_threads, tick, unavailable, cpus) -> dict:
        from mimesys.errors import RunnerError
        from mimesys.solo_profile import windows_of

        from .calibrator import (BANDWIDTH_CLASSES, CalibrationPlan, _run_pass, pace_rates, solo_pass, summarize,
                                 summarize_empty)

        if set(catalog.names) != set(plain) | set(paced):
            raise RunnerError("the solo profile needs every stressor of the catalog (not --only)")
        bases = sorted({catalog.stressors[catalog.index(n)].pace["base"] for n in paced})
        tick.total -= len(plain) + len(paced)      # the runner's own pass would have run these
        bplan, bwins, bnotes = await _run_pass(catalog, config, bases, window_s, False, tick, unavailable)
        base_doc = summarize(catalog, bplan, bwins, bnotes, cpus) if bplan else summarize_empty(catalog, cpus,
                                                                                                 window_s)
        rates = pace_rates(catalog, base_doc)
        missing = sorted(set(unavailable) | {n for n in paced if n not in rates})
        if missing:
            self.why = f"the solo profile needs every stressor, and this host cannot run {', '.join(missing)}"
            tick.total += len(plain) + len(paced)
            return await solo_pass(catalog, config, plain, paced, window_s, all_threads, tick, unavailable, cpus)
        plan = profile_plan(catalog.names, catalog.hash, len(cpus), window_s=1.0, hold=self.hold)
        tick.total += plan.T
        values, starts, windows = await run_profile_plan(self.backend, plan, base_doc, progress=tick)
        rows = windows_of(len(catalog), plan.provenance["layout"], self.hold)
        K = len(cpus)
        bw = {m for m, s in enumerate(catalog.stressors) if s.resource_class in BANDWIDTH_CLASSES and s.pace is None}
        cplan = CalibrationPlan(plan, {m: rows["solo"][m] for m in range(len(catalog))},
                                {m: rows["all"][m] for m in bw} if all_threads and K > 1 else {})
        doc = summarize(catalog, cplan, windows, {}, cpus)
        for n in paced:
            doc["stressors"][n]["pace_Bps"] = rates[n]
        doc["solo_profile"] = {"hold": self.hold, "windows": plan.T, "window_s": plan.window_s}
        self.trace = Trace(values, self.backend.metric_schema(), window_s=plan.window_s, window_start_ns=starts,
                           simulated=False, provenance={"layout": plan.provenance["layout"], "hold": self.hold})
        return doc

    def finish(self, calibration: dict) -> Trace:
        """The profile trace with its provenance, once `calibration` (the document measure
        returned) is whole."""
        catalog = self.backend.catalog
        self.backend.use_calibration(calibration)
        prov = provenance([s.canonical() for s in catalog.stressors], catalog.hash, list(self.backend.cpus),
                          calibration, layout=self.trace.provenance["layout"], hold=self.hold,
                          recorded_by="mimesys-agent calibrate")
        prov["calibration_created"] = calibration.get("created")
        self.trace.provenance = prov
        self.trace.host_fingerprint = self.backend.info().fingerprint
        return self.trace


async def run_profile_plan(backend, plan, calibration: dict, *, progress=None):
    """Execute the profile plan on `backend` (a HostBackend) with `calibration`'s pace rates:
    (values [T, N], window starts [T], the executed windows with the runner's counts)."""
    backend.use_calibration(calibration)
    values = np.full((plan.T, len(backend.metric_schema())), np.nan, np.float32)
    starts = np.zeros(plan.T, np.int64)
    windows = []
    t0 = time.monotonic()
    async for w in backend.execute(plan, RunOptions(repetitions=1, warmup_windows=1, record=False, seed=0)):
        values[w.window], starts[w.window] = w.values, w.start_ns
        windows.append(w)
        if progress:
            progress(w)
    log.info("solo profile: %d windows in %.0f s", plan.T, time.monotonic() - t0)
    return values, starts, windows


def profile_path(state_dir: Path | str) -> Path:
    return Path(state_dir) / PROFILE_FILE


def stored_profile(state_dir: Path | str | None, catalog, info) -> Trace:
    """The profile `calibrate` left in `state_dir`, if it can stand for this host now: recorded
    with the calibration the agent runs with (info: the backend's BackendInfo), for its catalog,
    on the same hardware. NotFound naming what differs otherwise."""
    from mimesys.errors import NotFound

    again = "run `mimesys-agent calibrate` (it records the profile with the calibration)"
    path = profile_path(state_dir) if state_dir is not None else None
    if path is None or not path.is_file():
        raise NotFound(f"no solo profile on this agent: {again}")
    trace = Trace.read(path)
    why = mismatch(trace, info.calibration or {}, catalog.hash, info.fingerprint)
    if why:
        raise NotFound(f"the stored solo profile {why}: {again}")
    return trace


def mismatch(trace: Trace, calibration: dict, catalog_hash: str, fingerprint: dict) -> str:
    """Why a solo profile cannot stand for a host with this calibration, catalog and fingerprint
    ('' when it can): the checks of the agent's GET /v1/profile and of `calibrate --import`."""
    from mimesys.hardware import identity_diff

    prov = trace.provenance or {}
    if prov.get("by") != FORMAT:
        return f"is not a solo profile (provenance.by {prov.get('by')!r})"
    if prov.get("catalog_hash") != catalog_hash or calibration.get("catalog_hash", catalog_hash) != catalog_hash:
        return f"was recorded for another stressor catalog than {catalog_hash}"
    if not calibration or prov.get("calibration_created") != calibration.get("created"):
        return (f"was recorded with another calibration ({prov.get('calibration_created')}, "
                f"the calibration's: {calibration.get('created')})")
    diff = identity_diff(trace.host_fingerprint, fingerprint)
    if diff:
        return f"was measured on other hardware (fingerprint keys differ: {', '.join(diff)})"
    return ""


def import_measurement(src: Path | str, state_dir: Path | str, catalog, info) -> tuple[Path, Path]:
    """Install another agent's solo measurement (calibration.json and profile.h5 in `src`, as
    `calibrate` wrote them into its state or the demo keeps them) into `state_dir`, if it was
    measured on this hardware (info: this host's BackendInfo, without a calibration) for this
    catalog, and the two belong together. ValidationError naming what differs otherwise."""
    from mimesys import calibration as calfile
    from mimesys.errors import ValidationError

    src = Path(src)
    cal_path, prof_path = src / "calibration.json", src / PROFILE_FILE
    for p in (cal_path, prof_path):
        if not p.is_file():
            raise ValidationError(f"--import {src}: {p.name} not found (a directory holding calibration.json and "
                                  f"{PROFILE_FILE}, as `mimesys-agent calibrate` writes them)")
    doc = calfile.read(cal_path)
    trace = Trace.read(prof_path)
    why = mismatch(trace, doc, catalog.hash, info.fingerprint)
    if why:
        raise ValidationError(f"--import {src}: the profile {why}; calibrate this host instead")
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    calfile.write(doc, state_dir / "calibration.json")
    trace.write(profile_path(state_dir))
    return state_dir / "calibration.json", profile_path(state_dir)

"""The campaign's solo profile: taken once before round 0 (the agent's own where it measures as
the campaign does, else run here), and round 0's samples from it: its executed windows, their
compositions rebuilt from its provenance (layout, hold), one chain record under PROFILE_KEY.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time

import numpy as np

from mimesys.errors import MimesysError

from .campaign import PROFILE_KEY, Campaign, CampaignError, HostBinding
from .progress import progress_bar

log = logging.getLogger("mimesys.collect")


class ProfileUnusable(CampaignError):
    """The solo profile cannot serve as round 0's samples; the message names what differs."""


async def profile_host(campaign: Campaign, client, *, progress: bool = True) -> None:
    """The host's solo profile, once per campaign, before round 0: the first-order forward model
    is read from it (`mimesys forward fit` finds it here). The one the agent's `calibrate`
    recorded with its calibration is taken as it is (the host's one solo measurement); only
    where the agent has none this campaign can use is it run here, and the log says why."""
    from mimesys.errors import TraceError

    from ..fleet import AgentError
    from ..forward_fit.profile import run_profile

    try:
        trace = await client.solo_profile()
        unusable = "; ".join(profile_differences(campaign.binding, trace))
    except (AgentError, TraceError) as e:
        trace, unusable = None, str(e)
    if trace is not None and not unusable:
        trace.provenance = {**trace.provenance, "agent": getattr(client, "url", "")}
        await asyncio.to_thread(trace.write, campaign.profile_path)
        log.info("solo profile: the one %s recorded with its calibration of %s (%d windows) -> %s", client.name,
                 trace.provenance.get("calibration_created"), trace.T, campaign.profile_path)
        return
    tmp = campaign.profile_path.with_name(f".{campaign.profile_path.name}.tmp")
    log.info("solo profile of the host on %s (every stressor alone, then on every thread): the agent's own "
             "cannot be used: %s", client.name, unusable)
    t0 = time.monotonic()
    bar = progress_bar(progress, 1, "solo profile")
    try:
        def step(done, total):
            bar.total = total
            bar.update(done - bar.n)
        trace = await run_profile(client, tmp, progress=step)
    finally:
        bar.close()
    os.replace(tmp, campaign.profile_path)
    log.info("solo profile: %d windows in %.0f s -> %s", trace.T, time.monotonic() - t0, campaign.profile_path)


def profile_differences(binding: HostBinding, trace) -> list[str]:
    """Everything in which a solo profile differs from how this campaign measures (empty when it
    can be the campaign's): the checks of taking an agent's profile and of round 0 from it."""
    from mimesys.solo_profile import FORMAT

    b, prov = binding, trace.provenance or {}
    differs = []
    if prov.get("by") != FORMAT:
        differs.append(f"it is not a solo profile (provenance.by {prov.get('by')!r})")
    names, want = [m.name for m in trace.metrics], [m.name for m in b.metrics]
    if names != want:
        at = next((i for i, (x, y) in enumerate(zip(names, want)) if x != y), min(len(names), len(want)))
        ours, theirs = (names + [None])[at], (want + [None])[at]
        differs.append(f"its {len(names)} metrics are not the campaign's {len(want)} (first difference at "
                       f"{at}: {ours!r} vs {theirs!r})")
    cat_names = prov.get("catalog_names")
    if cat_names != b.catalog_names or prov.get("catalog_hash") != b.catalog_hash:
        differs.append(f"catalog {prov.get('catalog_hash')} of {len(cat_names or [])} stressors, the campaign's "
                       f"{b.catalog_hash} of {len(b.catalog_names)}")
    threads = len(prov.get("thread_cores") or [])
    if threads != b.threads:
        differs.append(f"{threads} threads, the campaign's {b.threads}")
    if bool(trace.simulated) != b.simulated:
        differs.append(f"{'simulated' if trace.simulated else 'real'} host, the campaign's "
                       f"{'simulated' if b.simulated else 'real'}")
    return differs


def profile_chain(campaign: Campaign) -> tuple[np.ndarray, np.ndarray]:
    """The solo profile as one chain: (compositions [L, M, K], values [1, L, N]), the
    compositions rebuilt from the trace's provenance (layout, hold), one repetition.
    Raises ProfileUnusable naming everything that differs from how this campaign measures."""
    from mimesys.solo_profile import LAYOUT_ONE_THREAD, profile_compositions
    from mimesys.trace import Trace

    path, b, cfg = campaign.profile_path, campaign.binding, campaign.config
    if not path.exists():
        raise ProfileUnusable(f"there is no solo profile at {path}")
    try:
        trace = Trace.read(path)
    except MimesysError as e:
        raise ProfileUnusable(f"{path} cannot be read: {e}") from None
    prov = trace.provenance or {}
    differs = profile_differences(b, trace)
    if not math.isclose(float(trace.window_s), cfg.window_s, rel_tol=1e-9):
        differs.append(f"window_s {trace.window_s:g}, the campaign's {cfg.window_s:g}")
    threads = len(prov.get("thread_cores") or [])
    if differs:
        raise ProfileUnusable("; ".join(differs))
    # the layout as fit_first_order reads it; every profile has named its hold
    layout, hold = prov.get("layout") or LAYOUT_ONE_THREAD, prov.get("hold")
    if isinstance(hold, bool) or not isinstance(hold, int) or hold < 1:
        raise ProfileUnusable(f"its provenance.hold {hold!r} is not a window count")
    try:
        comps = profile_compositions(len(b.catalog_names), threads, layout, hold)
    except MimesysError as e:
        raise ProfileUnusable(str(e)) from None
    if len(comps) != trace.T:
        raise ProfileUnusable(f"{trace.T} windows where its layout {layout} with hold {hold} has {len(comps)}")
    return comps, np.asarray(trace.values, np.float32)[None]


def record_profile(campaign: Campaign, comps: np.ndarray) -> int:
    """Round 0 from the solo profile: its windows as one chain record (acknowledged when this
    returns; once only, under PROFILE_KEY). `comps` are round 0's proposals, which the
    profile must still match. Returns the samples."""
    L = len(comps)
    if PROFILE_KEY in campaign.store:
        return L - 1
    chain, obs = profile_chain(campaign)
    if not np.array_equal(chain, comps):
        raise CampaignError(f"{campaign.profile_path} changed after round 0 was proposed from it; run collect "
                            f"again to propose round 0 anew")
    b = campaign.binding
    campaign.store.append([{"key": PROFILE_KEY, "type": "chain", "round": 0, "chain": 0, "agent": "solo profile",
                            "run_id": "", "t": time.time(),
                            "shape": [1, L, len(b.catalog_names), b.threads, len(b.metrics)],
                            "comps": np.ascontiguousarray(comps, "<f4").tobytes(),
                            "obs": np.ascontiguousarray(obs, "<f4").tobytes()}])
    log.info("acknowledged %s (%d samples) from the solo profile %s: one repetition, so a spread of 0 that "
             "the spread filter keeps", PROFILE_KEY, L - 1, campaign.profile_path)
    return L - 1

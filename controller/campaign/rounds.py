"""What each round runs: its compositions [B, M, K], proposed once and saved
(rounds/round_NNNN.npz) before any of its chains runs, so a resumed round runs the same ones.
Round 0 is the solo profile's windows or the one-hot sweep; rounds 1+ the hybrid novelty
proposal or random compositions (proposals.py).
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging

import numpy as np

from . import proposals
from .campaign import PROFILE_KEY, Campaign, CampaignError
from .coverage import metric_bounds, normalize
from .solo import ProfileUnusable, profile_chain
from .store import atomic_write_bytes

log = logging.getLogger("mimesys.collect")

MIN_SURROGATE_SAMPLES = 8


def proposals_for(campaign: Campaign, r: int) -> tuple[np.ndarray, dict]:
    """The round's compositions [B, M, K]: loaded if already proposed (resume), else made
    and saved atomically before anything runs."""
    path = campaign.round_path(r)
    if path.exists():
        with np.load(path, allow_pickle=False) as z:
            comps, info = z["compositions"], json.loads(str(z["info"]))
        if not (info.get("from_profile") and PROFILE_KEY not in campaign.store):
            return comps, info
        # proposed from the solo profile, not yet recorded (a crash in between): nothing of
        # round 0 is acknowledged, so it is proposed again from the profile as it is now
    cfg, b = campaign.config, campaign.binding
    M, K = len(b.catalog_names), b.threads
    rng = np.random.default_rng([cfg.seed, r, 0x6E6F76])
    sweep = proposals.one_hot_sweep(M, K, cfg.sweep_intensities, cfg.sweep_thread_counts)
    info: dict = {"round": r, "strategy": cfg.strategy}
    if cfg.strategy == "random":
        n = len(sweep) if r == 0 else cfg.round_size
        comps = proposals.random_compositions(rng, n, M, K)
        info["random"] = n
    elif r == 0:
        if cfg.round0 == "profile":
            try:
                comps, _ = profile_chain(campaign)
            except ProfileUnusable as e:
                log.warning("round 0: the solo profile cannot serve as samples (%s); running the one-hot "
                            "sweep", e)
                info["profile_unusable"] = str(e)
            else:
                # the profile's windows in their executed order: no shuffle, no holds
                info.update(from_profile=len(comps), compositions=len(comps), windows=len(comps))
                atomic_write_bytes(path, _npz_bytes(compositions=comps, info=np.array(json.dumps(info))))
                return comps, info
        comps = sweep
        info["sweep"] = len(sweep)
    else:
        s = campaign.samples()
        ki, _, units = b.key_index(cfg.key_metrics)
        if len(s["action"]) < MIN_SURROGATE_SAMPLES:
            # A noisy host (contention from other tenants) can leave too few stable samples to
            # fit the surrogate; the unstable ones' means still say where compositions land.
            unfiltered = campaign.samples(filtered=False)
            log.warning("round %d: only %d stable samples; fitting the surrogate on all %d samples "
                        "(the dataset still gets only the stable ones)", r, len(s["action"]),
                        len(unfiltered["action"]))
            s = unfiltered
            info["surrogate_on_unstable"] = True
        if len(s["action"]) < MIN_SURROGATE_SAMPLES:
            raise CampaignError(f"round {r}: only {len(s['action'])} samples so far; the surrogate needs "
                                f"{MIN_SURROGATE_SAMPLES} (a larger round 0: the solo profile, or more sweep "
                                f"intensities)")
        X = s["action"]
        hi = metric_bounds([b.metrics[i].name for i in ki], units, s["obs"][:, ki], b.peaks())
        Y = normalize(s["obs"][:, ki], hi)
        settings = proposals.NoveltySettings(pool=cfg.pool, lam=cfg.novelty_lambda, trees=cfg.trees,
                                             hull_fraction=cfg.hull_fraction)
        pairs = [(i, j) for i in range(len(ki)) for j in range(i + 1, len(ki))]
        pairs = [pairs[k] for k in rng.permutation(len(pairs))[:6]]
        comps, rep = proposals.hybrid(rng, X, Y, cfg.round_size, pairs, settings)
        info.update(dataclasses.asdict(rep))
    comps = comps[rng.permutation(len(comps))]          # chains mix stressors
    holds = rng.integers(1, cfg.hold_max + 1, len(comps))
    info.update(compositions=len(comps), windows=int(holds.sum()))
    comps = np.repeat(comps, holds, axis=0)
    buf = _npz_bytes(compositions=comps.astype(np.float32), info=np.array(json.dumps(info)))
    atomic_write_bytes(path, buf)
    return comps, info


def _npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()

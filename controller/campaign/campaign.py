"""A data-collection campaign: one directory, resumable after any crash.

    CAMPAIGN/
      campaign.toml          the configuration (written once; later runs must agree with it)
      host.json              the hardware this campaign is bound to, its metric schema and catalog
      samples.log            append-only checksummed record log (store.py): one record per
                             executed chain, one per finished round
      rounds/round_NNNN.npz  the round's proposed compositions, written before profiling starts
      reports/               coverage_round_NNNN.png, coverage.json (one entry per round)
      logs/collect.log       what happened, with times

Crash safety: a chain's windows are appended (fsync) as one record when its run ends; that
is the acknowledgement. A round's proposals are saved before any of its chains run, so a
resumed round runs exactly the chains that have no record yet: no acknowledged sample is
lost and none is collected twice. Round completion (and the spread filter's range) is a
record too.

Rounds: before round 0 the campaign records the host's solo profile (profile.h5: each stressor
alone on thread 0, on thread 1, on every thread, an idle window before each). Round 0 takes its
samples from it (`round0 = "profile"`, the default): the profile's executed windows, their
compositions rebuilt from its provenance (layout, hold), become one chain record ("r0/profile",
one repetition, so a spread of 0 that the filter always keeps), and nothing runs. Only a profile
measured as the campaign measures serves (the same metrics in the same order, window_s, catalog
names and hash, thread count, simulated or not); otherwise, and with `round0 = "sweep"`, round 0
runs the one-hot sweep (each stressor alone at `sweep_intensities` on `sweep_thread_counts`),
and collect.log names what differed. `--strategy random` keeps random compositions of the
sweep's count. Rounds 1+ are the hybrid novelty proposal or random compositions. With hold_max > 1
each proposed composition is held for 1..hold_max consecutive windows (drawn uniformly), so
the dataset also holds steady transitions (a_{t-1} = a_t), which generation meets in a
trace's phases; on the simulated host that did not improve the model at an equal window
budget (bench/results/model/README.md), so by default the composition changes every window.
The windows are cut into chains of `chain_len`; every chain runs with one warm-up window and
`repetitions` repetitions, and windows 1..L-1 each give a sample (a_{t-1}, a_t, o_{t-1}, o_t)
with o the mean over repetitions. A sample whose spread (max - min over repetitions) exceeds
`spread_threshold` of the observed range on any key metric is dropped and counted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import os
import time
import typing
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mimesys.backend import RunOptions
from mimesys.config import check_known, coerce, read_toml
from mimesys.errors import ConfigError, MimesysError
from mimesys.metrics import MetricSpec
from mimesys.plan import Plan

from ..dataset import Dataset, samples_from_chain
from . import proposals
from .coverage import DEFAULT_KEY_METRICS, UNIT_FLOOR, coverage, coverage_png, metric_bounds, normalize
from .store import RecordLog, atomic_write_bytes

log = logging.getLogger("mimesys.collect")

STRATEGIES = ("novelty", "random")
ROUND0 = ("profile", "sweep")     # where the novelty strategy's round 0 comes from
PROFILE_KEY = "r0/profile"        # the record key of round 0's samples from the solo profile
MIN_SURROGATE_SAMPLES = 8


class CampaignError(MimesysError):
    """The campaign directory or its configuration cannot be used as asked."""


class ProfileUnusable(CampaignError):
    """The solo profile cannot serve as round 0's samples; the message names what differs."""


@dataclass(frozen=True)
class CampaignConfig:
    strategy: str = "novelty"
    round0: str = "profile"          # novelty round 0: the solo profile's windows ("profile") or the sweep
    round_size: int = 128            # compositions proposed per round (rounds 1+)
    chain_len: int = 16              # windows per chain (L - 1 samples each)
    hold_max: int = 1                # each composition runs for 1..hold_max consecutive windows
    repetitions: int = 3             # R: every chain runs R times
    warmup_windows: int = 1
    window_s: float = 1.0
    threads: int | None = None       # K; None = the agents' max_threads
    spread_threshold: float = 0.10   # drop a sample whose spread > this x observed range
    key_metrics: tuple[str, ...] = DEFAULT_KEY_METRICS
    sweep_intensities: tuple[float, ...] = (0.25, 0.5, 1.0)
    sweep_thread_counts: tuple[int, ...] | None = None   # None = (1, K/2, K)
    hull_fraction: float = 0.3
    novelty_lambda: float = 1.0
    pool: int = 2000
    trees: int = 60
    coverage_grid: int = 20
    seed: int = 0
    allow_mixed_hosts: bool = False

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"strategy {self.strategy!r}; valid: {', '.join(STRATEGIES)}")
        if self.round0 not in ROUND0:
            raise ConfigError(f"round0 {self.round0!r}; valid: {', '.join(ROUND0)}")
        for name, lo in (("round_size", 2), ("chain_len", 2), ("hold_max", 1), ("repetitions", 1), ("pool", 10),
                         ("trees", 2), ("coverage_grid", 2)):
            if getattr(self, name) < lo:
                raise ConfigError(f"{name} must be >= {lo}, got {getattr(self, name)}")
        if not 0 <= self.hull_fraction <= 1:
            raise ConfigError(f"hull_fraction must be in [0, 1], got {self.hull_fraction}")
        if not 0 < self.spread_threshold:
            raise ConfigError(f"spread_threshold must be > 0, got {self.spread_threshold}")

    def to_toml(self) -> str:
        lines = ["# mimesys collection campaign (written at creation; edit with care)"]
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None:
                lines.append(f"# {f.name} = (auto)")
            else:
                lines.append(f"{f.name} = {json.dumps(list(v) if isinstance(v, tuple) else v)}")
        return "\n".join(lines) + "\n"

    @classmethod
    def from_toml(cls, path: Path) -> "CampaignConfig":
        return cls.from_dict(read_toml(path, "campaign config"), str(path))

    @classmethod
    def from_dict(cls, d: dict, where: str = "campaign config") -> "CampaignConfig":
        """Each value checked against its field's type (the typed config reader), then the
        ranges; every error names `where` and the key."""
        hints = typing.get_type_hints(cls)
        check_known(d, hints, where)
        kw = {k: coerce(v, hints[k], f"{where}: {k}") for k, v in d.items()}
        try:
            return cls(**kw)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None


@dataclass
class HostBinding:
    """What host.json records: the campaign's one hardware identity and its formats."""

    identity: dict
    metrics: list[MetricSpec]
    catalog_names: list[str]
    catalog_hash: str
    threads: int
    simulated: bool
    calibration: dict = field(default_factory=dict)
    fingerprint: dict = field(default_factory=dict)

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        d["metrics"] = [m.to_dict() for m in self.metrics]
        return json.dumps(d, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "HostBinding":
        d = json.loads(text)
        d["metrics"] = [MetricSpec.from_dict(m) for m in d["metrics"]]
        return cls(**d)

    def peaks(self) -> dict:
        peaks = dict((self.calibration or {}).get("peaks", {}) or {})
        peaks.update({k: v for k, v in (self.fingerprint.get("calibrated_peaks") or {}).items()
                      if isinstance(v, (int, float))})
        return peaks


@dataclass
class RoundSummary:
    round: int
    chains: int
    samples: int
    kept: int
    dropped: int
    coverage: dict
    seconds: float
    samples_per_s: float
    strategy: str
    profile_seconds: float = 0.0     # of `seconds`, the time spent running chains on the fleet
    proposal: dict = field(default_factory=dict)


class Campaign:
    def __init__(self, root: Path, config: CampaignConfig):
        self.root = Path(root)
        self.config = config
        self.store = RecordLog(self.root / "samples.log")
        self.binding: HostBinding | None = None
        hp = self.root / "host.json"
        if hp.exists():
            self.binding = HostBinding.from_json(hp.read_text())
        for d in ("rounds", "reports", "logs"):
            (self.root / d).mkdir(parents=True, exist_ok=True)

    # -- opening ------------------------------------------------------------------------
    @classmethod
    def open(cls, root: Path | str, overrides: dict | None = None, *, create: bool = True) -> "Campaign":
        """Open CAMPAIGN, creating it with `overrides` on top of the defaults when it does
        not exist. An override that contradicts the stored config is an error."""
        root = Path(root)
        cfg_path = root / "campaign.toml"
        overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
        if cfg_path.exists():
            config = CampaignConfig.from_toml(cfg_path)
            for k, v in overrides.items():
                stored = getattr(config, k)
                if (tuple(v) if isinstance(v, list) else v) != stored:
                    raise CampaignError(f"{cfg_path}: campaign was created with {k} = {stored!r}; this run asks "
                                        f"for {v!r}. Use a new campaign directory to change it")
        elif not create:
            raise CampaignError(f"{root}: no campaign here (no campaign.toml)")
        else:
            config = CampaignConfig.from_dict(overrides, "command-line options")
            root.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(cfg_path, config.to_toml().encode())
        return cls(root, config)

    def close(self) -> None:
        self.store.close()

    # -- host binding -------------------------------------------------------------------
    def bind(self, infos: list[dict], identity: dict) -> HostBinding:
        """Record (first run) or check (later runs) the host this campaign collects from."""
        info = infos[0]
        metrics = [MetricSpec.from_dict(m) for m in info["schema"]]
        cat = info.get("catalog", {})
        names = [s["name"] for s in cat.get("stressors", [])]
        threads = self.config.threads or min(int(i.get("max_threads") or 1) for i in infos)
        binding = HostBinding(identity=identity, metrics=metrics, catalog_names=names,
                              catalog_hash=str(cat.get("hash", "")), threads=int(threads),
                              simulated=bool(info.get("simulated")), calibration=info.get("calibration") or {},
                              fingerprint=info.get("fingerprint") or {})
        if self.binding is None:
            atomic_write_bytes(self.root / "host.json", binding.to_json().encode())
            self.binding = binding
            log.info("campaign bound to %s host (%d metrics, %d stressors, %d threads)",
                     "a SIMULATED" if binding.simulated else "a real", len(metrics), len(names), threads)
            return binding
        old = self.binding
        if old.identity != identity and not self.config.allow_mixed_hosts:
            diff = sorted(k for k in set(old.identity) | set(identity) if old.identity.get(k) != identity.get(k))
            raise CampaignError(f"the fleet's hardware differs from the host this campaign is bound to "
                                f"(fingerprint keys: {', '.join(diff)}); refusing to mix hosts in one dataset "
                                f"(set allow_mixed_hosts = true in campaign.toml to allow it explicitly)")
        if old.catalog_hash != binding.catalog_hash:
            raise CampaignError(f"the agents run catalog {binding.catalog_hash}, this campaign collected with "
                                f"{old.catalog_hash}; samples of two catalogs cannot share a dataset")
        if [m.name for m in old.metrics] != [m.name for m in metrics]:
            raise CampaignError("the agents' metric schema differs from the one this campaign recorded")
        if old.simulated != binding.simulated:
            raise CampaignError("this campaign was collected on a "
                                f"{'simulated' if old.simulated else 'real'} host; the fleet is not")
        return old

    # -- reading the store --------------------------------------------------------------
    def chain_records(self, upto_round: int | None = None) -> list[dict]:
        return [r for r in self.store if r.get("type") == "chain"
                and (upto_round is None or r["round"] <= upto_round)]

    def round_done(self, r: int) -> dict | None:
        for rec in self.store:
            if rec.get("type") == "round_done" and rec["round"] == r:
                return rec
        return None

    def next_round(self) -> int:
        r = 0
        while self.round_done(r) is not None:
            r += 1
        return r

    def key_index(self) -> tuple[list[int], list[str], list[str]]:
        b = self.binding
        idx = {m.name: i for i, m in enumerate(b.metrics)}
        avail = [n for n in self.config.key_metrics if n in idx and b.metrics[idx[n]].available]
        if len(avail) < 2:
            raise CampaignError(f"fewer than two key metrics available on this host ({avail}); configure "
                                f"key_metrics from: {', '.join(m.name for m in b.metrics if m.available)}")
        return [idx[n] for n in avail], avail, [b.metrics[idx[n]].unit for n in avail]

    def samples(self, upto_round: int | None = None, *, filtered: bool = True) -> dict:
        """Every sample of the store (through `upto_round`), with the spread filter applied as
        recorded at each round's end (the current range for an unfinished round). Beside the
        arrays: "dropped" (by the filter) and "from_profile" (samples kept from the solo profile)."""
        recs = self.chain_records(upto_round)
        b = self.binding
        M, K, N = len(b.catalog_names), b.threads, len(b.metrics)
        parts, rounds, profiled = [], [], []
        for rec in recs:
            R, L = rec["shape"][0], rec["shape"][1]
            comps = np.frombuffer(rec["comps"], "<f4").reshape(L, M, K)
            obs = np.frombuffer(rec["obs"], "<f4").reshape(R, L, N)
            parts.append(samples_from_chain(comps, obs))
            rounds.append(np.full(L - 1, rec["round"], np.int32))
            profiled.append(np.full(L - 1, rec["key"] == PROFILE_KEY))
        if not parts:
            z = np.zeros((0, M, K), np.float32)
            zn = np.zeros((0, N), np.float32)
            return {"prev_action": z, "action": z, "prev_obs": zn, "obs": zn, "obs_spread": zn,
                    "round": np.zeros(0, np.int32), "dropped": 0, "from_profile": 0}
        cols = [np.concatenate(x) for x in zip(*parts)]
        out = dict(zip(("prev_action", "action", "prev_obs", "obs", "obs_spread"), cols))
        out["round"] = np.concatenate(rounds)
        profiled = np.concatenate(profiled)
        keep = np.ones(len(out["round"]), bool)
        if filtered:
            ki, _, units = self.key_index()
            for r in np.unique(out["round"]):
                rec = self.round_done(int(r))
                if rec is not None:
                    lo, hi = np.frombuffer(rec["lo"], "<f4"), np.frombuffer(rec["hi"], "<f4")
                else:
                    lo, hi = self._range(out["obs"][out["round"] <= r][:, ki])
                sel = out["round"] == r
                keep[sel] = self._stable(out["obs_spread"][sel][:, ki], lo, hi, units)
        out = {k: v[keep] for k, v in out.items()}
        out["dropped"] = int((~keep).sum())
        out["from_profile"] = int(profiled[keep].sum())
        return out

    @staticmethod
    def _range(obs_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(all="ignore"):
            lo = np.nanmin(obs_key, axis=0) if len(obs_key) else np.zeros(obs_key.shape[1])
            hi = np.nanmax(obs_key, axis=0) if len(obs_key) else np.zeros(obs_key.shape[1])
        return np.nan_to_num(lo).astype(np.float32), np.nan_to_num(hi).astype(np.float32)

    def _stable(self, spread: np.ndarray, lo: np.ndarray, hi: np.ndarray, units: list[str]) -> np.ndarray:
        # A floor on the range so a metric that barely moved (idle NIC) cannot drop everything.
        floor = np.array([UNIT_FLOOR.get(u, 0.0) for u in units])
        rng = np.maximum(hi - lo, floor)
        with np.errstate(invalid="ignore"):
            bad = np.nan_to_num(spread, nan=0.0) > self.config.spread_threshold * rng
        return ~bad.any(axis=1)

    def dataset(self) -> Dataset:
        if self.binding is None:
            raise CampaignError(f"{self.root}: the campaign has not profiled anything yet (no host.json)")
        s = self.samples()
        b = self.binding
        return Dataset(prev_action=s["prev_action"], action=s["action"], prev_obs=s["prev_obs"], obs=s["obs"],
                       obs_spread=s["obs_spread"], round=s["round"], metrics=b.metrics,
                       catalog_names=b.catalog_names, catalog_hash=b.catalog_hash,
                       window_s=self.config.window_s, host_fingerprint=b.fingerprint, simulated=b.simulated,
                       provenance={"kind": "campaign", "campaign": str(self.root.resolve()),
                                   "strategy": self.config.strategy, "rounds": self.next_round(),
                                   "dropped_unstable": s["dropped"], "from_profile": s["from_profile"],
                                   "config": json.loads(
                                       json.dumps(dataclasses.asdict(self.config)))})

    # -- proposing ----------------------------------------------------------------------
    @property
    def profile_path(self) -> Path:
        """The host's solo profile (a trace), recorded once before round 0."""
        return self.root / "profile.h5"

    def round_path(self, r: int) -> Path:
        return self.root / "rounds" / f"round_{r:04d}.npz"

    def proposals_for(self, r: int) -> tuple[np.ndarray, dict]:
        """The round's compositions [B, M, K]: loaded if already proposed (resume), else made
        and saved atomically before anything runs."""
        path = self.round_path(r)
        if path.exists():
            with np.load(path, allow_pickle=False) as z:
                comps, info = z["compositions"], json.loads(str(z["info"]))
            if not (info.get("from_profile") and PROFILE_KEY not in self.store):
                return comps, info
            # proposed from the solo profile, not yet recorded (a crash in between): nothing of
            # round 0 is acknowledged, so it is proposed again from the profile as it is now
        cfg, b = self.config, self.binding
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
                    comps, _ = self.profile_chain()
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
            s = self.samples()
            ki, _, units = self.key_index()
            if len(s["action"]) < MIN_SURROGATE_SAMPLES:
                # A noisy host (contention from other tenants) can leave too few stable samples to
                # fit the surrogate; the unstable ones' means still say where compositions land.
                unfiltered = self.samples(filtered=False)
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

    def profile_chain(self) -> tuple[np.ndarray, np.ndarray]:
        """The solo profile as one chain: (compositions [L, M, K], values [1, L, N]), the
        compositions rebuilt from the trace's provenance (layout, hold), one repetition.
        Raises ProfileUnusable naming everything that differs from how this campaign measures."""
        from mimesys.solo_profile import LAYOUT_ONE_THREAD, profile_compositions
        from mimesys.trace import Trace

        path, b, cfg = self.profile_path, self.binding, self.config
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

    def record_profile(self, comps: np.ndarray) -> int:
        """Round 0 from the solo profile: its windows as one chain record (acknowledged when this
        returns; once only, under PROFILE_KEY). `comps` are round 0's proposals, which the
        profile must still match. Returns the samples."""
        L = len(comps)
        if PROFILE_KEY in self.store:
            return L - 1
        chain, obs = self.profile_chain()
        if not np.array_equal(chain, comps):
            raise CampaignError(f"{self.profile_path} changed after round 0 was proposed from it; run collect "
                                f"again to propose round 0 anew")
        b = self.binding
        self.store.append([{"key": PROFILE_KEY, "type": "chain", "round": 0, "chain": 0, "agent": "solo profile",
                            "run_id": "", "t": time.time(),
                            "shape": [1, L, len(b.catalog_names), b.threads, len(b.metrics)],
                            "comps": np.ascontiguousarray(comps, "<f4").tobytes(),
                            "obs": np.ascontiguousarray(obs, "<f4").tobytes()}])
        log.info("acknowledged %s (%d samples) from the solo profile %s: one repetition, so a spread of 0 that "
                 "the spread filter keeps", PROFILE_KEY, L - 1, self.profile_path)
        return L - 1

    def chains(self, comps: np.ndarray) -> list[np.ndarray]:
        L = self.config.chain_len
        out = [comps[i:i + L] for i in range(0, len(comps), L)]
        if len(out) > 1 and len(out[-1]) < 2:
            out[-2] = np.concatenate([out[-2], out[-1]])
            out.pop()
        return [c for c in out if len(c) >= 2]

    def jobs(self, r: int, comps: np.ndarray):
        from ..fleet import Job
        b, cfg = self.binding, self.config
        out = []
        for c, chain in enumerate(self.chains(comps)):
            key = f"r{r}/c{c}"
            if key in self.store:
                continue
            plan = Plan(np.ascontiguousarray(chain, np.float32), b.catalog_names, b.catalog_hash,
                        window_s=cfg.window_s, seed=(cfg.seed * 1_000_003 + r * 10_007 + c) & 0x7FFFFFFF,
                        provenance={"kind": "collect", "campaign": self.root.name, "round": r, "chain": c})
            out.append(Job(key, plan, RunOptions(repetitions=cfg.repetitions, warmup_windows=cfg.warmup_windows,
                                                 record=False, seed=plan.seed)))
        return out

    def record_chain(self, r: int, job, result) -> int:
        """Append one executed chain (acknowledged when this returns). Returns its samples."""
        b = self.binding
        names = [m.name for m in result.trace.metrics]
        if names != [m.name for m in b.metrics]:
            raise CampaignError(f"agent {result.agent} reports metrics that differ from the campaign's schema")
        obs = result.values_by_repetition(job.plan.T)
        c = int(job.id.split("/c")[1])
        self.store.append([{"key": job.id, "type": "chain", "round": r, "chain": c, "agent": result.agent,
                            "run_id": result.run_id, "t": time.time(),
                            "shape": [int(obs.shape[0]), job.plan.T, job.plan.M, job.plan.K, int(obs.shape[2])],
                            "comps": np.ascontiguousarray(job.plan.compositions, "<f4").tobytes(),
                            "obs": np.ascontiguousarray(obs, "<f4").tobytes()}])
        log.info("acknowledged %s (%d samples) from %s", job.id, job.plan.T - 1, result.agent)
        return job.plan.T - 1

    def record_start(self, job, agent: str, run_id: str) -> None:
        """Note that `agent` accepted `job` as `run_id`, so that after a crash the run can be
        recognised as ours (and cancelled) if it still occupies the agent."""
        self.store.append([{"key": f"{job.id}/run/{run_id}", "type": "run_started", "job": job.id,
                            "agent": agent, "run_id": run_id, "t": time.time()}])

    def orphan_runs(self) -> set[str]:
        """Runs started for chains that have no result record (the controller died meanwhile)."""
        return {r["run_id"] for r in self.store if r.get("type") == "run_started" and r["job"] not in self.store}

    def finish_round(self, r: int, seconds: float, proposal: dict, profile_seconds: float = 0.0) -> RoundSummary:
        s_all = self.samples(r, filtered=False)
        ki, names, units = self.key_index()
        lo, hi = self._range(s_all["obs"][:, ki])
        this = s_all["round"] == r
        kept_mask = self._stable(s_all["obs_spread"][this][:, ki], lo, hi, units)
        n_chains = sum(1 for rec in self.chain_records() if rec["round"] == r)
        self.store.append([{"key": f"r{r}/done", "type": "round_done", "round": r, "t": time.time(),
                            "lo": lo.tobytes(), "hi": hi.tobytes(), "kept": int(kept_mask.sum()),
                            "dropped": int((~kept_mask).sum())}])
        s = self.samples(r)
        Y = s["obs"][:, ki]
        bounds = metric_bounds(names, units, Y, self.binding.peaks())
        Yn = normalize(Y, bounds)
        cov = coverage(Yn, self.config.coverage_grid)
        summary = RoundSummary(round=r, chains=n_chains, samples=int(this.sum()), kept=int(kept_mask.sum()),
                               dropped=int((~kept_mask).sum()), coverage=cov, seconds=round(seconds, 3),
                               samples_per_s=round(int(this.sum()) / seconds, 3) if seconds > 0 else 0.0,
                               strategy=self.config.strategy, proposal=proposal,
                               profile_seconds=round(profile_seconds, 3))
        png = self.root / "reports" / f"coverage_round_{r:04d}.png"
        coverage_png(png, Yn, names, f"{self.root.name}: round {r}, {len(Yn)} samples, "
                     f"coverage {cov['occupied_cells']} cells ({cov['fraction']:.1%}), {self.config.strategy}",
                     simulated=self.binding.simulated, bounds=bounds)
        report_path = self.root / "reports" / "coverage.json"
        history = json.loads(report_path.read_text()) if report_path.exists() else []
        history = [h for h in history if h.get("round") != r] + [dataclasses.asdict(summary)]
        atomic_write_bytes(report_path, json.dumps(history, indent=1).encode())
        log.info("round %d done: %d samples (%d kept, %d dropped as unstable), coverage %d cells, %.1f samples/s",
                 r, summary.samples, summary.kept, summary.dropped, cov["occupied_cells"], summary.samples_per_s)
        return summary


def _npz_bytes(**arrays) -> bytes:
    import io
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


# ------------------------------------------------------------------------------------------
async def run_campaign(campaign: Campaign, fleet, rounds: int, *, progress: bool = True,
                       on_round=None) -> list[RoundSummary]:
    """Run rounds 0..`rounds` (round 0 = the solo profile's windows or the initial sweep, then
    `rounds` proposal rounds), resuming from the store. Returns the summaries of the rounds run
    by this call."""
    probes = await fleet.probe()
    for p in probes:
        if not p.ok:
            log.warning("agent %s unreachable at start: %s", p.client.name, p.error)
    if campaign.config.allow_mixed_hosts:
        fleet.allow_mixed_hosts = True
    identity = fleet.check_hosts(probes)          # the agents agree among themselves ...
    campaign.bind([p.info for p in probes if p.ok], identity)   # ... and with the campaign's host
    agents = [p.client for p in probes if p.ok]
    fleet.owned_runs |= campaign.orphan_runs()
    if not campaign.profile_path.exists() and agents:
        await profile_host(campaign, agents[0], progress=progress)
    summaries = []
    for r in range(campaign.next_round(), rounds + 1):
        t0 = time.monotonic()
        comps, info = await asyncio.to_thread(campaign.proposals_for, r)
        if info.get("from_profile"):
            n = await asyncio.to_thread(campaign.record_profile, comps)
            log.info("round 0: %d windows of the solo profile give %d samples; the one-hot sweep is not run",
                     len(comps), n)
            t_run = 0.0
        else:
            t_run = await _run_chains(campaign, fleet, agents, r, comps, info, progress)
        summary = await asyncio.to_thread(campaign.finish_round, r, time.monotonic() - t0, info, t_run)
        summaries.append(summary)
        if on_round is not None:
            on_round(summary)
    return summaries


async def _run_chains(campaign: Campaign, fleet, agents, r: int, comps: np.ndarray, info: dict,
                      progress: bool) -> float:
    """Run round r's chains that have no record yet on the fleet; returns the seconds it took."""
    jobs = campaign.jobs(r, comps)
    total = sum(j.plan.T - 1 for j in jobs)
    log.info("round %d: %d compositions over %d windows, %d chains to run (%d samples), %d agents", r,
             info.get("compositions", len(comps)), len(comps), len(jobs), total, len(agents))
    bar = _progress(progress, total, f"round {r}")
    t0 = time.monotonic()
    try:
        async def on_result(job, result):
            n = campaign.record_chain(r, job, result)
            bar.update(n)
        await fleet.run_jobs(jobs, on_result, agents=agents,
                             on_start=lambda job, client, run_id: campaign.record_start(job, client.name, run_id))
    finally:
        bar.close()
    return time.monotonic() - t0


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
    bar = _progress(progress, 1, "solo profile")
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


def _progress(enabled: bool, total: int, desc: str):
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="sample", disable=not enabled, dynamic_ncols=True,
                smoothing=0.1, mininterval=0.5)

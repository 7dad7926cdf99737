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

import dataclasses
import itertools
import json
import logging
import typing
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mimesys.config import check_known, coerce, read_toml
from mimesys.errors import ConfigError, MimesysError
from mimesys.metrics import MetricSpec

from ..dataset import Dataset
from .coverage import DEFAULT_KEY_METRICS
from .samples import chain_samples, spread_filter
from .store import RecordLog, atomic_write_bytes

log = logging.getLogger("mimesys.collect")

STRATEGIES = ("novelty", "random")
ROUND0 = ("profile", "sweep")     # where the novelty strategy's round 0 comes from
PROFILE_KEY = "r0/profile"        # the record key of round 0's samples from the solo profile


class CampaignError(MimesysError):
    """The campaign directory or its configuration cannot be used as asked."""


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

    def check_overrides(self, overrides: dict, where: Path) -> None:
        """An override that contradicts this stored config is an error: a campaign's samples
        are collected one way."""
        for k, v in overrides.items():
            stored = getattr(self, k)
            if (tuple(v) if isinstance(v, list) else v) != stored:
                raise CampaignError(f"{where}: campaign was created with {k} = {stored!r}; this run asks "
                                    f"for {v!r}. Use a new campaign directory to change it")

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
    def from_infos(cls, infos: list[dict], identity: dict, threads: int | None) -> "HostBinding":
        """The binding the agents' /v1/info describe; K is `threads` or the smallest max_threads."""
        info = infos[0]
        cat = info.get("catalog", {})
        threads = threads or min(int(i.get("max_threads") or 1) for i in infos)
        return cls(identity=identity, metrics=[MetricSpec.from_dict(m) for m in info["schema"]],
                   catalog_names=[s["name"] for s in cat.get("stressors", [])],
                   catalog_hash=str(cat.get("hash", "")), threads=int(threads),
                   simulated=bool(info.get("simulated")), calibration=info.get("calibration") or {},
                   fingerprint=info.get("fingerprint") or {})

    def check_same_host(self, new: "HostBinding", *, allow_mixed_hosts: bool) -> None:
        """Raise CampaignError where `new` (the fleet now) cannot add samples to this binding's."""
        if self.identity != new.identity and not allow_mixed_hosts:
            diff = sorted(k for k in set(self.identity) | set(new.identity)
                          if self.identity.get(k) != new.identity.get(k))
            raise CampaignError(f"the fleet's hardware differs from the host this campaign is bound to "
                                f"(fingerprint keys: {', '.join(diff)}); refusing to mix hosts in one dataset "
                                f"(set allow_mixed_hosts = true in campaign.toml to allow it explicitly)")
        if self.catalog_hash != new.catalog_hash:
            raise CampaignError(f"the agents run catalog {new.catalog_hash}, this campaign collected with "
                                f"{self.catalog_hash}; samples of two catalogs cannot share a dataset")
        if [m.name for m in self.metrics] != [m.name for m in new.metrics]:
            raise CampaignError("the agents' metric schema differs from the one this campaign recorded")
        if self.simulated != new.simulated:
            raise CampaignError("this campaign was collected on a "
                                f"{'simulated' if self.simulated else 'real'} host; the fleet is not")

    @classmethod
    def from_json(cls, text: str) -> "HostBinding":
        d = json.loads(text)
        d["metrics"] = [MetricSpec.from_dict(m) for m in d["metrics"]]
        return cls(**d)

    def key_index(self, key_metrics: tuple[str, ...]) -> tuple[list[int], list[str], list[str]]:
        """The key metrics this host has: (their indices, names, units)."""
        idx = {m.name: i for i, m in enumerate(self.metrics)}
        avail = [n for n in key_metrics if n in idx and self.metrics[idx[n]].available]
        if len(avail) < 2:
            raise CampaignError(f"fewer than two key metrics available on this host ({avail}); configure "
                                f"key_metrics from: {', '.join(m.name for m in self.metrics if m.available)}")
        return [idx[n] for n in avail], avail, [self.metrics[idx[n]].unit for n in avail]

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
    """The campaign directory (config, host binding, record store) and the samples read from it;
    proposing a round is rounds.py's, running it run.py's, round 0 from the solo profile solo.py's."""

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

    @classmethod
    def open(cls, root: Path | str, overrides: dict | None = None, *, create: bool = True) -> "Campaign":
        """Open CAMPAIGN, creating it with `overrides` on top of the defaults when it does
        not exist. An override that contradicts the stored config is an error."""
        root = Path(root)
        cfg_path = root / "campaign.toml"
        overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
        if cfg_path.exists():
            config = CampaignConfig.from_toml(cfg_path)
            config.check_overrides(overrides, cfg_path)
        elif not create:
            raise CampaignError(f"{root}: no campaign here (no campaign.toml)")
        else:
            config = CampaignConfig.from_dict(overrides, "command-line options")
            root.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(cfg_path, config.to_toml().encode())
        return cls(root, config)

    def close(self) -> None:
        self.store.close()

    def bind(self, infos: list[dict], identity: dict) -> HostBinding:
        """Record (first run) or check (later runs) the host this campaign collects from."""
        binding = HostBinding.from_infos(infos, identity, self.config.threads)
        if self.binding is None:
            atomic_write_bytes(self.root / "host.json", binding.to_json().encode())
            self.binding = binding
            log.info("campaign bound to %s host (%d metrics, %d stressors, %d threads)",
                     "a SIMULATED" if binding.simulated else "a real", len(binding.metrics),
                     len(binding.catalog_names), binding.threads)
            return binding
        self.binding.check_same_host(binding, allow_mixed_hosts=self.config.allow_mixed_hosts)
        return self.binding

    @property
    def profile_path(self) -> Path:
        """The host's solo profile (a trace), recorded once before round 0."""
        return self.root / "profile.h5"

    def round_path(self, r: int) -> Path:
        return self.root / "rounds" / f"round_{r:04d}.npz"

    def chain_records(self, upto_round: int | None = None) -> list[dict]:
        return [r for r in self.store if r.get("type") == "chain"
                and (upto_round is None or r["round"] <= upto_round)]

    def round_done(self, r: int) -> dict | None:
        return next((rec for rec in self.store if rec.get("type") == "round_done" and rec["round"] == r), None)

    def next_round(self) -> int:
        return next(r for r in itertools.count() if self.round_done(r) is None)

    def orphan_runs(self) -> set[str]:
        """Runs started for chains that have no result record (the controller died meanwhile)."""
        return {r["run_id"] for r in self.store if r.get("type") == "run_started" and r["job"] not in self.store}

    def samples(self, upto_round: int | None = None, *, filtered: bool = True) -> dict:
        """Every sample of the store (through `upto_round`), with the spread filter applied as
        recorded at each round's end (the current range for an unfinished round). Beside the
        arrays: "dropped" (by the filter) and "from_profile" (samples kept from the solo profile)."""
        b = self.binding
        out, profiled = chain_samples(self.chain_records(upto_round), len(b.catalog_names), b.threads,
                                      len(b.metrics), PROFILE_KEY)
        keep = np.ones(len(out["round"]), bool)
        if filtered and len(keep):
            ki, _, units = b.key_index(self.config.key_metrics)
            keep = spread_filter(out, ki, units, self.config.spread_threshold, self.round_done)
        out = {k: v[keep] for k, v in out.items()}
        out["dropped"] = int((~keep).sum())
        out["from_profile"] = int(profiled[keep].sum())
        return out

    def dataset(self) -> Dataset:
        if self.binding is None:
            raise CampaignError(f"{self.root}: the campaign has not profiled anything yet (no host.json)")
        s, b = self.samples(), self.binding
        return Dataset(prev_action=s["prev_action"], action=s["action"], prev_obs=s["prev_obs"], obs=s["obs"],
                       obs_spread=s["obs_spread"], round=s["round"], metrics=b.metrics,
                       catalog_names=b.catalog_names, catalog_hash=b.catalog_hash,
                       window_s=self.config.window_s, host_fingerprint=b.fingerprint, simulated=b.simulated,
                       provenance={"kind": "campaign", "campaign": str(self.root.resolve()),
                                   "strategy": self.config.strategy, "rounds": self.next_round(),
                                   "dropped_unstable": s["dropped"], "from_profile": s["from_profile"],
                                   "config": json.loads(json.dumps(dataclasses.asdict(self.config)))})

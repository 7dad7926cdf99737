"""SamplerSet: the enabled samplers as one instrument (the contract in docs/design.md).

    samplers = SamplerSet.from_config(cfg, hostpaths)   # probes every enabled sampler once
    samplers.schema()         -> list[MetricSpec]        # ordered; fixed for the set's lifetime
    raw = samplers.read()     -> RawSample               # raw counters + monotonic_ns
    samplers.derive(prev, cur) -> float32 [N]            # pure; NaN where unavailable/failed
    samplers.states()         -> {name: {"state", "reason", "errors", "no_data", "reads", "read_seconds"}}

Recording stores RawSamples (``RawSample.to_dict``) with the schema; replay calls
``derive_values(schema, prev, cur)``, the same function ``SamplerSet.derive`` uses.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from mimesys.errors import ConfigError
from mimesys.metrics import Availability, MetricSpec

from mimesys.hostpaths import HostPaths
from . import registry
from .base import NoData, Raw, Sampler
from .registry import SamplersConfig

log = logging.getLogger(__name__)


RAW_SAMPLE_VERSION = 1


@dataclass
class RawSample:
    """One tick: each sampler's raw counters (None = no data / failing this tick).

    ``to_dict`` is plain msgpack/JSON data with a version ("v"); readers accept every
    version up to RAW_SAMPLE_VERSION and ignore keys they do not know.
    """

    monotonic_ns: int
    readings: dict[str, Raw | None] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"v": RAW_SAMPLE_VERSION, "monotonic_ns": self.monotonic_ns,
                "readings": {k: (None if v is None else {n: (list(x) if isinstance(x, tuple) else x)
                                                          for n, x in v.items()})
                             for k, v in self.readings.items()}}

    @classmethod
    def from_dict(cls, d: Mapping) -> "RawSample":
        v = d.get("v", 1)
        if not isinstance(v, int) or not 1 <= v <= RAW_SAMPLE_VERSION:
            raise ValueError(f"raw sample version {v!r} not supported (this build reads 1..{RAW_SAMPLE_VERSION})")
        return cls(int(d["monotonic_ns"]), {k: (None if r is None else dict(r)) for k, r in d["readings"].items()})


class _Compiled:
    """Schema bookkeeping shared by live derive and replay: metric -> column, per sampler."""

    def __init__(self, schema: list[MetricSpec]):
        self.schema = list(schema)
        self.n = len(schema)
        self.columns: dict[str, dict[str, int]] = {}
        for i, m in enumerate(schema):
            if m.available:
                self.columns.setdefault(m.source, {})[m.name] = i


def derive_values(schema: list[MetricSpec] | _Compiled, prev: RawSample, cur: RawSample,
                  errors: dict[str, str] | None = None) -> np.ndarray:
    """float32 [N] in schema order from two raw samples; NaN where unavailable or missing.

    Pure apart from ``errors``, which (when given) collects sampler name -> message for a
    derivation that raised; that sampler's columns stay NaN.
    """
    comp = schema if isinstance(schema, _Compiled) else _Compiled(schema)
    out = np.full(comp.n, np.nan, dtype=np.float32)
    elapsed_s = (cur.monotonic_ns - prev.monotonic_ns) / 1e9
    if elapsed_s <= 0:
        return out
    for name, cols in comp.columns.items():
        a, b = prev.readings.get(name), cur.readings.get(name)
        if a is None or b is None:
            continue
        try:
            values = registry.get(name).derive(a, b, elapsed_s)
        except Exception as e:  # one bad derivation never takes the others down
            if errors is not None:
                errors[name] = f"{type(e).__name__}: {e}"
            continue
        for metric, i in cols.items():
            v = values.get(metric)
            if v is not None:
                out[i] = v
    return out


# Every value "state" can take (a fixed set: /metrics exposes each as its own series).
SAMPLER_STATES = ("ok", "no_data", "failing", "unsupported", "permission_denied")


class _State:
    __slots__ = ("probe_state", "probe_reason", "last", "reason", "errors", "no_data", "reads", "read_s")

    def __init__(self, probe_state: str, probe_reason: str):
        self.probe_state, self.probe_reason = probe_state, probe_reason
        self.last, self.reason, self.errors, self.no_data = "ok", "", 0, 0
        self.reads, self.read_s = 0, 0.0   # reads attempted and the seconds they took (/metrics)


class SamplerSet:
    def __init__(self, samplers: list[Sampler], specs: dict[str, list[MetricSpec]]):
        self._samplers = samplers
        self._schema = [m for s in samplers for m in specs[s.name]]
        self._compiled = _Compiled(self._schema)
        self._state: dict[str, _State] = {}
        for s in samplers:
            self._state[s.name] = _State(*_probe_state(specs[s.name]))
        # Only samplers with something available are read each tick.
        self._active = [s for s in samplers if self._state[s.name].probe_state == "ok"]

    # -- construction ---------------------------------------------------------
    @classmethod
    def from_config(cls, cfg: SamplersConfig | None, hostpaths: HostPaths | None = None) -> "SamplerSet":
        """Probe every enabled sampler once. An explicitly enabled sampler with nothing
        available is a ConfigError naming the kernel's reasons."""
        cfg = cfg or SamplersConfig()
        hp = hostpaths or HostPaths.from_env()
        chosen: list[Sampler] = []
        specs: dict[str, list[MetricSpec]] = {}
        try:
            for name, s_cls in registry.samplers().items():
                en = cfg.enable_of(name)
                if en is False or (en is None and not s_cls.default_enabled):
                    continue
                s = s_cls(hp, cfg.options_of(name))
                chosen.append(s)
                specs[name] = _checked(s, s.probe())
                if en is True and not any(m.available for m in specs[name]):
                    reasons = sorted({m.reason for m in specs[name]}) or ["it reports no metrics"]
                    raise ConfigError(f"samplers.{name}.enabled = true, but this host cannot provide it: "
                                      + "; ".join(reasons))
        except BaseException:
            for s in chosen:
                s.close()
            raise
        return cls(chosen, specs)

    # -- the contract ---------------------------------------------------------
    def schema(self) -> list[MetricSpec]:
        return list(self._schema)

    def read(self) -> RawSample:
        """Read every active sampler now. A sampler that raises is failing this tick."""
        readings = {s.name: _read_one(s, self._state[s.name]) for s in self._active}
        # Stamped after the reads: all sources are read within well under a millisecond.
        return RawSample(time.monotonic_ns(), readings)

    def derive(self, prev: RawSample, cur: RawSample) -> np.ndarray:
        errors: dict[str, str] = {}
        out = derive_values(self._compiled, prev, cur, errors)
        for name, msg in errors.items():
            st = self._state[name]
            st.errors += 1
            st.last, st.reason = "failing", msg
        return out

    def serving_on(self, ports) -> None:
        """Tell every sampler the agent's listening ports (its own traffic is not the workload)."""
        for s in self._active:
            s.serving_on(ports)

    def states(self) -> dict[str, dict]:
        out = {}
        for name, st in self._state.items():
            if st.probe_state != "ok":
                state, reason = st.probe_state, st.probe_reason
            else:
                state, reason = st.last, st.reason or st.probe_reason
            out[name] = {"state": state, "reason": reason, "errors": st.errors, "no_data": st.no_data,
                         "reads": st.reads, "read_seconds": st.read_s}
        return out

    def close(self) -> None:
        for s in self._samplers:
            try:
                s.close()
            except Exception as e:
                log.warning("closing sampler %s: %s", s.name, e)

    def __enter__(self) -> "SamplerSet":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read_one(s: Sampler, st: _State) -> Raw | None:
    """One sampler's reading this tick (None when it has none), its state and counters updated."""
    t0 = time.perf_counter()
    raw = None
    try:
        raw = s.read()
        st.last, st.reason = "ok", ""
    except NoData as e:
        st.no_data += 1
        st.last, st.reason = "no_data", str(e)
        log.debug("sampler %s: no data: %s", s.name, e)
    except Exception as e:
        st.errors += 1
        st.last, st.reason = "failing", f"{type(e).__name__}: {e}"
        if st.errors <= 3 or st.errors % 100 == 0:
            log.warning("sampler %s failing (%d errors): %s", s.name, st.errors, st.reason)
    st.reads += 1
    st.read_s += time.perf_counter() - t0
    return raw


def _checked(s: Sampler, specs: list[MetricSpec]) -> list[MetricSpec]:
    for m in specs:
        if m.source != s.name:
            raise RuntimeError(f"sampler {s.name} returned metric {m.name} with source {m.source!r}")
    return specs


def _probe_state(specs: list[MetricSpec]) -> tuple[str, str]:
    """ok if anything is available (reason lists what is not); else the first cause."""
    missing = [m for m in specs if not m.available]
    if len(missing) < len(specs):
        reason = ""
        if missing:
            reason = f"{len(missing)} of {len(specs)} metrics unavailable: " + "; ".join(
                sorted({f"{m.reason}" for m in missing}))
        return "ok", reason
    if not specs:
        return "unsupported", "no metrics"
    denied = [m for m in specs if m.availability is Availability.PERMISSION_DENIED]
    first = denied[0] if denied else specs[0]
    return first.availability.value, first.reason

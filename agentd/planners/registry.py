"""Every way an agent can turn a target trace into a plan, registered by name, behind the one
Generator interface (agentd/generate.py): `generate(trace, *, seed, progress=None) -> Plan`.

A planner is named by a spec:

    DIR                       the kind is read from DIR/manifest.json (a model export → diffusion,
                              a forward model → inverse)
    KIND:DIR                  diffusion | inverse | inverse-first-order
    select:MODEL_DIR,FWD_DIR  the diffusion model proposes candidates per window, the forward
                              model keeps the one it predicts closest to the target

Callers (`mimesys-agent generate`, `mimesys evaluate`, the demo, /v1/generate) never branch on
the kind. Every planner comes back behind the no-invented-activity guard (agentd/activity.py):
no plan runs a stressor that drives a resource in a window where its target left that resource
idle. The controller adds its dataset baselines (nearest, knn, single) on top of these.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from .errors import ConfigError, ValidationError

LOADERS: dict[str, Callable[..., object]] = {}


def planner(kind: str):
    def register(fn):
        LOADERS[kind] = fn
        return fn
    return register


@planner("diffusion")
def _diffusion(paths: list[str], **kw):
    from .generate import load_generator
    return load_generator(paths[0], **{k: v for k, v in kw.items() if k in ("steps", "guidance", "eta", "threads")})


@planner("inverse")
def _inverse(paths: list[str], **kw):
    from .forward.inverse import InversePlanner
    return InversePlanner(paths[0])


@planner("inverse-first-order")
def _inverse_first(paths: list[str], **kw):
    from .forward.inverse import InversePlanner, InverseSettings
    return InversePlanner(paths[0], InverseSettings(first_order_only=True))


@planner("select")
def _select(paths: list[str], **kw):
    from .forward.select import ForwardSelect
    from .generate import load_generator
    if len(paths) != 2:
        raise ConfigError("planner 'select' takes MODEL_DIR,FORWARD_DIR (a model export and a forward model)")
    gen = load_generator(paths[0], **{k: v for k, v in kw.items() if k in ("steps", "guidance", "eta", "threads")})
    return ForwardSelect(gen, paths[1], candidates=int(kw.get("candidates") or 8))


# manifest format -> the kind a bare directory means
KIND_OF_FORMAT = {"mimesys.model-export": "diffusion", "mimesys.forward-model": "inverse"}


def kinds() -> list[str]:
    return sorted(LOADERS)


def kind_of_dir(path: Path | str) -> str:
    manifest = Path(path) / "manifest.json"
    if not manifest.is_file():
        raise ConfigError(f"{path} is not a model directory (no manifest.json; a model export or a forward model)")
    try:
        fmt = json.loads(manifest.read_text()).get("format")
    except (OSError, ValueError, AttributeError) as e:
        raise ConfigError(f"{manifest}: unreadable manifest: {e}") from None
    if fmt not in KIND_OF_FORMAT:
        raise ConfigError(f"{manifest}: format {fmt!r} is not a planner (known: {', '.join(KIND_OF_FORMAT)})")
    return KIND_OF_FORMAT[fmt]


def load_planner(spec: str | Path, **options):
    """A spec (see the module docstring) -> a Generator. options: steps, guidance, eta, threads
    (diffusion), candidates (select)."""
    spec = str(spec)
    kind, sep, rest = spec.partition(":")
    if sep and kind in LOADERS:
        paths = [p for p in rest.split(",") if p]
    else:
        paths = [spec]
        kind = kind_of_dir(spec)
    for p in paths:
        if not Path(p).is_dir():
            raise ConfigError(f"planner {spec!r}: {p} is not a directory")
    try:
        gen = LOADERS[kind](paths, **options)
    except ValidationError:
        raise
    except (KeyError, TypeError) as e:
        raise ConfigError(f"planner {spec!r}: {e}") from None
    return guarded(gen)


def guarded(gen):
    """Every planner keeps the no-invented-activity rule (agentd/activity.py), with the host's
    idle profile when it has a forward model."""
    from .activity import GuardedPlanner
    fm = getattr(gen, "model", None) or getattr(gen, "forward", None)
    return GuardedPlanner(gen, getattr(fm, "first", None))

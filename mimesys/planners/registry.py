"""Every way of turning a target trace into a plan, registered by name in one table: the
kinds, their command-line help and the every-kind lists callers need all come from here.

A planner is named by a spec:

    DIR                       the kind is read from DIR/manifest.json (a model export → diffusion,
                              a forward model → inverse)
    KIND:INPUT[,INPUT]        e.g. inverse:FORWARD_DIR, select:MODEL_DIR,FORWARD_DIR
    KIND                      a kind whose inputs come as options (load_planner(..., dataset=DS))
    GROUP:KIND                the same, the group spelled out (baseline:KIND)

Callers (`mimesys-agent generate`, /v1/generate, `mimesys evaluate`, `mimesys serve`, the demo)
never branch on the kind and never name one. Every planner comes back behind the
no-invented-activity guard (mimesys/activity.py): no plan runs a stressor that drives a
resource in a window where its target left that resource idle.

The agent's kinds are registered at the bottom of this file; the controller registers its
dataset baselines on top of them when it is imported (controller/baselines/), so an agent
never loads torch or controller code. Loaders are imported on first use: registering costs
nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import ConfigError, ValidationError
from ..lazyload import load_target


@dataclass(frozen=True)
class Input:
    """What a planner is built from."""

    metavar: str
    what: str
    directory: bool = True
    flag: str | None = None        # the command-line option that also carries it, where there is one


INPUTS = {
    "model": Input("MODEL_DIR", "a model export (`mimesys export`)"),
    "forward": Input("FORWARD_DIR", "a forward model (`mimesys forward fit`)"),
    "dataset": Input("DATASET", "a dataset (`mimesys dataset build`)", directory=False, flag="--dataset"),
}


@dataclass(frozen=True)
class Kind:
    name: str
    load: str | Callable       # function(*inputs, **options) -> a Generator, or "module:function" (imported on use)
    inputs: tuple[str, ...]    # keys of INPUTS, in the spec's order
    about: str                 # one line: what the planner does
    options: tuple[str, ...] = ()
    manifest_format: str | None = None   # a bare directory with this manifest format is this kind
    agent: bool = True         # an agent can run it (no controller, no torch)
    group: str | None = None   # e.g. "baseline": GROUP:KIND names it, and callers can ask for the group
    variant: bool = False      # a variant of another kind (an ablation): not in every-kind lists
    showcase: bool = False     # in the short list a demo replays (the learned generator, the planner it
                               # is measured against, the simplest baseline)

    @property
    def form(self) -> str:
        return f"{self.name}:{','.join(INPUTS[i].metavar for i in self.inputs)}"


KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    for i in kind.inputs:
        if i not in INPUTS:
            raise ValueError(f"planner {kind.name!r}: unknown input {i!r}")
    KINDS[kind.name] = kind
    return kind


def kinds(*, agent_only: bool = False, group: str | None = None) -> list[str]:
    """Registered kinds, in registration order."""
    return [k.name for k in KINDS.values() if (k.agent or not agent_only) and (group is None or k.group == group)]


def groups() -> list[str]:
    return list(dict.fromkeys(k.group for k in KINDS.values() if k.group))


def help_text(*, agent_only: bool = False) -> str:
    """The PLANNER part of a command's help, from the table."""
    ks = [KINDS[n] for n in kinds(agent_only=agent_only)]
    dirs = " or ".join(INPUTS[i].what.split(" (")[0] for i in dict.fromkeys(
        k.inputs[0] for k in ks if k.manifest_format))
    text = f"{dirs} directory (its manifest says which), or KIND:INPUT[,INPUT] with " + \
        "; ".join(f"{k.form} ({k.about})" for k in ks if not k.group)
    for g in dict.fromkeys(k.group for k in ks if k.group):
        members = [k for k in ks if k.group == g]
        flags = sorted({INPUTS[i].flag for k in members for i in k.inputs if INPUTS[i].flag})
        text += f"; the {g}s " + ", ".join(f"{k.name} ({k.about})" for k in members) + \
            f", as {members[0].name}:{','.join(INPUTS[i].metavar for i in members[0].inputs)}" + \
            (f" or by name with {', '.join(flags)}" if flags else "")
    return text + "."


def specs_for(available: dict[str, str | Path], *, group: str | None = None,
              showcase: bool = False) -> dict[str, str]:
    """Every kind (variants left out; with `showcase`, only the showcase kinds) that the
    available inputs can build -> its spec, in registration order: an evaluation's every-method
    list, the demo's short one."""
    out = {}
    for k in KINDS.values():
        if k.variant or (group is not None and k.group != group) or (showcase and not k.showcase):
            continue
        if all(i in available for i in k.inputs):
            out[k.name] = f"{k.name}:{','.join(str(available[i]) for i in k.inputs)}"
    return out


def kind_of_dir(path: Path | str) -> str:
    manifest = Path(path) / "manifest.json"
    if not manifest.is_file():
        raise ConfigError(f"{path} is not a model directory (no manifest.json; a model export or a forward model)")
    try:
        fmt = json.loads(manifest.read_text()).get("format")
    except (OSError, ValueError, AttributeError) as e:
        raise ConfigError(f"{manifest}: unreadable manifest: {e}") from None
    by_format = {k.manifest_format: k.name for k in KINDS.values() if k.manifest_format}
    if fmt not in by_format:
        raise ConfigError(f"{manifest}: format {fmt!r} is not a planner (known: {', '.join(by_format)})")
    return by_format[fmt]


def _parse(spec: str, options: dict) -> tuple[Kind, list]:
    """spec -> (kind, its inputs in order)."""
    head, sep, rest = spec.partition(":")
    if sep and head in KINDS:
        kind, args = KINDS[head], [p for p in rest.split(",") if p]
        if len(args) != len(kind.inputs):
            raise ConfigError(f"planner {kind.name!r} takes {kind.form.split(':', 1)[1]} "
                              f"({' and '.join(INPUTS[i].what for i in kind.inputs)}), got {spec!r}")
        return kind, args
    if sep and head in groups():
        members = kinds(group=head)
        if rest not in members:
            raise ConfigError(f"unknown {head} {rest!r}; known: {', '.join(members)}")
        head, sep = rest, ""
    if not sep and head in KINDS:
        kind = KINDS[head]
        missing = [i for i in kind.inputs if options.get(i) is None]
        if missing:
            how = [INPUTS[i].flag for i in missing if INPUTS[i].flag]
            raise ConfigError(f"planner {kind.name!r} is built from {' and '.join(INPUTS[i].what for i in missing)}: "
                              f"write {kind.form}" + (f", or pass {' and '.join(how)}" if how else ""))
        return kind, [options[i] for i in kind.inputs]
    return KINDS[kind_of_dir(spec)], [spec]


def load_planner(spec: str | Path, **options):
    """A spec (see the module docstring) -> a Generator behind the activity guard. options:
    the kinds' own (steps, guidance, eta, threads, candidates, k, stressor; None = the
    planner's default; a kind ignores the others) and inputs for a kind named bare (dataset)."""
    spec = str(spec)
    kind, args = _parse(spec, options)
    for i, a in zip(kind.inputs, args):
        if isinstance(a, (str, Path)) and not (Path(a).is_dir() if INPUTS[i].directory else Path(a).is_file()):
            raise ConfigError(f"planner {spec!r}: {a} is not a {'directory' if INPUTS[i].directory else 'file'}")
    loader = kind.load
    if isinstance(loader, str):
        loader = load_target(loader)
    try:
        gen = loader(*args, **{k: options[k] for k in kind.options if options.get(k) is not None})
    except ValidationError:
        raise
    except (KeyError, TypeError) as e:
        raise ConfigError(f"planner {spec!r}: {e}") from None
    return guarded(gen)


def guarded(gen):
    """Every planner keeps the no-invented-activity rule (mimesys/activity.py), with the host's
    idle profile when it has a forward model, and every plan holds the memory its target held
    (memory.py)."""
    from ..activity import GuardedPlanner
    from .memory import plan_memory
    fm = getattr(gen, "model", None) or getattr(gen, "forward", None)
    return GuardedPlanner(gen, getattr(fm, "first", None), finish=plan_memory)


# -- the agent's planners (NumPy and ONNX Runtime) ---------------------------------------
def _inverse(forward_dir, **_):
    from .inverse import InversePlanner
    return InversePlanner(forward_dir)


def _inverse_first_order(forward_dir, **_):
    from .inverse import InversePlanner, InverseSettings
    return InversePlanner(forward_dir, InverseSettings(first_order_only=True))


def _select(model_dir, forward_dir, *, candidates: int = 8, **sampler):
    from .diffusion import load_generator
    from .select import ForwardSelect
    return ForwardSelect(load_generator(model_dir, **sampler), forward_dir, candidates=int(candidates))


_SAMPLER = ("steps", "guidance", "eta", "threads")

register(Kind("diffusion", "mimesys.planners.diffusion:load_generator", ("model",),
              "the diffusion model samples each window", options=_SAMPLER,
              manifest_format="mimesys.model-export", showcase=True))
register(Kind("inverse", _inverse, ("forward",), "the forward model inverted",
              manifest_format="mimesys.forward-model", showcase=True))
register(Kind("inverse-first-order", _inverse_first_order, ("forward",), "the same, first order only",
              variant=True))
register(Kind("select", _select, ("model", "forward"),
              "the model proposes candidates, the forward model keeps the closest", options=(*_SAMPLER, "candidates")))

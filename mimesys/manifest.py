"""Reading the manifest.json of a model directory (a diffusion export, a forward model): one
reader, so every kind refuses the same things with the same words."""

from __future__ import annotations

import json
from pathlib import Path

from .errors import NotImplementedYet, ValidationError

MANIFEST = "manifest.json"


def read_manifest(model_dir: Path | str, *, fmt: str, version: int, required: tuple[str, ...], what: str,
                  hint: str) -> dict:
    """model_dir/manifest.json as a dict, checked: format `fmt`, `version`, the `required` keys.
    `what` names the kind in errors ("model export"); `hint` says how to make one."""
    path = Path(model_dir) / MANIFEST
    if not path.is_file():
        raise NotImplementedYet(f"{model_dir}: no {MANIFEST} ({hint})")
    try:
        m = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValidationError(f"{path}: unreadable manifest: {e}") from e
    if not isinstance(m, dict) or m.get("format") != fmt:
        raise ValidationError(f"{path}: not a mimesys {what} (format={m.get('format') if isinstance(m, dict) else None!r})")
    if m.get("version") != version:
        raise ValidationError(f"{path}: {what} version {m.get('version')} not supported (this build reads {version})")
    for key in required:
        if key not in m:
            raise ValidationError(f"{path}: manifest lacks {key!r}")
    return m

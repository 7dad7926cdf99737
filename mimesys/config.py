"""The typed configuration reader every TOML file of the project goes through.

A file is read with `read_toml` (an unreadable or malformed file is a ConfigError naming it);
`check_known` refuses names a table or an override does not know, listing the valid ones;
a table becomes a frozen dataclass with `build_section`: an unknown key fails naming the file
and listing the valid keys, a value of the wrong type names file, table and key (`coerce`
checks it against the field's annotation; "auto" is None for an optional field), and the
section's own `validate(where)` checks what types cannot say. The agent's config
(agentd/config.py), the campaign's (controller/campaign/campaign.py) and the stressor catalog
(mimesys/catalog.py) are read this way.
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, Mapping

from .errors import ConfigError


def check_known(given, valid, where: str, *, noun: str = "key") -> None:
    """An unknown name in `given` (a table's keys, overrides) is a ConfigError that lists them
    all and the valid ones: `{where}: unknown key(s) ['x']; valid: a, b`."""
    valid = list(valid)
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise ConfigError(f"{where}: unknown {noun}(s) {unknown}; valid: {', '.join(valid)}")


def read_toml(path: Path, what: str = "") -> dict:
    """A TOML file as a dict, or a ConfigError naming the file (and what it was meant to be)."""
    label = f"{what} " if what else ""
    try:
        return tomllib.loads(Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"{path}: cannot read {label}file: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None


def build_section(cls: type, table_name: str, table: Mapping[str, Any], origin, where_all: str):
    """`cls(**table)` with each value checked against its field, then `validate`d; `origin` maps
    (table, key) to the file that set it, for the messages."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in table.items():
        where = origin.get((table_name, key), where_all)
        if key not in fields:
            raise ConfigError(f"{where}: unknown key {table_name}.{key}; valid keys in [{table_name}]: "
                              f"{', '.join(fields)}")
        kwargs[key] = coerce(value, hints[key], f"{where}: {table_name}.{key}")
    section = cls(**kwargs)
    # Validation messages name the file that set the last key of this table.
    last = [origin[(table_name, k)] for k in table if (table_name, k) in origin]
    section.validate(last[-1] if last else where_all)
    return section


def coerce(value: Any, hint: Any, where: str):
    """Check a TOML value against a field's annotation; "auto" means None for optional fields."""
    args = typing.get_args(hint)
    optional = (typing.get_origin(hint) in (typing.Union, types.UnionType)) and type(None) in args
    if optional:
        if value == "auto":
            return None
        hint = next(a for a in args if a is not type(None))
    origin = typing.get_origin(hint)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if hint is Path:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}: expected a path string, got {value!r}")
        return Path(value)
    if origin is tuple:
        item = (typing.get_args(hint) or (int,))[0]
        if not isinstance(value, (list, tuple)) or not all(_is_a(x, item) for x in value):
            alt = ' or "auto"' if optional else ''
            raise ConfigError(f"{where}: expected a list of {_PLURAL[item]}{alt}, got {value!r}")
        return tuple(float(x) if item is float else x for x in value)
    raise TypeError(f"config field type {hint} not handled")  # a bug in this file, not in the config


_PLURAL = {int: "integers", float: "numbers", str: "strings"}


def _is_a(x: Any, item: type) -> bool:
    """A list element of a `tuple[item, ...]` field: TOML's true is not an integer, 1 is a number."""
    if isinstance(x, bool):
        return False
    return isinstance(x, (int, float)) if item is float else isinstance(x, item)


def plain(v: Any) -> Any:
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, tuple):
        return list(v)
    return v


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

"""Experiment configurations: nested dicts with scale presets and validated overrides.

A config is a plain nested dict (what `config.yaml` holds). An experiment ships a default
config and per-scale overrides; users change single keys with ``key.sub=value`` strings.
Every override is checked against the default: unknown keys and values of the wrong type
raise :class:`ConfigError`, which the command line turns into a one-line message.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import yaml


class ConfigError(ValueError):
    """Bad user input: an unknown key, a value of the wrong type, an impossible shape."""


def merge(base: Mapping[str, Any], updates: Mapping[str, Any]) -> dict:
    """Return a deep copy of ``base`` with ``updates`` merged in (nested dicts merge)."""
    out = copy.deepcopy(dict(base))
    for key, value in updates.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


ABSENT = "(absent)"
"""What :func:`differences` gives for a key one config lacks."""


def differences(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> dict[str, tuple[Any, Any]]:
    """The dotted keys where configs ``a`` and ``b`` differ (blocks compared key by key, an empty block as
    a value), each with its two values (:data:`ABSENT` for a key one of them lacks), ``a``'s keys first."""
    out = {}
    for key in {**a, **b}:
        mine, theirs = a.get(key, ABSENT), b.get(key, ABSENT)
        if isinstance(mine, Mapping) and isinstance(theirs, Mapping) and mine and theirs:
            out.update(differences(mine, theirs, f"{prefix}{key}."))
        elif key not in a or key not in b or mine != theirs:
            out[prefix + key] = (mine, theirs)
    return out


def leaves(config: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every ``(dotted key, value)`` of a nested config whose value is not a block."""
    for key, value in config.items():
        if isinstance(value, Mapping):
            yield from leaves(value, f"{prefix}{key}.")
        else:
            yield prefix + key, value


def _flat_keys(config: Mapping[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for key, value in config.items():
        keys.append(prefix + key)
        if isinstance(value, Mapping):
            keys += _flat_keys(value, prefix + key + ".")
    return keys


def coerce(key: str, value: Any, default: Any) -> Any:
    """Check ``value`` against the type of ``default``; ints are accepted for floats."""
    if default is None or value is None:
        return value
    if isinstance(default, bool) or isinstance(value, bool):
        if isinstance(default, bool) and isinstance(value, bool):
            return value
    elif isinstance(default, float) and isinstance(value, (int, float)):
        return float(value)
    elif isinstance(default, int) and isinstance(value, int):
        return value
    elif isinstance(default, str) and isinstance(value, str):
        return value
    elif isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)):
        return value
    elif isinstance(default, Mapping) and isinstance(value, Mapping):
        return value
    raise ConfigError(f"{key} expects {type(default).__name__}, got {value!r} ({type(value).__name__})")


def set_key(config: dict, dotted_key: str, value: Any) -> None:
    """Set ``config[a][b]...`` from ``"a.b"`` in place, validating key and type."""
    parts = dotted_key.split(".")
    node = config
    for depth, part in enumerate(parts):
        if not isinstance(node, dict) or part not in node:
            close = difflib.get_close_matches(dotted_key, _flat_keys(config), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown config key {dotted_key!r}{hint}")
        if depth == len(parts) - 1:
            node[part] = coerce(dotted_key, value, node[part])
        else:
            node = node[part]


def parse_assignment(text: str) -> tuple[str, Any]:
    """Split ``"key=value"``; the value is parsed by :func:`parse_value`."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set expects key=value, got {text!r}")
    return key.strip(), parse_value(key, raw)


_EXPONENT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
_SPECIAL = {"nan": math.nan, "inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "infinity": math.inf}
"""Floats as people write them, which YAML reads as strings (it wants ``.nan`` and ``.inf``)."""


def parse_value(key: str, raw: str) -> Any:
    """A command-line value parsed as YAML (``3``, ``0.1``, ``[1, 2]``, ``true``); ``1e-3``, ``nan`` and ``inf``,
    which YAML 1.1 reads as strings, are floats (a float key then takes or refuses them as any other value)."""
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as err:
        raise ConfigError(f"cannot parse value for {key!r}: {raw!r}") from err
    if isinstance(value, str) and value.lower() in _SPECIAL:
        return _SPECIAL[value.lower()]
    return float(value) if isinstance(value, str) and _EXPONENT.fullmatch(value) else value


def resolve(
    defaults: Mapping[str, Any],
    scales: Mapping[str, Mapping[str, Any]],
    scale: str,
    overrides: Iterable[str] | Mapping[str, Any] = (),
) -> dict:
    """Build the config for a run: defaults, then the scale preset, then the overrides.

    ``overrides`` is either ``["a.b=1", ...]`` strings or a ``{"a.b": 1}`` mapping.
    """
    if scale not in scales:
        raise ConfigError(f"unknown scale {scale!r}; choose from {', '.join(scales)}")
    config = merge(defaults, scales[scale])
    config["scale"] = scale
    pairs = overrides.items() if isinstance(overrides, Mapping) else map(parse_assignment, overrides)
    for key, value in pairs:
        set_key(config, key, value)
    return config


def dump(config: Mapping[str, Any]) -> str:
    """Serialise a config to YAML (keys in their natural order)."""
    return yaml.safe_dump(dict(config), sort_keys=False)

"""Every key of every experiment's config, given values of every kind: the config resolves, or is refused with
a ConfigError (one line on the command line, exit 2), never another exception."""

import math

from iclab import api, experiments
from iclab.config import ConfigError


def _leaves(config: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in config.items():
        keys += _leaves(value, f"{prefix}{key}.") if isinstance(value, dict) and value else [prefix + key]
    return keys


VALUES = [
    None,
    True,
    False,
    -3,
    -1,
    0,
    1,
    2,
    0.0,
    -0.5,
    1e-9,
    1e9,
    math.nan,
    math.inf,
    "",
    "x",
    "adam",
    [],
    [-1, 2],
    {},
]


def test_every_value_of_every_key_resolves_or_is_refused_in_one_line():
    tried = 0
    for name in experiments.names():
        for key in _leaves(api.resolved_config(name)):
            if key in ("experiment", "scale"):
                continue
            for value in VALUES:
                tried += 1
                try:
                    api.resolved_config(name, "quick", {key: value})
                except ConfigError as err:
                    assert "\n" not in str(err), (name, key, value)
    assert tried > 1000

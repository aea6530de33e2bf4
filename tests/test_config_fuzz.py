"""Every experiment's every config key, given values of every kind: the config resolves, or is refused
with a ConfigError (one line on the command line, exit 2), never another exception (property-based)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iclab import api, experiments
from iclab.config import ConfigError


def _leaves(config: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in config.items():
        keys += _leaves(value, f"{prefix}{key}.") if isinstance(value, dict) and value else [prefix + key]
    return keys


KEYS = [
    (name, key)
    for name in experiments.names()
    for key in _leaves(api.resolved_config(name))
    if key not in ("experiment", "scale")
]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, -0.5, 1e-9, 1e9, float("nan"), float("inf")]),
    st.sampled_from(["", "x", "adam"]),
    st.lists(st.integers(-2, 3), max_size=3),
    st.just({}),
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(KEYS), value=VALUES)
def test_any_value_of_any_key_resolves_or_is_refused_in_one_line(key, value):
    experiment, dotted = key
    try:
        api.resolved_config(experiment, "quick", {dotted: value})
    except ConfigError as err:
        assert "\n" not in str(err)

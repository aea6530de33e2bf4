import pytest

from iclab.config import ConfigError, parse_assignment, resolve

DEFAULTS = {"seed": 0, "train": {"steps": 10, "lr": 0.1, "clip": None}, "cov": [1.0, 2.0], "name": "a", "flag": False}
SCALES = {"quick": {}, "paper": {"train": {"steps": 1000}}}


def test_scale_then_overrides():
    config = resolve(DEFAULTS, SCALES, "paper", ["train.lr=1", "cov=[3, 4]", "train.clip=2.5", "flag=true"])
    assert config["train"] == {"steps": 1000, "lr": 1.0, "clip": 2.5}
    assert config["cov"] == [3, 4] and config["flag"] is True and config["scale"] == "paper"
    assert DEFAULTS["train"]["steps"] == 10  # defaults untouched
    assert resolve(DEFAULTS, SCALES, "quick", {"train.steps": 5})["train"]["steps"] == 5


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.stepz=5", "did you mean train.steps"),
        ("train.steps=0.5", "train.steps expects int"),
        ("train.steps=true", "expects int"),
        ("name=3", "expects str"),
        ("cov=1", "expects list"),
        ("novalue", "key=value"),
        ("seed.x=1", "unknown config key"),
    ],
)
def test_bad_overrides(override, message):
    with pytest.raises(ConfigError, match=message):
        resolve(DEFAULTS, SCALES, "quick", [override])


def test_unknown_scale_and_yaml_values():
    with pytest.raises(ConfigError, match="unknown scale"):
        resolve(DEFAULTS, SCALES, "huge")
    assert parse_assignment("a.b=[1, 2]") == ("a.b", [1, 2])
    assert parse_assignment("x=null") == ("x", None)

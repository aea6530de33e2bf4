"""lsa-linear's claims on constructed records."""

import pytest


def _setting(model_loss: float, optimum_on_prompts: float):
    """An isotropic setting whose trained LSA (one seed) and optimal predictor have these losses on the same
    evaluation prompts; the optimum's population loss is the formula's, 1.1538 (d = 5, N = 20)."""
    from iclab.experiments.lsa_linear import OPTIMUM, Setting

    losses = {("lsa-isotropic", 0): model_loss, OPTIMUM: optimum_on_prompts}
    return Setting("isotropic", "lsa-isotropic", 1.1538, 1.3, losses, {0: None}, [1.0], (None, None))


@pytest.mark.parametrize(
    "model_loss, optimum_on_prompts, holds",
    [
        (1.115, 1.110, True),  # easy prompts: below the population loss, yet 0.45% above the optimum on them
        (1.110 * 1.0299, 1.110, True),
        (1.110 * 1.0301, 1.110, False),  # just past 3% above the optimum on the same prompts
        (1.110 * 0.9699, 1.110, False),  # 3% below it: not the optimum either
    ],
)
def test_the_loss_at_the_optimum_is_paired_with_the_optimal_predictor(model_loss, optimum_on_prompts, holds):
    from iclab.experiments.lsa_linear import DEFAULTS, _loss_at_optimum_claim

    claim = _loss_at_optimum_claim(_setting(model_loss, optimum_on_prompts), DEFAULTS)
    assert claim.holds is holds and claim.id == "loss-at-optimum-isotropic"
    measured = claim.measured["0"]
    assert measured["trained"] == pytest.approx(model_loss, abs=1e-5)
    assert measured["optimum, same prompts"] == pytest.approx(optimum_on_prompts)

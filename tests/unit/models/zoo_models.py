"""Models registered by the tests only (promo_assets.models.registry.register)."""

from dataclasses import dataclass

from promo_assets.models import ModelInputError, ResponseModel
from promo_assets.models.s_learner import SLearner


class FailingModel(ResponseModel):
    """A model whose fit raises a domain error: its chain must fail alone."""

    name = "failing"
    title = "test model whose training always fails"
    source = "tests"

    def _fit_phase(self, data, phase, previous, log):
        raise ModelInputError(f"failing: campaign '{data.campaign}' has no column 'loyalty_tier' (test model)")

    @classmethod
    def _load(cls, version, root=None):
        raise ModelInputError("failing: never stored")


@dataclass(frozen=True)
class TunedParams:
    gamma: float = 1.0
    steps: int = 10
    mode: str = "fd"


class TunedModel(ResponseModel):
    """A model off by default with hyper-parameters: campaign.yaml's `models:` block selects and tunes it."""

    name = "tuned"
    title = "test model with hyper-parameters, off by default"
    source = "tests"
    default = False
    rules = {"gamma": (lambda x: x > 0, "a number > 0"), "mode": (lambda x: x in ("fd", "nes"), "'fd' or 'nes'")}

    Params = TunedParams

    def _fit_phase(self, data, phase, previous, log):
        raise ModelInputError("tuned: a test model that is never trained")

    @classmethod
    def _load(cls, version, root=None):
        raise ModelInputError("tuned: never stored")


class FlakyModel(SLearner):
    """The s_learner under another name, whose training fails while PROMO_TEST_FLAKY_FAILS is set: its
    earlier evaluation must then be marked stale, not ranked."""

    name = "flaky"
    title = "test model: s_learner that fails on demand"
    source = "tests"
    default = False

    def _fit_phase(self, data, phase, previous, log):
        import os

        if os.environ.get("PROMO_TEST_FLAKY_FAILS"):
            raise ModelInputError("flaky: failing on purpose (PROMO_TEST_FLAKY_FAILS is set)")
        fitted = super()._fit_phase(data, phase, previous, log)
        fitted.name = "flaky"
        return fitted

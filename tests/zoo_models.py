"""Models registered by the tests only (promo_assets.models.registry.register)."""

from promo_assets.models import ModelInputError, ResponseModel


class FailingModel(ResponseModel):
    """A model whose fit raises a domain error: its chain must fail alone."""

    name = "failing"
    title = "test model whose training always fails"
    source = "tests"

    def fit(self, data, config, *, phase="model", previous=None, seed=0, max_epochs=None, log=None):
        raise ModelInputError(f"failing: campaign '{data.campaign}' has no column 'loyalty_tier' (test model)")


class TunedModel(ResponseModel):
    """A model off by default with hyper-parameters: campaign.yaml's `models:` block selects and tunes it."""

    name = "tuned"
    title = "test model with hyper-parameters, off by default"
    source = "tests"
    default = False
    params = {"gamma": 1.0, "steps": 10, "mode": "fd"}

    def check_params(self, params):
        out = []
        if params["gamma"] <= 0:
            out.append(f"gamma = {params['gamma']!r} must be > 0")
        if params["mode"] not in ("fd", "nes"):
            out.append(f"mode = {params['mode']!r} must be 'fd' or 'nes'")
        return out

    def fit(self, data, config, *, phase="model", previous=None, seed=0, max_epochs=None, log=None):
        raise ModelInputError("tuned: a test model that is never trained")


class FlakyModel(ResponseModel):
    """The s_learner under another name, whose training fails while PROMO_TEST_FLAKY_FAILS is set: its
    earlier evaluation must then be marked stale, not ranked."""

    name = "flaky"
    title = "test model: s_learner that fails on demand"
    source = "tests"
    default = False

    def fit(self, data, config, *, phase="model", previous=None, seed=0, max_epochs=None, log=None):
        import os

        from promo_assets.models import registry

        if os.environ.get("PROMO_TEST_FLAKY_FAILS"):
            raise ModelInputError("flaky: failing on purpose (PROMO_TEST_FLAKY_FAILS is set)")
        fitted = registry.get("s_learner").fit(data, config, phase=phase, seed=seed, max_epochs=max_epochs, log=log)
        fitted.name = "flaky"
        return fitted

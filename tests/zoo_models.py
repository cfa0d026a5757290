"""Models registered by the tests only (promo_assets.models.registry.register)."""

from promo_assets.models import ModelInputError, ResponseModel


class FailingModel(ResponseModel):
    """A model whose fit raises a domain error: its chain must fail alone."""

    name = "failing"
    title = "test model whose training always fails"
    source = "tests"

    def fit(self, data, config, *, phase="model", previous=None, seed=0, max_epochs=None, log=None):
        raise ModelInputError(f"failing: campaign '{data.campaign}' has no column 'loyalty_tier' (test model)")

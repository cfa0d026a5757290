"""Registry entry `gnn_hazard`: the GNN + piecewise hazard model of the GNN/hazard paper (Eq. 7–10,
`promo_assets.graph.train_gnn_hazard`) as an estimator (protocol.ResponseModel).

It applies to customer–merchant campaigns only (campaign.yaml has a `merchants:` block) and reads
the customer_merchant_graph asset (`needs_graph`); `fit` raises ModelSkipped when no graph was
loaded. torch_geometric is imported inside `fit` / `load` only, so that listing the registry stays
light. Besides the model, `fit` leaves on the fitted model a `report` dict (offline metrics, errors
against the truth when simulated, predicted vs true response per level, the Fig. 4 uplift-quintile
plot) that the model's asset shows as metadata.
"""

from __future__ import annotations

from dataclasses import asdict, fields, make_dataclass
from pathlib import Path

from promo_assets.config.campaign import CampaignConfig
from promo_assets.graph import (
    GraphData,
    GraphTrainConfig,
    holdout_uplift_quintiles,
    level_curve,
    load_graph_model,
    train_gnn_hazard,
    truth_matrix,
    truth_metrics,
)
from promo_assets.graph.warehouse_io import read_truth
from promo_assets.ingestion.merchants import MerchantConfig
from promo_assets.models.base import resolve_max_epochs
from promo_assets.models.errors import ModelInputError
from promo_assets.models.protocol import (
    COUNT,
    FLAG,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    SEED,
    ModelSkipped,
    ResponseModel,
    TrainingData,
    fraction,
    is_number,
)

HEADLINE = ["auc_c", "mae_c", "mse_c", "mae_m", "mse_m", "mae_c_truth", "mse_c_truth", "mae_m_truth", "mse_m_truth"]


# gnn_hazard's hyper-parameters (campaign.yaml `models.params.gnn_hazard`): GraphTrainConfig's fields
# but the encoder and the head, which make it this model (a GNN encoder and the hazard head)
GnnHazardParams = make_dataclass(
    "GnnHazardParams", [(f.name, f.type, f.default) for f in fields(GraphTrainConfig) if f.name not in ("encoder", "head")],
    frozen=True)


class GnnHazard(ResponseModel):
    """Hyper-parameters (`promo_assets.graph.GraphTrainConfig`'s): `hidden` (node embedding width),
    `tower` (head width), `lr`, `lr_decay`, `weight_decay`, `fused_lasso` (the hazard's fused-lasso
    weight), `merchant_weight` (of the merchant loss), `dropout`, `max_epochs` (capped by
    PROMO_MAX_EPOCHS), `patience`, `validation_fraction` / `holdout_fraction` (of the graph's nodes),
    `init_marginal` (start the hazard at the marginal response), `seed`."""

    name = "gnn_hazard"
    title = "GNN + piecewise hazard: heterogeneous GraphSAGE over the customer–merchant graph, fused-lasso hazard head"
    source = "GNN/hazard paper Eq. 7–10"
    needs_graph = True
    applies = "customer–merchant campaigns (`merchants:` block, payment edges and merchant events)"
    rules = {"hidden": COUNT, "tower": COUNT, "lr": POSITIVE, "lr_decay": (lambda x: is_number(x) and 0 < x <= 1,
                                                                          "a number in (0, 1]"),
             "weight_decay": NON_NEGATIVE, "fused_lasso": NON_NEGATIVE, "merchant_weight": NON_NEGATIVE,
             "dropout": FRACTION, "max_epochs": COUNT, "patience": COUNT, "validation_fraction": FRACTION,
             "holdout_fraction": FRACTION, "init_marginal": FLAG, "seed": SEED}

    Params = GnnHazardParams

    def _check_values(self) -> list[str]:
        p = self.params
        if fraction(p.validation_fraction) and fraction(p.holdout_fraction) and \
                p.validation_fraction + p.holdout_fraction >= 1:
            return [f"validation_fraction + holdout_fraction = {p.validation_fraction + p.holdout_fraction!r}: "
                    "expected < 1 (rows must be left to train on)"]
        return []

    @classmethod
    def applies_to(cls, config: CampaignConfig) -> str | None:
        if config.merchants is not None:
            return None
        return "needs a customer–merchant campaign (campaign.yaml has no merchants: block)"

    def _fit_phase(self, data: TrainingData, phase: str, previous, log):
        config = data.config
        if data.graph is None or data.merchant_events is None or data.merchant_events.empty:
            raise ModelSkipped("no customer–merchant graph was loaded (no payment edges or merchant events)")
        campaign_dir = Path(data.campaign_dir or ".")
        mconf = MerchantConfig(config, campaign_dir / "campaign.yaml")
        customer_events = data.frame[["user_id", "level", "response", "split"]]
        if log:
            log(f"{data.campaign}: training gnn_hazard on graph {data.graph_version}: {data.graph['customer'].num_nodes} "
                f"customers, {data.graph['merchant'].num_nodes} merchants, {len(customer_events)} customer and "
                f"{len(data.merchant_events)} merchant events")
        params = {k: v for k, v in self.get_params().items() if k not in ("seed", "max_epochs")}
        try:
            graph_data = GraphData(data.graph, customer_events, data.merchant_events[["merchant_id", "level", "response"]],
                                   config.incentives, mconf.commissions)
            trained = train_gnn_hazard(graph_data, seed=self.params.seed,
                                       max_epochs=resolve_max_epochs(self.params.max_epochs), log=log, save=False, **params)
        except ValueError as exc:
            raise ModelInputError(f"gnn_hazard for campaign '{data.campaign}': {exc}") from None
        trained.report = _report(trained, data, config, mconf, campaign_dir, log)
        return trained

    @classmethod
    def _load(cls, version: str, root=None):
        return load_graph_model(version, root)

    @classmethod
    def _params_of(cls, fitted) -> dict:
        """The parameters stored with the artefact; for an artefact stored before them, its
        GraphTrainConfig (where max_epochs is the cap it trained under)."""
        if fitted.estimator:
            return super()._params_of(fitted)
        return {k: v for k, v in asdict(fitted.config).items() if k in cls.param_names()}


def _report(trained, data: TrainingData, config: CampaignConfig, mconf, campaign_dir: Path, log) -> dict:
    """Metadata of the fitted model: rows (list of dicts), text, and PNG bytes (plots)."""
    c_truth_df, m_truth_df = read_truth(campaign_dir.parent, campaign_dir.name, mconf.truth)
    ct = mt = None
    if c_truth_df is not None and m_truth_df is not None:
        try:
            ct = truth_matrix(c_truth_df, "user_id", trained.customer_ids, config.n_levels)
            mt = truth_matrix(m_truth_df, "merchant_id", trained.merchant_ids, len(mconf.commissions))
            trained.metrics.update(truth_metrics(trained.customer_values, trained.merchant_values, ct[0], mt[0],
                                                 trained.merchant_normalizer))
        except ValueError as exc:
            if log:
                log(f"truth files do not cover the graph; no truth metrics: {exc}")
            ct = mt = None
    curve = level_curve(trained.customer_values, None if ct is None else ct[0], config.incentives)
    png, uplift = holdout_uplift_quintiles(trained.customer_ids, trained.customer_sensitivity(), data.frame,
                                           None if ct is None else ct[0], config.n_levels)
    report = {
        "graph_version": data.graph_version,
        "offline_metrics": [{k: trained.metrics[k] for k in HEADLINE if k in trained.metrics}],
        "response_per_level": curve.to_dict("records"),
        "merchant_response_per_level": [
            {"level": j, "commission": float(mconf.commissions[j]), "predicted": float(trained.merchant_values[:, j].mean()),
             **({"true": float(mt[0][:, j].mean())} if mt is not None else {})}
            for j in range(len(mconf.commissions))],
        "ground_truth": ct is not None,
        "uplift_quintiles": uplift,
    }
    if png is not None:
        report["uplift_quintiles_plot"] = png
    return report

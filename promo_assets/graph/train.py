"""Full-graph training of the joint customer + merchant response model (GNN/hazard paper, Eq. 7–10).

`train_graph_model` trains any encoder (gnn | dnn | dnn_h) with any customer head
(hazard | cox | sbbm) and the merchant linear-mapping head on the joint loss of Eq. 7:

    L = L_c / n_c + merchant_weight * L_m / n_m + fused_lasso * sum_j ||w_{j+1} - w_j||_1

with L_c the censored likelihood of Eq. 9 (cross-entropy for SBBM) and L_m the squared error on the
*normalized* merchant label (sharing count / shares received in the previous days, floored at 1),
the paper's normalization that puts both sides on the same scale. The per-side means and the
penalty weight (Eq. 8 written as a penalty rather than a constraint) are our choices.
`train_gnn_hazard` is the paper's model (gnn + hazard).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
import torch
from torch_geometric.data import HeteroData

from promo_assets.core.coefficients import Coefficients
from promo_assets.core.errors import DomainError
from promo_assets.graph.data import CUSTOMER, MERCHANT, normalized_adjacency
from promo_assets.graph.metrics import customer_metrics, merchant_metrics
from promo_assets.graph.nn import ENCODERS, HEADS, GraphResponseModel, marginal_increments
from promo_assets.models.training import FullBatch, SamePass, Step, TrainingConfig, fit_torch_model
from promo_assets.store.artifacts import ArtifactFormatError, load_object, save_object

SPLITS = ("train", "validation", "holdout")
# Payload format of a stored graph model. 2: training history in the keys of the one training loop
# (`fit_torch_model`: train_loss, train_loss_c, validation_loss_c, ...). Format 1 (no "format" key:
# history keys loss, loss_c, val_c, ...) holds the same predictions and parameters and still loads.
PAYLOAD_FORMAT = 2
READABLE_FORMATS = (1, 2)


class GraphTrainingError(DomainError, ValueError):
    """Training inputs that do not fit the graph or the incentive grid."""


@dataclass
class GraphTrainConfig:
    """Hyper-parameters (paper: 64-dim embeddings, 2 GNN layers, Adam with exponential decay)."""

    encoder: str = "gnn"
    head: str = "hazard"
    hidden: int = 64
    tower: int = 128
    lr: float = 0.003
    lr_decay: float = 0.99
    weight_decay: float = 0.0
    fused_lasso: float = 1e-3
    merchant_weight: float = 1.0
    dropout: float = 0.0
    max_epochs: int = 300
    patience: int = 30
    validation_fraction: float = 0.15
    holdout_fraction: float = 0.15
    init_marginal: bool = True
    seed: int = 0

    def validate(self) -> None:
        if self.encoder not in ENCODERS:
            raise GraphTrainingError(f"encoder must be one of {ENCODERS}, got {self.encoder!r}")
        if self.head not in HEADS:
            raise GraphTrainingError(f"head must be one of {HEADS}, got {self.head!r}")
        if self.max_epochs < 1:
            raise GraphTrainingError(f"max_epochs must be >= 1, got {self.max_epochs}")
        if not 0 <= self.validation_fraction < 1 or not 0 <= self.holdout_fraction < 1:
            raise GraphTrainingError("validation_fraction and holdout_fraction must be in [0, 1)")
        if self.validation_fraction + self.holdout_fraction >= 1:
            raise GraphTrainingError("validation_fraction + holdout_fraction must leave rows to train on")


@dataclass
class TrainedGraphModel:
    """A trained joint model with its predictions for every node of the graph it was trained on.

    `customer_values[i, j]`: predicted redemption probability of customer `customer_ids[i]` at
    coupon level j; `merchant_values[i, j]`: predicted sharing count of merchant `merchant_ids[i]`
    at commission level j (de-normalized). Costs follow the 'redeemed' rule: amount x response.
    """

    name: str
    config: GraphTrainConfig
    customer_ids: np.ndarray
    merchant_ids: np.ndarray
    incentives: np.ndarray
    commissions: np.ndarray
    customer_values: np.ndarray
    merchant_values: np.ndarray
    merchant_normalizer: np.ndarray
    metrics: dict[str, Any]
    history: list[dict[str, float]]
    state_dict: dict[str, dict[str, torch.Tensor]] = field(repr=False)  # best 'customer' / 'merchant' states
    version: str | None = None
    estimator: dict[str, Any] | None = None  # the registered model's parameters and phase (models.protocol)

    def predict_customers(self) -> Coefficients:
        """Coefficients(response N_c x K, cost N_c x K) for `customer_ids` (Eq. 10 scores; cost =
        incentive x response)."""
        return Coefficients(self.customer_values, self.customer_values * self.incentives[None, :])

    def predict_merchants(self) -> Coefficients:
        """Coefficients(response N_m x K_m sharing counts, cost = commission x count) for `merchant_ids`."""
        return Coefficients(self.merchant_values, self.merchant_values * self.commissions[None, :])

    def predict(self, frame: pd.DataFrame) -> Coefficients:
        """Coefficients(response, cost) for the rows of `frame` (its `user_id` column), looked up in the graph.

        The model is transductive: a user_id absent from the training graph raises GraphTrainingError.
        """
        if "user_id" not in frame.columns:
            raise GraphTrainingError("predict needs a 'user_id' column")
        idx = pd.Index(self.customer_ids).get_indexer(frame["user_id"].astype(str))
        if (idx < 0).any():
            missing = frame["user_id"].astype(str)[idx < 0].head(3).tolist()
            raise GraphTrainingError(f"{int((idx < 0).sum())} user(s) are not in the graph, e.g. {missing}")
        response, cost = self.predict_customers()
        return Coefficients(response[idx], cost[idx])

    def customer_sensitivity(self) -> np.ndarray:
        """Predicted uplift f(r_K) - f(r_1) per customer (the incentive sensitivity used for Fig. 4)."""
        return self.customer_values[:, -1] - self.customer_values[:, 0]

    def coefficients(self, side: str = "customer") -> pd.DataFrame:
        """Long table of the predicted coefficients: id, level, incentive, response, cost."""
        if side == "customer":
            ids, values, costs, amounts, col = self.customer_ids, *self.predict_customers(), self.incentives, "user_id"
        elif side == "merchant":
            ids, values, costs, amounts, col = self.merchant_ids, *self.predict_merchants(), self.commissions, "merchant_id"
        else:
            raise GraphTrainingError(f"side must be 'customer' or 'merchant', got {side!r}")
        n, k = values.shape
        return pd.DataFrame(
            {
                col: np.repeat(ids, k),
                "level": np.tile(np.arange(k), n),
                "incentive": np.tile(amounts, n),
                "response": values.ravel(),
                "cost": costs.ravel(),
            }
        )

    def payload(self) -> dict[str, Any]:
        """What `save` stores (all plain arrays / dicts)."""
        return {
            "format": PAYLOAD_FORMAT,
            "name": self.name,
            "config": asdict(self.config),
            "customer_ids": self.customer_ids,
            "merchant_ids": self.merchant_ids,
            "incentives": self.incentives,
            "commissions": self.commissions,
            "customer_values": self.customer_values,
            "merchant_values": self.merchant_values,
            "merchant_normalizer": self.merchant_normalizer,
            "metrics": self.metrics,
            "history": self.history,
            "state_dict": self.state_dict,
            **({"estimator": self.estimator} if self.estimator is not None else {}),
        }

    def save(self, root: Path | None = None) -> str:
        """Store the model in the artefact store (kind 'model'); sets and returns `version`."""
        self.version, _ = save_object(self.payload(), "model", root)
        return self.version

    @classmethod
    def from_payload(cls, payload: dict[str, Any], version: str | None = None) -> "TrainedGraphModel":
        payload = dict(payload)
        fmt = payload.pop("format", 1)
        if fmt not in READABLE_FORMATS:
            raise GraphTrainingError(
                f"graph model {version or payload.get('name')!r} was stored in payload format {fmt!r}; this version "
                f"reads formats {list(READABLE_FORMATS)}: re-materialize gnn_hazard_model to retrain it"
            )
        try:
            payload["config"] = GraphTrainConfig(**payload["config"])
            return cls(**payload, version=version)
        except TypeError as exc:
            raise GraphTrainingError(
                f"graph model {version or payload.get('name')!r} does not fit this version's model ({exc}): "
                "re-materialize gnn_hazard_model to retrain it"
            ) from None


def _as_levels(name: str, levels: Sequence[float]) -> np.ndarray:
    arr = np.asarray(list(levels), dtype=float)
    if arr.ndim != 1 or arr.size < 2 or np.any(np.diff(arr) <= 0) or np.any(arr < 0):
        raise GraphTrainingError(f"{name} must be >= 2 ascending non-negative amounts, got {levels!r}")
    return arr


def _rows(
    events: pd.DataFrame, id_col: str, ids: np.ndarray, n_levels: int, side: str, cfg: GraphTrainConfig
) -> dict[str, np.ndarray]:
    """Node index, level, response and split of each labelled row."""
    missing = {id_col, "level", "response"} - set(events.columns)
    if missing:
        raise GraphTrainingError(f"{side} events need columns {id_col}, level, response; missing {sorted(missing)}")
    node = pd.Index(ids).get_indexer(events[id_col].astype(str))
    if (node < 0).any():
        ex = events[id_col].astype(str)[node < 0].head(3).tolist()
        raise GraphTrainingError(f"{int((node < 0).sum())} {side} event(s) name nodes missing from the graph, e.g. {ex}")
    level = pd.to_numeric(events["level"], errors="coerce").to_numpy()
    if np.any(~np.isfinite(level)) or np.any((level < 0) | (level >= n_levels)) or np.any(level != np.round(level)):
        raise GraphTrainingError(f"{side} events: 'level' must be integers in 0..{n_levels - 1}")
    response = pd.to_numeric(events["response"], errors="coerce").to_numpy(dtype=float)
    if np.any(~np.isfinite(response)) or np.any(response < 0):
        raise GraphTrainingError(f"{side} events: 'response' must be finite and >= 0")
    if side == "customer" and np.any((response != 0) & (response != 1)):
        raise GraphTrainingError("customer events: 'response' must be 0/1 redemptions for the hazard likelihood")
    if "split" in events.columns:
        split = events["split"].astype(str).to_numpy()
        bad = ~np.isin(split, SPLITS)
        if bad.any():
            raise GraphTrainingError(f"{side} events: 'split' must be one of {SPLITS}, got {sorted(set(split[bad]))[:3]}")
    else:  # node-level random split (the paper: 85% of customers/merchants for training)
        rng = np.random.default_rng([cfg.seed, 1 if side == "customer" else 2])
        u = rng.random(len(ids))[node]
        split = np.where(
            u < cfg.holdout_fraction, "holdout", np.where(u < cfg.holdout_fraction + cfg.validation_fraction, "validation", "train")
        )
    if not (split == "train").any():
        raise GraphTrainingError(f"{side} events: no rows in the 'train' split")
    return {"node": node.astype(np.int64), "level": level.astype(np.int64), "response": response, "split": split}


@dataclass(frozen=True)
class GraphData:
    """What a graph model learns from: the graph of `build_graph`, the customer RCT rows (user_id,
    level, response 0/1, optional split in train/validation/holdout; without it customers are split
    at random by node), the merchant RCT rows (merchant_id, level, response = sharing count, optional
    split), the coupon amounts per level and the commission amounts per level."""

    graph: HeteroData
    customer_events: pd.DataFrame
    merchant_events: pd.DataFrame
    incentives: Sequence[float]
    commissions: Sequence[float]


def train_graph_model(
    data: GraphData,
    config: GraphTrainConfig | None = None,
    *,
    log: Callable[[str], None] | None = None,
    save: bool = True,
    artifacts_root: Path | None = None,
) -> TrainedGraphModel:
    """Train one (encoder, head) combination with full-graph batches on CPU, on `data` (GraphData). Early stopping is per side: the
    customer predictions come from the parameters of the epoch with the best customer validation
    loss, the merchant predictions from the best merchant epoch (our choice: the customer side
    overfits in far fewer epochs than the merchant side); training stops when neither improved for
    `patience` epochs. Without validation rows the training loss is monitored. Returns a TrainedGraphModel with predictions for every node, label
    metrics on the holdout rows (validation when there is no holdout) and, when `save`, a version
    from the artefact store. `log` gets one line per 10 epochs.
    """
    cfg = config or GraphTrainConfig()
    cfg.validate()
    graph, customer_events, merchant_events = data.graph, data.customer_events, data.merchant_events
    incentives, commissions = data.incentives, data.commissions
    say = log or (lambda _msg: None)
    r_c = _as_levels("incentives", incentives)
    r_m = _as_levels("commissions", commissions)
    c_ids, m_ids = graph[CUSTOMER].ids, graph[MERCHANT].ids
    c_rows = _rows(customer_events, "user_id", c_ids, r_c.size, "customer", cfg)
    m_rows = _rows(merchant_events, "merchant_id", m_ids, r_m.size, "merchant", cfg)
    norm = graph[MERCHANT].normalizer.numpy().astype(float)
    m_rows["target"] = m_rows["response"] / norm[m_rows["node"]]

    torch.manual_seed(cfg.seed)
    x_c, x_m = graph[CUSTOMER].x.float(), graph[MERCHANT].x.float()
    hist_c, hist_m = graph[CUSTOMER].history.float(), graph[MERCHANT].history.float()
    adj = normalized_adjacency(graph) if cfg.encoder == "gnn" else None
    model = GraphResponseModel(cfg, (x_c.shape[1], x_m.shape[1]), torch.tensor(r_c), torch.tensor(r_m),
                               history_dim=hist_c.shape[1])

    def tensors(rows, key, split):
        sel = rows["split"] == split
        return (
            torch.from_numpy(rows["node"][sel]),
            torch.from_numpy(rows["level"][sel]),
            torch.from_numpy(rows[key][sel].astype(np.float32)),
        )

    c_tr, c_va = tensors(c_rows, "response", "train"), tensors(c_rows, "response", "validation")
    m_tr, m_va = tensors(m_rows, "target", "train"), tensors(m_rows, "target", "validation")
    c_mon = c_va if len(c_va[0]) else c_tr  # without validation rows the training loss is monitored
    m_mon = m_va if len(m_va[0]) else m_tr

    if cfg.init_marginal:
        model.customer_head.init_from_marginal(marginal_increments(c_tr[1], c_tr[2], r_c.size))

    def side_losses(h_c, h_m, c, m):
        lc = model.customer_head.loss(h_c[c[0]], c[1], c[2]) / max(len(c[0]), 1)
        lm = model.merchant_head.loss(h_m[m[0]], m[1], m[2]) / max(len(m[0]), 1)
        return lc, lm

    def full_graph_loss(module, batch, step) -> Step:
        """One full-graph batch: the joint loss, and each side's validation loss of the same pass."""
        h_c, h_m = module.embed(x_c, x_m, adj, hist_c, hist_m)
        lc, lm = side_losses(h_c, h_m, c_tr, m_tr)
        with torch.no_grad():
            vc, vm = side_losses(h_c, h_m, c_mon, m_mon)
        objective = lc + cfg.merchant_weight * lm + cfg.fused_lasso * module.customer_head.penalty()
        return Step(objective, float(objective.detach()),
                    train={"train_loss_c": lc.item(), "train_loss_m": lm.item()},
                    monitored={"validation_loss_c": vc.item(), "validation_loss_m": vm.item()})

    # per-side early stopping: each side keeps the parameters of its best validation epoch
    loop = TrainingConfig(max_epochs=cfg.max_epochs, lr=cfg.lr, weight_decay=cfg.weight_decay,
                          patience=cfg.patience, min_delta=1e-6, grad_clip=None, lr_decay=cfg.lr_decay,
                          log_every=10)
    t0 = time.perf_counter()
    fit = fit_torch_model(model, full_graph_loss, FullBatch(), SamePass(), loop, log=say,
                          label=f"{cfg.encoder}+{cfg.head}")
    best_c, best_m = fit.best_states["validation_loss_c"], fit.best_states["validation_loss_m"]
    with torch.no_grad():
        model.load_state_dict(best_c)
        f_c, _ = model(x_c, x_m, adj, hist_c, hist_m)
        model.load_state_dict(best_m)
        _, y_m = model(x_c, x_m, adj, hist_c, hist_m)
    customer_values = f_c.numpy().astype(np.float64)
    merchant_values = np.clip(y_m.numpy().astype(np.float64), 0.0, None) * norm[:, None]
    history = fit.history

    metrics = label_metrics(customer_values, merchant_values, norm, c_rows, m_rows)
    metrics.update(
        {"epochs": fit.epochs, "best_epoch_c": fit.best_epochs["validation_loss_c"],
         "best_epoch_m": fit.best_epochs["validation_loss_m"], "seconds": time.perf_counter() - t0,
         "seconds_per_epoch": fit.seconds_per_epoch}
    )
    trained = TrainedGraphModel(
        name=f"{cfg.encoder}_{cfg.head}",
        config=cfg,
        customer_ids=np.asarray(c_ids, dtype=object),
        merchant_ids=np.asarray(m_ids, dtype=object),
        incentives=r_c,
        commissions=r_m,
        customer_values=customer_values,
        merchant_values=merchant_values,
        merchant_normalizer=norm,
        metrics=metrics,
        history=history,
        state_dict={"customer": best_c, "merchant": best_m},
    )
    if save:
        trained.save(artifacts_root)
    return trained


def train_gnn_hazard(
    data: GraphData,
    *,
    seed: int = 0,
    max_epochs: int | None = None,
    log: Callable[[str], None] | None = None,
    save: bool = True,
    artifacts_root: Path | None = None,
    **config: Any,
) -> TrainedGraphModel:
    """The paper's model: 2-layer heterogeneous GraphSAGE (64-d) + piecewise hazard + merchant head.

    Same arguments as `train_graph_model`; extra keyword arguments are GraphTrainConfig fields.
    """
    fields = dict(config)
    fields.setdefault("encoder", "gnn")
    fields.setdefault("head", "hazard")
    if max_epochs is not None:
        fields["max_epochs"] = int(max_epochs)
    try:
        cfg = GraphTrainConfig(seed=seed, **fields)
    except TypeError as exc:
        raise GraphTrainingError(f"unknown training option: {exc}") from None
    return train_graph_model(data, cfg, log=log, save=save, artifacts_root=artifacts_root)


def label_metrics(
    customer_values: np.ndarray,
    merchant_values: np.ndarray,
    normalizer: np.ndarray,
    c_rows: dict[str, np.ndarray],
    m_rows: dict[str, np.ndarray],
) -> dict[str, Any]:
    """AUC_c, MAE_c, MSE_c (score at the assigned level vs the 0/1 redemption) and MAE_m, MSE_m
    (normalized predicted vs normalized observed sharing count) on the holdout rows, or on the
    validation rows when there is no holdout."""
    out: dict[str, Any] = {}
    for side, rows in (("c", c_rows), ("m", m_rows)):
        split = "holdout" if (rows["split"] == "holdout").any() else "validation"
        sel = rows["split"] == split
        out[f"eval_split_{side}"] = split
        out[f"n_eval_{side}"] = int(sel.sum())
        if not sel.any():
            continue
        node, level = rows["node"][sel], rows["level"][sel]
        if side == "c":
            out.update(customer_metrics(customer_values[node, level], rows["response"][sel]))
        else:
            norm = normalizer[node]
            out.update(merchant_metrics(merchant_values[node, level] / norm, rows["response"][sel] / norm))
    return out


def load_graph_model(version: str, root: Path | None = None) -> TrainedGraphModel:
    """Load a TrainedGraphModel stored by `TrainedGraphModel.save` (artefact kind 'model')."""
    try:
        payload = load_object("model", version, root)
    except ArtifactFormatError as exc:
        raise GraphTrainingError(str(exc)) from None
    if not isinstance(payload, dict) or "customer_values" not in payload:
        raise GraphTrainingError(f"artefact model/{version} is not a graph model")
    return TrainedGraphModel.from_payload(payload, version=version)

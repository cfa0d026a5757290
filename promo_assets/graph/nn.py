"""Encoders (heterogeneous GraphSAGE, MLP) and response heads (hazard, Cox, SBBM, merchant linear map).

Customer heads map an embedding h_u and the ordered incentive grid r_1 < ... < r_K to response
scores f_c(h_u, r_j) in [0, 1]; the merchant head maps h_m to a (normalized) sharing count.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import HeteroConv, SAGEConv

from promo_assets.graph.data import CUSTOMER, EDGE, MERCHANT, REV_EDGE

ENCODERS = ("gnn", "dnn", "dnn_h")
HEADS = ("hazard", "cox", "sbbm")
_LOG_HAZARD_MIN, _LOG_HAZARD_MAX = -15.0, 6.0


class GraphEncoder(nn.Module):
    """Two-layer heterogeneous GraphSAGE over the bipartite graph (HeteroConv of SAGEConv).

    Each layer updates customers from their merchants and merchants from their customers;
    SAGEConv's root weight keeps the node's own features. Neighbour aggregation is the
    payment-weighted mean (SAGEConv aggr='sum' over a row-normalized weighted adjacency, see
    `normalized_adjacency`). ReLU between layers; returns (h_customer, h_merchant), `hidden` wide.
    """

    def __init__(self, in_customer: int, in_merchant: int, hidden: int = 64, layers: int = 2, dropout: float = 0.0):
        super().__init__()
        dims = {CUSTOMER: in_customer, MERCHANT: in_merchant}
        self.convs = nn.ModuleList()
        for _ in range(layers):
            self.convs.append(
                HeteroConv(
                    {
                        EDGE: SAGEConv((dims[CUSTOMER], dims[MERCHANT]), hidden, aggr="sum"),
                        REV_EDGE: SAGEConv((dims[MERCHANT], dims[CUSTOMER]), hidden, aggr="sum"),
                    },
                    aggr="sum",
                )
            )
            dims = {CUSTOMER: hidden, MERCHANT: hidden}
        self.dropout = dropout

    def forward(self, x_customer, x_merchant, adj, history_c=None, history_m=None):
        x = {CUSTOMER: x_customer, MERCHANT: x_merchant}
        for i, conv in enumerate(self.convs):
            x = conv(x, adj)
            if i < len(self.convs) - 1:
                x = {k: F.dropout(F.relu(v), self.dropout, self.training) for k, v in x.items()}
        return x[CUSTOMER], x[MERCHANT]


class MLPEncoder(nn.Module):
    """The DNN baselines' encoder: a two-layer MLP per node type, no graph.

    DNN-H concatenates the aggregated interaction-history features (`history_c`, `history_m`).
    """

    def __init__(self, in_customer: int, in_merchant: int, hidden: int = 64, dropout: float = 0.0):
        super().__init__()
        self.customer = nn.Sequential(nn.Linear(in_customer, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, hidden))
        self.merchant = nn.Sequential(nn.Linear(in_merchant, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, hidden))

    def forward(self, x_customer, x_merchant, adj=None, history_c=None, history_m=None):
        if history_c is not None:
            x_customer = torch.cat([x_customer, history_c], dim=1)
        if history_m is not None:
            x_merchant = torch.cat([x_merchant, history_m], dim=1)
        return self.customer(x_customer), self.merchant(x_merchant)


def _tower(dim: int, hidden: int) -> nn.Module:
    return nn.Sequential(nn.ReLU(), nn.Linear(dim, hidden), nn.ReLU())


class HazardHead(nn.Module):
    """Piecewise hazard (Eq. 8): lambda(u, r_j) = exp(w_j^T z_u + b_j), z_u = tower(h_u).

    The cumulative hazard at level j is the sum of the pieces up to j (our discretization of
    int_0^{r_j} lambda: piece j is the hazard mass on (r_{j-1}, r_j], its width folded into b_j, and
    piece 1 is the mass up to r_1, i.e. the natural response at the lowest level). The response score
    (Eq. 10) f_j = 1 - exp(-Lambda_j) is non-decreasing in j by construction.
    """

    def __init__(self, dim: int, n_levels: int, tower: int = 128):
        super().__init__()
        self.tower = _tower(dim, tower)
        self.linear = nn.Linear(tower, n_levels)

    def init_from_marginal(self, increments: torch.Tensor) -> None:
        """Start b_j at the log of the average hazard increment of level j (see `marginal_increments`)."""
        with torch.no_grad():
            self.linear.bias.copy_(increments.log())

    def cumulative_hazard(self, h):
        log_hazard = self.linear(self.tower(h)).clamp(_LOG_HAZARD_MIN, _LOG_HAZARD_MAX)
        return torch.cumsum(torch.exp(log_hazard), dim=1)

    def forward(self, h):
        return -torch.expm1(-self.cumulative_hazard(h))

    def loss(self, h, level, response):
        return censored_hazard_loss(self.cumulative_hazard(h), level, response)

    def penalty(self):
        """Fused lasso of Eq. 8 on consecutive pieces: sum_j ||w_{j+1} - w_j||_1 (+ |b_{j+1} - b_j|
        is not penalized: the baseline may jump)."""
        w = self.linear.weight
        return (w[1:] - w[:-1]).abs().sum()


class CoxHead(nn.Module):
    """Cox proportional hazard with the same embedding: lambda(u, r_j) = lambda_0(r_j) exp(w^T z_u).

    lambda_0 is a free positive piece per level (exp(b_j)); trained with the same censored likelihood.
    """

    def __init__(self, dim: int, n_levels: int, tower: int = 128):
        super().__init__()
        self.tower = _tower(dim, tower)
        self.linear = nn.Linear(tower, 1)
        self.log_base = nn.Parameter(torch.full((n_levels,), -1.5))

    def init_from_marginal(self, increments: torch.Tensor) -> None:
        """Start lambda_0 at the average hazard increments (see `marginal_increments`)."""
        with torch.no_grad():
            self.log_base.copy_(increments.log())
            self.linear.bias.zero_()

    def cumulative_hazard(self, h):
        risk = self.linear(self.tower(h)).clamp(_LOG_HAZARD_MIN, _LOG_HAZARD_MAX)
        return torch.exp(risk) * torch.cumsum(torch.exp(self.log_base), dim=0)[None, :]

    def forward(self, h):
        return -torch.expm1(-self.cumulative_hazard(h))

    def loss(self, h, level, response):
        return censored_hazard_loss(self.cumulative_hazard(h), level, response)

    def penalty(self):
        return torch.zeros(())


class SBBMHead(nn.Module):
    """Semi-black-box model (Eq. 21): f = sigmoid(softplus(w_g^T z) * r + w_i^T z), r scaled to [0, 1].

    softplus(w_g^T z) is the customer's "gradient" (incentive sensitivity). Trained with cross-entropy.
    """

    def __init__(self, dim: int, incentives: torch.Tensor, tower: int = 128):
        super().__init__()
        self.tower = _tower(dim, tower)
        self.linear = nn.Linear(tower, 2)
        self.register_buffer("r", incentives / incentives.max().clamp_min(1e-12))

    def init_from_marginal(self, increments: torch.Tensor) -> None:
        """Start the intercept at the logit of the average response at the lowest level."""
        p0 = -torch.expm1(-increments[0])
        with torch.no_grad():
            self.linear.bias[1] = torch.log(p0 / (1 - p0))

    def gradient_intercept(self, h):
        out = self.linear(self.tower(h))
        return F.softplus(out[:, 0]), out[:, 1]

    def logits(self, h):
        g, b = self.gradient_intercept(h)
        return g[:, None] * self.r[None, :] + b[:, None]

    def forward(self, h):
        return torch.sigmoid(self.logits(h))

    def loss(self, h, level, response):
        logit = self.logits(h).gather(1, level[:, None]).squeeze(1)
        return F.binary_cross_entropy_with_logits(logit, response, reduction="sum")

    def penalty(self):
        return torch.zeros(())


class MerchantHead(nn.Module):
    """Linear mapping head (Liu et al. 2019b, FORMULAS.md): y_m(r) = softplus(w_g^T z) * r + w_i^T z.

    r is the commission scaled to [0, 1]; y is the *normalized* sharing count (count divided by the
    shares received in the previous days), trained with squared error.
    """

    def __init__(self, dim: int, commissions: torch.Tensor, tower: int = 128):
        super().__init__()
        self.tower = _tower(dim, tower)
        self.linear = nn.Linear(tower, 2)
        self.register_buffer("r", commissions / commissions.max().clamp_min(1e-12))

    def forward(self, h):
        out = self.linear(self.tower(h))
        return F.softplus(out[:, :1]) * self.r[None, :] + out[:, 1:]

    def loss(self, h, level, target):
        pred = self.forward(h).gather(1, level[:, None]).squeeze(1)
        return ((pred - target) ** 2).sum()


def marginal_increments(level: torch.Tensor, response: torch.Tensor, n_levels: int) -> torch.Tensor:
    """Average hazard increment per level from RCT rows: Lambda_j = -log(1 - mean response at level
    <= j, made non-decreasing), differenced and floored at 1e-3 (an initialization, our choice)."""
    p = torch.full((n_levels,), float("nan"))
    for j in range(n_levels):
        sel = level == j
        if sel.any():
            p[j] = response[sel].float().mean()
    p = torch.nan_to_num(p, nan=float(response.float().mean())).clamp(1e-3, 0.99)
    p = torch.cummax(p, dim=0).values
    cum = -torch.log1p(-p)
    return torch.diff(cum, prepend=torch.zeros(1)).clamp_min(1e-3)


def censored_hazard_loss(cum_hazard: torch.Tensor, level: torch.Tensor, response: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood of Eq. 9 (summed): redeemed at r_j -> -log(1 - exp(-Lambda_j));
    not redeemed -> +Lambda_j. `cum_hazard` is N x K, `level` the assigned level, `response` 0/1."""
    lam = cum_hazard.gather(1, level[:, None]).squeeze(1)
    pos = -torch.log(-torch.expm1(-lam.clamp_min(1e-8)))
    return (response * pos + (1.0 - response) * lam).sum()


class GraphResponseModel(nn.Module):
    """Encoder + customer head + merchant head; `forward` returns (f_c N_c x K, y_m N_m x K_m)."""

    def __init__(self, config, in_dims: tuple[int, int], incentives: torch.Tensor, commissions: torch.Tensor,
                 history_dim: int = 3):
        """`config`: the training config's `encoder`, `head`, `hidden`, `tower` and `dropout`
        (graph.train.GraphTrainConfig); `in_dims`: the customer and merchant feature widths."""
        super().__init__()
        encoder, head, hidden, tower, dropout = config.encoder, config.head, config.hidden, config.tower, config.dropout
        in_customer, in_merchant = in_dims
        if encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {ENCODERS}, got {encoder!r}")
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        self.encoder_name, self.head_name = encoder, head
        if encoder == "gnn":  # the graph model also sees its own interaction aggregates
            self.encoder = GraphEncoder(in_customer + history_dim, in_merchant + history_dim, hidden, 2, dropout)
        else:
            extra = history_dim if encoder == "dnn_h" else 0
            self.encoder = MLPEncoder(in_customer + extra, in_merchant + extra, hidden, dropout)
        K = int(incentives.numel())
        if head == "hazard":
            self.customer_head = HazardHead(hidden, K, tower)
        elif head == "cox":
            self.customer_head = CoxHead(hidden, K, tower)
        else:
            self.customer_head = SBBMHead(hidden, incentives.float(), tower)
        self.merchant_head = MerchantHead(hidden, commissions.float(), tower)

    def embed(self, x_c, x_m, adj, hist_c, hist_m):
        if self.encoder_name == "dnn_h":
            return self.encoder(x_c, x_m, None, hist_c, hist_m)
        if self.encoder_name == "gnn":
            return self.encoder(torch.cat([x_c, hist_c], 1), torch.cat([x_m, hist_m], 1), adj)
        return self.encoder(x_c, x_m)

    def forward(self, x_c, x_m, adj, hist_c=None, hist_m=None):
        h_c, h_m = self.embed(x_c, x_m, adj, hist_c, hist_m)
        return self.customer_head(h_c), self.merchant_head(h_m)

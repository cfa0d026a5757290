"""CoMAN (Constrained Monotonic Adaptive Network, Ele.me 2024; `coman-spatiotemporal-monotonic.txt`,
FORMULAS.md "CoMAN"), registered as `coman`.

1. Embedding: one token per feature (categorical: an embedding; numeric: value x a learned vector +
   a bias); the spatio-temporal (S-T) columns (hyper-parameter `spatiotemporal`, default
   period_of_day, city, weekday: those that are categorical features of the campaign) form e_st,
   the concatenation of their tokens.
2. Temporal Activation (Eq. 8): h_i = sigmoid(FC(e_st) . e_i) e_i + e_i for every other token.
3. Temporal target attention: query FC_q(e_st), keys / values h_i, softmax(q . h_i / sqrt(d)).
4. Deep representation z = MLP([h_1..h_n, attention output, e_st]) (the paper's expert/gating
   towers are left out: one tower).
5. Monotonic layer: CMNN with CLU (`MonotoneStack`) on [scaled incentive attributes, z] giving the
   monotone incentive index s. Adaptive Activation (Eq. 14, our form): a convex share
   1/4 + 1/2 sigmoid(FC(e_st)) per spatio-temporal context masks the non-saturated units between the
   convex and the concave activation (`monotone.adaptive_masks`); without it the fixed 7:7:2 blocks.
   Our choices, measured on coman_spatiotemporal: a share computed from the user representation as
   well, or unbounded, was used as a level shift (all units convex or all concave) and fit worse.
6. S-t Attention (Eq. 15, our form): FC layers on e_st produce a weight matrix W (|z| x 4) and a
   bias b; the FPM parameters are z A + a + z W(e_st) + b(e_st) (A, a: a linear layer on z, which
   alone gives the parameters without S-t). W, b and the Adaptive Activation's layer start at zero,
   so CoMAN starts as CoMAN-B.
7. Output: `fpm_response(params, s)` (r0, rmax, x0, k), non-decreasing in s, hence monotone in
   every attribute in its declared direction (the gates and parameters depend on the user only).

Ablations (paper §5.2): `adaptive_activation: false` (w/o AA), `st_attention: false` (w/o S-t),
both false (CoMAN-B: CMNN(CLU) + FPM with the S-T embedding modules).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from promo_assets.campaign import CampaignConfig
from promo_assets.models.base import TrainedModel, register_architecture
from promo_assets.models.monotone import MonotoneStack, fpm_response
from promo_assets.models.monotone_models import COMMON, AttributeCurves, _list, _MonotoneModel, train_attribute_model
from promo_assets.models.protocol import ModelSkipped, TrainingData
from promo_assets.models.s_learner import mlp

SPATIOTEMPORAL = ["period_of_day", "city", "weekday"]


@register_architecture("coman")
class CoMANNet(AttributeCurves):
    def __init__(self, n_numeric: int, cardinalities: list[int], st_index: list[int],
                 level_attributes: list[list[float]], signs: list[int], token_dim: int = 8, hidden=(64, 32),
                 mono_hidden=(32, 16), adaptive_activation: bool = True, st_attention: bool = True,
                 binary: bool = True, cost_heads: bool = False, response_init: float = 0.0):
        super().__init__()
        d = int(token_dim)
        self.d = d
        self.st_index = [int(i) for i in st_index]
        self.other_index = [j for j in range(len(cardinalities)) if j not in self.st_index]
        self.cat_tokens = nn.ModuleList(nn.Embedding(int(c), d) for c in cardinalities)
        self.num_weight = nn.Parameter(torch.randn(n_numeric, d) * 0.1)
        self.num_bias = nn.Parameter(torch.zeros(n_numeric, d))
        d_st = d * max(1, len(self.st_index))
        n_tokens = n_numeric + len(self.other_index)
        self.temporal_gate = nn.Linear(d_st, d)       # Eq. 8's FC(e_st)
        self.target_query = nn.Linear(d_st, d)        # temporal target attention
        self.tower, z = mlp(n_tokens * d + d + d_st, tuple(hidden))
        self._init_levels(level_attributes, signs, z, cost_heads)
        self.stack = MonotoneStack(self.signs, z, tuple(mono_hidden), "clu")
        # The Adaptive Activation and the S-t Attention start as CoMAN-B (zero-initialised: a convex share of
        # 1/2, i.e. the fixed 7:7 blocks, and no spatio-temporal term) and move away only where the
        # gradient asks: with a random start both made the fit worse in our runs (README, "Monotone models").
        self.aa = nn.Linear(d_st, 1) if adaptive_activation else None
        self.z_dim = z
        self.fpm_params = nn.Linear(z, 4)
        with torch.no_grad():
            self.fpm_params.bias[0] = float(response_init)
            if self.aa is not None:
                self.aa.weight.zero_()
                self.aa.bias.zero_()
        if st_attention:
            self.st_w = nn.Linear(d_st, z * 4)
            self.st_b = nn.Linear(d_st, 4)
            for layer in (self.st_w, self.st_b):
                nn.init.zeros_(layer.weight)
                nn.init.zeros_(layer.bias)
        else:
            self.st_w = self.st_b = None
        self.binary = bool(binary)

    def representation(self, x_num: torch.Tensor, x_cat: torch.Tensor):
        n = x_num.shape[0]
        num = x_num[:, :, None] * self.num_weight + self.num_bias                    # (N, Dn, d)
        cat = [self.cat_tokens[j](x_cat[:, j]) for j in range(len(self.cat_tokens))]
        if self.st_index:
            e_st = torch.cat([cat[j] for j in self.st_index], dim=1)                 # (N, d_st)
        else:
            e_st = x_num.new_zeros((n, self.d))
        others = [num] + [cat[j][:, None, :] for j in self.other_index]
        e = torch.cat(others, dim=1)                                                  # (N, T, d)
        gate = torch.sigmoid((e * self.temporal_gate(e_st)[:, None, :]).sum(-1, keepdim=True))
        h = gate * e + e                                                              # Eq. 8
        q = self.target_query(e_st)
        alpha = torch.softmax((h * q[:, None, :]).sum(-1) / math.sqrt(self.d), dim=1)
        att = (alpha[:, :, None] * h).sum(1)
        z = self.tower(torch.cat([h.reshape(n, -1), att, e_st], dim=1))
        return z, e_st

    def respond(self, attrs: torch.Tensor, rep) -> torch.Tensor:
        z, e_st = rep
        # convex share in [1/4, 3/4] from the spatio-temporal context (see the module docstring, 5.)
        share = 0.25 + 0.5 * torch.sigmoid(self.aa(e_st)) if self.aa is not None else None
        s = self.stack(attrs, z, share).squeeze(-1)                                  # (N, M)
        params = self.fpm_params(z)
        if self.st_w is not None:                                                     # Eq. 15
            w = self.st_w(e_st).reshape(-1, self.z_dim, 4)
            params = params + torch.bmm(z[:, None, :], w).squeeze(1) + self.st_b(e_st)
        return fpm_response(params[:, None, :], s, self.binary)


class CoMAN(_MonotoneModel):
    name = "coman"
    title = ("CoMAN: spatio-temporal embedding, Temporal Activation, target attention, CMNN(CLU) with Adaptive "
             "Activation, S-t Attention -> FPM")
    source = "CoMAN paper §4 (Eq. 8-15)"
    params = {**{k: v for k, v in COMMON.items() if k != "embedding_dim"}, "token_dim": 8, "spatiotemporal": list(SPATIOTEMPORAL), "adaptive_activation": True,
              "st_attention": True}

    def check_params(self, params: dict[str, Any]) -> list[str]:
        out = super().check_params(params)
        st = params["spatiotemporal"]
        if not st or not all(isinstance(c, str) and c for c in st):
            out.append(f"'spatiotemporal' = {st!r}: expected a non-empty list of feature column names")
        if not isinstance(params["token_dim"], int) or params["token_dim"] < 1:
            out.append(f"'token_dim' = {params['token_dim']!r}: expected an integer >= 1")
        return out

    def fit(self, data: TrainingData, config: CampaignConfig, *, phase: str = "model", previous=None,
            seed: int = 0, max_epochs: int | None = None, log=None) -> TrainedModel:
        hp = self.fit_hparams(data, config)
        categorical = list(data.categorical)
        st_index = [categorical.index(c) for c in hp["spatiotemporal"] if c in categorical]
        if not st_index:
            raise ModelSkipped(f"none of the spatio-temporal columns {list(hp['spatiotemporal'])} (models.params.coman."
                               f"spatiotemporal) is a categorical feature of campaign {config.campaign!r}")

        def arch(prep) -> dict[str, Any]:
            return dict(st_index=st_index, token_dim=int(hp["token_dim"]), hidden=_list(hp["hidden"]),
                        mono_hidden=_list(hp["mono_hidden"]), adaptive_activation=bool(hp["adaptive_activation"]),
                        st_attention=bool(hp["st_attention"]))

        return train_attribute_model(self.name, "coman", data.frame, config, list(data.numeric), categorical, hp, arch,
                                     weighted=data.extra.get("weighted", True), seed=seed, max_epochs=max_epochs, log=log)

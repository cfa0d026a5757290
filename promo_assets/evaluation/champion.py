"""The champion: the policy to deploy, chosen among the evaluated models and blends of them without
ground truth, by paired comparisons on the same evaluation events.

**Evidence.** `Evidence` holds the events the candidates are compared on (the holdout days): the
logged level t, response y, cost z, propensity p, the direct-method outcome model's predictions m
(fitted without those events) and each model's coefficients (predicted response v and cost c per
level) for the same users.

**Why not the highest DR value.** A policy's doubly robust (DR) value at equal spend is informed
only by the events logged at the policy's own levels (1/K of them): on a demo holdout (2,500 users,
6 levels) two top models' paired difference has a standard error about five times their true
difference, and picking the highest DR value lost about 1 point of the oracle on the tuning
campaigns (docs/decisions.md). Every event, however, informs every level through the doubly robust
pseudo-outcomes (`pseudo_outcomes`)
    G_ik = m(x_i, k) + 1{t_i = k} (y_i - m(x_i, k)) / p_i      (and the same for the cost),
unbiased for user i's expected response at level k. The allocation ranks a user's levels by the
reduced value v_ik - λ c_ik; the **decision loss** of a candidate is the squared error of its
reduced values against the pseudo-outcomes', summed over the levels and the configured budgets
(λ_b: the multiplier that spends budget b, `decision_lambdas`), per event (`LossTerms`). Its mean
estimates, up to a constant shared by all candidates, the mean squared error of the candidate's
reduced values against the truth's; paired differences of it are far less noisy than those of DR
values, and ranking by it follows decision quality closely (docs/decisions.md has the measurements).

**Candidates.** Every evaluated model (or those of `candidates:`) that can meet every budget, and,
with `blends: true`, blends: the weighted mean of several models' coefficients. The stacked blend
(`LossTerms.stack`) has the weights (>= 0, summing to 1) that minimize the decision loss on the
evaluation events — "weights chosen on the evaluation days"; it averages the models' errors away
where they differ and follows the best model where one dominates.

**Cross-fitted evidence** (`cross_fitted`, campaign.yaml `champion.evidence: cross_fitted`): the
training days' events scored out of fold by refits of some models (promo_assets.decisions.crossfit).
Only the refitted models have coefficients for them, so the stack is fitted in two stages
(`two_stage_weights`): the refitted models' weights on the holdout and the cross-fitted events together,
then that blend (one member) with every model that was not refitted on the holdout events. The other
comparisons stay on the holdout, where every candidate has honest predictions; the refitted models'
losses on all events are reported as comparisons ('loss (cross-fitted)').

**The rule** (`choose_champion`):
1. the proposal is the stacked blend (without blends: the single model with the lowest loss), its
   weights after the worst-case guard (`guarded_weights`; default: drop_worse);
2. a campaign's first champion is the proposal; afterwards the proposal replaces the incumbent (the
   earlier champion's members and weights, at their current versions) only when its decision loss —
   with weights fitted on the other half of the events, so that it is not judged on the events it
   was fitted to — is lower than the incumbent's at `confidence` (paired interval); else the
   incumbent stays;
3. `pin: <model>` deploys that model whatever the evidence (everything is still reported).
Every candidate's DR value at equal spend (at the multiplier whose DR cost equals the budget) with its
interval, and the paired DR value and decision-loss differences against the proposal, are reported.

**Paired comparison.** For per-event terms a_i, b_i of two candidates (their DR influence functions
phi, or their decision losses) the difference is mean(a - b) with standard error sd(a - b) / sqrt(N)
and a two-sided normal interval at `confidence`.

No dagster here (domain code).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from promo_assets.core.coefficients import Coefficients
from promo_assets.evaluation.eom import EvaluationError, _as_matrix, levels_at_lambdas
from promo_assets.evaluation.honest import dr_q_at_budget, pct_oracle_at_matched_spend
from promo_assets.evaluation.records import LoggedEvents, OutcomePredictions, Truth

__all__ = [
    "BLEND_PREFIX",
    "Candidate",
    "CandidateResult",
    "ChampionDecision",
    "ChampionSettings",
    "Evidence",
    "choose_champion",
    "LossTerms",
    "cross_fitted_stack_loss",
    "two_stage_weights",
    "decision_lambdas",
    "evaluate_candidate",
    "evidence_frame",
    "loss_terms",
    "pseudo_outcomes",
    "headline_text",
    "stored_headline",
    "verdict_words",
    "guarded_weights",
    "influence",
    "paired_difference",
    "summary_tables",
    "truth_audit",
]

BLEND_PREFIX = "blend"


@dataclass(frozen=True)
class Candidate:
    """A policy that can be deployed: one model, or the weighted mean of several models' coefficients.

    members: model names; weights: one per member (summing to 1); versions: the members' model
    versions (the coefficients compared); name: the model's name, or 'blend(a+b+c)'."""

    members: tuple[str, ...]
    weights: tuple[float, ...] = ()
    versions: tuple[str, ...] = ()

    def __post_init__(self):
        if not self.members:
            raise EvaluationError("a candidate needs at least one model")
        w = self.weights or tuple(1.0 / len(self.members) for _ in self.members)
        if len(w) != len(self.members) or any(not math.isfinite(x) or x < 0 for x in w) or not sum(w) > 0:
            raise EvaluationError(f"candidate weights must be one number >= 0 per member, got {self.weights}")
        object.__setattr__(self, "weights", tuple(float(x) / sum(w) for x in w))

    @classmethod
    def blend(cls, members: Sequence[str], versions: Mapping[str, str] | None = None) -> "Candidate":
        """The equal-weight blend of `members` (sorted; a single name is that model)."""
        names = tuple(sorted(set(members)))
        return cls(names, (), tuple((versions or {}).get(m, "") for m in names))

    @property
    def name(self) -> str:
        if len(self.members) == 1:
            return self.members[0]
        equal = all(abs(w - self.weights[0]) < 1e-12 for w in self.weights)
        inside = "+".join(self.members) if equal else "+".join(f"{w:.3g}*{m}" for m, w in zip(self.members, self.weights))
        return f"{BLEND_PREFIX}({inside})"

    @property
    def is_blend(self) -> bool:
        return len(self.members) > 1

    @property
    def version(self) -> str:
        """Content version of the policy: its members, weights and the members' versions."""
        text = json.dumps([self.members, [round(w, 12) for w in self.weights], self.versions])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def with_versions(self, versions: Mapping[str, str]) -> "Candidate":
        return Candidate(self.members, self.weights, tuple(versions.get(m, "") for m in self.members))

    def coefficients(self, coefficients: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> Coefficients:
        """Coefficients(response, cost) of the policy: the weighted mean of its members' (N x K each)."""
        missing = [m for m in self.members if m not in coefficients]
        if missing:
            raise EvaluationError(f"no coefficients of {', '.join(missing)} for candidate {self.name}")
        v = sum(w * np.asarray(coefficients[m][0], dtype=np.float64) for m, w in zip(self.members, self.weights))
        c = sum(w * np.asarray(coefficients[m][1], dtype=np.float64) for m, w in zip(self.members, self.weights))
        return Coefficients(v, c)

    def to_dict(self) -> dict:
        return {"name": self.name, "members": list(self.members), "weights": list(self.weights),
                "versions": list(self.versions), "version": self.version}

    @classmethod
    def from_dict(cls, data: Mapping) -> "Candidate":
        return cls(tuple(data["members"]), tuple(data.get("weights") or ()), tuple(data.get("versions") or ()))


@dataclass(frozen=True)
class ChampionSettings:
    """campaign.yaml `champion:` (docs/decisions.md)."""

    confidence: float = 0.9
    pin: str | None = None
    candidates: tuple[str, ...] | None = None
    blends: bool = True
    guard: str = "bag"
    guard_level: float = 0.25
    deployed_days: bool = True
    evidence: str = "cross_fitted"
    folds: int = 3
    fold_by: str = "day"
    refit: tuple[str, ...] | None = None
    fold_epochs: str = "full_fit"

    @classmethod
    def from_config(cls, block) -> "ChampionSettings":
        """From campaign.yaml's `champion:` block (`CampaignConfig.champion`, a `ChampionBlock`)."""
        cands = block.candidates
        return cls(float(block.confidence), block.pin, tuple(cands) if cands else None, bool(block.blends),
                   str(block.guard), float(block.guard_level), bool(block.deployed_days), str(block.evidence),
                   int(block.folds), str(block.fold_by), None if block.refit is None else tuple(block.refit),
                   str(block.fold_epochs))


@dataclass
class Evidence:
    """The events candidates are compared on (module docstring): logged level t, response y, cost z,
    propensity p (N each), the outcome model's predictions dm_values, dm_costs (N x K), each model's
    coefficients for the same events {model: (response, cost)} and where each event comes from
    (`source`, N labels such as 'holdout' / 'validation', for the report)."""

    logged: np.ndarray
    response: np.ndarray
    cost: np.ndarray
    propensity: np.ndarray
    dm_values: np.ndarray
    dm_costs: np.ndarray
    coefficients: dict[str, tuple[np.ndarray, np.ndarray]]
    source: np.ndarray | None = None

    def __post_init__(self):
        self.logged = np.asarray(self.logged, dtype=np.int64)
        n = self.logged.shape[0]
        self.response = np.asarray(self.response, dtype=np.float64)
        self.cost = np.asarray(self.cost, dtype=np.float64)
        self.propensity = np.asarray(self.propensity, dtype=np.float64)
        if any(a.shape != (n,) for a in (self.response, self.cost, self.propensity)):
            raise EvaluationError("logged, response, cost and propensity must be N values each")
        if n < 2:
            raise EvaluationError(f"the evidence needs at least two events, got {n}")
        if not np.all(np.isfinite(self.propensity)) or self.propensity.min() <= 0 or self.propensity.max() > 1:
            raise EvaluationError("propensities must lie in (0, 1]")
        self.dm_values = _as_matrix(self.dm_values, "dm_values", n)
        self.dm_costs = _as_matrix(self.dm_costs, "dm_costs", n, self.dm_values.shape[1])
        k = self.dm_values.shape[1]
        for m, (v, c) in self.coefficients.items():
            _as_matrix(v, f"values of {m}", n, k)
            _as_matrix(c, f"costs of {m}", n, k)
        if self.logged.min() < 0 or self.logged.max() >= k:
            raise EvaluationError(f"logged levels must lie in 0..{k - 1}")

    @property
    def n(self) -> int:
        return int(self.logged.shape[0])

    @property
    def events(self) -> LoggedEvents:
        """The logged events of the evidence."""
        return LoggedEvents(self.logged, self.response, self.cost, self.propensity)

    @property
    def outcome(self) -> OutcomePredictions:
        """The outcome model's predictions for the evidence's events."""
        return OutcomePredictions(self.dm_values, self.dm_costs)

    def only(self, models: Sequence[str]) -> "Evidence":
        """The same events with the coefficients of `models` only."""
        return Evidence(self.logged, self.response, self.cost, self.propensity, self.dm_values, self.dm_costs,
                        {m: self.coefficients[m] for m in models}, self.source)

    @classmethod
    def concat(cls, parts: Sequence["Evidence"]) -> "Evidence":
        """One evidence of several (the same models in each): events appended in order."""
        models = set(parts[0].coefficients)
        if any(set(p.coefficients) != models for p in parts):
            raise EvaluationError("every part of the evidence needs coefficients of the same models")
        cat = np.concatenate
        return cls(cat([p.logged for p in parts]), cat([p.response for p in parts]), cat([p.cost for p in parts]),
                   cat([p.propensity for p in parts]), cat([p.dm_values for p in parts]),
                   cat([p.dm_costs for p in parts]),
                   {m: (cat([p.coefficients[m][0] for p in parts]), cat([p.coefficients[m][1] for p in parts]))
                    for m in sorted(models)},
                   cat([p.source if p.source is not None else np.full(p.n, "events") for p in parts]))


@dataclass
class CandidateResult:
    """A candidate on the evidence: per budget the DR value and cost at DR cost = budget, its interval
    and the influence vector (N); pooled: the mean over budgets."""

    candidate: Candidate
    budgets: list[float]
    values: list[float]
    costs: list[float]
    intervals: list[tuple[float, float]]
    phis: list[np.ndarray]
    cost_intervals: list[tuple[float, float]] = field(default_factory=list)
    confidence: float = 0.9

    @property
    def phi(self) -> np.ndarray:
        return np.mean(self.phis, axis=0)

    @property
    def value(self) -> float:
        return float(np.mean(self.values))

    @property
    def pooled_interval(self) -> tuple[float, float]:
        """The interval of the pooled value (mean over budgets) at the result's confidence."""
        phi = self.phi
        half = _quantile(self.confidence) * float(np.std(phi, ddof=1)) / math.sqrt(phi.size)
        return self.value - half, self.value + half


def _quantile(confidence: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + confidence / 2))


def influence(evidence: Evidence, levels: np.ndarray, cost: bool = False) -> np.ndarray:
    """phi (N) of the DR value (or, with cost=True, the DR cost) of the allocation `levels`."""
    t, y, z, p = evidence.logged, evidence.response, evidence.cost, evidence.propensity
    my, mz = evidence.dm_values, evidence.dm_costs
    if cost:
        y, my = z, mz
    rows = np.arange(evidence.n)
    rho = (levels == t) / p
    den = rho.sum()
    resid = y - my[rows, t]
    if not den > 0:
        return np.full(evidence.n, np.nan)
    r_bar = float(rho @ resid) / den
    return my[rows, levels] + rho * (resid - r_bar) / (den / evidence.n) + r_bar


def _interval(phi: np.ndarray, q: float) -> tuple[float, float]:
    mean = float(np.mean(phi))
    half = q * float(np.std(phi, ddof=1)) / math.sqrt(phi.size)
    return mean - half, mean + half


def evaluate_candidate(evidence: Evidence, candidate: Candidate, budgets: Sequence[float], *,
                       confidence: float = 0.9) -> CandidateResult:
    """The candidate at every budget on the evidence (DR at DR cost = budget, its interval, phi)."""
    v, c = candidate.coefficients(evidence.coefficients)
    events, outcome = evidence.events, evidence.outcome
    q = _quantile(confidence)
    values, costs, intervals, cost_intervals, phis = [], [], [], [], []
    for b in budgets:
        res = dr_q_at_budget((v, c), events, outcome, float(b))
        levels = levels_at_lambdas(v, c, [res.lambda_])[0]
        phi = influence(evidence, levels)
        phi_cost = influence(evidence, levels, cost=True)
        values.append(float(np.mean(phi)))
        costs.append(float(np.mean(phi_cost)))
        intervals.append(_interval(phi, q))
        cost_intervals.append(_interval(phi_cost, q))
        phis.append(phi)
    return CandidateResult(candidate, [float(b) for b in budgets], values, costs, intervals, phis, cost_intervals,
                           confidence)


def paired_difference(phi_a: np.ndarray, phi_b: np.ndarray, confidence: float = 0.9) -> tuple[float, float, float]:
    """(mean difference of DR values A - B, low, high) of the paired interval at `confidence`."""
    d = np.asarray(phi_a, dtype=np.float64) - np.asarray(phi_b, dtype=np.float64)
    if d.size < 2 or not np.all(np.isfinite(d)):
        return math.nan, math.nan, math.nan
    mean = float(d.mean())
    half = _quantile(confidence) * float(d.std(ddof=1)) / math.sqrt(d.size)
    return mean, mean - half, mean + half


# ------------------------------------------------------------------ the decision loss and stacking
def pseudo_outcomes(evidence: Evidence) -> tuple[np.ndarray, np.ndarray]:
    """Doubly robust pseudo-outcomes of every event at every level (N x K, response and cost):
        G_ik = m(x_i, k) + 1{t_i = k} (y_i - m(x_i, k)) / p_i,
    unbiased for the user's expected response at level k when either the outcome model m or the
    propensity p is right. Every event informs every level (through m), which is why a loss on them
    is far less noisy than a policy's value, which only the events at its own levels inform."""
    t, y, z, p = evidence.logged, evidence.response, evidence.cost, evidence.propensity
    my, mz = evidence.dm_values, evidence.dm_costs
    rows = np.arange(evidence.n)
    gv, gc = my.copy(), mz.copy()
    gv[rows, t] += (y - my[rows, t]) / p
    gc[rows, t] += (z - mz[rows, t]) / p
    return gv, gc


def decision_lambdas(evidence: Evidence, models: Sequence[str], budgets: Sequence[float]) -> np.ndarray:
    """The multiplier of each budget that the loss weighs response against cost with: λ* of the
    equal-weight blend of `models` allocated on the evidence users at that per-capita budget (NaN
    where that budget cannot be met)."""
    from promo_assets.allocation import InfeasibleBudgetError, solve

    v, c = Candidate.blend(models).coefficients(evidence.coefficients)
    out = []
    for b in budgets:
        try:
            out.append(float(solve(v, c, float(b), per_capita=True, rounding="down").lambda_))
        except InfeasibleBudgetError:
            out.append(math.nan)
    lam = np.asarray(out, dtype=np.float64)
    return np.where(np.isfinite(lam), lam, np.nan)


@dataclass
class LossTerms:
    """Per-event pieces of the decision loss of any blend of `models` (weights w):
        loss_i(w) = w' P_i w - 2 w' R_i + S_i,
        P_i[m, m'] = sum_b sum_k D_mbik D_m'bik,  R_i[m] = sum_b sum_k D_mbik g_bik,  S_i = sum_b sum_k g_bik^2,
    D_mbik = v_mik - λ_b c_mik (model m's reduced value of level k at budget b's multiplier) and
    g_bik = G^v_ik - λ_b G^c_ik (the pseudo-outcomes'). Its mean over events estimates, up to a
    constant that is the same for every candidate, the mean squared error of the candidate's reduced
    values against the truth's: the error in exactly what the allocation ranks levels by."""

    models: list[str]
    P: np.ndarray  # N x M x M
    R: np.ndarray  # N x M
    S: np.ndarray  # N
    lambdas: np.ndarray

    def loss(self, weights: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        w = np.asarray(weights, dtype=np.float64)
        P, R, S = (self.P, self.R, self.S) if rows is None else (self.P[rows], self.R[rows], self.S[rows])
        return np.einsum("nij,i,j->n", P, w, w) - 2 * R @ w + S

    def weights_of(self, candidate: Candidate) -> np.ndarray:
        w = np.zeros(len(self.models))
        for m, x in zip(candidate.members, candidate.weights):
            w[self.models.index(m)] = x
        return w

    def take(self, rows: np.ndarray) -> "LossTerms":
        """The same terms for the events `rows` only."""
        return LossTerms(self.models, self.P[rows], self.R[rows], self.S[rows], self.lambdas)

    def subset(self, models: Sequence[str]) -> "LossTerms":
        """The same terms for `models` only (a subset of `self.models`)."""
        idx = [self.models.index(m) for m in models]
        return LossTerms(list(models), self.P[:, idx][:, :, idx], self.R[:, idx], self.S, self.lambdas)

    def stack(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The simplex weights (>= 0, summing to 1) minimizing the mean loss over `rows` (all events)."""
        from scipy.optimize import minimize

        P, R = (self.P, self.R) if rows is None else (self.P[rows], self.R[rows])
        Q, r = P.sum(axis=0), R.sum(axis=0)
        scale = max(float(np.abs(Q).max()), 1e-300)
        Q, r = Q / scale, r / scale
        k = len(self.models)
        res = minimize(lambda w: w @ Q @ w - 2 * r @ w, np.full(k, 1.0 / k), jac=lambda w: 2 * Q @ w - 2 * r,
                       bounds=[(0.0, 1.0)] * k, constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0}],
                       method="SLSQP", options={"maxiter": 200, "ftol": 1e-12})
        w = np.clip(res.x, 0.0, None)
        return w / w.sum()


def loss_terms(evidence: Evidence, models: Sequence[str], lambdas: np.ndarray, chunk: int = 20_000) -> LossTerms:
    """`LossTerms` of `models` on the evidence at the budgets' multipliers (NaN ones skipped)."""
    gv, gc = pseudo_outcomes(evidence)
    lams = [float(x) for x in lambdas if math.isfinite(x)]
    n, m = evidence.n, len(models)
    P, R, S = np.zeros((n, m, m)), np.zeros((n, m)), np.zeros(n)
    for s0 in range(0, n, chunk):
        sl = slice(s0, s0 + chunk)
        for lam in lams:
            d = np.stack([evidence.coefficients[x][0][sl] - lam * evidence.coefficients[x][1][sl] for x in models], 1)
            g = gv[sl] - lam * gc[sl]
            P[sl] += np.einsum("nik,njk->nij", d, d)
            R[sl] += np.einsum("nik,nk->ni", d, g)
            S[sl] += (g * g).sum(axis=1)
    return LossTerms(list(models), P, R, S, np.asarray(lams))


def _folds(n: int, k: int = 2, seed: int = 29) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.arange(n) % k)


def cross_fitted_stack_loss(terms: LossTerms, k: int = 2, fit=None, fit_rows=None) -> np.ndarray:
    """Per-event loss of the stacked blend with weights fitted on the other folds (k folds): the
    stack's loss as it will do on events it did not see, to compare it fairly with a fixed incumbent.
    `fit(terms of the other folds) -> weights` (default: `LossTerms.stack`) fits the weights;
    `fit_rows(rows of the other folds) -> weights`, when given, instead (a fit that uses more than `terms`)."""
    fold = _folds(terms.S.shape[0], k)
    out = np.empty(terms.S.shape[0])
    for f in range(k):
        rows = np.flatnonzero(fold != f)
        w = fit_rows(rows) if fit_rows is not None else terms.stack(rows) if fit is None else fit(terms.take(rows))
        out[fold == f] = terms.loss(w, np.flatnonzero(fold == f))
    return out


def two_stage_weights(terms: LossTerms, wide: LossTerms, rows: np.ndarray | None = None) -> np.ndarray:
    """The stacked weights over `terms.models` with cross-fitted evidence ("Cross-fitted evidence" in the
    module docstring): `wide` holds the refitted models' terms on the evidence's events (first, in the
    same order) and then on the cross-fitted events. Stage 1: the refitted models' stacked weights on
    the cross-fitted events and the evidence's `rows` (all); stage 2: the stacked weights of that
    blend, as one member, and every model that was not refitted, on the evidence's `rows` only."""
    n = terms.S.shape[0]
    rows = np.arange(n) if rows is None else np.asarray(rows)
    w_refit = wide.stack(np.concatenate([rows, np.arange(n, wide.S.shape[0])]))
    others = [m for m in terms.models if m not in wide.models]
    t = np.zeros((len(terms.models), 1 + len(others)))
    for m, x in zip(wide.models, w_refit):
        t[terms.models.index(m), 0] = x
    if not others:
        return t[:, 0]
    for j, m in enumerate(others):
        t[terms.models.index(m), 1 + j] = 1.0
    sub = terms.take(rows)
    outer = LossTerms(["refitted", *others], np.einsum("nij,ia,jb->nab", sub.P, t, t), sub.R @ t, sub.S, sub.lambdas)
    return t @ outer.stack()


GUARDS = ("none", "shrink", "members", "drop_worse", "bag", "equal")


def guarded_weights(terms: LossTerms, weights: np.ndarray, guard: str, level: float,
                    confidence: float, stack=None) -> tuple[np.ndarray, str]:
    """The stacked weights after the worst-case guard `guard` (ChampionSettings.guard), and what it did:
    - none: the stacked weights;
    - shrink: (1 - level) x the stacked weights + level x the single model of lowest decision loss;
    - members: the stacked blend only when its decision loss with weights fitted on other events
      (cross-fitted, `cross_fitted_stack_loss`) is lower than every member's by more than `level`
      standard errors of the paired difference (0: lower on average), else the single model of lowest loss;
    - drop_worse: the models whose decision loss is worse than the lowest single model's at `confidence`
      (paired interval) get no weight; the stack is fitted again among the others;
    - bag: the mean of the stacked weights fitted on 20 bootstrap resamples of the events (seeded);
    - equal: (1 - level) x the stacked weights + level x equal weights over every model.
    `stack(rows=None, keep=None) -> weights over terms.models` fits the stacked weights again on the
    events `rows` (all) among the models `keep` (all) for bag, members and drop_worse (default: on
    `terms`; with cross-fitted evidence, `two_stage_weights`)."""
    if stack is None:
        def stack(rows=None, keep=None):
            names = terms.models if keep is None else list(keep)
            out = np.zeros(len(terms.models))
            out[[terms.models.index(x) for x in names]] = terms.subset(names).stack(rows)
            return out
    if guard not in GUARDS:
        raise EvaluationError(f"champion.guard must be one of {', '.join(GUARDS)}, got {guard!r}")
    m = len(terms.models)
    single = np.stack([terms.loss(np.eye(m)[i]) for i in range(m)])
    best = int(np.argmin(single.mean(axis=1)))
    if guard == "none" or m < 2:
        return weights, ""
    if guard == "shrink":
        return (1 - level) * weights + level * np.eye(m)[best], f"shrunk by {level:g} toward {terms.models[best]}"
    if guard == "bag":
        rng = np.random.default_rng(31)
        n = terms.S.shape[0]
        bagged = np.mean([stack(rows=rng.integers(0, n, n)) for _ in range(20)], axis=0)
        return bagged / bagged.sum(), "the mean of the stacked weights over 20 bootstrap resamples"
    if guard == "equal":
        return (1 - level) * weights + level / m, f"shrunk by {level:g} toward equal weights"
    if guard == "members":
        oof = cross_fitted_stack_loss(terms, 5, fit_rows=lambda r: stack(rows=r))
        for i in np.flatnonzero(weights >= 0.01):
            d = oof - single[i]
            if not d.mean() + level * d.std(ddof=1) / math.sqrt(d.size) < 0:
                return np.eye(m)[best], (f"the blend does not beat its member {terms.models[i]} on events it was not "
                                         f"fitted to: {terms.models[best]} alone")
        return weights, "the blend beats every member on events it was not fitted to"
    keep = [terms.models[i] for i in range(m)
            if i == best or paired_difference(single[i], single[best], confidence)[1] <= 0]
    if len(keep) == m:
        return weights, ""
    w = stack(keep=keep) if len(keep) > 1 else np.eye(m)[best]
    gone = [x for x in terms.models if x not in keep]
    return w, f"left out of the blend, worse than {terms.models[best]} at {confidence:.0%}: {', '.join(gone)}"


@dataclass
class ChampionDecision:
    """What `choose_champion` decided and why.

    champion: the candidate to deploy; leader: the single model with the lowest decision loss;
    proposal: what the rule proposes before the incumbent is considered (the stacked blend);
    incumbent: the earlier champion (None for a first champion); changed: the champion differs
    from the incumbent; reason: one sentence; losses: candidate -> (mean decision loss, low, high);
    comparisons: one dict per paired comparison (statistic 'loss' or 'dr_value', candidate,
    reference, budget or None for pooled, difference, low, high, verdict); results: the DR value at
    equal spend of every candidate; excluded: model -> why it is no candidate; decided_by: the
    comparison that made the choice, in words (the decision loss; the DR values are only reported)."""

    champion: Candidate
    leader: Candidate
    proposal: Candidate
    incumbent: Candidate | None
    changed: bool
    reason: str
    confidence: float
    comparisons: list[dict] = field(default_factory=list)
    results: dict[str, CandidateResult] = field(default_factory=dict)
    losses: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)
    decided_by: str = ""

    def headline(self, reference: str | None = None) -> dict:
        """The champion against `reference` (default: the single model with the lowest loss, or when
        that is the champion the next one): {'reference', 'difference', 'low', 'high'}, the paired
        difference of their DR values at equal spend pooled over the budgets."""
        champ = self.results[self.champion.name]
        if reference is None:
            singles = [n for n in sorted(self.losses, key=lambda n: self.losses[n][0])
                       if n in self.results and not self.results[n].candidate.is_blend and n != self.champion.name]
            if not singles:
                return {"reference": None, "difference": math.nan, "low": math.nan, "high": math.nan}
            reference = singles[0]
        ref = self.results[reference]
        d, lo, hi = paired_difference(champ.phi, ref.phi, self.confidence)
        return {"reference": reference, "difference": d, "low": lo, "high": hi}


def _verdict(lo: float, hi: float, better_is_lower: bool = False) -> str:
    if better_is_lower:
        lo, hi = -hi, -lo
    return "better" if lo > 0 else "worse" if hi < 0 else "not distinguishable"


def _compare(a: CandidateResult, b: CandidateResult, confidence: float) -> list[dict]:
    """Paired DR value differences a - b per budget and pooled."""
    rows = []
    for i, budget in enumerate(a.budgets):
        d, lo, hi = paired_difference(a.phis[i], b.phis[i], confidence)
        rows.append({"statistic": "dr_value", "candidate": a.candidate.name, "reference": b.candidate.name,
                     "budget_per_capita": budget, "difference": d, "low": lo, "high": hi, "verdict": _verdict(lo, hi)})
    d, lo, hi = paired_difference(a.phi, b.phi, confidence)
    rows.append({"statistic": "dr_value", "candidate": a.candidate.name, "reference": b.candidate.name,
                 "budget_per_capita": None, "difference": d, "low": lo, "high": hi, "verdict": _verdict(lo, hi)})
    return rows


def _loss_row(name: str, ref: str, la: np.ndarray, lb: np.ndarray, confidence: float) -> dict:
    d, lo, hi = paired_difference(la, lb, confidence)
    return {"statistic": "loss", "candidate": name, "reference": ref, "budget_per_capita": None, "difference": d,
            "low": lo, "high": hi, "verdict": _verdict(lo, hi, better_is_lower=True)}


def _feasible(evidence: Evidence, model: str, budgets: Sequence[float]) -> str | None:
    """None, or why `model` cannot be deployed: a budget below its predicted cheapest allocation."""
    cheapest = float(np.asarray(evidence.coefficients[model][1]).min(axis=1).mean())
    low = [b for b in budgets if float(b) < cheapest]
    if low:
        return (f"its predicted cheapest allocation costs {cheapest:.4g} per user, more than the budget "
                f"{', '.join(f'{b:g}' for b in low)}")
    return None


def choose_champion(evidence: Evidence, budgets: Sequence[float], settings: ChampionSettings = ChampionSettings(),
                    incumbent: Candidate | None = None, versions: Mapping[str, str] | None = None,
                    cross_fitted: Evidence | None = None) -> ChampionDecision:
    """The champion by the rule of the module docstring. `versions`: model name -> the version of
    the coefficients in the evidence (recorded in the candidates); `cross_fitted`: out-of-fold evidence
    of the refitted models (its coefficients' models), or None."""
    versions = dict(versions or {})
    conf = settings.confidence
    named = [m for m in evidence.coefficients if settings.candidates is None or m in settings.candidates]
    if not named:
        raise EvaluationError("no candidate: none of the evaluated models is among champion.candidates "
                              f"({', '.join(settings.candidates or ())}); evaluated: {', '.join(evidence.coefficients)}")
    if settings.pin is not None and settings.pin not in evidence.coefficients:
        raise EvaluationError(f"champion.pin = {settings.pin!r} has no evaluation for this campaign (evaluated: "
                              f"{', '.join(evidence.coefficients)})")
    excluded = {m: why for m in named if (why := _feasible(evidence, m, budgets))}
    models = [m for m in named if m not in excluded] or named
    lams = decision_lambdas(evidence, models, budgets)
    if not np.isfinite(lams).any():
        lams = np.asarray([0.0])
    terms = loss_terms(evidence, models, lams)
    refitted = [m for m in models if cross_fitted is not None and m in cross_fitted.coefficients]
    wide = (loss_terms(Evidence.concat([evidence.only(refitted), cross_fitted.only(refitted)]), refitted, lams)
            if refitted else None)

    def stacked(rows=None, keep=None) -> np.ndarray:
        """The stacked weights (over `models`) on the evidence's `rows` (all) among the models `keep` (all),
        in two stages with cross-fitted evidence."""
        names = models if keep is None else list(keep)
        sub = terms if keep is None else terms.subset(names)
        refit = [m for m in refitted if m in names]
        w = sub.stack(rows) if not refit else two_stage_weights(sub, wide if len(refit) == len(refitted)
                                                                else wide.subset(refit), rows)
        out = np.zeros(len(models))
        out[[models.index(x) for x in names]] = w
        return out

    single_loss = {m: terms.loss(np.eye(len(models))[i]) for i, m in enumerate(models)}
    best = min(models, key=lambda m: single_loss[m].mean())
    leader = Candidate((best,), (), (versions.get(best, ""),))
    guard_note = ""
    if settings.blends and len(models) > 1:
        w, guard_note = guarded_weights(terms, stacked(), settings.guard, settings.guard_level, conf, stacked)
        keep = [(m, x) for m, x in zip(models, w) if x >= 0.01]
        proposal = Candidate(tuple(m for m, _ in keep), tuple(x for _, x in keep),
                             tuple(versions.get(m, "") for m, _ in keep))
    else:
        proposal = leader
    prop_loss = terms.loss(terms.weights_of(proposal))
    losses = {m: single_loss[m] for m in models}
    losses[proposal.name] = prop_loss
    results: dict[str, CandidateResult] = {}

    def result(cand: Candidate) -> CandidateResult:
        if cand.name not in results:
            results[cand.name] = evaluate_candidate(evidence, cand.with_versions(versions), budgets, confidence=conf)
        return results[cand.name]

    for m in models:
        result(Candidate((m,)))
    result(proposal)
    if settings.blends and len(models) > 2:  # reported beside the others: the blend of every model, equal weights
        equal = Candidate.blend(models)
        result(equal)
        losses.setdefault(equal.name, terms.loss(terms.weights_of(equal)))
    comparisons = []
    for m in models:
        if (m,) != proposal.members:
            comparisons.append(_loss_row(m, proposal.name, single_loss[m], prop_loss, conf))
            comparisons += _compare(results[m], results[proposal.name], conf)
    if wide is not None:  # the refitted models paired on the holdout and the cross-fitted events together
        eye = np.eye(len(refitted))
        wide_loss = {m: wide.loss(eye[i]) for i, m in enumerate(refitted)}
        top = min(refitted, key=lambda m: wide_loss[m].mean())
        for m in refitted:
            if m != top:
                row = _loss_row(m, top, wide_loss[m], wide_loss[top], conf)
                row["statistic"] = "loss (cross-fitted)"
                comparisons.append(row)
    q = _quantile(conf)
    summary = {n: (float(l.mean()), float(l.mean() - q * l.std(ddof=1) / math.sqrt(l.size)),
                   float(l.mean() + q * l.std(ddof=1) / math.sqrt(l.size))) for n, l in losses.items()}
    more = (f" and {cross_fitted.n} cross-fitted training-day events of {', '.join(refitted)}" if wide is not None
            else "")
    why = (f"{proposal.name} has the lowest decision loss on the {evidence.n} evaluation events{more}"
           + (f" (the weights that minimize it; the best single model, {leader.name}, is "
              f"{_verdict(*paired_difference(prop_loss, single_loss[leader.name], conf)[1:], True)} by "
              f"{single_loss[leader.name].mean() - prop_loss.mean():.4g})" if proposal.is_blend else "")
           + (f"; left out: {'; '.join(f'{m}: {r}' for m, r in excluded.items())}" if excluded else "")
           + (f"; guard {settings.guard}: {guard_note}" if guard_note else ""))

    lowest = (f"the decision loss on {evidence.n} events{more}: {proposal.name} has the lowest"
              + (" (stacked weights)" if proposal.is_blend else ""))

    def decided(champ: Candidate, changed: bool, reason: str, by: str = lowest) -> ChampionDecision:
        result(champ)
        return ChampionDecision(champ, leader, proposal, incumbent, changed, reason, conf, comparisons, results,
                                summary, excluded, by)

    if settings.pin is not None:
        pinned = Candidate((settings.pin,), (), (versions.get(settings.pin, ""),))
        return decided(pinned, incumbent is None or incumbent.name != pinned.name,
                       f"{settings.pin}: pinned by campaign.yaml champion.pin (the rule would deploy {proposal.name})",
                       "campaign.yaml champion.pin (no comparison)")
    if incumbent is None:
        return decided(proposal, True, f"first champion: {why}")
    gone = sorted(set(incumbent.members) - set(models))
    if gone:
        return decided(proposal, True, f"{why}; the champion {incumbent.name} is replaced: {', '.join(gone)} is no "
                       "candidate any more", f"{lowest}; the incumbent's {', '.join(gone)} is no candidate any more")
    inc = Candidate(incumbent.members, incumbent.weights, tuple(versions.get(m, "") for m in incumbent.members))
    if inc.name == proposal.name:
        return decided(inc, False, f"{inc.name} stays champion: {why}", f"{lowest}, and it is the incumbent")
    inc_loss = terms.loss(terms.weights_of(inc))
    def fit_on(r: np.ndarray) -> np.ndarray:
        return guarded_weights(terms.take(r), stacked(r), settings.guard, settings.guard_level, conf,
                               lambda rows=None, keep=None: stacked(r if rows is None else r[rows], keep))[0]

    fair = cross_fitted_stack_loss(terms, fit_rows=fit_on) if proposal.is_blend else prop_loss
    row = _loss_row(proposal.name, inc.name, fair, inc_loss, conf)
    row["statistic"] = "loss (challenger cross-fitted)"
    comparisons.append(row)
    losses[inc.name] = inc_loss
    summary[inc.name] = (float(inc_loss.mean()), math.nan, math.nan)
    comparisons += _compare(result(proposal), result(inc), conf)
    d, lo, hi = row["difference"], row["low"], row["high"]
    by = (f"the decision loss against the incumbent {inc.name} on {evidence.n} events: {proposal.name} "
          f"{_verdict(lo, hi, better_is_lower=True)} at {conf:.0%}, {d:+.4g} [{lo:+.4g}, {hi:+.4g}]")
    if hi < 0:
        return decided(proposal, True, f"{proposal.name} replaces {inc.name}: its decision loss (weights fitted on "
                       f"other events) is lower by {-d:.4g} [{-hi:.4g}, {-lo:.4g}] at {conf:.0%} ({why})", by)
    return decided(inc, False, f"{inc.name} stays champion: the challenger {proposal.name} is not better at {conf:.0%} "
                   f"(decision loss {d:+.4g} [{lo:+.4g}, {hi:+.4g}], weights fitted on other events)", by)


# ---------------------------------------------------------------------------------- reporting
def truth_audit(true_values, true_costs, results: Mapping[str, CandidateResult],
                holdout: Mapping[str, tuple[np.ndarray, np.ndarray]], budgets: Sequence[float]) -> dict[str, list[float]]:
    """{candidate: % of the oracle per budget} at matched true spend on the holdout users (simulated
    campaigns: `true_values`, `true_costs` N x K of the holdout events; `holdout`: each model's
    coefficients of the same events). Only for auditing: the rule never sees the truth."""
    tv = np.asarray(true_values, dtype=np.float64)
    tc = np.asarray(true_costs, dtype=np.float64)
    return {name: pct_oracle_at_matched_spend(r.candidate.coefficients(holdout), Truth(tv, tc), budgets, seed=0)
            for name, r in results.items()}


def evidence_frame(decision: ChampionDecision, pct: Mapping[str, list[float]] | None = None):
    """The rows of the warehouse table champion_evidence: every candidate's DR value at equal spend
    per budget and pooled (evidence_kind 'candidate', with its DR cost and % of the oracle where
    known), its mean decision loss ('loss'), and every paired comparison ('dr_comparison' /
    'loss_comparison': candidate - reference with its interval and verdict)."""
    import pandas as pd

    pct = pct or {}
    rows = []

    def row(kind, cand, ref, budget, value, lo, hi, **extra):
        rows.append({"evidence_kind": kind, "champion_candidate": cand, "champion_reference": ref,
                     "budget_per_capita": budget, "value": value, "value_low": lo, "value_high": hi,
                     "dr_cost": extra.get("dr_cost"), "dr_cost_low": extra.get("dr_cost_low"),
                     "dr_cost_high": extra.get("dr_cost_high"), "champion_verdict": extra.get("verdict"),
                     "pct_oracle": extra.get("pct")})

    for name, r in decision.results.items():
        for i, b in enumerate(r.budgets):
            row("candidate", name, None, b, r.values[i], *r.intervals[i], dr_cost=r.costs[i],
                dr_cost_low=r.cost_intervals[i][0], dr_cost_high=r.cost_intervals[i][1],
                pct=pct[name][i] if name in pct else None)
        row("candidate", name, None, None, r.value, *r.pooled_interval, dr_cost=float(np.mean(r.costs)),
            pct=float(np.mean(pct[name])) if name in pct else None)
    for name, (mean, lo, hi) in decision.losses.items():
        row("loss", name, None, None, mean, lo, hi)
    for c in decision.comparisons:
        kind = "loss_comparison" if c["statistic"].startswith("loss") else "dr_comparison"
        row(kind, c["candidate"], c["reference"], c["budget_per_capita"], c["difference"], c["low"], c["high"],
            verdict=c["verdict"])
    frame = pd.DataFrame(rows)
    for col in ("budget_per_capita", "value", "value_low", "value_high", "dr_cost", "dr_cost_low", "dr_cost_high",
                "pct_oracle"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    return frame


def headline_text(name: str, budgets: Sequence[float], head: Mapping, confidence: float | None = None) -> str:
    """'deploy: X at budget B — better than / worse than / not distinguishable from Y ... (DR value per
    user at equal spend, <confidence> interval; reported only)': the first line of `promo report` and of
    the champion asset's page. The comparison is reported; the choice is made on the decision loss
    (`ChampionDecision.decided_by`)."""
    at = ", ".join(f"{float(b):g}" for b in budgets)
    d = head.get("difference")
    if head.get("reference") is None or d is None or not math.isfinite(float(d)):
        return f"deploy: {name} at budget {at}"
    conf = f"{float(confidence):.0%} interval, " if confidence is not None and math.isfinite(float(confidence)) else ""
    return (f"deploy: {name} at budget {at} — {verdict_words(d, head['low'], head['high'], head['reference'])} "
            f"(DR value per user at equal spend, pooled over the budgets, {conf}reported only: the choice is made "
            "on the decision loss)")


def stored_headline(row: Mapping) -> dict:
    """The headline comparison ({'reference', 'difference', 'low', 'high'}, as `ChampionDecision.headline`)
    of a stored row of table champion; missing values as None."""
    def value(key: str):
        x = row.get(key)
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else x

    return {"reference": value("champion_reference"),
            **{k: None if value(c) is None else float(value(c)) for k, c in
               (("difference", "champion_difference"), ("low", "champion_difference_low"),
                ("high", "champion_difference_high"))}}


def verdict_words(difference: float, low: float, high: float, reference: str) -> str:
    """The headline comparison worded by its interval: better than / worse than the reference when the
    interval excludes 0, else not distinguishable from it (the interval containing 0 says no more)."""
    interval = f"by {abs(difference):.4f} [{low:+.4f}, {high:+.4f}]"
    if low is not None and math.isfinite(float(low)) and low > 0:
        return f"better than {reference} {interval}"
    if high is not None and math.isfinite(float(high)) and high < 0:
        return f"worse than {reference} {interval}"
    return f"not distinguishable from {reference}: {difference:+.4f} [{low:+.4f}, {high:+.4f}]"


def summary_tables(decision: ChampionDecision, pct: Mapping[str, list[float]] | None = None) -> tuple[list, list]:
    """(candidates, comparisons) as rows for display: each candidate's mean decision loss and pooled
    DR value at equal spend with its interval (and % of the oracle where known), lowest loss first;
    each pooled paired comparison."""
    pct = pct or {}
    names = sorted(decision.results, key=lambda n: decision.losses.get(n, (math.inf,))[0])
    cands = []
    for n in names:
        r = decision.results[n]
        loss = decision.losses.get(n)
        cands.append({"candidate": n, "decision loss": None if loss is None else round(loss[0], 6),
                      "DR value (pooled)": round(r.value, 5),
                      "interval": f"[{r.pooled_interval[0]:.4f}, {r.pooled_interval[1]:.4f}]",
                      **({"% oracle (truth)": round(100 * float(np.mean(pct[n])), 2)} if n in pct else {})})
    comps = [{"statistic": c["statistic"], "candidate": c["candidate"], "reference": c["reference"],
              "difference": round(c["difference"], 6), "interval": f"[{c['low']:+.4g}, {c['high']:+.4g}]",
              "verdict": c["verdict"]} for c in decision.comparisons if c["budget_per_capita"] is None]
    return cands, comps

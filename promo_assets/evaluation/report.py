"""`policy_evaluation` rows and the leaderboard.

`evaluate_models` scores every model's allocation at every budget on the holdout RCT users:
EOM value and cost with a bootstrap interval, Q(v, c) at the same budget (end-to-end paper
Algorithm 1), the doubly robust EOM (value, cost, interval, matched value) when an outcome model's
predictions are given, the true value and cost, the spend ratio, the value at matched true spend and
its share of the oracle's when the truth is known, the frontier area ratio (AUCC generalized to
K > 2), AUCC for two-arm campaigns and the response-curve metrics. `evaluate_random` gives the
cost-matched `random` reference policy's rows (see `promo_assets.evaluation.honest`), and
`evaluate_policies` both (every model next to the reference).
`leaderboard_markdown` / `format_leaderboard` / `leaderboard_table` render the result for the
Dagster UI / a terminal: ranked at equal spend.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from promo_assets.evaluation.curve_metrics import CURVE_METRIC_NAMES, LevelScale, curve_metrics
from promo_assets.evaluation.curves import frontier_lambdas, logged_level_costs
from promo_assets.core.text import markdown_text
from promo_assets.evaluation.eom import (
    EvaluationError,
    _as_matrix,
    _checked,
    aucc,
    eom_batch,
    levels_at_lambdas,
    q_at_budget,
    roi_score,
)
from promo_assets.evaluation.honest import (
    BootstrapInterval,
    InfluenceInterval,
    IntervalStrategy,
    area_ratio,
    dr_batch,
    dr_mix,
    dr_q_at_budget,
    ipw_mix,
    match_mix,
    matched_true_value,
    mix_true_value,
    pct_oracle,
    random_mix,
    spend_ratio,
)
from promo_assets.evaluation.records import Holdout, OutcomePredictions, Truth
from promo_assets.evaluation.truth import allocate, true_policy_value

__all__ = [
    "POLICY_EVALUATION_COLUMNS",
    "RANDOM_MODEL",
    "OVERSPEND_TOLERANCE",
    "EvaluationSettings",
    "evaluate_models",
    "evaluate_policies",
    "evaluate_random",
    "leaderboard",
    "leaderboard_markdown",
    "leaderboard_table",
    "format_leaderboard",
    "leaderboard_compact",
    "leaderboard_records",
    "leaderboard_footer",
]

RANDOM_MODEL = "random"
RANDOM_VERSION = "cost-matched-mix"
OVERSPEND_TOLERANCE = 0.01  # a policy spending > 1 % above the budget (truth, else EOM) is flagged

POLICY_EVALUATION_COLUMNS = [
    "campaign", "model", "model_version", "budget_per_capita",
    "eom_value", "eom_cost", "eom_ci_low", "eom_ci_high", "q_value",
    "true_value", "true_cost", "oracle_value", "oracle_cost", "aucc",
    *CURVE_METRIC_NAMES,  # logloss, auc, rmse, rpr, epr, mlss
    "n_users", "n_matched", "too_small",
    "q_cost", "spend_ratio", "matched_true_value", "matched_true_cost", "matched_budget", "pct_oracle",
    "dr_value", "dr_cost", "dr_ci_low", "dr_ci_high", "dr_q_value", "dr_q_cost",
    "area_ratio_eom", "area_ratio_true", "overspend", "note",
    "evaluated_at",
]
TOO_SMALL = "too small to evaluate"
_CURVE_SHARES = np.linspace(0.0, 1.0, 21)  # the random reference's curve: cheapest .. uniformly random


@dataclass(frozen=True)
class EvaluationSettings:
    """How a campaign's policies are evaluated (campaign.yaml's evaluation settings, and the run's).

    budgets: the per-capita budgets; campaign: the campaign id; scale: the levels' `LevelScale` for the
    response-curve metrics (RPR/EPR/MLSS need ordered levels); seed: seeds the allocator's rounding
    and the bootstrap; eom_interval, dr_interval: the interval strategies (`IntervalStrategy`) of the
    EOM (IPW) value and of the doubly robust value; min_holdout_users: a holdout with fewer users is
    "too small to evaluate": every row is still computed but carries too_small = True, and the
    leaderboard says so instead of a % of the oracle; evaluated_at: the rows' timestamp (default
    now, UTC, naive); log: a progress callback.
    """

    budgets: Sequence[float]
    campaign: str
    scale: LevelScale = LevelScale()
    seed: int = 0
    eom_interval: IntervalStrategy = BootstrapInterval()
    dr_interval: IntervalStrategy = InfluenceInterval()
    min_holdout_users: int | None = None
    evaluated_at: dt.datetime | None = None
    log: Callable[[str], None] | None = None

    @classmethod
    def from_config(cls, config, campaign: str, **run) -> "EvaluationSettings":
        """The settings campaign.yaml gives (a `CampaignConfig`: its budgets, the levels' incentives and
        order, whether the response is binary, min_holdout_users), with the run's own (`seed`, the
        interval strategies, `evaluated_at`, `log`) as keywords."""
        return cls(list(config.budget_per_capita), campaign,
                   LevelScale(list(config.incentives), config.ordered, config.response == "binary"),
                   min_holdout_users=config.min_holdout_users, **run)


def evaluate_models(
    models: Mapping[str, tuple[str, np.ndarray, np.ndarray]],
    holdout: Holdout,
    settings: EvaluationSettings,
    *,
    decisions: Mapping[str, Mapping[float, np.ndarray | str]] | None = None,
) -> pd.DataFrame:
    """Rows of the warehouse table `policy_evaluation` for the models of one campaign (no reference row;
    `evaluate_random` gives those, `evaluate_policies` both).

    Takes:
      models: model name -> (model_version, response N x K, cost N x K), predictions for the N holdout
        users (rows aligned with the logged events). The name 'random' is reserved.
      holdout: the logged `events` of the holdout RCT (see `eom`), with the `truth` (N x K, simulated
        campaigns) and the `outcome` model's predictions for the holdout events
        (`fit_outcome_model(...).predict`, fitted on the training days only) when known: with the
        latter the doubly robust columns are filled.
      settings: the budgets, the campaign, the curve metrics' level scale, the seed, the interval
        strategies and the rest (`EvaluationSettings`).
      decisions: model name -> {budget: the stored decision's levels for the N holdout users, or the
        reason there is none (an infeasible budget)}: these are evaluated "as made" instead of a new
        allocation (the pipeline applies `budget_dual`'s λ* to the holdout, `allocation.decide_at`).
    For every model and budget the allocator (`solve`) allocates the holdout users on the model's
    coefficients ("as made"): eom_value / eom_cost (self-normalized IPW) with the interval of
    `settings.eom_interval` (default `bootstrap_eom`'s 95%), dr_value / dr_cost with that of
    `settings.dr_interval` (default `dr_interval`'s: influence function, Student-t), true_value /
    true_cost and spend_ratio
    (true cost / budget); then at equal spend: q_value / q_cost (KKT multiplier searched until the
    EOM cost = budget, Algorithm 1), dr_q_value / dr_q_cost (the same on the DR cost),
    matched_true_value / matched_true_cost / matched_budget (`matched_true_value`: the allocator's
    budget bisected until the TRUE cost = budget within 0.1 %) and pct_oracle = matched value /
    the oracle's (the allocator on the truth; its LP optimum where that is larger, so pct_oracle
    <= 1). overspend: true cost (or, without truth, EOM cost) > budget x 1.01. area_ratio_eom
    (DR curve when given, else IPW) and area_ratio_true: `area_ratio` of the model's frontier
    against the random reference's curve.
    A budget below a model's (or the truth's) cheapest allocation, or a policy whose levels no
    holdout event received, leaves that row's figures NaN with the reason in `note` (and logged),
    instead of failing the whole evaluation.
    Returns a DataFrame with POLICY_EVALUATION_COLUMNS (NaN where a figure does not apply).
    """
    evaluation, checked = _Evaluation.prepare(models, holdout, settings)
    rows = []
    for name, (version, v, c) in checked.items():
        stored = None if decisions is None or name not in decisions else decisions[name]
        rows += evaluation.model_rows(name, version, (v, c), stored)
    return evaluation.frame(rows)


def evaluate_random(holdout: Holdout, settings: EvaluationSettings) -> pd.DataFrame:
    """The `random` reference rows of `policy_evaluation` (the arguments as `evaluate_models`'): the
    random reference mix (`random_mix`, levels ordered by their logged mean cost) scaled until its EOM
    cost equals the budget (q_value = eom_value there); its DR figures at the same mix, dr_q_value
    with the mix scaled on the DR cost (levels ordered by the outcome model's mean cost), its matched
    true value with the mix scaled on the true cost (levels ordered by their true mean cost); its area
    ratios are 1 by definition."""
    evaluation, _ = _Evaluation.prepare({}, holdout, settings)
    return evaluation.frame(evaluation.random_rows())


def evaluate_policies(models: Mapping[str, tuple[str, np.ndarray, np.ndarray]], holdout: Holdout,
                      settings: EvaluationSettings) -> pd.DataFrame:
    """`evaluate_models`' rows followed by `evaluate_random`'s on the same holdout (the arguments of
    `evaluate_models`, without `decisions`): every model next to the cost-matched random reference,
    as the benchmarks compare them."""
    evaluation, checked = _Evaluation.prepare(models, holdout, settings)
    rows = [row for name, (version, v, c) in checked.items()
            for row in evaluation.model_rows(name, version, (v, c), None)]
    return evaluation.frame(rows + evaluation.random_rows())


class _Evaluation:
    """The checked holdout (logged events with the optional truth and outcome-model predictions), the
    settings, and what every row is computed against: the oracle per budget and the random reference's
    curve."""

    @classmethod
    def prepare(cls, models, holdout: Holdout, settings: EvaluationSettings):
        """(the evaluation, the checked models: name -> (version, response, cost)); EvaluationError naming
        what does not fit."""
        events, _ = _checked(holdout.events)
        t = events.logged
        n = t.shape[0]
        if RANDOM_MODEL in models:
            raise EvaluationError(f"model name {RANDOM_MODEL!r} is reserved for the random reference policy")
        budgets = [float(b) for b in settings.budgets]
        if not budgets:
            raise EvaluationError("the evaluation needs at least one budget_per_capita")
        if any(not math.isfinite(b) or b < 0 for b in budgets):
            raise EvaluationError(f"budgets must be finite and >= 0, got {budgets}")
        k = None
        checked: dict[str, tuple[str, np.ndarray, np.ndarray]] = {}
        for name, spec in models.items():
            if len(spec) != 3:
                raise EvaluationError(f"models[{name!r}] must be (model_version, response, cost)")
            version, vals, csts = spec
            v = _as_matrix(vals, f"values of {name}", n)
            c = _as_matrix(csts, f"costs of {name}", n, v.shape[1])
            if k is not None and v.shape[1] != k:
                raise EvaluationError(f"model {name} has {v.shape[1]} levels, the others {k}")
            k = v.shape[1]
            checked[name] = (str(version), v, c)

        def pair(a, b, what: str, names: tuple[str, str]):
            nonlocal k
            first = _as_matrix(a, names[0], n)
            second = _as_matrix(b, names[1], n, first.shape[1])
            if k is not None and first.shape[1] != k:
                raise EvaluationError(f"{what} has {first.shape[1]} levels, the models {k}")
            k = first.shape[1]
            return first, second

        truth = outcome = None
        if holdout.truth is not None:
            truth = Truth(*pair(holdout.truth.response, holdout.truth.cost, "the truth",
                                ("true_values", "true_costs")))
        if holdout.outcome is not None:
            outcome = OutcomePredictions(*pair(holdout.outcome.response, holdout.outcome.cost, "the outcome model",
                                               ("dm_values", "dm_costs")))
        if k is None:
            k = int(t.max()) + 1
        if t.max() >= k:
            raise EvaluationError(f"logged has level {t.max()} but there are only {k} levels")
        evaluated_at = settings.evaluated_at
        if evaluated_at is None:
            evaluated_at = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        too_small = settings.min_holdout_users is not None and n < settings.min_holdout_users
        if too_small and settings.log:
            settings.log(f"the holdout has {n} users, fewer than min_holdout_users = {settings.min_holdout_users}: "
                         f"{TOO_SMALL}")
        settings = replace(settings, budgets=budgets, evaluated_at=evaluated_at)
        return cls(Holdout(events, truth, outcome), settings, k, too_small), checked

    def __init__(self, holdout: Holdout, settings: EvaluationSettings, k: int, too_small: bool):
        self.events, self.truth, self.outcome = holdout.events, holdout.truth, holdout.outcome
        self.settings, self.k, self.n, self.too_small = settings, k, holdout.events.logged.shape[0], too_small
        self.budgets, self.seed = settings.budgets, settings.seed
        self.oracle: dict[float, tuple[float, float, float]] = {}
        truth = self.truth
        if truth is not None:
            for b in self.budgets:
                res, _ = self.allocation_or_none("oracle", (truth.response, truth.cost), b)
                if res is not None:
                    ov, oc = true_policy_value(np.asarray(res.levels, dtype=np.int64), truth.response, truth.cost)
                    self.oracle[b] = (ov, oc, max(ov, float(res.lp_response) / self.n))
        self.level_costs = logged_level_costs(self.events.logged, self.events.cost, self.events.propensity, k)

    def say(self, msg: str) -> None:
        if self.settings.log:
            self.settings.log(msg)

    def allocation_or_none(self, who: str, coefficients, b: float):
        from promo_assets.allocation.errors import InfeasibleBudgetError

        try:
            return allocate(coefficients[0], coefficients[1], b, seed=self.seed), ""
        except InfeasibleBudgetError as exc:
            note = f"budget {b:g} per capita cannot be met: {exc}"
            self.say(f"{who}: {note}; its row stays empty")
            return None, note

    def base_row(self, model: str, version: str, b: float) -> dict:
        row = {col: np.nan for col in POLICY_EVALUATION_COLUMNS}
        row.update(campaign=self.settings.campaign, model=model, model_version=version, budget_per_capita=b,
                   n_users=self.n, too_small=self.too_small, evaluated_at=self.settings.evaluated_at, note="",
                   overspend=None)
        if b in self.oracle:
            row["oracle_value"], row["oracle_cost"] = self.oracle[b][:2]
        return row

    def finish(self, row: dict, b: float) -> None:
        if self.truth is not None:
            row["spend_ratio"] = spend_ratio(row["true_cost"], b)
            if b in self.oracle:
                row["pct_oracle"] = pct_oracle(row["matched_true_value"], self.oracle[b][2])
            spent = row["spend_ratio"]
        else:
            spent = spend_ratio(row["eom_cost"], b)
        row["overspend"] = None if math.isnan(spent) else bool(spent > 1 + OVERSPEND_TOLERANCE)

    def add_note(self, row: dict, who: str, note: str) -> None:
        if note:
            row["note"] = "; ".join(x for x in (row["note"], note) if x)
            self.say(f"{who}: {note}")

    @functools.cached_property
    def random_curves(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The random reference's curve (shares 0..1) as (cost, value) rows, estimated (DR when given,
        else IPW) and true (None without truth): the budget range and base of the area ratios."""
        events, truth, outcome = self.events, self.truth, self.outcome
        mixes = [random_mix(self.level_costs, s) for s in _CURVE_SHARES]
        est_mix = (lambda m: dr_mix(m, events, outcome)) if outcome is not None else (lambda m: ipw_mix(m, events))
        estimated = np.array([est_mix(m)[:2] for m in mixes])[:, ::-1]
        true = np.array([mix_true_value(m, truth)[::-1] for m in mixes]) if truth is not None else None
        return estimated, true

    def areas(self, v: np.ndarray, c: np.ndarray) -> tuple[float, float]:
        ev, truth, outcome = self.events, self.truth, self.outcome
        rand_curve, rand_true = self.random_curves
        lams = frontier_lambdas(v, c, 40)
        assigned = levels_at_lambdas(v, c, lams)
        if outcome is not None:
            est_v, est_c, _ = dr_batch(assigned, ev, outcome)
        else:
            est_v, est_c, _ = eom_batch(assigned, ev.logged, ev.response, ev.cost, ev.propensity)
        a_eom = area_ratio(est_c, est_v, rand_curve[:, 0], rand_curve[:, 1])
        a_true = np.nan
        if truth is not None:
            rows_ = np.arange(self.n)[None]
            a_true = area_ratio(truth.cost[rows_, assigned].mean(axis=1), truth.response[rows_, assigned].mean(axis=1),
                                rand_true[:, 0], rand_true[:, 1])
        return a_eom, a_true

    def model_rows(self, name: str, version: str, coefficients: tuple[np.ndarray, np.ndarray],
                   decisions: Mapping[float, np.ndarray | str] | None) -> list[dict]:
        """One model's rows, one per budget (see `evaluate_models`)."""
        from promo_assets.allocation import frontier

        v, c = coefficients
        ev, truth, outcome, settings = self.events, self.truth, self.outcome, self.settings
        t, y, z, p = ev.logged, ev.response, ev.cost, ev.propensity
        n, seed = self.n, self.seed
        metrics = curve_metrics(v, t, y, scale=settings.scale)
        model_aucc = np.nan
        if self.k == 2:
            try:
                model_aucc = aucc(roi_score(v, c), t, y, z, p)
            except EvaluationError as exc:  # e.g. no positive overall uplift on this holdout
                self.say(f"{name}: AUCC not computed: {exc}")
        a_eom, a_true = self.areas(v, c)
        model_frontier = frontier(v, c) if truth is not None else None
        rows = []
        for b in self.budgets:
            row = self.base_row(name, version, b)
            row.update(metrics)
            row.update(aucc=model_aucc, area_ratio_eom=a_eom, area_ratio_true=a_true)
            stored = None if decisions is None else decisions.get(b, f"no stored decision at budget {b:g}")
            res, note = self.allocation_or_none(name, (v, c), b) if stored is None else (
                (None, stored) if isinstance(stored, str) else (stored, ""))
            if res is None:
                row["note"] = note
                rows.append(row)
                continue
            assigned = np.asarray(getattr(res, "levels", res), dtype=np.int64)
            eom_v, eom_c, nm = eom_batch(assigned, t, y, z, p)
            row["n_matched"] = int(nm[0])
            if truth is not None:
                row["true_value"], row["true_cost"] = true_policy_value(assigned, truth.response, truth.cost)
                if b > 0:
                    m = matched_true_value((v, c), truth, b, seed=seed, frontier=model_frontier)
                    row.update(matched_true_value=m.value, matched_true_cost=m.cost, matched_budget=m.budget_given)
                    self.add_note(row, name, m.note)
            if nm[0] == 0:
                self.add_note(row, name, f"no holdout event was logged at the levels this policy assigns at budget "
                              f"{b:g} (0 of {n} match): EOM undefined")
            else:
                row["eom_value"], row["eom_cost"] = float(eom_v[0]), float(eom_c[0])
                row["eom_ci_low"], row["eom_ci_high"] = settings.eom_interval.interval(assigned, ev, seed=seed)
                q = q_at_budget((v, c), ev, b)
                row["q_value"], row["q_cost"] = q.value, q.cost
                if outcome is not None:
                    dv, dc, _ = dr_batch(assigned, ev, outcome)
                    row["dr_value"], row["dr_cost"] = float(dv[0]), float(dc[0])
                    row["dr_ci_low"], row["dr_ci_high"] = settings.dr_interval.interval(assigned, ev, outcome,
                                                                                        seed=seed)
                    if math.isnan(row["dr_ci_low"]):
                        self.add_note(row, name, f"only {int(nm[0])} holdout event matches the levels this policy "
                                      f"assigns at budget {b:g}: no DR interval (needs 2)")
                    dq = dr_q_at_budget((v, c), ev, outcome, b)
                    row["dr_q_value"], row["dr_q_cost"] = dq.value, dq.cost
            self.finish(row, b)
            rows.append(row)
        self.say(f"evaluated {name} ({version}) at {len(self.budgets)} budget(s)")
        return rows

    def random_rows(self) -> list[dict]:
        """The `random` reference's rows, one per budget (see `evaluate_random`)."""
        rows = [self.random_row(self.base_row(RANDOM_MODEL, RANDOM_VERSION, b), b) for b in self.budgets]
        for row in rows:
            row["area_ratio_eom"] = 1.0
            if self.truth is not None:
                row["area_ratio_true"] = 1.0
        self.say(f"evaluated the cost-matched random reference at {len(self.budgets)} budget(s)")
        return rows

    def random_row(self, row: dict, b: float) -> dict:
        """The cost-matched random reference at budget b (see `evaluate_random`)."""
        ev, truth, outcome, settings, seed = self.events, self.truth, self.outcome, self.settings, self.seed
        if b <= 0:
            self.add_note(row, RANDOM_MODEL, f"budget {b:g} per capita: nothing to match")
            return row
        match = match_mix(lambda m: ipw_mix(m, ev)[1], self.level_costs, b, what="EOM")
        self.add_note(row, RANDOM_MODEL, match.note)
        if match.mix is None:
            return row
        mix = match.mix
        eom_v, eom_c, nm = ipw_mix(mix, ev)
        row.update(eom_value=eom_v, eom_cost=eom_c, q_value=eom_v, q_cost=eom_c, n_matched=nm)
        row["eom_ci_low"], row["eom_ci_high"] = settings.eom_interval.interval(mix, ev, is_mix=True, seed=seed)
        if truth is not None:
            row["true_value"], row["true_cost"] = mix_true_value(mix, truth)
            true_match = match_mix(lambda m: mix_true_value(m, truth)[1], truth.cost.mean(axis=0), b, what="true")
            self.add_note(row, RANDOM_MODEL, true_match.note)
            if true_match.mix is not None:
                row["matched_true_value"], row["matched_true_cost"] = mix_true_value(true_match.mix, truth)
        if outcome is not None:
            row["dr_value"], row["dr_cost"], _ = dr_mix(mix, ev, outcome)
            row["dr_ci_low"], row["dr_ci_high"] = settings.dr_interval.interval(mix, ev, outcome, is_mix=True,
                                                                                seed=seed)
            dr_match = match_mix(lambda m: dr_mix(m, ev, outcome)[1], outcome.cost.mean(axis=0), b, what="DR")
            self.add_note(row, RANDOM_MODEL, dr_match.note)
            if dr_match.mix is not None:
                row["dr_q_value"], row["dr_q_cost"], _ = dr_mix(dr_match.mix, ev, outcome)
        row["model_version"] = f"{RANDOM_VERSION} (share {match.share:.3f})"
        self.finish(row, b)
        return row

    @staticmethod
    def frame(rows: list[dict]) -> pd.DataFrame:
        frame = pd.DataFrame(rows, columns=POLICY_EVALUATION_COLUMNS)
        frame["n_matched"] = frame["n_matched"].astype("Int64")
        frame["n_users"] = frame["n_users"].astype("int64")
        frame["too_small"] = frame["too_small"].astype(bool)
        frame["overspend"] = frame["overspend"].astype("boolean")
        frame["note"] = frame["note"].astype(str)
        return frame


# ------------------------------------------------------------------------------------ leaderboard
_BOARD = [
    # (column in the board, source column or None (computed), format)
    ("campaign", "campaign", "{}"),
    ("budget", "budget_per_capita", "{:.4g}"),
    ("rank", None, None),
    ("model", "model", "{}"),
    ("version", "model_version", "{}"),
    ("% oracle", None, None),
    ("matched value", "matched_true_value", "{:.4f}"),
    ("spend ratio", None, None),
    ("DR Q", "dr_q_value", "{:.4f}"),
    ("DR value", "dr_value", "{:.4f}"),
    ("DR 95% CI", None, None),
    ("DR cost", "dr_cost", "{:.4g}"),
    ("Q(v,c)", "q_value", "{:.4f}"),
    ("EOM value", "eom_value", "{:.4f}"),
    ("95% CI", None, None),
    ("EOM cost", "eom_cost", "{:.4g}"),
    ("true value", "true_value", "{:.4f}"),
    ("true cost", "true_cost", "{:.4g}"),
    ("oracle", "oracle_value", "{:.4f}"),
    ("area ratio", "area_ratio_eom", "{:.3f}"),
    ("area ratio (true)", "area_ratio_true", "{:.3f}"),
    ("AUCC", "aucc", "{:.4f}"),
    ("LogLoss", "logloss", "{:.4f}"),
    ("AUC", "auc", "{:.4f}"),
    ("RPR", "rpr", "{:.3f}"),
    ("EPR", "epr", "{:.3f}"),
    ("MLSS", "mlss", "{:.4f}"),
    ("note", None, None),
]
_LEFT = {"campaign", "model", "version", "note"}
# what a campaign's rows are ranked by, first column with a value for the campaign wins
_RANK_KEYS = ("pct_oracle", "dr_q_value", "q_value", "eom_value")
_RANK_TEXT = {
    "pct_oracle": "% of the oracle at matched true spend",
    "dr_q_value": "the doubly robust value at DR cost = budget (DR Q)",
    "q_value": "Q(v,c), the EOM value at EOM cost = budget",
    "eom_value": "the EOM value of each allocation as made (NOT at equal spend)",
}


def _metrics_dict(m) -> dict:
    if isinstance(m, dict):
        return m
    if isinstance(m, str) and m.strip():
        try:
            out = json.loads(m)
        except ValueError:
            return {}
        return out if isinstance(out, dict) else {}
    return {}


def _missing(x) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


def _latest_rows(df: pd.DataFrame) -> pd.DataFrame:
    missing = {"campaign", "model", "model_version", "budget_per_capita", "eom_value"} - set(df.columns)
    if missing:
        raise EvaluationError(f"not policy_evaluation rows: missing columns {sorted(missing)}")
    d = df.copy()
    if "metrics" in d.columns:  # a warehouse layout with the curve metrics as one JSON column
        parsed = [_metrics_dict(m) for m in d["metrics"]]
        for name in CURVE_METRIC_NAMES:
            if name not in d.columns:
                d[name] = [p.get(name, np.nan) for p in parsed]
    if "evaluated_at" in d.columns and len(d):
        d = d.sort_values("evaluated_at").groupby(["campaign", "model", "budget_per_capita"],
                                                  as_index=False, sort=False).tail(1)
    for col in POLICY_EVALUATION_COLUMNS:
        if col not in d.columns:
            d[col] = np.nan
    return d


def _rank_basis(d: pd.DataFrame) -> dict[str, str]:
    """campaign -> the column its rows are ranked by (see _RANK_KEYS)."""
    basis = {}
    for campaign, g in d.groupby("campaign", sort=False):
        basis[campaign] = next((c for c in _RANK_KEYS if pd.to_numeric(g[c], errors="coerce").notna().any()),
                               "eom_value")
    return basis


def _ranked(df: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """The latest rows in leaderboard order with their rank (`_rank`, NaN without a ranking figure)
    and ranking figure (`_key`), and each campaign's ranking column (`_rank_basis`)."""
    d = _latest_rows(df)
    basis = _rank_basis(d)
    key = pd.Series([pd.to_numeric(pd.Series([r[basis[r["campaign"]]]]), errors="coerce").iloc[0]
                     for _, r in d.iterrows()], index=d.index, dtype=float)
    d = d.assign(_key=key).sort_values(["campaign", "budget_per_capita", "_key"],
                                       ascending=[True, True, False], na_position="last")
    d["_rank"] = d.groupby(["campaign", "budget_per_capita"], sort=False)["_key"].rank(method="min", ascending=False)
    return d.reset_index(drop=True), basis


def leaderboard(df: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard as a DataFrame of formatted strings, ranked at equal spend.

    Takes `policy_evaluation` rows (possibly with history); keeps the latest `evaluated_at` per
    (campaign, model, budget); reads the curve metrics from a JSON `metrics` column when the frame
    has one. Within each (campaign, budget) the rows are ranked (`rank`, best first) by pct_oracle
    where the campaign has truth, else by the doubly robust matched value (dr_q_value), else Q(v,c),
    else (older rows) the EOM value. `% oracle` is pct_oracle (the value at matched true spend over
    the oracle's), `spend ratio` the true cost over the budget (or the EOM cost, marked "EOM",
    without truth); `note` flags a policy whose allocation as made overspends the budget by more
    than 1 %, says "too small to evaluate (N holdout users)" (and hides `% oracle`) for a too small
    holdout, and carries the row's stored note (e.g. why it is empty). Drops columns that are empty
    for every row. Returns one row per (campaign, model, budget).
    """
    d, basis = _ranked(df)
    ranks = d["_rank"]
    small = [False if _missing(x) else bool(x) for x in d["too_small"]]

    def fmt(x, pattern):
        return "" if _missing(x) else pattern.format(x)

    def ci(lo_col, hi_col):
        return ["" if _missing(lo) or _missing(hi) else f"[{lo:.4f}, {hi:.4f}]" for lo, hi in zip(d[lo_col], d[hi_col])]

    def spend(row) -> tuple[str, str]:
        b = row["budget_per_capita"]
        truth = not _missing(row["true_cost"])
        ratio = spend_ratio(row["true_cost"] if truth else row["eom_cost"], b)
        if math.isnan(ratio):
            return "", ""
        text = f"{ratio:.3f}" + ("" if truth else " (EOM)")
        flag = ""
        if ratio > 1 + OVERSPEND_TOLERANCE:
            flag = f"OVERSPENDS the budget by {100 * (ratio - 1):.1f}% {'in truth' if truth else 'on EOM'} as made"
        return text, flag

    spends = [spend(r) for _, r in d.iterrows()]
    out = {}
    for title, src, pattern in _BOARD:
        if title == "rank":
            out[title] = ["" if _missing(r) else str(int(r)) for r in ranks]
        elif title == "% oracle":
            out[title] = ["" if sm or _missing(p) else f"{100 * p:.1f}%" for p, sm in zip(d["pct_oracle"], small)]
        elif title == "spend ratio":
            out[title] = [s for s, _ in spends]
        elif title == "DR 95% CI":
            out[title] = ci("dr_ci_low", "dr_ci_high")
        elif title == "95% CI":
            out[title] = ci("eom_ci_low", "eom_ci_high")
        elif title == "note":
            notes = []
            for (_, flag), n_users, sm, stored in zip(spends, d["n_users"], small, d["note"]):
                parts = [f"{TOO_SMALL} ({int(n_users)} holdout users)" if sm else "", flag,
                         "" if _missing(stored) else str(stored)]
                notes.append("; ".join(p for p in parts if p))
            out[title] = notes
        elif title == "version":
            out[title] = [str(x)[:16] for x in d[src]]
        else:
            out[title] = [fmt(x, pattern) for x in d[src]]
    board = pd.DataFrame(out)
    keep = [c for c in board.columns if c in ("campaign", "budget", "model", "version", "EOM value")
            or (board[c] != "").any()]
    board = board[keep].reset_index(drop=True)
    board.attrs["rank_basis"] = basis
    return board


def _footer(board: pd.DataFrame) -> list[str]:
    """The lines under the board: what it is ranked by, the spend caveat, a too small holdout."""
    lines = []
    for campaign, col in board.attrs.get("rank_basis", {}).items():
        lines.append(f"{campaign}: ranked by {_RANK_TEXT[col]}.")
    if any(c in board.columns for c in ("EOM value", "true value", "DR value")):
        lines.append("EOM value / DR value / true value / spend ratio are each allocation as made, at its own spend; "
                     "% oracle, DR Q and Q(v,c) compare at equal spend (= the budget).")
    if "note" in board.columns and board["note"].str.contains(TOO_SMALL, regex=False).any():
        campaigns = sorted(set(board.loc[board["note"].str.contains(TOO_SMALL, regex=False), "campaign"]))
        lines.append(f"holdout {TOO_SMALL} for campaign(s) {', '.join(map(repr, campaigns))}: fewer users than "
                     "campaign.yaml's min_holdout_users; the figures of those rows are not reliable")
    return lines


def leaderboard_markdown(df: pd.DataFrame) -> str:
    """The leaderboard as a GitHub-flavoured markdown table (for Dagster's MetadataValue.md)."""
    board = leaderboard(df)
    head = "| " + " | ".join(markdown_text(c) for c in board.columns) + " |"
    sep = "| " + " | ".join("---" if c in _LEFT else "---:" for c in board.columns) + " |"
    body = ["| " + " | ".join(markdown_text(v) for v in r) + " |" for r in board.itertuples(index=False)]
    footer = [markdown_text(x) for x in _footer(board)]
    return "\n".join([head, sep, *body]) + "\n" + ("\n" + "\n\n".join(f"*{x}*" for x in footer) + "\n" if footer else "")


def leaderboard_table(df: pd.DataFrame) -> tuple[list[tuple[str, str]], list[dict]]:
    """The leaderboard for Dagster's table metadata (`MetadataValue.table`), without dagster.

    Returns (columns, records): columns = [(name, type)] with type "int" for `rank` and "string"
    otherwise (the formatted figures of `leaderboard`), records = one dict of plain Python values
    per row (rank None when the row has no ranking figure).
    """
    board = leaderboard(df)
    columns = [(c, "int" if c == "rank" else "string") for c in board.columns]
    records = [{c: (int(v) if v else None) if c == "rank" else str(v) for c, v in zip(board.columns, r)}
               for r in board.itertuples(index=False)]
    return columns, records


def format_leaderboard(df: pd.DataFrame) -> str:
    """The leaderboard as aligned plain text for a terminal (`promo report`)."""
    board = leaderboard(df)
    if board.empty:
        return "(no policy evaluations)\n"
    cols = list(board.columns)
    widths = [max(len(c), *(len(str(v)) for v in board[c])) for c in cols]

    def line(values):
        return "  ".join(str(v).ljust(w) if c in _LEFT else str(v).rjust(w)
                         for c, v, w in zip(cols, values, widths)).rstrip()

    out = [line(cols), line(["-" * w for w in widths])]
    out += [line(r) for r in board.itertuples(index=False)]
    return "\n".join(out) + "\n" + "".join(x + "\n" for x in _footer(board))


_HEADLINE = {"pct_oracle": "% oracle", "dr_q_value": "DR Q", "q_value": "Q(v,c)", "eom_value": "EOM value"}


def _vs_random(d: pd.DataFrame) -> pd.Series:
    """Each row's ranking figure minus the `random` reference's at the same campaign and budget
    (NaN for the reference itself and where either figure is missing)."""
    ref = d[d["model"] == RANDOM_MODEL].groupby(["campaign", "budget_per_capita"])["_key"].first()
    base = [ref.get((c, b), np.nan) for c, b in zip(d["campaign"], d["budget_per_capita"])]
    diff = d["_key"].to_numpy(dtype=float) - np.asarray(base, dtype=float)
    return pd.Series(np.where(d["model"] == RANDOM_MODEL, np.nan, diff), index=d.index)


def leaderboard_compact(df: pd.DataFrame) -> pd.DataFrame:
    """The few columns of the leaderboard that fit a terminal (`promo report`; `--wide` shows all of
    `leaderboard`): campaign (`promo report` prints one campaign per table and leaves it out), budget,
    rank, model, the figure the rows are ranked by (titled as in the full board), the estimate with
    its 95 % interval (DR value, else EOM value: the allocation as made), the spend ratio, `vs random`
    (the ranking figure minus the cost-matched random policy's at the same budget; percentage points
    for % oracle; empty where the holdout is too small, as % oracle) and the note; a column empty for
    every row is left out. Same rows and order as `leaderboard`; `attrs["rank_basis"]` as there."""
    board = leaderboard(df)
    d, basis = _ranked(df)
    if board.empty:
        return board
    bases = set(basis.values())
    head = _HEADLINE[next(iter(bases))] if len(bases) == 1 else "ranked by"
    dr = pd.to_numeric(d["dr_value"], errors="coerce").notna().any()
    value, low, high = ("dr_value", "dr_ci_low", "dr_ci_high") if dr else ("eom_value", "eom_ci_low", "eom_ci_high")

    def estimate(v, lo, hi):
        if _missing(v):
            return ""
        return f"{v:.4f}" + ("" if _missing(lo) or _missing(hi) else f" [{lo:.4f}, {hi:.4f}]")

    points = [basis[c] == "pct_oracle" for c in d["campaign"]]
    small = [False if _missing(x) else bool(x) for x in d["too_small"]]  # no % oracle, as in the full board
    key_text = ["" if _missing(k) or (p and sm) else (f"{100 * k:.1f}%" if p else f"{k:.4f}")
                for k, p, sm in zip(d["_key"], points, small)]
    vs = ["" if _missing(x) or sm else (f"{100 * x:+.1f} pt" if p else f"{x:+.4f}")
          for x, p, sm in zip(_vs_random(d), points, small)]
    out = pd.DataFrame({
        "campaign": board["campaign"], "budget": board["budget"], "rank": board["rank"], "model": board["model"],
        head: key_text,
        f"{'DR' if dr else 'EOM'} value [95% CI]": [estimate(*t) for t in zip(d[value], d[low], d[high])],
        "spend ratio": board["spend ratio"] if "spend ratio" in board.columns else "",
        "vs random": vs,
        "note": board["note"] if "note" in board.columns else "",
    })
    if head == "EOM value" and not dr:
        out = out.drop(columns=[head])
    out = out[[c for c in out.columns if c in ("campaign", "budget", "rank", "model") or (out[c] != "").any()]]
    out.attrs["rank_basis"] = basis
    return out


def leaderboard_records(df: pd.DataFrame) -> list[dict]:
    """The leaderboard for machines (`promo report --format csv|json`): one dict per row in
    leaderboard order with the stored figures as numbers (NaN where missing), `rank` (None without a
    ranking figure), `ranked_by` (the column the rows are ranked by), `ranking_value`, `vs_random`
    (as in `leaderboard_compact`, not scaled) and the board's `note`."""
    board = leaderboard(df)
    d, basis = _ranked(df)
    vs = _vs_random(d)
    figures = [c for c in POLICY_EVALUATION_COLUMNS
               if c not in ("campaign", "model", "model_version", "budget_per_capita", "note", "evaluated_at")]
    records = []
    for i, r in d.iterrows():
        rec = {"campaign": r["campaign"], "budget_per_capita": float(r["budget_per_capita"]),
               "rank": None if _missing(r["_rank"]) else int(r["_rank"]), "model": r["model"],
               "model_version": r["model_version"], "ranked_by": basis[r["campaign"]],
               "ranking_value": r["_key"], "vs_random": vs[i]}
        rec.update({c: r[c] for c in figures})
        rec["note"] = board["note"].iloc[i] if "note" in board.columns else ""
        rec["evaluated_at"] = r.get("evaluated_at")
        records.append(rec)
    return records


def leaderboard_footer(board: pd.DataFrame) -> list[str]:
    """The lines printed under a board of `leaderboard` or `leaderboard_compact`: what it is ranked
    by, the spend caveat, a too small holdout."""
    lines = _footer(board)
    if any(c.endswith("value [95% CI]") for c in board.columns):
        at = len(board.attrs.get("rank_basis", {}))
        lines[at:at] = ["value [95% CI], spend ratio: each allocation as made, at its own spend; the ranking figure: "
                        "at equal spend (= budget).", "`promo report --wide` shows every column."]
    return lines

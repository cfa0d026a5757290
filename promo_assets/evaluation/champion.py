"""The champion: the policy to deploy, chosen among the evaluated models (and blends of them) without
ground truth, by paired comparisons at equal spend.

Why paired: two policies evaluated on the *same* events differ with far less noise than either alone
(most users get the same level from both, and those users' noise cancels). Why at equal spend: a
policy that spends more looks better; every candidate is evaluated at the multiplier whose doubly
robust (DR) cost equals the budget (`dr_q_at_budget`'s search), i.e. "DR Q".

**Evidence.** `Evidence` holds the events the candidates are compared on — the holdout days, and
optionally more events scored by models that did not train on them (the validation split, see
docs/decisions.md) — with the logged level, response, cost, propensity, the direct-method outcome
model's predictions (fitted without those events) and each model's coefficients for them. For a
candidate at budget b the KKT allocation a at the DR-matched multiplier gives the self-normalized DR
value V = mean_i dm_i(a_i) + sum_i rho_i r_i / sum_i rho_i (rho_i = 1{a_i = t_i} / p_i, r_i = y_i -
m(x_i, t_i)) and its influence function
    phi_i = dm_i(a_i) + rho_i (r_i - R) / mean(rho) + R,   R = sum rho r / sum rho,   mean(phi) = V.
Pooled over the configured budgets, phi_i is averaged over budgets (the same user, one term).

**Paired comparison.** For candidates A, B: d_i = phi_i(A) - phi_i(B); the difference of their DR
values is mean(d) with standard error sd(d) / sqrt(N) and the two-sided interval at `confidence`
(normal quantile: N is in the thousands). "A is better than B at confidence c" means the interval's
lower end is above 0.

**Candidates.** Every evaluated model (or those of `candidates:`), and, with `blends: true`, blends:
the mean of several models' coefficients (response and cost), which averages their errors.

**The rule** (`choose_champion`; docs/decisions.md gives the measurements that chose it):
1. the leader is the candidate with the highest pooled DR value;
2. the contenders are the single models not significantly worse than the leader (the upper end of
   their paired interval against it is >= 0);
3. the proposal is the leader when it alone is a contender or blends are off, else the blend of the
   contenders — the evidence cannot tell them apart, and their mean is as good as the best of them
   or better more often than any one of them;
4. a campaign's first champion is the proposal; afterwards the proposal replaces the incumbent (the
   earlier champion's members, at their current versions) only when it is better than the incumbent
   at `confidence`; else the incumbent stays;
5. `pin: <model>` deploys that model whatever the evidence (the comparisons are still reported).

No dagster here (domain code).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from promo_assets.evaluation.eom import EvaluationError, _as_matrix, levels_at_lambdas
from promo_assets.evaluation.honest import dr_q_at_budget

__all__ = [
    "BLEND_PREFIX",
    "Candidate",
    "CandidateResult",
    "ChampionDecision",
    "ChampionSettings",
    "Evidence",
    "choose_champion",
    "evaluate_candidate",
    "evidence_frame",
    "headline_text",
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

    def coefficients(self, coefficients: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """(values, costs) of the policy: the weighted mean of its members' (N x K each)."""
        missing = [m for m in self.members if m not in coefficients]
        if missing:
            raise EvaluationError(f"no coefficients of {', '.join(missing)} for candidate {self.name}")
        v = sum(w * np.asarray(coefficients[m][0], dtype=np.float64) for m, w in zip(self.members, self.weights))
        c = sum(w * np.asarray(coefficients[m][1], dtype=np.float64) for m, w in zip(self.members, self.weights))
        return v, c

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

    @classmethod
    def from_config(cls, block: Mapping) -> "ChampionSettings":
        cands = block.get("candidates")
        return cls(float(block.get("confidence", 0.9)), block.get("pin"), tuple(cands) if cands else None,
                   bool(block.get("blends", True)))


@dataclass
class Evidence:
    """The events candidates are compared on (module docstring): logged level t, response y, cost z,
    propensity p (N each), the outcome model's predictions dm_values, dm_costs (N x K), each model's
    coefficients for the same events {model: (values, costs)} and where each event comes from
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
    def arrays(self) -> tuple:
        return self.logged, self.response, self.cost, self.propensity, self.dm_values, self.dm_costs

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
    t, y, z, p, my, mz = evidence.arrays
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
    t, y, z, p, my, mz = evidence.arrays
    q = _quantile(confidence)
    values, costs, intervals, cost_intervals, phis = [], [], [], [], []
    for b in budgets:
        res = dr_q_at_budget(v, c, t, y, z, p, my, mz, float(b))
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


@dataclass
class ChampionDecision:
    """What `choose_champion` decided and why.

    champion: the candidate to deploy; leader: the candidate with the highest pooled DR value;
    proposal: what the rule proposes before the incumbent is considered; incumbent: the earlier
    champion (None for a first champion); changed: the champion differs from the incumbent;
    reason: one sentence; comparisons: one dict per paired comparison (candidate, reference, budget
    or None for pooled, difference, low, high, verdict); results: every evaluated candidate."""

    champion: Candidate
    leader: Candidate
    proposal: Candidate
    incumbent: Candidate | None
    changed: bool
    reason: str
    confidence: float
    comparisons: list[dict] = field(default_factory=list)
    results: dict[str, CandidateResult] = field(default_factory=dict)

    def headline(self, reference: str | None = None) -> dict:
        """The champion against `reference` (default: the best single model other than the champion,
        by pooled DR value): {'reference', 'difference', 'low', 'high'} pooled over the budgets."""
        champ = self.results[self.champion.name]
        others = [r for n, r in self.results.items() if n != self.champion.name and not r.candidate.is_blend]
        if reference is None:
            if not others:
                return {"reference": None, "difference": math.nan, "low": math.nan, "high": math.nan}
            ref = max(others, key=lambda r: r.value)
        else:
            ref = self.results[reference]
        d, lo, hi = paired_difference(champ.phi, ref.phi, self.confidence)
        return {"reference": ref.candidate.name, "difference": d, "low": lo, "high": hi}


def _compare(a: CandidateResult, b: CandidateResult, confidence: float) -> list[dict]:
    rows = []
    for i, budget in enumerate(a.budgets):
        d, lo, hi = paired_difference(a.phis[i], b.phis[i], confidence)
        rows.append({"candidate": a.candidate.name, "reference": b.candidate.name, "budget_per_capita": budget,
                     "difference": d, "low": lo, "high": hi})
    d, lo, hi = paired_difference(a.phi, b.phi, confidence)
    rows.append({"candidate": a.candidate.name, "reference": b.candidate.name, "budget_per_capita": None,
                 "difference": d, "low": lo, "high": hi})
    for r in rows:
        r["verdict"] = ("better" if r["low"] > 0 else "worse" if r["high"] < 0 else "not distinguishable")
    return rows


def choose_champion(evidence: Evidence, budgets: Sequence[float], settings: ChampionSettings = ChampionSettings(),
                    incumbent: Candidate | None = None, versions: Mapping[str, str] | None = None) -> ChampionDecision:
    """The champion by the rule of the module docstring. `versions`: model name -> the version of
    the coefficients in the evidence (recorded in the candidates)."""
    versions = dict(versions or {})
    models = [m for m in evidence.coefficients if settings.candidates is None or m in settings.candidates]
    if not models:
        raise EvaluationError("no candidate: none of the evaluated models is among champion.candidates "
                              f"({', '.join(settings.candidates or ())}); evaluated: {', '.join(evidence.coefficients)}")
    if settings.pin is not None and settings.pin not in evidence.coefficients:
        raise EvaluationError(f"champion.pin = {settings.pin!r} has no evaluation for this campaign (evaluated: "
                              f"{', '.join(evidence.coefficients)})")
    conf = settings.confidence
    results: dict[str, CandidateResult] = {}

    def result(cand: Candidate) -> CandidateResult:
        if cand.name not in results:
            results[cand.name] = evaluate_candidate(evidence, cand.with_versions(versions), budgets, confidence=conf)
        return results[cand.name]

    singles = [result(Candidate((m,))) for m in models]
    pool = list(singles)
    if settings.blends and len(models) > 1:
        pool.append(result(Candidate.blend(models)))
    leader = max(pool, key=lambda r: r.value)
    comparisons: list[dict] = []
    contenders = []
    for r in singles:
        if r is leader:
            contenders.append(r)
            continue
        rows = _compare(r, leader, conf)
        comparisons += rows
        if rows[-1]["high"] >= 0:
            contenders.append(r)
    if leader.candidate.is_blend or (settings.blends and len(contenders) > 1):
        members = sorted({m for r in contenders for m in r.candidate.members if not r.candidate.is_blend} |
                         (set() if leader.candidate.is_blend else set(leader.candidate.members)))
        if leader.candidate.is_blend and len(contenders) <= 1:
            members = list(leader.candidate.members)
        proposal = result(Candidate.blend(members))
    else:
        proposal = leader
    names = ", ".join(r.candidate.name for r in contenders)
    why = (f"{proposal.candidate.name}: the leader {leader.candidate.name} has the highest DR value at equal spend"
           + (f"; not significantly worse than it at {conf:.0%}: {names}" if len(contenders) > 1 else "")
           + ("; deployed as their blend" if proposal is not leader else ""))
    if settings.pin is not None:
        pinned = result(Candidate((settings.pin,)))
        if pinned is not proposal:
            comparisons += _compare(proposal, pinned, conf)
        return ChampionDecision(pinned.candidate, leader.candidate, proposal.candidate,
                                incumbent, incumbent is None or incumbent.name != pinned.candidate.name,
                                f"{settings.pin}: pinned by campaign.yaml champion.pin (the rule would deploy "
                                f"{proposal.candidate.name})", conf, comparisons, results)
    if incumbent is None:
        return ChampionDecision(proposal.candidate, leader.candidate, proposal.candidate, None, True,
                                f"first champion {why}", conf, comparisons, results)
    usable = set(incumbent.members) <= set(evidence.coefficients)
    if not usable:
        gone = sorted(set(incumbent.members) - set(evidence.coefficients))
        return ChampionDecision(proposal.candidate, leader.candidate, proposal.candidate, incumbent, True,
                                f"{why}; the champion {incumbent.name} is replaced: {', '.join(gone)} has no current "
                                "evaluation", conf, comparisons, results)
    inc = result(Candidate(incumbent.members, incumbent.weights))
    if inc.candidate.name == proposal.candidate.name:
        return ChampionDecision(inc.candidate, leader.candidate, proposal.candidate, incumbent, False,
                                f"{inc.candidate.name} stays champion: {why}", conf, comparisons, results)
    rows = _compare(proposal, inc, conf)
    comparisons += rows
    d, lo, hi = rows[-1]["difference"], rows[-1]["low"], rows[-1]["high"]
    if lo > 0:
        return ChampionDecision(proposal.candidate, leader.candidate, proposal.candidate, incumbent, True,
                                f"{proposal.candidate.name} replaces {inc.candidate.name}: better by {d:+.4f} "
                                f"[{lo:+.4f}, {hi:+.4f}] at {conf:.0%} ({why})", conf, comparisons, results)
    return ChampionDecision(inc.candidate, leader.candidate, proposal.candidate, incumbent, False,
                            f"{inc.candidate.name} stays champion: the proposal {proposal.candidate.name} is not "
                            f"better at {conf:.0%} ({d:+.4f} [{lo:+.4f}, {hi:+.4f}])", conf, comparisons, results)


# ---------------------------------------------------------------------------------- reporting
def truth_audit(true_values, true_costs, results: Mapping[str, CandidateResult],
                holdout: Mapping[str, tuple[np.ndarray, np.ndarray]], budgets: Sequence[float]) -> dict[str, list[float]]:
    """{candidate: % of the oracle per budget} at matched true spend on the holdout users (simulated
    campaigns: `true_values`, `true_costs` N x K of the holdout events; `holdout`: each model's
    coefficients of the same events). Only for auditing: the rule never sees the truth."""
    from promo_assets.evaluation.honest import matched_true_value
    from promo_assets.evaluation.truth import allocate, true_policy_value

    tv = np.asarray(true_values, dtype=np.float64)
    tc = np.asarray(true_costs, dtype=np.float64)
    oracle = []
    for b in budgets:
        res = allocate(tv, tc, float(b), seed=0)
        ov, _ = true_policy_value(np.asarray(res.levels, dtype=np.int64), tv, tc)
        oracle.append(max(ov, float(res.lp_value) / tv.shape[0]))
    out = {}
    for name, r in results.items():
        v, c = r.candidate.coefficients(holdout)
        out[name] = [matched_true_value(v, c, tv, tc, float(b), seed=0).value / o if o > 0 else math.nan
                     for b, o in zip(budgets, oracle)]
    return out


def evidence_frame(decision: ChampionDecision, pct: Mapping[str, list[float]] | None = None):
    """The rows of the warehouse table champion_evidence: every candidate per budget and pooled (DR
    value and cost with intervals, % of the oracle where known) and every paired comparison."""
    import pandas as pd

    pct = pct or {}
    rows = []
    for name, r in decision.results.items():
        for i, b in enumerate(r.budgets):
            rows.append({"evidence_kind": "candidate", "champion_candidate": name, "champion_reference": None,
                         "budget_per_capita": b, "value": r.values[i], "value_low": r.intervals[i][0],
                         "value_high": r.intervals[i][1], "dr_cost": r.costs[i], "dr_cost_low": r.cost_intervals[i][0],
                         "dr_cost_high": r.cost_intervals[i][1], "champion_verdict": None,
                         "pct_oracle": pct[name][i] if name in pct else None})
        lo, hi = r.pooled_interval
        rows.append({"evidence_kind": "candidate", "champion_candidate": name, "champion_reference": None,
                     "budget_per_capita": None, "value": r.value, "value_low": lo, "value_high": hi,
                     "dr_cost": float(np.mean(r.costs)), "dr_cost_low": None, "dr_cost_high": None,
                     "champion_verdict": None, "pct_oracle": float(np.mean(pct[name])) if name in pct else None})
    for c in decision.comparisons:
        rows.append({"evidence_kind": "comparison", "champion_candidate": c["candidate"],
                     "champion_reference": c["reference"], "budget_per_capita": c["budget_per_capita"],
                     "value": c["difference"], "value_low": c["low"], "value_high": c["high"], "dr_cost": None,
                     "dr_cost_low": None, "dr_cost_high": None, "champion_verdict": c["verdict"], "pct_oracle": None})
    frame = pd.DataFrame(rows)
    for col in ("budget_per_capita", "value", "value_low", "value_high", "dr_cost", "dr_cost_low", "dr_cost_high",
                "pct_oracle"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    return frame


def headline_text(name: str, budgets: Sequence[float], head: Mapping) -> str:
    """'deploy: X at budget B — better than Y by d [lo, hi]' (the first line of `promo report`)."""
    at = ", ".join(f"{float(b):g}" for b in budgets)
    d = head.get("difference")
    if head.get("reference") is None or d is None or not math.isfinite(float(d)):
        return f"deploy: {name} at budget {at}"
    word = "better than" if d >= 0 else "behind"
    return (f"deploy: {name} at budget {at} — {word} {head['reference']} by {abs(d):.4f} "
            f"[{head['low']:+.4f}, {head['high']:+.4f}] (DR value per user at equal spend, pooled over the budgets)")


def summary_tables(decision: ChampionDecision, pct: Mapping[str, list[float]] | None = None) -> tuple[list, list]:
    """(candidates, comparisons) as rows for display: each candidate's pooled DR value with its
    interval (and % of the oracle where known), best first; each paired comparison."""
    pct = pct or {}
    cands = [{"candidate": n, "DR value (pooled)": round(r.value, 5),
              "interval": f"[{r.pooled_interval[0]:.4f}, {r.pooled_interval[1]:.4f}]",
              **({"% oracle (truth)": round(100 * float(np.mean(pct[n])), 2)} if n in pct else {})}
             for n, r in sorted(decision.results.items(), key=lambda kv: -kv[1].value)]
    comps = [{"candidate": c["candidate"], "reference": c["reference"],
              "budget": "pooled" if c["budget_per_capita"] is None else c["budget_per_capita"],
              "difference": round(c["difference"], 5), "interval": f"[{c['low']:+.4f}, {c['high']:+.4f}]",
              "verdict": c["verdict"]} for c in decision.comparisons]
    return cands, comps

"""Joint allocation of customer coupons and merchant commissions under a ratio budget (Eq. 11–20).

Customers i get one coupon level, merchants one commission level (Eq. 12–15). The objective (Eq. 11)
is the sum of the customers' response scores f^c (redemption probabilities) and the merchants'
response scores f^m; the paper puts both on one scale by *normalizing* f^m: the predicted sharing
count divided by the shares the merchant received in the previous days (``merchant_normalizer``,
the model's ``merchant_normalizer``, floored at 1). Pass it to follow the paper; without it the raw
predicted counts are used (both sides then count redeemed incentives and costs are money).

The ratio budget (Eq. 16) bounds the average incentive per unit of response,

    sum r_j f^c x^c + sum r_j f^m x^m  <=  B * (sum f^c x^c + sum f^m x^m),

with the *same* f^m (normalized when a normalizer is given) in numerator and denominator, so the
merchant cost column is ``commission x f^m``, i.e. the money cost divided by the normalizer. This is
one MCKP with the shifted costs c - B f, solved exactly (LP + one rounded user) by
`promo_assets.allocation.solve_ratio`. The per-request decision rule for the multiplier lambda*
(Eq. 19–20) is

    argmax_j f_ij - lambda* (c_ij - B f_ij)  =  argmin_j f_ij (lambda* r_j - lambda* B - 1)   (c = r f)

for both sides. Departure from the print: Eq. 17–18 and hence Eq. 20 drop the factor f^m on the
merchants' lambda (r_j - B) term (argmin_j lambda* r_j - lambda* B - f^m), which is not the
Lagrangian of Eq. 16 as printed; we keep f^m so that the merchant terms obey Eq. 16, i.e. Eq. 20 is
implemented in the same form as Eq. 19.

"Independent under the same total budget" (`independent_allocation`): the shared total is the
predicted Eq. 16 numerator (total incentive cost, in the units above) of the joint ratio-B policy,
C_J. Each side is first solved on its own under the same ratio B (`solve_ratio`), giving side costs
C_c^B and C_m^B; the total C_J is split in those proportions, b_c = C_J C_c^B / (C_c^B + C_m^B) and
b_m = C_J - b_c, and each side is then solved alone under its absolute budget (`allocation.solve`).
Both policies thus spend the same predicted total (up to the one rounded user per solve); the joint
one chooses the split between the sides, the independent one fixes it beforehand. On the LP of the
predicted curves the joint ratio-B optimum lies on the value-cost frontier (its Lagrangian is
f - lambda*/(1 + lambda* B) c), so it is at least as good as any split of C_J; whether that survives
on the *true* curves is what `compare_joint_independent` measures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from promo_assets.core.errors import DomainError


class JointAllocationError(DomainError, ValueError):
    """Inputs of the joint allocation that do not line up."""


@dataclass
class JointAllocation:
    """Levels per customer and per merchant with the (predicted) totals of the allocation.

    `value`, `cost`, `merchant_value` are in the units the allocation optimized (merchant side
    divided by `merchant_normalizer` when one was given, see the module docstring).
    """

    kind: str  # "joint" | "independent" | "independent_same_ratio" | "split" (split_scan)
    ratio: float
    customer_levels: np.ndarray
    merchant_levels: np.ndarray
    lambda_: float | tuple[float, float]
    value: float
    cost: float
    customer_value: float
    merchant_value: float
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JointCurves:
    """Expected response and cost per node x level of both sides: `customer` a (response, cost) pair
    of N_c x K_c arrays, `merchant` one of N_m x K_m arrays (a model's predictions, or the truth)."""

    customer: tuple[np.ndarray, np.ndarray]
    merchant: tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class JointNodes:
    """What the level frames of `allocate_ratio_budgets` name: the customer and merchant ids (in the
    curves' row order) and the incentive per customer level and commission per merchant level."""

    customer_ids: np.ndarray
    merchant_ids: np.ndarray
    incentives: np.ndarray
    commissions: np.ndarray


def _check(name: str, response: np.ndarray, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v, c = np.asarray(response, dtype=np.float64), np.asarray(cost, dtype=np.float64)
    if v.ndim != 2 or v.shape != c.shape:
        raise JointAllocationError(f"{name} response {v.shape} and cost {c.shape} must be matching N x K arrays")
    if not (np.isfinite(v).all() and np.isfinite(c).all()):
        raise JointAllocationError(f"{name} response and cost must be finite")
    return v, c


def _normalizer(merchant_normalizer, n: int) -> np.ndarray | None:
    if merchant_normalizer is None:
        return None
    norm = np.asarray(merchant_normalizer, dtype=np.float64)
    if norm.shape != (n,):
        raise JointAllocationError(f"merchant_normalizer must have one entry per merchant ({n}), got shape {norm.shape}")
    if not (np.isfinite(norm).all() and (norm > 0).all()):
        raise JointAllocationError("merchant_normalizer must be finite and > 0 (shares in the previous days, floored at 1)")
    return norm


def _inputs(curves: JointCurves, merchant_normalizer) -> JointCurves:
    """The curves checked, as float64, the merchant side divided by `merchant_normalizer` when given."""
    vc, cc = _check("customer", *curves.customer)
    vm, cm = _check("merchant", *curves.merchant)
    norm = _normalizer(merchant_normalizer, vm.shape[0])
    if norm is not None:  # the paper's f^m: count / previous shares; cost r_j f^m scales alike
        vm, cm = vm / norm[:, None], cm / norm[:, None]
    return JointCurves((vc, cc), (vm, cm))


def _pad(a: np.ndarray, k: int) -> np.ndarray:
    """Pad to k columns by repeating level 0 (a copy of a level is never strictly better)."""
    if a.shape[1] == k:
        return a
    return np.concatenate([a, np.repeat(a[:, :1], k - a.shape[1], axis=1)], axis=1)


def decide(response: np.ndarray, cost: np.ndarray, lambda_: float, ratio: float) -> np.ndarray:
    """Eq. 19–20: per-row level argmax_j v_ij - lambda_ (c_ij - ratio v_ij), by the project's one
    decision rule (`promo_assets.allocation.decide`: on ties the cheaper level, then the lower index).

    With c_ij = r_j v_ij this is argmin_j v_ij (lambda_ r_j - lambda_ ratio - 1), Eq. 19, used for the
    merchants too (Eq. 20 with its f^m factor restored, see the module docstring). For merchants pass
    the same (normalized) values and costs the allocation used. Returns an int array of levels.
    """
    from promo_assets import allocation

    v, c = _check("decision", response, cost)
    return allocation.decide(v, c, lambda_, ratio=ratio)


def joint_allocation(
    curves: JointCurves,
    ratio: float,
    *,
    merchant_normalizer: np.ndarray | None = None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> JointAllocation:
    """Solve Eq. 11–16 for both sides at once (one ratio constraint, one lambda*).

    Takes the predicted `curves`: (response, cost) N_c x K_c for customers and N_m x K_m for merchants
    (raw sharing counts and money costs; divided here by `merchant_normalizer`, length N_m, when
    given, the paper's normalization) and the ratio budget B. Returns a JointAllocation (kind "joint") whose
    `value`/`cost` are the predicted Eq. 11 objective and Eq. 16 numerator.
    """
    from promo_assets import allocation

    scaled = _inputs(curves, merchant_normalizer)
    (vc, cc), (vm, cm) = scaled.customer, scaled.merchant
    k = max(vc.shape[1], vm.shape[1])
    values = np.concatenate([_pad(vc, k), _pad(vm, k)])
    costs = np.concatenate([_pad(cc, k), _pad(cm, k)])
    a = allocation.solve_ratio(values, costs, ratio, seed=seed, log=log)
    levels = np.asarray(a.levels)
    lc, lm = levels[: len(vc)].copy(), levels[len(vc):].copy()
    lc[lc >= vc.shape[1]] = 0
    lm[lm >= vm.shape[1]] = 0
    info = {"allocation": a.summary(), "normalized_merchants": merchant_normalizer is not None}
    return _result("joint", ratio, (lc, lm), float(a.lambda_), scaled, info)


def independent_allocation(
    curves: JointCurves,
    ratio: float,
    *,
    total_cost: float | None = None,
    merchant_normalizer: np.ndarray | None = None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> JointAllocation:
    """Each side allocated on its own, under the same total budget as the joint policy.

    Takes the same inputs as `joint_allocation`, plus `total_cost`: the shared total (Eq. 16
    numerator, same units as the allocation); None means the predicted cost of
    `joint_allocation(..., ratio)` on these inputs. The total is split between the sides in
    proportion to the costs each side's own ratio-B solution spends (`solve_ratio` per side), and
    each side is solved alone under its share with `allocation.solve` (see the module docstring).
    Returns a JointAllocation (kind "independent") with `lambda_` = (customer, merchant) multipliers
    of the budget solves and `info` holding the split.

    Raises JointAllocationError for a negative or non-finite `total_cost`, or when a side's share is
    below the cheapest allocation of that side.
    """
    from promo_assets import allocation

    scaled = _inputs(curves, merchant_normalizer)
    (vc, cc), (vm, cm) = scaled.customer, scaled.merchant
    if total_cost is None:
        total_cost = joint_allocation(scaled, ratio, seed=seed, log=log).cost
    total = float(total_cost)
    if not np.isfinite(total) or total < 0:
        raise JointAllocationError(f"total_cost must be finite and >= 0, got {total_cost!r}")
    rc = allocation.solve_ratio(vc, cc, ratio, seed=seed, log=log)
    rm = allocation.solve_ratio(vm, cm, ratio, seed=seed, log=log)
    side_ratio_costs = max(rc.cost, 0.0) + max(rm.cost, 0.0)
    share_c = max(rc.cost, 0.0) / side_ratio_costs if side_ratio_costs > 0 else len(vc) / (len(vc) + len(vm))
    budgets = (total * share_c, total * (1.0 - share_c))
    out = []
    for name, v, c, b in (("customer", vc, cc, budgets[0]), ("merchant", vm, cm, budgets[1])):
        try:
            out.append(allocation.solve(v, c, b, seed=seed, log=log))
        except allocation.InfeasibleBudgetError as exc:
            raise JointAllocationError(f"{name} share {b:.6g} of the total {total:.6g} is infeasible: {exc}") from exc
    ac, am = out
    info = {
        "total_cost": total,
        "customer_share": share_c,
        "customer_budget": budgets[0],
        "merchant_budget": budgets[1],
        "customer_ratio_cost": float(rc.cost),
        "merchant_ratio_cost": float(rm.cost),
        "customer_allocation": ac.summary(),
        "merchant_allocation": am.summary(),
        "normalized_merchants": merchant_normalizer is not None,
    }
    return _result("independent", ratio, (np.asarray(ac.levels), np.asarray(am.levels)),
                   (float(ac.lambda_), float(am.lambda_)), scaled, info)


def independent_same_ratio_allocation(
    curves: JointCurves,
    ratio: float,
    *,
    merchant_normalizer: np.ndarray | None = None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> JointAllocation:
    """Each side alone under the same *ratio* B (`solve_ratio` per side); its total cost generally
    differs from the joint policy's, so it is reported for context only (kind "independent_same_ratio")."""
    from promo_assets import allocation

    scaled = _inputs(curves, merchant_normalizer)
    ac = allocation.solve_ratio(*scaled.customer, ratio, seed=seed, log=log)
    am = allocation.solve_ratio(*scaled.merchant, ratio, seed=seed, log=log)
    return _result(
        "independent_same_ratio", ratio, (np.asarray(ac.levels), np.asarray(am.levels)),
        (float(ac.lambda_), float(am.lambda_)), scaled,
        {"customer_allocation": ac.summary(), "merchant_allocation": am.summary(),
         "normalized_merchants": merchant_normalizer is not None},
    )


def _result(kind, ratio, levels: tuple[np.ndarray, np.ndarray], lam, scaled: JointCurves, info) -> JointAllocation:
    """The allocation of `levels` (customer, merchant) with its totals on the (normalized) curves."""
    lc, lm = levels
    (vc, cc), (vm, cm) = scaled.customer, scaled.merchant
    rc, rm = np.arange(len(lc)), np.arange(len(lm))
    cv, mv = float(vc[rc, lc].sum()), float(vm[rm, lm].sum())
    cost = float(cc[rc, lc].sum() + cm[rm, lm].sum())
    return JointAllocation(kind, float(ratio), lc, lm, lam, cv + mv, cost, cv, mv, info)


def allocation_truth(
    alloc: JointAllocation,
    customer_truth: tuple[np.ndarray, np.ndarray],
    merchant_truth: tuple[np.ndarray, np.ndarray],
    merchant_normalizer: np.ndarray | None = None,
) -> dict[str, float]:
    """True totals of an allocation from (expected_response, expected_cost) N x K arrays per side.

    Returns `true_value` (Eq. 11 objective: expected redemptions + expected merchant responses,
    the latter divided by `merchant_normalizer` when given, as in the allocation), its customer /
    merchant parts, `true_cost` (Eq. 16 numerator in the same units), `true_ratio` = cost / value,
    and the un-normalized money figures `true_spend` (coupons + commissions paid) and
    `true_merchant_count` (expected sharing count).
    """
    (tvc, tcc), (tvm, tcm) = customer_truth, merchant_truth
    if tvc.shape[0] != len(alloc.customer_levels) or tvm.shape[0] != len(alloc.merchant_levels):
        raise JointAllocationError("truth arrays and allocation cover different numbers of customers/merchants")
    norm = _normalizer(merchant_normalizer, tvm.shape[0])
    norm = np.ones(tvm.shape[0]) if norm is None else norm
    rc, rm = np.arange(tvc.shape[0]), np.arange(tvm.shape[0])
    lc, lm = alloc.customer_levels, alloc.merchant_levels
    cv, cc = float(tvc[rc, lc].sum()), float(tcc[rc, lc].sum())
    m_count, m_spend = tvm[rm, lm], tcm[rm, lm]
    mv, mc = float((m_count / norm).sum()), float((m_spend / norm).sum())
    return {
        "true_value": cv + mv,
        "true_customer_value": cv,
        "true_merchant_value": mv,
        "true_cost": cc + mc,
        "true_ratio": (cc + mc) / (cv + mv) if cv + mv > 0 else float("nan"),
        "true_spend": cc + float(m_spend.sum()),
        "true_merchant_count": float(m_count.sum()),
    }


def compare_joint_independent(
    predicted: JointCurves,
    ratio: float,
    truth: JointCurves,
    *,
    merchant_normalizer: np.ndarray | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Joint vs independent allocation at the same total predicted budget, scored on the truth.

    For `source` in ("predicted" — the model's curves, "oracle" — the true curves `truth`): the joint
    ratio-B policy, the independent policy given the joint policy's predicted total cost
    (`independent_allocation(total_cost=joint.cost)`), and, for context, each side under the same
    ratio B (`independent_same_ratio`). Returns {"ratio": B, f"{source}_{kind}": row}, each row the
    `allocation_truth` figures plus `predicted_value` / `predicted_cost` (what the allocation saw).
    All values and costs use `merchant_normalizer` (the paper's scale) when given, raw counts otherwise.
    """
    out: dict[str, Any] = {"ratio": float(ratio), "normalized_merchants": merchant_normalizer is not None}
    for source, curves in (("predicted", predicted), ("oracle", truth)):
        kw = {"merchant_normalizer": merchant_normalizer, "seed": seed}
        j = joint_allocation(curves, ratio, **kw)
        allocs = (j, independent_allocation(curves, ratio, total_cost=j.cost, **kw),
                  independent_same_ratio_allocation(curves, ratio, **kw))
        for a in allocs:
            row = allocation_truth(a, truth.customer, truth.merchant, merchant_normalizer)
            row.update({"predicted_value": a.value, "predicted_cost": a.cost})
            if a.kind == "independent":
                row["customer_share"] = a.info["customer_share"]
            out[f"{source}_{a.kind}"] = row
    return out


def ratio_budgets(raw: Any) -> list[float]:
    """The ratio budgets of campaign.yaml's `ratio_budget` (a number or a list of numbers; absent:
    none). Raises JointAllocationError for anything that is not a finite number >= 0."""
    if raw is None:
        return []
    items = raw if isinstance(raw, list) else [raw]
    try:
        out = [float(r) for r in items]
    except (TypeError, ValueError):
        raise JointAllocationError(f"ratio_budget must be a number or a list of numbers, got {raw!r}") from None
    if any(not np.isfinite(r) or r < 0 for r in out):
        raise JointAllocationError(f"ratio_budget must be finite and >= 0, got {raw!r}")
    return out


def allocate_ratio_budgets(
    curves: JointCurves,
    ratios: list[float],
    nodes: JointNodes,
    *,
    merchant_normalizer: np.ndarray | None = None,
    truth: JointCurves | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[list[dict[str, Any]], list[Any]]:
    """For every ratio budget: the joint allocation and the independent one under the joint
    policy's predicted total cost (`independent_allocation(total_cost=joint.cost)`).

    Returns (rows, level frames): one row per ratio with `ratio_budget`, `joint_lambda`,
    `{kind}_value` / `{kind}_cost` (predicted) and, with `truth` over the same nodes,
    `{kind}_true_value` / `{kind}_true_cost`; a ratio the solver refuses gets a row with its `note`
    instead. Each level frame holds ratio_budget, kind, side, node_id, level, incentive for one side
    of one allocation (ids and amounts from `nodes`)."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    levels: list[Any] = []
    for ratio in ratios:
        row: dict[str, Any] = {"ratio_budget": ratio, "note": None}
        try:
            joint = joint_allocation(curves, ratio, merchant_normalizer=merchant_normalizer, log=log)
            allocs = {"joint": joint, "independent": independent_allocation(
                curves, ratio, total_cost=joint.cost, merchant_normalizer=merchant_normalizer)}
        except ValueError as exc:
            row["note"] = str(exc)
            rows.append(row)
            if log is not None:
                log(f"ratio {ratio}: {exc}")
            continue
        row["joint_lambda"] = float(joint.lambda_)
        for kind, a in allocs.items():
            row[f"{kind}_value"], row[f"{kind}_cost"] = a.value, a.cost
            if truth is not None:
                t = allocation_truth(a, truth.customer, truth.merchant, merchant_normalizer)
                row[f"{kind}_true_value"], row[f"{kind}_true_cost"] = t["true_value"], t["true_cost"]
            for side, ids, lv, amounts in (("customer", nodes.customer_ids, a.customer_levels, nodes.incentives),
                                           ("merchant", nodes.merchant_ids, a.merchant_levels, nodes.commissions)):
                levels.append(pd.DataFrame({"ratio_budget": ratio, "kind": kind, "side": side, "node_id": ids,
                                            "level": lv.astype(np.int32), "incentive": np.asarray(amounts)[lv]}))
        rows.append(row)
    return rows, levels


def split_scan(
    curves: JointCurves,
    total_cost: float,
    shares: np.ndarray,
    truth: JointCurves,
    *,
    merchant_normalizer: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """How the true value depends on the split of one total budget between the sides.

    For each customer share s in `shares` (fractions in [0, 1]), each side is allocated alone on its
    predicted LP frontier (`allocation.frontier`) under s * `total_cost` (customers) and
    (1 - s) * `total_cost` (merchants), the units of the allocation (merchants divided by
    `merchant_normalizer` when given), and the pair is scored on the truth. The joint ratio-B policy
    is one point of this family (the split where the two sides' predicted frontier slopes meet),
    the independent policy another (its fixed split); this curve shows how much the choice of split
    is worth, and how far the predicted slopes are from crossing where the true value peaks.

    Returns arrays over the shares: `share`, `true_value`, `true_cost` (same units), and
    `customer_slope` / `merchant_slope`, the predicted frontier slopes (d value / d cost) of each
    side at its part of the budget. Raises JointAllocationError for shares outside [0, 1] or a
    share whose part is below a side's cheapest allocation.
    """
    from promo_assets import allocation

    scaled = _inputs(curves, merchant_normalizer)
    s = np.asarray(shares, dtype=np.float64).ravel()
    if s.size == 0 or not np.isfinite(s).all() or (s < 0).any() or (s > 1).any():
        raise JointAllocationError(f"shares must be fractions in [0, 1], got {shares!r}")
    total = float(total_cost)
    if not np.isfinite(total) or total < 0:
        raise JointAllocationError(f"total_cost must be finite and >= 0, got {total_cost!r}")
    fc, fm = allocation.frontier(*scaled.customer), allocation.frontier(*scaled.merchant)
    out = {k: np.empty(s.size) for k in ("true_value", "true_cost", "customer_slope", "merchant_slope")}
    for i, share in enumerate(s):
        bc, bm = total * share, total * (1.0 - share)
        try:
            lc, lm = np.asarray(fc.allocation(bc).levels), np.asarray(fm.allocation(bm).levels)
        except allocation.InfeasibleBudgetError as exc:
            raise JointAllocationError(f"customer share {share:.4g} of {total:.6g} is infeasible: {exc}") from exc
        split = _result("split", float("nan"), (lc, lm), float("nan"), scaled, {"customer_share": float(share)})
        t = allocation_truth(split, truth.customer, truth.merchant, merchant_normalizer)
        out["true_value"][i], out["true_cost"][i] = t["true_value"], t["true_cost"]
        out["customer_slope"][i], out["merchant_slope"][i] = fc.lambda_at(bc), fm.lambda_at(bm)
    return {"share": s, **out}

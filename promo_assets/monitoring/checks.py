"""The monitoring checks over a campaign's deployed days, and the cumulative effect read every day.

- `cumulative(days, confidence, planned)`: for every deployed day, the effect so far (the deployed
  days up to it) with its confidence sequence (valid however often it is read), the fixed-sample
  interval beside it (valid for one look only; shown for its width) and the plain difference of means
  between the champion and explore groups with its interval.
- `run_checks(...)`: the checks of campaign.yaml `monitoring:`, each with its verdict, message,
  severity, the reaction configured for it and the day the failure started (a reaction's change day).

| check | fails when |
| --- | --- |
| `outcomes_joined` | a decided day's events were refused (came back twice, propensities differ, ambiguous) |
| `realized_vs_predicted` | the latest day's realized response or spend is off the prediction by more than `realized_tolerance` (relative) beyond its sampling noise, or one segment's response (a value of a categorical feature) by more than twice that beyond its noise (Bonferroni over the segments) |
| `effect_below_zero` | the effect's upper bound over the last `effect_days` deployed days is below 0 |
| `population_drift` | a feature of the users decided for drifted from the training events (PSI, range, new categories) |
| `compliance` | the share of the latest day's events at their decided level is below `min_compliance` |
| `freshness` | a decided day's events are late, or the decision in force (the newest not stopped) is older than `max_decision_age_days` |

No dagster here (domain code).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import NamedTuple

from scipy.stats import norm

from promo_assets.monitoring import sequential

CHECKS = {
    "outcomes_joined": "Every decided day's events were joined to the decision they answer (none refused).",
    "realized_vs_predicted": "The latest day's realized response and spend are within the prediction (campaign.yaml "
                             "monitoring.realized_tolerance, beyond sampling noise).",
    "effect_below_zero": "The champion's effect against random levels at equal spend is not below 0 over the last "
                         "monitoring.effect_days deployed days (upper bound of the confidence sequence).",
    "population_drift": "The users decided for have not drifted from the training events (PSI, training range, new "
                        "categories; monitoring.psi_threshold, out_of_range_share, new_category_share).",
    "compliance": "The coupon system applied the decisions (share of events at their decided level >= "
                  "monitoring.min_compliance).",
    "freshness": "Every decided day's events arrived (monitoring.grace_days) and the decision in force (the newest "
                 "whose export was not stopped) is younger than monitoring.max_decision_age_days.",
}


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    passed: bool
    message: str
    severity: str = "WARN"          # 'WARN' | 'ERROR'
    reaction: str = "warn"
    change_day: dt.date | None = None   # the first day of the failure (the reaction's change day)
    segments: tuple[tuple[str, str], ...] = ()  # (feature, value) of the segments off during the failure

    @property
    def acts(self) -> bool:
        """A failed check whose reaction is more than a warning."""
        return not self.passed and self.reaction != "warn"


class _Pooled(NamedTuple):
    """A pooled mean with its confidence sequence (low, high) and its fixed-sample interval."""

    mean: float
    low: float
    high: float
    fixed_low: float
    fixed_high: float


def _interval(total: float, ss: float, n: float, alpha: float, planned: float) -> _Pooled:
    """The pooled mean and intervals from pooled sums (Σψ, Σ(ψ − day mean)², n)."""
    if n < 2:
        return _Pooled(*(math.nan,) * 5)
    mean, sd = total / n, math.sqrt(max(ss, 0.0) / n)
    r, f = sequential.radius(sd, n, alpha, planned), sequential.fixed_radius(sd, n, alpha)
    return _Pooled(mean, mean - r, mean + r, mean - f, mean + f)


def cumulative(days: list[dict], confidence: float, planned: float) -> list[dict]:
    """One row per deployed day (ascending `day`, status 'ok' only): the effect over the deployed days up
    to it (`effect`, `low`, `high`: the confidence sequence; `fixed_low`, `fixed_high`), against the
    cheapest level (`vs_cheapest*`) and the difference of means (`dm_effect`, `dm_low`, `dm_high`)."""
    alpha = 1.0 - confidence
    z = float(norm.ppf(1 - alpha / 2))
    out, acc = [], {"n": 0.0, "sum": 0.0, "ss": 0.0, "csum": 0.0, "css": 0.0, "dm_w": 0.0, "dm_var": 0.0, "days": 0}
    for d in sorted(days, key=lambda r: r["day"]):
        acc["n"] += d["psi_n"]
        acc["sum"] += d["psi_sum"]
        acc["ss"] += d["psi_ss"]
        acc["csum"] += d["cheap_sum"]
        acc["css"] += d["cheap_ss"]
        acc["days"] += 1
        if math.isfinite(d.get("dm_effect", math.nan)) and math.isfinite(d.get("dm_var", math.nan)):
            acc["dm_w"] += d["psi_n"] * d["dm_effect"]
            acc["dm_var"] += d["psi_n"] ** 2 * d["dm_var"]
            acc.setdefault("dm_n", 0.0)
            acc["dm_n"] = acc.get("dm_n", 0.0) + d["psi_n"]
        e = _interval(acc["sum"], acc["ss"], acc["n"], alpha, planned)
        c = _interval(acc["csum"], acc["css"], acc["n"], alpha, planned)
        dm_n = acc.get("dm_n", 0.0)
        dm = acc["dm_w"] / dm_n if dm_n else math.nan
        dm_se = math.sqrt(acc["dm_var"]) / dm_n if dm_n else math.nan
        out.append({"day": d["day"], "days": acc["days"], "events": int(acc["n"]), "effect": e.mean, "low": e.low,
                    "high": e.high, "fixed_low": e.fixed_low, "fixed_high": e.fixed_high, "vs_cheapest": c.mean,
                    "vs_cheapest_low": c.low, "vs_cheapest_high": c.high, "dm_effect": dm, "dm_low": dm - z * dm_se,
                    "dm_high": dm + z * dm_se})
    return out


def _episode_start(n: int, failing, settle: int = 1) -> int | None:
    """The index of the first failing look of the failure that goes on at the latest look `n - 1` (None if
    it passes): looking back, fewer than `settle` passing looks in a row do not end the failure (a model
    still learning a change passes a day now and then; it is the same change, not a new one)."""
    start, passing = None, 0
    for i in range(n - 1, -1, -1):
        if failing(i):
            start, passing = i, 0
        else:
            if start is None:
                return None
            passing += 1
            if passing >= settle:
                break
    return start


def _streak_start(days: list[dict], failing, settle: int = 1) -> dt.date | None:
    """The first day of the failure that goes on at the latest day (None if it passes; `_episode_start`)."""
    ok = sorted(days, key=lambda r: r["day"])
    i = _episode_start(len(ok), lambda j: failing(ok[j]), settle)
    return None if i is None else ok[i]["day"]


def _off(d: dict, tol: float, z: float) -> list[dict]:
    """The segment rows of a day's outcome row (`segments`) whose response is off the prediction by more
    than twice `tol` beyond their noise (Bonferroni over the segments)."""
    segs = d.get("segments") or []
    zs = float(norm.ppf(1 - (1 - norm.cdf(z)) / max(1, len(segs))))  # Bonferroni over the segments
    return [s for s in segs if s["predicted"] > 0 and abs(s["realized"] - s["predicted"])
            > 2 * tol * s["predicted"] + (zs * s["se"] if math.isfinite(s["se"]) else 0.0)]


def segments_off(d: dict, tol: float, z: float) -> list[str]:
    """The segments of a day's outcome row whose response is off the prediction (`_off`), one message each."""
    return [f"{s['segment']}: realized response {s['realized']:.4g} per event against {s['predicted']:.4g} "
            f"predicted ({(s['realized'] - s['predicted']) / s['predicted']:+.1%}, {s['events']} events)"
            for s in _off(d, tol, z)]


def failure_segments(days: list[dict], start: dt.date | None, tol: float, z: float) -> tuple[tuple[str, str], ...]:
    """The (feature, value) of every segment off its prediction on a deployed day from `start` on (the
    failure of realized_vs_predicted): where the response changed, for a `retrain` limited to them."""
    if start is None:
        return ()
    return tuple(sorted({(s["feature"], s["value"]) for d in days if d["day"] >= start
                         for s in _off(d, tol, z) if "feature" in s}))


def check_z(settings) -> float:
    """The noise allowance of realized_vs_predicted: two-sided at `confidence`, response and spend."""
    return float(norm.ppf(1 - (1.0 - settings.confidence) / 4))


def _realized_fails(d: dict, tol: float, z: float) -> list[str]:
    out = segments_off(d, tol, z)
    stored = d.get("segments_off")  # a carried day (its segment rows gone): its verdict when it was read
    if not d.get("segments") and stored is not None and stored == stored and stored > 0:
        out.append(f"{int(stored)} segment(s) off their prediction when the day was read")
    for what, real, pred, se in (("response", d["realized_response"], d["predicted_response"], d["realized_response_se"]),
                                 ("spend", d["realized_cost"], d["predicted_cost"], d["realized_cost_se"])):
        noise = z * se if math.isfinite(se) else 0.0
        if abs(real - pred) > tol * abs(pred) + noise:
            out.append(f"realized {what} {real:.4g} per event against {pred:.4g} predicted "
                       f"({(real - pred) / pred if pred else math.inf:+.1%}; tolerance {tol:.0%} + noise {noise:.2g})")
    return out


def run_checks(settings, days: list[dict], refused: list[dict], drift, late_days: list[dt.date],
               decision_age_days: float | None, stopped: str | None = None) -> list[CheckOutcome]:
    """Every check of CHECKS over the deployed days' outcome rows (`days`: status 'ok', each with `day`),
    the refused days (`day`, `reason`), the latest population's feature drift (FeatureDrift list), the
    decided days whose events are late and the age of the decision in force (None: no decision;
    `freshness_check`, with `stopped`)."""
    z = check_z(settings)
    ok = sorted(days, key=lambda r: r["day"])
    out: list[CheckOutcome] = []

    def outcome(name, passed, message, change=None, segments=()):
        out.append(_reacting(settings, name, passed, message, change, segments))

    if refused:
        latest = max(refused, key=lambda r: r["day"])
        out.append(CheckOutcome("outcomes_joined", False, f"{len(refused)} decided day(s) refused; latest "
                                f"{latest['day']}: {latest['reason']}", "ERROR", "warn", latest["day"]))
    else:
        out.append(CheckOutcome("outcomes_joined", True, f"{len(ok)} decided day(s) joined to their decisions"))

    tol = settings.realized_tolerance
    if ok:
        last = ok[-1]
        fails = _realized_fails(last, tol, z)
        start = _streak_start(ok, lambda d: bool(_realized_fails(d, tol, z)), settings.settle_days)
        outcome("realized_vs_predicted", not fails, f"{last['day']}: " + ("; ".join(fails) if fails else
                f"realized response {last['realized_response']:.4g} and spend {last['realized_cost']:.4g} per event, "
                f"predicted {last['predicted_response']:.4g} and {last['predicted_cost']:.4g}"), start if fails else None,
                failure_segments(ok, start, tol, z) if fails else ())
    else:
        outcome("realized_vs_predicted", True, "no deployed day has come back yet")

    if ok:
        n_days = settings.effect_days

        def effect_upto(i: int) -> dict:  # the check as read on deployed day i: its last `effect_days` days
            return cumulative(ok[max(0, i - n_days + 1):i + 1], settings.confidence, settings.planned_events)[-1]

        def below_at(i: int) -> bool:
            high = effect_upto(i)["high"]
            return math.isfinite(high) and high < 0

        recent, eff = ok[-n_days:], effect_upto(len(ok) - 1)
        below = math.isfinite(eff["high"]) and eff["high"] < 0
        first = _episode_start(len(ok), below_at, settings.settle_days) if below else None
        outcome("effect_below_zero", not below,
                f"effect against random levels at equal spend over the last {len(recent)} deployed day(s): "
                f"{eff['effect']:+.4g} per user [{eff['low']:+.4g}, {eff['high']:+.4g}]",
                ok[max(0, first - n_days + 1)]["day"] if first is not None else None)
    else:
        outcome("effect_below_zero", True, "no deployed day has come back yet")

    flagged = [f for f in drift if f.flagged]
    outcome("population_drift", not flagged, ("; ".join(f.describe() for f in flagged) if flagged else
            f"{len(drift)} feature(s) within the thresholds" if drift else "no population to compare"),
            None)

    if ok:
        last = ok[-1]
        low = last["compliance"] < settings.min_compliance
        outcome("compliance", not low, f"{last['day']}: {last['compliance']:.1%} of {last['joined']} events at their "
                f"decided level (minimum {settings.min_compliance:.0%}); {last['undecided_incentive']} incentive(s) "
                "to users never decided for", _streak_start(ok, lambda d: d["compliance"] < settings.min_compliance,
                                                                 settings.settle_days)
                if low else None)
    else:
        outcome("compliance", True, "no deployed day has come back yet")

    out.append(freshness_check(settings, late_days, decision_age_days, stopped))
    return out


def freshness_check(settings, late: list[dt.date], decision_age_days: float | None,
                    stopped: str | None = None) -> CheckOutcome:
    """The `freshness` check: the decided days whose events are late (`late_days`) and the age of the
    decision in force (the newest whose export was not stopped, promo_assets.monitoring.exported); `stopped`:
    the export-stopped line, said with a failure. The outcomes asset runs it, and `promo report` again at
    the time it is asked."""
    problems = []
    if late:
        problems.append(f"the events of decided day(s) {', '.join(map(str, late))} have not arrived "
                        f"({settings.grace_days} day(s) of grace)")
    if decision_age_days is not None and decision_age_days > settings.max_decision_age_days:
        problems.append(f"the decision in force is {decision_age_days:.1f} days old (maximum "
                        f"{settings.max_decision_age_days:g})" + (f"; {stopped}" if stopped else ""))
    return _reacting(settings, "freshness", not problems, "; ".join(problems) if problems else
                     ("no decision yet" if decision_age_days is None else
                      f"the decision in force is {decision_age_days:.2f} days old, every decided day's events on time"),
                     min(late) if late else None)


def _reacting(settings, name: str, passed: bool, message: str, change: dt.date | None = None,
              segments=()) -> CheckOutcome:
    """Check `name`'s outcome with the reaction campaign.yaml sets for it (ERROR when a failure's reaction acts)."""
    reaction = getattr(settings.reactions, name, "warn")
    return CheckOutcome(name, passed, message, "WARN" if reaction == "warn" or passed else "ERROR", reaction, change,
                        tuple(segments))


def late_days(decided: list[tuple[dt.date, dt.datetime]], loaded: set, now: dt.datetime, grace_days: int) -> list[dt.date]:
    """Decided days (day, decided_at) whose events are not loaded although due: the day has ended (or
    the decision was made, if later) more than `grace_days` days ago."""
    out = []
    for day, decided_at in decided:
        if day in loaded:
            continue
        due = max(day, decided_at.date()) + dt.timedelta(days=1 + grace_days)
        if now.date() > due:
            out.append(day)
    return sorted(out)

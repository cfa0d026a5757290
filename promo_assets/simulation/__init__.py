"""Campaign simulator: writes the landing format of DESIGN.md plus the ground truth.

    simulate(preset, SimulationRequest(campaign, landing_dir, days, users, seed, start), **options) -> SimulationSummary

Presets (``PRESETS``, name -> :class:`Preset` with ``description`` and ``defaults``):
  demo                the built-in coupon campaign (promo_assets.simulation.demo)
  dipn_synthetic_1/2  the DIPN paper's generator, Eq. 18-20 (promo_assets.simulation.dipn)
  e2e_synthetic       the end-to-end paper's K=4 data set (promo_assets.simulation.e2e)
  coman_spatiotemporal  multi-attribute coupons / fee waivers, period-of-day and city curves (simulation.coman)
  dfcl_discount       the DFCL paper's five-level discount campaign (promo_assets.simulation.dfcl)
  uplift_two_arm      two-arm uplift RCT shaped like CRITEO-UPLIFT v2 (promo_assets.simulation.uplift)
  bipartite           registered when promo_assets.simulation.bipartite exists

The closed loop: ``respond(campaign_dir, decision_file, day)`` writes day `day`'s events of an existing
simulated campaign as its population answers an exported decision file (the outbox's
`<budget>.parquet|csv`: user_id, level, propensity), the decision's propensities logged.

A planted change (``simulate(..., change=Change(day, response_shift, population_shift, compliance))``,
promo_assets.simulation.change): the true curves and/or the population shift from a day on, and the
coupon system applies only part of the decisions; kept in campaign.yaml's `simulation.change` block,
so every later `respond` honours it.

Truth readers: ``truth_arrays(campaign_dir, user_ids) -> (values N x K, costs N x K)`` (the truth
file, as of the last RCT day), ``truth_on(campaign_dir, day, user_ids)`` (the truth on any day, the
change included, rebuilt from campaign.yaml), ``true_propensity_arrays``, ``load_truth``, ``truth_user_ids``.
No dagster import here (domain package).
"""

from __future__ import annotations

import datetime as dt
import importlib
import importlib.util
import inspect
import shutil
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from promo_assets.decisions.outbox import OutboxError, decision_file_date, read_decision_file
from promo_assets.ingestion.ids import clean_user_ids
from promo_assets.simulation import (
    coman as _coman,
    demo as _demo,
    dfcl as _dfcl,
    dipn as _dipn,
    e2e as _e2e,
    uplift as _uplift,
)
from promo_assets.simulation.change import Change
from promo_assets.simulation.landing import (
    REFERENCE_START,
    Log,
    Response,
    SimulationError,
    SimulationRequest,
    SimulationSummary,
    capturing,
    changing,
    existing_simulation,
    responding,
    summary_from_folder,
    user_ids as pool_user_ids,
)
from promo_assets.simulation.truth import (
    TruthError,
    load_truth,
    true_propensity_arrays,
    truth_arrays,
    truth_user_ids,
)

__all__ = [
    "PRESETS", "REFERENCE_START", "Change", "Preset", "SimulationError", "SimulationRequest", "SimulationSummary",
    "TruthError", "load_truth", "respond", "simulate", "true_propensity_arrays", "truth_arrays", "truth_on", "truth_user_ids",
]


@dataclass(frozen=True)
class Preset:
    """A simulator preset: `run(request: SimulationRequest, **options) -> SimulationSummary`."""

    name: str
    description: str
    defaults: dict[str, Any] = field(default_factory=dict)
    run: Callable[..., SimulationSummary] | None = None
    respondable: bool = True  # its runner writes through landing.write_campaign (`respond` works)


PRESETS: dict[str, Preset] = {
    "demo": Preset("demo", _demo.DESCRIPTION, dict(_demo.DEFAULTS), _demo.simulate_demo),
    "dipn_synthetic_1": Preset(
        "dipn_synthetic_1", _dipn.DESCRIPTION["dipn_synthetic_1"], dict(_dipn.DEFAULTS),
        partial(_dipn.simulate_dipn, variant="dipn_synthetic_1"),
    ),
    "dipn_synthetic_2": Preset(
        "dipn_synthetic_2", _dipn.DESCRIPTION["dipn_synthetic_2"], dict(_dipn.DEFAULTS),
        partial(_dipn.simulate_dipn, variant="dipn_synthetic_2"),
    ),
    "e2e_synthetic": Preset("e2e_synthetic", _e2e.DESCRIPTION, dict(_e2e.DEFAULTS), _e2e.simulate_e2e),
    "coman_spatiotemporal": Preset("coman_spatiotemporal", _coman.DESCRIPTION, dict(_coman.DEFAULTS),
                                   _coman.simulate_coman),
    "dfcl_discount": Preset("dfcl_discount", _dfcl.DESCRIPTION, dict(_dfcl.DEFAULTS), _dfcl.simulate_dfcl),
    "uplift_two_arm": Preset(
        "uplift_two_arm", _uplift.DESCRIPTION, dict(_uplift.DEFAULTS), _uplift.simulate_uplift_two_arm,
    ),
}

# The bipartite preset (GNN/hazard setting) lives in its own module, written separately; it is
# registered only when that module exists (an error inside it is not hidden).
if importlib.util.find_spec("promo_assets.simulation.bipartite") is not None:
    _bipartite = importlib.import_module("promo_assets.simulation.bipartite")
    PRESETS["bipartite"] = Preset(
        "bipartite", getattr(_bipartite, "DESCRIPTION", "customer-merchant bipartite campaign"),
        dict(getattr(_bipartite, "DEFAULTS", {})), _bipartite.simulate_bipartite, respondable=False,
    )


def _accepted(run: Callable[..., Any]) -> tuple[set[str], bool]:
    params = inspect.signature(run).parameters
    names = {n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return names, any(p.kind == p.VAR_KEYWORD for p in params.values())


def simulate(preset: str, request: SimulationRequest, *, overwrite: bool = False, log: Log = None,
             change: Change | None = None, **options: Any) -> SimulationSummary:
    """Simulate a campaign of preset `preset` (a key of PRESETS) as `request` asks (a SimulationRequest:
    campaign name, landing folder, days, users, seed, start) into ``<landing_dir>/<campaign>/`` and
    return what was written.

    overwrite: clear the folder's events/population/truth/edges first (otherwise writing a *different*
    simulated pool into an existing simulated campaign is refused, while the same pool may be extended
    by more days); log: progress callback (one line per day file); change: a planted Change (see
    promo_assets.simulation.change), whose day must come after the request's start; kept in
    campaign.yaml (`simulation.change`) for every later `respond` (None: the files are exactly those
    of a campaign without a change); options: preset options (see PRESETS[preset].defaults), e.g.
    ``daily_active=0.5``, ``logging="confounded"``.
    Raises SimulationError (a ValueError) for an unknown preset/option, an invalid campaign name or bad sizes.
    Returns a SimulationSummary for every preset (a runner's own dict report lands in `.details`).
    """
    if preset not in PRESETS:
        raise SimulationError(f"unknown preset {preset!r}; known presets: {sorted(PRESETS)}")
    spec = PRESETS[preset]
    request = request.resolved()
    names, var_kw = _accepted(spec.run)
    allowed = names - {"request", "log", "variant"}
    unknown = sorted(set(options) - allowed) if not var_kw else []
    if unknown:
        allowed = sorted(allowed)
        raise SimulationError(f"preset {preset!r} has no option(s) {unknown}; options: {allowed}")
    if change is not None and change.day is not None and change.day <= request.start:
        raise SimulationError(f"--change-day {change.day} must come after the first simulated day {request.start} "
                              "(the change needs days before it)")
    if change is not None and not spec.respondable:
        raise SimulationError(f"preset {preset!r} cannot plant a change (only the presets that answer decisions can)")
    campaign_dir = request.campaign_dir
    if overwrite and campaign_dir.exists():
        for sub in ("events", "population", "truth", "edges"):
            if (campaign_dir / sub).exists():
                shutil.rmtree(campaign_dir / sub)
        (campaign_dir / "campaign.yaml").unlink(missing_ok=True)
    kwargs = dict(options)
    if "log" in names or var_kw:
        kwargs["log"] = log
    with changing(change):
        result = spec.run(request, **kwargs)
    if isinstance(result, SimulationSummary):
        return result
    # a preset runner that reports a plain dict (bipartite): read the summary back from the folder
    details = result if isinstance(result, dict) else {}
    return summary_from_folder(campaign_dir, preset, request.seed, request.users, details)


def respond(campaign_dir: str | Path, decision_file: str | Path, day: dt.date, *, preset: str | None = None,
            log: Log = None) -> SimulationSummary:
    """Day `day`'s events of the simulated campaign in `campaign_dir` as its population answers the
    decisions in `decision_file` (columns user_id, level, propensity; an outbox file), the truth known.

    The pool is rebuilt from campaign.yaml's `simulation:` block (preset, seed, users, options: the
    same users, features and true curves); `preset`, when given, must be that preset. The same share
    of the decided users as on an RCT day answers (`daily_active`), each at its decided level, and the
    day's file logs the decision's propensities, so ingestion and IPS use them. campaign.yaml and the
    truth are not touched; a day that already has events is refused. The user ids follow the landing
    folder's rule (`promo_assets.ingestion.ids`); a file in an outbox folder is answered for its date
    only (`outbox.decision_file_date`: its manifest's, else its folder's name). Raises
    SimulationError (a bad or empty file, another day than the file's, unknown users, levels or
    propensities out of range, a campaign that was not simulated)."""
    campaign_dir = Path(campaign_dir)
    stored = _stored_simulation(campaign_dir, preset, log)
    spec, sim, change, kwargs = stored.preset, stored.block, stored.change, stored.kwargs
    day = _day(day, "day")
    try:
        frame = read_decision_file(Path(decision_file))
    except (OutboxError, OSError, ValueError) as exc:
        raise SimulationError(f"{decision_file}: cannot read the decisions: {exc}") from None
    missing = [c for c in ("user_id", "level", "propensity") if c not in frame.columns]
    if missing:
        raise SimulationError(f"{decision_file}: a decision file needs the columns user_id, level, propensity; "
                              f"missing {missing}")
    if frame.empty:
        raise SimulationError(f"{decision_file}: holds no decisions (a header at most); nothing was written")
    try:
        written_for = decision_file_date(Path(decision_file))
    except OutboxError as exc:
        raise SimulationError(f"{decision_file}: cannot read the decisions' date: {exc}") from None
    if written_for is not None and written_for[0] != day:
        raise SimulationError(f"{decision_file}: the decisions are for {written_for[0]} ({written_for[1]}), not for "
                              f"the day asked, {day}; answer them for {written_for[0]}")
    try:
        frame["user_id"] = clean_user_ids(frame["user_id"])
    except ValueError as exc:
        raise SimulationError(f"{decision_file}: {exc}") from None
    levels = pd.to_numeric(frame["level"], errors="coerce")
    if levels.isna().any() or (levels % 1 != 0).any():
        raise SimulationError(f"{decision_file}: column 'level' must hold level indexes (whole numbers)")
    response = Response(day=day, user_ids=frame["user_id"].astype(str).to_numpy(),
                        levels=levels.to_numpy().astype(np.int64),
                        propensity=pd.to_numeric(frame["propensity"], errors="coerce").to_numpy(dtype=np.float64))
    with responding(response), changing(change):
        result = spec.run(_request(campaign_dir, sim, day), **kwargs)
    if not isinstance(result, SimulationSummary) or "decided_users" not in result.details:
        raise SimulationError(f"preset {spec.name!r} did not answer the decisions")
    return result


def truth_on(campaign_dir: str | Path, day: dt.date | str, user_ids: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """The true (expected_response, expected_cost), each N x K, of users `user_ids` (None: every pool
    user, in the truth file's order) on `day`, the planted change included (a shifted user's truth
    as of its shifted features, e.g. a new city). The pool is rebuilt from campaign.yaml's
    `simulation:` block, as `respond` does; truth/response.parquet is not read. Raises
    SimulationError for a campaign that was not simulated (or cannot answer decisions) and
    TruthError for user ids outside the simulated pool."""
    campaign_dir = Path(campaign_dir)
    stored = _stored_simulation(campaign_dir, None, None)
    spec, sim, change, kwargs = stored.preset, stored.block, stored.change, stored.kwargs
    day = _day(day, "day")
    with capturing() as captured, changing(change):
        spec.run(_request(campaign_dir, sim, day), **kwargs)
    if captured.pool is None:
        raise SimulationError(f"preset {spec.name!r} did not hand over its pool")
    pool = captured.pool.on(day)
    values, costs = pool.expected_response, pool.expected_cost
    if user_ids is None:
        return values.copy(), costs.copy()
    index = pd.Index(pool_user_ids(pool.n_users).to_numpy(zero_copy_only=False))
    wanted = np.asarray(user_ids, dtype=object)
    rows = index.get_indexer(pd.Index(wanted))
    missing = np.flatnonzero(rows < 0)
    if missing.size:
        raise TruthError(f"{campaign_dir}: {missing.size} user ids are not in the simulated pool, e.g. "
                         f"{[str(wanted[i]) for i in missing[:5]]}")
    return values[rows], costs[rows]


def _request(campaign_dir: Path, sim: dict[str, Any], day: dt.date) -> SimulationRequest:
    """One day `day` of the simulated campaign in `campaign_dir`, its pool as campaign.yaml's `simulation:`
    block `sim` records."""
    return SimulationRequest(campaign_dir.name, campaign_dir.parent, 1, int(sim["users"]), int(sim["seed"]), day)


def _day(value: Any, what: str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise SimulationError(f"{what} must be a date (YYYY-MM-DD), got {value!r}") from None


@dataclass(frozen=True)
class _Stored:
    """A simulated campaign as its campaign.yaml records it: the `preset`, the `simulation:` `block`,
    the planted `change` and the runner's keyword arguments `kwargs`."""

    preset: Preset
    block: dict[str, Any]
    change: Change | None
    kwargs: dict[str, Any]


def _stored_simulation(campaign_dir: Path, preset: str | None, log: Log) -> _Stored:
    """What a simulated campaign's campaign.yaml records, to rebuild the same pool (`respond`, `truth_on`)."""
    sim = existing_simulation(campaign_dir)
    if not sim or "preset" not in sim:
        raise SimulationError(f"{campaign_dir}: not a simulated campaign (its campaign.yaml has no `simulation:` block "
                              "written by `promo simulate`)")
    name = sim["preset"]
    if preset is not None and preset != name:
        raise SimulationError(f"{campaign_dir} was simulated with preset {name!r}, not {preset!r}")
    if name not in PRESETS:
        raise SimulationError(f"{campaign_dir}: unknown preset {name!r} in campaign.yaml")
    spec = PRESETS[name]
    if not spec.respondable:
        raise SimulationError(f"preset {name!r} cannot answer exported decisions (only the single-sided presets can: "
                              f"{', '.join(p for p, s in PRESETS.items() if s.respondable)})")
    change = Change.from_stored(sim.get("change"))
    options = dict(sim.get("options") or {})
    names, var_kw = _accepted(spec.run)
    kwargs = {k: v for k, v in options.items() if k in names or var_kw}
    if "log" in names or var_kw:
        kwargs["log"] = log
    return _Stored(spec, sim, change, kwargs)

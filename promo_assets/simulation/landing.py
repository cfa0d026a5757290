"""Shared machinery of the simulator presets: a simulated user pool and the landing-folder writer.

A preset builds a :class:`Pool` (user features, the true expected response and cost of every user
at every level, and the logging policy) and hands it to :func:`write_campaign`, which writes the
landing format of DESIGN.md ("Data contract"):

    <campaign_dir>/campaign.yaml
    <campaign_dir>/events/<YYYY-MM-DD>.parquet      one RCT event per active user and day
    <campaign_dir>/population/<last date>.parquet   every pool user + features
    <campaign_dir>/truth/response.parquet           user_id, level, incentive, expected_response, expected_cost
    <campaign_dir>/truth/propensity.parquet         user_id, level, propensity (non-uniform logging only)

Inside ``responding(Response(...))`` (`promo_assets.simulation.respond`, the closed loop) `write_campaign`
writes instead one day of an existing campaign as its users answer exported decisions
(`write_response_day`): same pool, the decided levels, the decisions' propensities logged.

Determinism: the pool is drawn from the stream ``SeedSequence([seed, 0])`` and day ``d`` from
``SeedSequence([seed, 1, d.toordinal()])``, so the same arguments give byte-identical files, and
simulating days one at a time (a daily refresh) gives the same day files as simulating them at once.
Files are written with pyarrow straight from Arrow arrays (no pandas metadata).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from promo_assets.config import settings
from promo_assets.config.campaign import CampaignConfig, CampaignNameError, check_campaign_name, dump_campaign_yaml
from promo_assets.core.errors import DomainError

Log = Callable[[str], None] | None

#: The start date of every campaign the project's tests and benchmarks simulate. A simulated campaign is
#: its preset, seed *and* start date (day d is drawn from d's ordinal), and `SimulationRequest`'s default
#: start is today minus the days: a fixed start makes a test's or benchmark's campaign the same on every
#: day it runs. Users of `promo simulate` keep today as the default.
REFERENCE_START = dt.date(2026, 3, 1)

#: Largest truth table (users x levels rows) the simulator agrees to write.
MAX_TRUTH_ROWS = 100_000_000


class SimulationError(DomainError, ValueError):
    """Bad arguments to the simulator (unknown preset or option, impossible sizes or values)."""


@dataclass(frozen=True)
class SimulationRequest:
    """What to simulate, and what `simulate` hands a preset's runner: campaign `campaign` (the folder
    name, promo_assets.config.campaign.CAMPAIGN_NAME_RULE) in the landing folder `landing_dir` (None:
    settings.landing_dir()), `days` daily event files from `start` (None: today - days, so the last
    day is yesterday; a date, a datetime or YYYY-MM-DD text), a pool of `users` and the `seed` (same
    request and options => byte-identical files). `resolved()` checks it and fills the defaults."""

    campaign: str
    landing_dir: str | Path | None = None
    days: int = 14
    users: int = 5000
    seed: int = 0
    start: dt.date | str | None = None

    @property
    def campaign_dir(self) -> Path:
        """`<landing_dir>/<campaign>` (landing_dir None: settings.landing_dir())."""
        return Path(settings.landing_dir() if self.landing_dir is None else self.landing_dir) / self.campaign

    def resolved(self) -> "SimulationRequest":
        """This request checked, with `landing_dir` a Path, `start` a date and `seed` an int. Raises
        SimulationError naming the bad value (campaign name, start, days, users)."""
        try:
            check_campaign_name(self.campaign)
        except CampaignNameError as exc:
            raise SimulationError(str(exc)) from None
        start, days, users = self.start, self.days, self.users
        if start is None:
            start = dt.date.today() - dt.timedelta(days=int(days))
        elif isinstance(start, dt.datetime):
            start = start.date()
        elif isinstance(start, str):
            try:
                start = dt.date.fromisoformat(start)
            except ValueError:
                raise SimulationError(f"start must be a date (YYYY-MM-DD), got {start!r}") from None
        if not isinstance(days, int) or isinstance(days, bool) or days < 1:
            raise SimulationError(f"days must be an integer >= 1, got {days!r}")
        if not isinstance(users, int) or isinstance(users, bool) or users < 1:
            raise SimulationError(f"users must be an integer >= 1, got {users!r}")
        landing = Path(settings.landing_dir() if self.landing_dir is None else self.landing_dir)
        return SimulationRequest(self.campaign, landing, days, users, int(self.seed), start)


@dataclass(frozen=True)
class CampaignDesign:
    """What a preset writes besides its pool (`write_campaign`): its name `preset`, `config` (the
    campaign.yaml body without the `simulation` block, added by write_campaign), `incentives` (the
    amount per level), `cost_rule` ('redeemed': cost = incentive x response, 'assigned': cost =
    incentive, 'column': incentive x pool.order_value x response written as the events' cost column,
    'bernoulli': a binary cost label, cost = u < expected_cost with the same uniform u that draws the
    response, so response implies cost when expected_response <= expected_cost), `options` (the
    preset's options, kept in campaign.yaml), `daily_active` (the share of the pool with an event each
    day), `log_propensity` (write the logging policy's probability of the logged level as the events'
    `propensity` column) and `treatment_labels` (the events' `treatment` value per level, e.g. the
    level index as text for multi-attribute campaigns; None: the level's incentive amount)."""

    preset: str
    config: dict[str, Any]
    incentives: list[float]
    cost_rule: str
    options: dict[str, Any]
    daily_active: float
    log_propensity: bool = True
    treatment_labels: list[str] | None = None


@dataclass(frozen=True)
class Assigned:
    """One day's events before their outcomes: the pool `rows` of the users, the `levels` they got
    and the logged `propensity` of each (None: no propensity column)."""

    rows: np.ndarray
    levels: np.ndarray
    propensity: np.ndarray | None


@dataclass
class SimulationSummary:
    """What :func:`promo_assets.simulation.simulate` wrote.

    campaign_dir: the campaign folder; files: every file written (campaign.yaml first);
    rows_per_day: events per day file; users: size of the user pool; dates: the simulated days.
    """

    campaign: str
    preset: str
    campaign_dir: Path
    files: list[Path]
    rows_per_day: dict[dt.date, int]
    users: int
    dates: list[dt.date]
    seed: int
    n_levels: int
    options: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        span = f"{self.dates[0].isoformat()}..{self.dates[-1].isoformat()}" if self.dates else "no days"
        return (f"{self.preset} campaign '{self.campaign}' at {self.campaign_dir}: {len(self.dates)} day(s) {span}, "
                f"{self.rows} events, {self.users} users, {self.n_levels} levels, {len(self.files)} files")

    @property
    def rows(self) -> int:
        return int(sum(self.rows_per_day.values()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "preset": self.preset,
            "campaign_dir": str(self.campaign_dir),
            "files": [str(p) for p in self.files],
            "rows_per_day": {d.isoformat(): n for d, n in self.rows_per_day.items()},
            "rows": self.rows,
            "users": self.users,
            "dates": [d.isoformat() for d in self.dates],
            "seed": self.seed,
            "n_levels": self.n_levels,
            "options": dict(self.options),
            "details": dict(self.details),
        }


@dataclass
class Pool:
    """A simulated user pool and its ground truth.

    features: name -> float64 array (numeric) or int array of codes into ``categories[name]``
    (categorical), in the column order they are written; expected_response / expected_cost:
    users x levels; assignment: users x levels probabilities of the logging policy, or None for a
    uniform RCT; hours: per-user (start_hour, end_hour) window in which the events' event_time falls
    (None: the whole day); order_value: per-user multiplier of the cost for cost rule 'column';
    by_day: the pool as it is on a given day (same users, levels and logging; features and truth may
    change with the date, e.g. a weekday column and effect), None: the same every day. The truth and
    the population file are written as of the last day (the holdout day). truth_of: the true
    (expected_response, expected_cost) of these users for given (shifted) features, codes of
    categories beyond the preset's own having no effect (a population shift recomputes the truth
    with it; None: shifted users keep their curves).
    """

    features: dict[str, np.ndarray]
    categories: dict[str, list[str]]
    expected_response: np.ndarray
    expected_cost: np.ndarray
    assignment: np.ndarray | None = None
    hours: np.ndarray | None = None
    order_value: np.ndarray | None = None  # per user, for cost rule 'column' (dfcl_discount)
    by_day: Callable[[dt.date], "Pool"] | None = None
    truth_of: Callable[[dict[str, np.ndarray]], tuple[np.ndarray, np.ndarray]] | None = None

    def on(self, day: dt.date) -> "Pool":
        """The pool as it is on `day` (itself when it does not change with the date)."""
        return self if self.by_day is None else self.by_day(day)

    @property
    def n_users(self) -> int:
        return int(self.expected_response.shape[0])


@dataclass(frozen=True)
class Response:
    """Exported decisions the simulated population answers on `day` (the closed loop): per decided
    user its id, the level index it was given and the propensity the decision logged."""

    day: dt.date
    user_ids: np.ndarray
    levels: np.ndarray
    propensity: np.ndarray


_RESPONSE: contextvars.ContextVar[Response | None] = contextvars.ContextVar("promo_simulation_response", default=None)
# the planted change (promo_assets.simulation.change.Change) write_campaign applies to the pool, or None
_CHANGE: contextvars.ContextVar[Any] = contextvars.ContextVar("promo_simulation_change", default=None)


@dataclass
class Captured:
    """What `write_campaign` hands over inside ``capturing()``: the pool (the change applied), the
    level incentives, the cost rule; nothing is written."""

    pool: Pool | None = None
    incentives: np.ndarray | None = None
    cost_rule: str | None = None


_CAPTURE: contextvars.ContextVar[Captured | None] = contextvars.ContextVar("promo_simulation_capture", default=None)


@contextlib.contextmanager
def responding(response: Response):
    """Within the block, `write_campaign` writes the day's answer to `response` (see `write_response_day`)
    instead of a campaign: a preset runner builds its pool as always and hands it over unchanged."""
    token = _RESPONSE.set(response)
    try:
        yield
    finally:
        _RESPONSE.reset(token)


@contextlib.contextmanager
def changing(change: Any):
    """Within the block, `write_campaign` plants `change` (a Change, or None: none) in the pool."""
    token = _CHANGE.set(change)
    try:
        yield
    finally:
        _CHANGE.reset(token)


@contextlib.contextmanager
def capturing():
    """Within the block, `write_campaign` writes nothing and fills the yielded Captured (the pool a
    preset runner built, with the planted change): how `truth_on` rebuilds a campaign's truth."""
    captured = Captured()
    token = _CAPTURE.set(captured)
    try:
        yield captured
    finally:
        _CAPTURE.reset(token)


def rng_pool(seed: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), 0]))


def rng_day(seed: int, day: dt.date) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), 1, day.toordinal()]))


def user_ids(n: int) -> pa.Array:
    """User ids 'u0000000', 'u0000001', ... (at least 7 digits)."""
    width = max(7, len(str(max(n - 1, 0))))
    fmt = f"u%0{width}d"
    return pa.array([fmt % i for i in range(n)], type=pa.string())


def check_common(days: int, users: int, n_levels: int, daily_active: float) -> None:
    if not isinstance(days, (int, np.integer)) or days < 1:
        raise SimulationError(f"days must be an integer >= 1, got {days!r}")
    if not isinstance(users, (int, np.integer)) or users < 1:
        raise SimulationError(f"users must be an integer >= 1, got {users!r}")
    if not 0.0 < float(daily_active) <= 1.0:
        raise SimulationError(f"daily_active must be in (0, 1], got {daily_active!r}")
    if users * n_levels > MAX_TRUTH_ROWS:
        raise SimulationError(
            f"users x levels = {users} x {n_levels} = {users * n_levels} truth rows exceeds the "
            f"simulator's limit of {MAX_TRUTH_ROWS}; use fewer users or levels"
        )


def rct_config(treatments: dict[str, Any], cost: str, budgets: list[float], *, randomized: bool = True,
               ips_clip: float = 20.0, **extra: Any) -> dict[str, Any]:
    """The campaign.yaml body every preset writes (binary response, one holdout day, 20 % validation),
    in this key order; `extra` keys (models, segments, ...) follow."""
    return {"treatments": treatments, "cost": cost, "randomized": randomized, "response": "binary",
            "budget_per_capita": budgets, "holdout_days": 1, "validation_fraction": 0.2, "ips_clip": ips_clip,
            **extra}


def budgets_within(preset_budgets: list[float], pool: Pool) -> list[float]:
    """The preset's per-capita budgets if they lie strictly between the cheapest and the most
    expensive allocation under the true costs; otherwise 25/50/75 % points of that range."""
    cheapest = float(pool.expected_cost.min(axis=1).mean())
    dearest = float(pool.expected_cost.max(axis=1).mean())
    if preset_budgets and all(cheapest < b < dearest for b in preset_budgets):
        return [float(b) for b in preset_budgets]
    span = dearest - cheapest
    return [round(cheapest + f * span, 3) for f in (0.25, 0.5, 0.75)]


def _feature_array(name: str, values: np.ndarray, categories: dict[str, list[str]], take: np.ndarray | None) -> pa.Array:
    if name in categories:
        vocab = pa.array(categories[name], type=pa.string())
        codes = values if take is None else values[take]
        return pc.take(vocab, pa.array(codes.astype(np.int32)))
    col = values if take is None else values[take]
    return pa.array(np.asarray(col, dtype=np.float64))


def _write(table: pa.Table, path: Path, files: list[Path]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="snappy")
    tmp.replace(path)
    files.append(path)


def existing_simulation(campaign_dir: Path) -> dict[str, Any] | None:
    import yaml

    path = campaign_dir / "campaign.yaml"
    if not path.exists():
        return None
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError:
        return {}
    return raw.get("simulation") if isinstance(raw, dict) else {}


def prepare_dir(campaign_dir: Path, pool_key: dict[str, Any], overwrite: bool) -> None:
    """Refuse to mix two different simulated pools in one folder (unless overwrite)."""
    if overwrite and campaign_dir.exists():
        for sub in ("events", "population", "truth", "edges"):
            if (campaign_dir / sub).exists():
                shutil.rmtree(campaign_dir / sub)
        (campaign_dir / "campaign.yaml").unlink(missing_ok=True)
        return
    existing = existing_simulation(campaign_dir)
    if existing is None:
        if campaign_dir.exists() and any((campaign_dir / "events").glob("*")):
            raise SimulationError(
                f"{campaign_dir} already holds events but no simulated campaign.yaml; "
                "choose another campaign name or pass overwrite=True"
            )
        return
    diff = _pool_diff(existing, pool_key)
    if diff:
        raise SimulationError(
            f"{campaign_dir} holds a different simulated campaign ({diff}: existing vs requested); "
            "choose another campaign name or pass overwrite=True"
        )


def _pool_diff(existing: dict[str, Any], pool_key: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """What differs between a stored `simulation:` block and the requested pool key (the planted
    `change` is compared when either has one)."""
    keys = list(pool_key) + (["change"] if "change" in existing and "change" not in pool_key else [])
    return {k: (existing.get(k), pool_key.get(k)) for k in keys if existing.get(k) != pool_key.get(k)}


def write_campaign(request: SimulationRequest, design: CampaignDesign, pool: Pool, *, overwrite: bool = False,
                   log: Log = None) -> SimulationSummary:
    """Write one simulated campaign (see the module docstring): `request`'s days of `pool`'s events
    as `design` says, and return its summary."""
    campaign_dir, days, start, seed = Path(request.campaign_dir), request.days, request.start, request.seed
    preset, config, options, daily_active = design.preset, design.config, design.options, design.daily_active
    log_propensity, cost_rule = design.log_propensity, design.cost_rule
    n_users, n_levels = pool.expected_response.shape
    check_common(days, n_users, n_levels, daily_active)
    dates = [start + dt.timedelta(days=i) for i in range(days)]
    pool_key = {"preset": preset, "seed": int(seed), "users": int(n_users), "options": _plain(options)}
    incentives_arr = np.asarray(design.incentives, dtype=np.float64)
    change = _CHANGE.get()
    if change is not None:  # promo_assets.simulation.change: the pool changes from change.day
        pool = change.apply(pool, seed, int(np.argmin(incentives_arr)), cost_rule)
        pool_key["change"] = change.stored()
    captured = _CAPTURE.get()
    if captured is not None:
        captured.pool, captured.incentives, captured.cost_rule = pool, incentives_arr, cost_rule
        return SimulationSummary(campaign=campaign_dir.name, preset=preset, campaign_dir=campaign_dir, files=[],
                                 rows_per_day={}, users=int(n_users), dates=[], seed=int(seed), n_levels=int(n_levels),
                                 options=_plain(options))
    response = _RESPONSE.get()
    if response is not None:
        return write_response_day(request, response, design, pool, pool_key, log=log, change=change)
    prepare_dir(campaign_dir, pool_key, overwrite)
    base_pool, pool = pool, pool.on(dates[-1])  # truth and population as of the last (holdout) day

    ids = user_ids(n_users)
    files: list[Path] = []
    body = dict(config)
    body["simulation"] = {
        **pool_key,
        "days": int(days),
        "start": start.isoformat(),
        "end": dates[-1].isoformat(),
        "daily_active": float(daily_active),
    }
    dump_campaign_yaml(campaign_dir / "campaign.yaml", body)
    files.append(campaign_dir / "campaign.yaml")

    # ground truth
    level_col = np.tile(np.arange(n_levels, dtype=np.int32), n_users)
    user_take = pa.array(np.repeat(np.arange(n_users, dtype=np.int64), n_levels))
    truth_ids = pc.take(ids, user_take)
    truth = pa.table({
        "user_id": truth_ids,
        "level": pa.array(level_col),
        "incentive": pa.array(incentives_arr[level_col]),
        "expected_response": pa.array(pool.expected_response.reshape(-1).astype(np.float64)),
        "expected_cost": pa.array(pool.expected_cost.reshape(-1).astype(np.float64)),
    })
    _write(truth, campaign_dir / "truth" / "response.parquet", files)
    if pool.assignment is not None:
        prop = pa.table({
            "user_id": truth_ids,
            "level": pa.array(level_col),
            "propensity": pa.array(pool.assignment.reshape(-1).astype(np.float64)),
        })
        _write(prop, campaign_dir / "truth" / "propensity.parquet", files)
    del truth, truth_ids
    if log:
        log(f"{preset}: wrote truth for {n_users} users x {n_levels} levels")

    _write_population(pool, ids, campaign_dir, dates[-1], files)
    if _population_changes_after(change, dates[-1]):  # the next decision is for the shifted users
        _write_population(base_pool.on(change.day), ids, campaign_dir, change.day, files)

    # one RCT event per active user and day
    cum = None if pool.assignment is None else np.cumsum(pool.assignment, axis=1)
    rows_per_day: dict[dt.date, int] = {}
    for day in dates:
        rng = rng_day(seed, day)
        pool = base_pool.on(day)
        if daily_active >= 1.0:
            idx = np.arange(n_users, dtype=np.int64)
        else:
            idx = np.flatnonzero(rng.random(n_users) < daily_active)
        n = idx.size
        if cum is None:
            level = rng.integers(0, n_levels, size=n)
            propensity = np.full(n, 1.0 / n_levels)
        else:
            u = rng.random(n)[:, None]
            level = np.minimum((u >= cum[idx]).sum(axis=1), n_levels - 1)
            propensity = pool.assignment[idx, level]
        table = day_events(pool, ids, Assigned(idx, level, propensity if log_propensity else None), rng, day,
                           design)
        _write(table, campaign_dir / "events" / f"{day.isoformat()}.parquet", files)
        rows_per_day[day] = int(n)
        if log:
            log(f"{preset}: {day.isoformat()}: {n} events")

    return SimulationSummary(
        campaign=campaign_dir.name,
        preset=preset,
        campaign_dir=campaign_dir,
        files=files,
        rows_per_day=rows_per_day,
        users=int(n_users),
        dates=dates,
        seed=int(seed),
        n_levels=int(n_levels),
        options=_plain(options),
    )


def write_response_day(request: SimulationRequest, response: Response, design: CampaignDesign, pool: Pool,
                       pool_key: dict[str, Any], *, log: Log = None, change: Any = None) -> SimulationSummary:
    """Day `response.day`'s events of an existing simulated campaign (`request`'s folder and seed,
    written as `design` says) as its population answers the
    exported decisions: the same share `daily_active` of the decided users is active as on an RCT day
    (a seeded draw of its own), each at the level the decision gave it, with the response and cost
    drawn from the pool's truth on that day and the decision's propensity logged. campaign.yaml and
    the truth files are left as they are. `details` of the summary: the decided users, the events and
    the decision's true expected response and cost per decided user (the truth is known).

    With a planted `change` (promo_assets.simulation.change): a compliance C < 1 in force on the day
    gives a seeded share 1 - C of the decided users the cheapest level instead of theirs (the events
    log the level given and the decision's propensity; `details["not_applied"]` counts them among
    the events); answering the day before a population shift writes `population/<change day>`."""
    campaign_dir, seed, preset, options = Path(request.campaign_dir), request.seed, design.preset, design.options
    daily_active, incentives = design.daily_active, np.asarray(design.incentives, dtype=np.float64)
    existing = existing_simulation(campaign_dir)
    if existing is None:
        raise SimulationError(f"{campaign_dir}: no simulated campaign to respond for (simulate its RCT days first)")
    diff = _pool_diff(existing, pool_key)
    if diff:
        raise SimulationError(f"{campaign_dir} holds another simulated pool than the one asked for ({diff}: existing vs "
                              "requested)")
    target = campaign_dir / "events" / f"{response.day.isoformat()}.parquet"
    if target.exists() or target.with_suffix(".csv").exists():
        raise SimulationError(f"{target}: day {response.day} already has events; respond to the decisions for a new day")
    n_users, n_levels = pool.expected_response.shape
    ids = user_ids(n_users)
    index = {u: i for i, u in enumerate(ids.to_pylist())}
    rows = np.fromiter((index.get(str(u), -1) for u in response.user_ids), dtype=np.int64, count=len(response.user_ids))
    unknown = np.flatnonzero(rows < 0)
    if unknown.size:
        shown = ", ".join(repr(str(response.user_ids[i])) for i in unknown[:3])
        raise SimulationError(f"{unknown.size} decided user(s) are not in the simulated population of {campaign_dir.name} "
                              f"(e.g. {shown})")
    if len(np.unique(rows)) != rows.size:
        raise SimulationError("the decisions list a user more than once; one level per user is expected")
    levels = np.asarray(response.levels)
    if levels.size and (not np.issubdtype(levels.dtype, np.integer) or levels.min() < 0 or levels.max() >= n_levels):
        raise SimulationError(f"decision levels must be integers in 0..{n_levels - 1}")
    prop = np.asarray(response.propensity, dtype=np.float64)
    if prop.size and (not np.all(np.isfinite(prop)) or prop.min() <= 0 or prop.max() > 1):
        raise SimulationError("decision propensities must lie in (0, 1]")
    day_pool = pool.on(response.day)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 2, response.day.toordinal()]))
    active = np.ones(rows.size, dtype=bool) if daily_active >= 1.0 else rng.random(rows.size) < daily_active
    if not active.any():
        raise SimulationError(f"none of the {rows.size} decided user(s) is active on {response.day} (daily_active "
                              f"{daily_active:g} of the decided users answer): the day would have no events; "
                              "nothing was written (answer a decision file with more users)")
    given = levels.astype(np.int64)
    if change is not None and change.compliance is not None and change.in_force(response.day):
        skipped = np.random.default_rng(np.random.SeedSequence([int(seed), 4, response.day.toordinal()])).random(
            rows.size) >= change.compliance
        given = np.where(skipped, int(np.argmin(incentives)), given)
    table = day_events(day_pool, ids, Assigned(rows[active], given[active], prop[active]), rng, response.day, design)
    files: list[Path] = []
    _write(table, target, files)
    if _population_changes_after(change, response.day):
        _write_population(pool.on(change.day), ids, campaign_dir, change.day, files)
    truth_v = day_pool.expected_response[rows, levels]
    truth_c = day_pool.expected_cost[rows, levels]
    if log:
        log(f"{preset}: {response.day.isoformat()}: {int(active.sum())} events answering {rows.size} decisions")
    return SimulationSummary(
        campaign=campaign_dir.name, preset=preset, campaign_dir=campaign_dir, files=files,
        rows_per_day={response.day: int(active.sum())}, users=int(n_users), dates=[response.day], seed=int(seed),
        n_levels=int(n_levels), options=_plain(options),
        details={"decided_users": int(rows.size), "events": int(active.sum()),
                 "true_value_per_decided_user": float(truth_v.mean()) if rows.size else float("nan"),
                 "true_cost_per_decided_user": float(truth_c.mean()) if rows.size else float("nan"),
                 **({"not_applied": int((given != levels)[active].sum())} if change is not None else {})})


def _population_changes_after(change: Any, day: dt.date) -> bool:
    """Whether the population shifts on the day after `day` (its file is then written with `day`'s events)."""
    return change is not None and bool(change.population_terms) and change.day == day + dt.timedelta(days=1)


def _write_population(pool: Pool, ids: pa.Array, campaign_dir: Path, day: dt.date, files: list[Path]) -> None:
    """`population/<day>.parquet`: every pool user and its features as of `day` (`pool` is the day's)."""
    cols: dict[str, pa.Array] = {"user_id": ids}
    for name, values in pool.features.items():
        cols[name] = _feature_array(name, values, pool.categories, None)
    _write(pa.table(cols), campaign_dir / "population" / f"{day.isoformat()}.parquet", files)


def day_events(pool: Pool, ids: pa.Array, assigned: Assigned, rng: np.random.Generator, day: dt.date,
               design: CampaignDesign) -> pa.Table:
    """One day's events of the `assigned` users (pool rows) at their levels: the response drawn from
    the pool's truth on that day, the cost by the design's cost rule, the logged propensity (None: no
    propensity column), event_time within each user's hours, the features; rows in time order."""
    idx, level, propensity = assigned.rows, assigned.levels, assigned.propensity
    incentives = np.asarray(design.incentives, dtype=np.float64)
    cost_rule, treatment_labels = design.cost_rule, design.treatment_labels
    n = idx.size
    p = pool.expected_response[idx, level]
    u = rng.random(n)
    response = (u < p).astype(np.float64)
    incentive = incentives[level]
    if cost_rule == "column":  # cost = incentive x the user's order value x response (a cost column)
        cost = incentive * pool.order_value[idx] * response
    elif cost_rule == "bernoulli":
        cost = (u < pool.expected_cost[idx, level]).astype(np.float64)
    else:
        cost = incentive * response if cost_rule == "redeemed" else incentive.copy()
    if pool.hours is None:
        lo, hi = np.zeros(n), np.full(n, 24.0)
    else:
        lo, hi = pool.hours[idx, 0], pool.hours[idx, 1]
    seconds = np.floor((lo + rng.random(n) * (hi - lo)) * 3600.0).astype(np.int64)
    event_time = _epoch_us(day) + seconds * 1_000_000
    order = np.argsort(event_time, kind="stable")
    idx, level, response, incentive, cost, event_time = (
        a[order] for a in (idx, level, response, incentive, cost, event_time))
    cols: dict[str, pa.Array] = {
        "user_id": pc.take(ids, pa.array(idx)),
        "treatment": (pa.array(incentive) if treatment_labels is None
                      else pc.take(pa.array(list(treatment_labels), type=pa.string()), pa.array(level))),
        "response": pa.array(response),
        "cost": pa.array(cost),
    }
    if propensity is not None:
        cols["propensity"] = pa.array(np.asarray(propensity, dtype=np.float64)[order])
    cols["event_time"] = pa.array(event_time, type=pa.timestamp("us"))
    for name, values in pool.features.items():
        cols[name] = _feature_array(name, values, pool.categories, idx)
    return pa.table(cols)


def summary_from_folder(campaign_dir: Path, preset: str, seed: int, users: int, details: dict[str, Any]) -> SimulationSummary:
    """A SimulationSummary read back from a campaign folder (for presets whose runner returns a
    plain dict, e.g. bipartite): dates and rows per day from the events files' parquet metadata,
    files = everything under the folder, `details` = the runner's own report."""
    campaign_dir = Path(campaign_dir)
    rows_per_day: dict[dt.date, int] = {}
    for f in sorted((campaign_dir / "events").glob("*.parquet")):
        try:
            day = dt.date.fromisoformat(f.stem)
        except ValueError:
            continue
        rows_per_day[day] = int(pq.read_metadata(f).num_rows)
    files = sorted(p for p in campaign_dir.rglob("*") if p.is_file() and not p.name.startswith("."))
    return SimulationSummary(
        campaign=campaign_dir.name,
        preset=preset,
        campaign_dir=campaign_dir,
        files=files,
        rows_per_day=rows_per_day,
        users=int(users),
        dates=sorted(rows_per_day),
        seed=int(seed),
        n_levels=CampaignConfig.load(campaign_dir).n_levels,
        details=_plain(dict(details)),
    )


def _epoch_us(day: dt.date) -> int:
    """Microseconds from 1970-01-01 (naive, UTC) to midnight of `day`."""
    return (day.toordinal() - dt.date(1970, 1, 1).toordinal()) * 86_400 * 1_000_000


def _plain(value: Any) -> Any:
    """YAML-safe copy (tuples -> lists, numpy scalars -> Python)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def plain_number(x: float) -> int | float:
    """2.0 -> 2 (prettier campaign.yaml), 2.5 -> 2.5."""
    f = float(x)
    return int(f) if f.is_integer() else f

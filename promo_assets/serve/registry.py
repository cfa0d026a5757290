"""The service's campaigns, loaded from the landing folder, the warehouse (read-only) and the
artefact store, and reloaded when one of them changes.

`Registry.snapshot()` returns one immutable mapping {campaign: CampaignState | Unavailable}. A
reload (`refresh`) builds a complete new mapping and replaces the old one with a single assignment,
so a request (which takes the snapshot once) never sees a half-updated state: it is answered
wholly by the old champion and λ or wholly by the new ones. `refresh` only reads when a watched
file changed (the warehouse and its write-ahead log, every campaign.yaml): a poll costs a few
`stat` calls. While a run holds the warehouse's write lock the reload is put off and the current
state keeps serving.

No dagster here (domain code).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import Iterable, Mapping, NamedTuple

import numpy as np
import pandas as pd

from promo_assets.config import settings
from promo_assets.config.campaign import CampaignConfigError, CampaignNameError, check_campaign_name
from promo_assets.decisions import Exploration
from promo_assets.monitoring.exported import export_state
from promo_assets.ingestion import load_config
from promo_assets.models import registry
from promo_assets.models.plan import model_features
from promo_assets.serve.state import CampaignState, Unavailable
from promo_assets.store import warehouse as wh
from promo_assets.store import decisions as decisions_store, runs

log = logging.getLogger("promo_assets.serve")


class _Fingerprint(NamedTuple):
    """What `promo serve` watches to know when to reload: the campaign folders' names, the warehouse's
    and its write-ahead log's stat, each campaign.yaml's stat."""

    campaigns: tuple
    warehouse: tuple
    wal: tuple
    configs: tuple


def _stat(path: Path) -> tuple:
    try:
        st = os.stat(path)
    except OSError:
        return (None,)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _valid_name(name: str) -> bool:
    try:
        check_campaign_name(name)
    except CampaignNameError:
        return False
    return True


def _campaign_folders(landing: Path, only: Iterable[str] | None) -> list[str]:
    """The served campaigns: `only`, else every folder of the landing folder with a campaign.yaml and a
    valid campaign name (checked silently: this runs at every poll)."""
    if only:
        return sorted(set(only))
    try:
        found = [p for p in landing.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")]
    except OSError:
        return []
    return sorted(p.name for p in found if _valid_name(p.name) and (p / "campaign.yaml").is_file())


def load_models(members, versions) -> tuple[list, str | None]:
    """The champion's member models from the artefact store, or ([], the reason they cannot serve)."""
    models = []
    for name, version in zip(members, versions):
        try:
            spec = registry.get(name)
        except ValueError as exc:
            return [], f"the champion's model {name!r} is not registered: {exc}"
        if spec.needs_graph:
            return [], (f"the champion's model {name} reads the customer-merchant graph: it cannot decide for a user "
                        "given by features alone (pin a feature-only model with campaign.yaml champion.pin)")
        try:
            models.append(spec.load(version))
        except (OSError, ValueError) as exc:  # missing or tampered artefact, unreadable format
            return [], f"the champion's model {name} {version} cannot be loaded from the artefact store: {exc}"
    return models, None


_ABSOLUTE = re.compile(r"(?<![\w.])/(?:[^\s'\"():,]+/)*([^\s'\"():,/]+)")


def public(text: str, *roots: Path) -> str:
    """`text` without server paths (for an error body, /health and /v1/campaigns): a path under one of
    `roots` (the landing folder, the warehouse's folder, the artefact store) from that root on, any
    other absolute path by its last part."""
    for root in sorted((str(r) for r in roots if r), key=len, reverse=True):
        text = text.replace(root.rstrip("/") + "/", "")
    return _ABSOLUTE.sub(lambda m: m.group(1), text)


def read_campaign(con, landing: Path, campaign: str, lambdas_override: Mapping[float, float] | None = None,
                  model_cache: dict | None = None) -> CampaignState | Unavailable:
    """The state of one campaign from an open read-only warehouse connection (see the package docs)."""
    try:
        config = load_config(landing, campaign)
    except (CampaignConfigError, OSError, ValueError) as exc:
        return Unavailable(campaign, f"campaign.yaml is refused: {exc}")
    export = export_state(con, campaign)
    if export.newest is None:
        if decisions_store.latest_champion(con, campaign).empty:
            return Unavailable(campaign, f"campaign '{campaign}' has no champion yet: run `promo run --campaign {campaign}`")
        return Unavailable(campaign, f"campaign '{campaign}' has a champion but no decisions yet (their run failed a "
                           f"check or did not run): run `promo run --campaign {campaign}`")
    if export.in_force is None:
        return Unavailable(campaign, export.stopped_line(dt.datetime.now()))
    run_id = export.in_force.run_id
    rows = runs.decision_budgets_of_run(con, campaign, run_id)
    if rows.empty:
        return Unavailable(campaign, f"the decisions run {run_id} of campaign '{campaign}' left no decisions")
    first = rows.iloc[0]
    stored = json.loads(first["decision_manifest"])
    info = stored["champion"]
    members, weights, versions = tuple(info["members"]), tuple(float(w) for w in info["weights"]), tuple(info["versions"])
    key = (campaign, members, versions)
    if model_cache is not None and key in model_cache:
        models = model_cache[key]
    else:
        models, reason = load_models(members, versions)
        if reason:
            return Unavailable(campaign, reason)
        if model_cache is not None:
            model_cache[key] = models
    lambdas, paced, pacing, multipliers = {}, None, None, {}
    for _, row in rows.iterrows():
        entry = json.loads(row["decision_manifest"])["entry"]
        lam = entry["lambda_"]
        lambdas[float(row["budget_per_capita"])] = None if lam is None else float(lam)
        if "multipliers" in entry:  # campaign.yaml `constraints:`: several budgets
            multipliers[float(row["budget_per_capita"])] = entry["multipliers"]
        if "pacing" in entry:  # campaign.yaml `budget:`: the day's paced decision
            paced, pacing = float(row["budget_per_capita"]), entry["pacing"]
    source = "decisions"
    if lambdas_override:
        lambdas = {float(b): (None if v is None else float(v)) for b, v in lambdas_override.items()}
        source = "pacing"
    # the exploration these decisions used (their manifest), not campaign.yaml's current block; the seed
    # of decisions stored before it was kept with them comes from campaign.yaml
    explored = json.loads(first["decision_manifest"])["entry"].get("exploration") or {}
    exploration = Exploration.from_config(config.exploration)
    seed = int(stored.get("exploration_seed", exploration.seed))
    share = float(explored.get("share", exploration.share))
    try:
        mix = (np.asarray(explored["mix"], dtype=np.float64) if len(explored.get("mix") or ()) == config.n_levels
               else exploration.weights(config.n_levels))
    except ValueError as exc:
        return Unavailable(campaign, str(exc))
    features = model_features(models)
    constraints = config.constraints if multipliers else None
    for group in (constraints.groups if constraints else {}).values():  # a group's feature is sent with every user
        features.setdefault(group.feature, "categorical")
    return CampaignState(
        campaign=campaign, champion=str(info["name"]), champion_version=str(info["version"]), members=members,
        weights=weights, versions=versions, models=tuple(models), lambdas=lambdas, features=features,
        labels=tuple(config.labels), incentives=config.incentives, share=share,
        seed=seed, mix=np.asarray(mix, dtype=np.float64),
        decision_date=pd.Timestamp(first["decision_date"]).date(),
        decided_at=pd.Timestamp(first["decided_at"]).isoformat(), decisions_run_id=str(run_id),
        champion_run_id=str(first["champion_run_id"]), lambda_source=source, paced_budget=paced, pacing=pacing,
        multipliers=multipliers or None, constraints=constraints,
        extra={"max_decision_age_days": float(config.monitoring.max_decision_age_days)}, export=export)


class Registry:
    """The campaigns the service decides for (`only`: these names; default: every campaign folder of
    the landing folder) and their reload (module docstring)."""

    def __init__(self, landing: Path, warehouse: Path, only: Iterable[str] | None = None):
        self.landing = Path(landing)
        self.warehouse = Path(warehouse)
        self.only = list(only) if only else None
        self._snapshot: Mapping[str, CampaignState | Unavailable] = {}
        self._fingerprint = None
        self._models: dict = {}
        self._lock = threading.Lock()  # one reload at a time (requests never take it)
        self.loaded_at: str | None = None
        self.reloads = 0
        self.last_error: str | None = None

    def snapshot(self) -> Mapping[str, CampaignState | Unavailable]:
        return self._snapshot

    def fingerprint(self) -> _Fingerprint:
        names = _campaign_folders(self.landing, self.only)
        wal = self.warehouse.with_name(self.warehouse.name + ".wal")
        return _Fingerprint(tuple(names), _stat(self.warehouse), _stat(wal),
                            tuple(_stat(self.landing / n / "campaign.yaml") for n in names))

    def refresh(self, force: bool = False) -> bool:
        """Reload when a watched file changed (or `force`); True when a new snapshot was swapped in.
        A busy or unreadable warehouse keeps the current snapshot (and is retried next time)."""
        with self._lock:
            fp = self.fingerprint()
            if not force and fp == self._fingerprint:
                return False
            names = list(fp[0])
            new: dict[str, CampaignState | Unavailable] = {}
            if not self.warehouse.exists():
                new = {n: Unavailable(n, "the warehouse does not exist yet: run `promo run`") for n in names}
            else:
                try:
                    with wh.connect(self.warehouse, read_only=True) as con:
                        for n in names:
                            new[n] = self._read(con, n)
                except Exception as exc:  # noqa: BLE001 (busy, damaged: keep serving what we have)
                    self.last_error = self.public(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                    log.warning("reload put off: %s", self.last_error)
                    return False
            previous = self._snapshot
            self._snapshot = new  # one assignment: requests see the old mapping or the new one
            self._fingerprint = fp
            self.loaded_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
            self.reloads += 1
            self.last_error = None
            live = {(n, s.members, s.versions) for n, s in new.items() if isinstance(s, CampaignState)}
            self._models = {k: v for k, v in self._models.items() if k in live}
            for n, s in new.items():
                old = previous.get(n)
                if isinstance(s, CampaignState) and (not isinstance(old, CampaignState)
                                                     or old.champion_version != s.champion_version
                                                     or old.lambdas != s.lambdas):
                    log.info("%s: serving %s (%s), λ %s, decided for %s", n, s.champion, s.champion_version,
                             ", ".join(f"{b:g}: {lam if lam is None else round(lam, 6)}" for b, lam in sorted(s.lambdas.items())),
                             s.decision_date)
                elif isinstance(s, Unavailable) and (not isinstance(old, Unavailable) or old.reason != s.reason):
                    log.info("%s: not serving: %s", n, s.reason)
            return True

    def public(self, text: str) -> str:
        """`text` without this server's paths (`public`)."""
        try:
            artifacts = settings.artifacts_dir()
        except Exception:  # noqa: BLE001 (a bad setting: the other roots still apply)
            artifacts = None
        return public(text, self.landing, self.warehouse.parent, *([artifacts] if artifacts else []))

    def _read(self, con, name: str) -> CampaignState | Unavailable:
        """One campaign's state; anything but the warehouse failing makes that campaign unavailable
        (with the reason, without paths), never the others."""
        import duckdb

        try:
            state = read_campaign(con, self.landing, name, model_cache=self._models)
        except duckdb.Error:
            raise  # the warehouse itself (busy, damaged): the whole reload is put off
        except Exception as exc:  # noqa: BLE001 (one campaign's config or artefacts: that campaign only)
            log.warning("%s: not serving: %s: %s", name, type(exc).__name__, exc)
            return Unavailable(name, self.public(f"campaign '{name}' cannot be served: {type(exc).__name__}: "
                                                 f"{str(exc).splitlines()[0] if str(exc) else ''}"))
        if isinstance(state, Unavailable):
            return Unavailable(name, self.public(state.reason))
        return state

    def watch(self, interval: float, stop: threading.Event) -> None:
        """Poll for changes every `interval` seconds until `stop` is set (a daemon thread's body)."""
        while not stop.wait(interval):
            try:
                self.refresh()
            except Exception as exc:  # noqa: BLE001 (the watcher must survive anything)
                log.warning("reload failed: %s: %s", type(exc).__name__, exc)

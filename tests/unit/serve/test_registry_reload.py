"""The service's registry: a reloaded champion is compiled before it serves (no request is answered by
a half-built plan), and a campaign whose campaign.yaml is broken is reported for that campaign only
while the others keep serving."""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from promo_assets.store import warehouse
from promo_assets.core.coefficients import Coefficients
from promo_assets.models.encoder import FeatureEncoder
from promo_assets.serve import CampaignState, Registry, Unavailable
from promo_assets.serve import registry as registry_module

YAML = "treatments:\n  levels: [0, 1, 2]\nbudget_per_capita: [1.0]\n"


class _SlowModel:
    """A model the plan compiles (a fitted FeatureEncoder, predict_encoded) whose compile() takes a
    while and which refuses to predict before it finished."""

    def __init__(self, version: int, delay: float):
        self.version, self.delay, self.ready = version, delay, False
        self.encoder = FeatureEncoder(["x"], []).fit(pd.DataFrame({"x": [0.0, 1.0, 2.0]}))

    def compile(self):
        time.sleep(self.delay)
        self.ready = True
        return self

    def predict_encoded(self, x_num, x_cat):
        assert self.ready, "predicted with a half-built plan"
        v = np.full((len(x_num), 3), float(self.version))
        return Coefficients(v, np.tile([0.0, 1.0, 2.0], (len(x_num), 1)))

    def predict(self, frame):
        return self.predict_encoded(*self.encoder.transform(frame))


def _state(model, name: str = "a") -> CampaignState:
    return CampaignState(campaign=name, champion="m", champion_version=f"{model.version:016d}", members=("m",),
                         weights=(1.0,), versions=("0" * 16,), models=(model,), lambdas={1.0: 0.0},
                         features={"x": "numeric"}, labels=("0", "1", "2"), incentives=(0.0, 1.0, 2.0), share=0.0,
                         seed=0, mix=np.full(3, 1 / 3), decision_date=dt.date(2026, 3, 1), decided_at="t",
                         decisions_run_id="r", champion_run_id="c")


@pytest.fixture()
def landing(tmp_path):
    for name in ("a", "b"):
        (tmp_path / "landing" / name).mkdir(parents=True)
        (tmp_path / "landing" / name / "campaign.yaml").write_text(YAML)
    with warehouse.connect(tmp_path / "wh.duckdb"):
        pass
    return tmp_path


def test_a_reloaded_champion_is_compiled_before_it_serves(landing, monkeypatch):
    version = {"now": 1}

    def read(con, root, name, lambdas_override=None, model_cache=None):
        return _state(_SlowModel(version["now"], 0.3 if version["now"] > 1 else 0.0), name)

    monkeypatch.setattr(registry_module, "read_campaign", read)
    reg = Registry(landing / "landing", landing / "wh.duckdb", ["a"])
    assert reg.refresh(True)
    version["now"] = 2
    reloading = threading.Thread(target=reg.refresh, args=(True,))
    reloading.start()
    seen = []
    while reloading.is_alive() or not seen or seen[-1] == 1:
        state = reg.snapshot()["a"]  # as a request takes it
        budget, ids, rows = state.parse({"user": {"user_id": "u", "features": {"x": 0.5}}, "budget": 1.0})
        out = state.decide(budget, ids, rows)  # the stand-in asserts its plan finished compiling
        seen.append(int(out["decisions"][0]["predicted_response"]))
        if not reloading.is_alive() and seen[-1] == 2:
            break
    reloading.join()
    assert seen[0] == 1 and seen[-1] == 2 and seen == sorted(seen)  # old answers while the new one compiled
    assert seen.count(1) > 1  # requests came in during the 0.3 s compile


@pytest.mark.hostile
@pytest.mark.parametrize("case", [pytest.param(None, id="error-budget-date-that-does-not-exist-one-campaign-only")])
def test_a_broken_campaign_yaml_is_reported_for_that_campaign_only(landing, monkeypatch, case):
    """b's budget period has a date that does not exist: b is unavailable with the reason (no server
    path), a keeps serving."""
    real = registry_module.read_campaign

    def read(con, root, name, lambdas_override=None, model_cache=None):
        if name == "a":
            return _state(_SlowModel(1, 0.0), name)
        return real(con, root, name, model_cache=model_cache)

    monkeypatch.setattr(registry_module, "read_campaign", read)
    with open(landing / "landing" / "b" / "campaign.yaml", "a") as f:
        f.write("budget:\n  total: 100\n  start: 2026-02-01\n  end: 2026-02-30\n")
    reg = Registry(landing / "landing", landing / "wh.duckdb")
    assert reg.refresh(True) and reg.last_error is None
    snap = reg.snapshot()
    assert isinstance(snap["a"], CampaignState)
    assert isinstance(snap["b"], Unavailable) and snap["b"].reason.startswith("campaign.yaml is refused")
    assert str(landing) not in snap["b"].reason


def test_an_unexpected_failure_of_one_campaign_leaves_the_others_serving(landing, monkeypatch):
    def read(con, root, name, lambdas_override=None, model_cache=None):
        if name == "b":
            raise RuntimeError(f"exploded at {root}/b/artifacts/x.json")
        return _state(_SlowModel(1, 0.0), name)

    monkeypatch.setattr(registry_module, "read_campaign", read)
    reg = Registry(landing / "landing", landing / "wh.duckdb")
    assert reg.refresh(True)
    assert isinstance(reg.snapshot()["a"], CampaignState)
    assert reg.snapshot()["b"].reason == "campaign 'b' cannot be served: RuntimeError: exploded at b/artifacts/x.json"


def test_freshness_says_the_age_of_the_decision_served_and_when_it_is_stale():
    """/health's decision age: a decision made three days ago is stale against the default two days."""
    import dataclasses
    import datetime as dt

    from promo_assets.serve.state import CampaignState

    fields = {f.name for f in dataclasses.fields(CampaignState)}
    assert {"decided_at", "decision_date", "extra"} <= fields
    state = object.__new__(CampaignState)  # only the fields freshness() reads
    object.__setattr__(state, "decided_at", "2026-01-05T20:00:00")
    object.__setattr__(state, "decision_date", dt.date(2026, 1, 6))
    object.__setattr__(state, "extra", {"max_decision_age_days": 2.0})
    fresh = CampaignState.freshness(state, now=dt.datetime(2026, 1, 6, 8))
    assert fresh == {"decision_date": "2026-01-06", "decided_at": "2026-01-05T20:00:00", "decision_age_days": 0.5,
                     "stale": False}
    assert CampaignState.freshness(state, now=dt.datetime(2026, 1, 8, 21))["stale"] is True
    object.__setattr__(state, "decided_at", "t")  # not a time: no age, never a failed /health
    assert CampaignState.freshness(state)["decision_age_days"] is None


@pytest.mark.hostile
@pytest.mark.parametrize("case", [pytest.param(None, id="error-serve-start-on-a-damaged-warehouse")])
def test_a_damaged_warehouse_at_start_is_said_for_every_campaign_not_called_unknown(landing, case):
    """The warehouse cannot be read when the service starts: a campaign is answered 503 with the reason
    (no server path), not 404 'unknown campaign'; once it can be read, the campaign is served or refused
    as usual."""
    import json

    from promo_assets.serve.app import _lookup

    (landing / "wh.duckdb").write_bytes(b"this is not a DuckDB file" * 100)
    reg = Registry(landing / "landing", landing / "wh.duckdb")
    assert reg.refresh(True) is False and reg.last_error and reg.loaded_at is None
    state, response = _lookup(reg, "a")
    body = json.loads(response.body)
    assert state is None and response.status_code == 503 and body["field"] == "campaign"
    assert body["detail"].startswith("campaign 'a' is not served yet: the warehouse could not be read (")
    assert str(landing) not in body["detail"]
    (landing / "wh.duckdb").unlink()
    with warehouse.connect(landing / "wh.duckdb"):
        pass
    assert reg.refresh(True) and reg.loaded_at is not None
    assert _lookup(reg, "a")[1].status_code == 409  # served once readable: no champion yet (a reason of its own)
    assert _lookup(reg, "zz")[1].status_code == 404

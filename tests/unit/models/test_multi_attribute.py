"""Multi-attribute incentive levels in the data contract (issue #17, Deliver 1): campaign.yaml
`treatments.levels` as mappings with `attributes:` and `cost: {attribute:}`, the CampaignConfig
accessors, ingestion by level index, and DIPN skipped with its reason."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from promo_assets.config.campaign import CampaignConfig, CampaignConfigError
from promo_assets.ingestion import IngestError, ingest_events_day, load_config
from promo_assets.models import registry
from promo_assets.store import warehouse
from promo_assets.simulation import REFERENCE_START

MULTI = """treatments:
  levels:
    - {amount: 0,  threshold: 0}
    - {amount: 5,  threshold: 20}
    - {amount: 8,  threshold: 30}
    - {amount: 8,  threshold: 20}
  attributes:
    amount:    {monotone: increasing}
    threshold: {monotone: decreasing}
  cost: {attribute: amount}
budget_per_capita: [1.0]
"""
DAY = dt.date(2026, 3, 1)


def load_text(tmp_path, text: str) -> CampaignConfig:
    folder = tmp_path / "c1"
    folder.mkdir(exist_ok=True)
    (folder / "campaign.yaml").write_text(text)
    return CampaignConfig.load(folder / "campaign.yaml")


def test_multi_attribute_levels_and_accessors(tmp_path):
    c = load_text(tmp_path, MULTI)
    assert c.multi_attribute and not c.ordered
    assert c.attribute_names == ("amount", "threshold")
    assert c.attribute_directions() == ("increasing", "decreasing")
    np.testing.assert_array_equal(c.attribute_signs(), [1, -1])
    np.testing.assert_array_equal(c.attribute_matrix(), [[0, 0], [5, 20], [8, 30], [8, 20]])
    assert c.incentives == (0.0, 5.0, 8.0, 8.0)  # the cost attribute: cost rules keep working
    assert c.labels == ("0", "1", "2", "3")       # the events' treatment names a level by its index
    assert c.level_of(2) == 2 and c.level_of("3") == 3 and c.level_of("4") is None
    # a config rebuilt from a stored artefact (lists) is equal to the parsed one
    again = CampaignConfig.from_record(c.to_dict())
    assert again.level_attributes == c.level_attributes and again.attributes == c.attributes


def test_single_amount_campaigns_keep_one_increasing_attribute(tmp_path):
    c = load_text(tmp_path, "treatments:\n  levels: [0, 1, 2.5]\n")
    assert not c.multi_attribute and c.ordered and c.labels == ("0", "1", "2.5")
    assert c.attribute_names == ("amount",) and c.attribute_directions() == ("increasing",)
    np.testing.assert_array_equal(c.attribute_matrix(), [[0.0], [1.0], [2.5]])
    arms = load_text(tmp_path, "treatments:\n  arms: {a: 0, b: 1}\n")
    assert arms.attribute_names == () and arms.attribute_matrix().shape == (2, 0)


BAD = {
    "error-direction-down": (MULTI.replace("{monotone: decreasing}", "{monotone: down}"),
                             ["'treatments.attributes.threshold.monotone'", "'down'", "increasing | decreasing | none"]),
    "error-level-missing-attribute": (MULTI.replace("{amount: 8,  threshold: 30}", "{amount: 8}"),
                                      ["'treatments.levels[2]'", "missing attribute(s) 'threshold'"]),
    "error-level-unknown-attribute": (MULTI.replace("{amount: 5,  threshold: 20}", "{amount: 5, threshhold: 20, threshold: 20}"),
                                      ["'treatments.levels[1].threshhold'", "did you mean 'threshold'?"]),
    "error-cost-unknown-attribute": (MULTI.replace("{attribute: amount}", "{attribute: fee}"),
                                     ["'treatments.cost.attribute'", "'fee'", "amount, threshold"]),
    "error-no-attributes-block": (MULTI.split("  attributes:")[0] + "budget_per_capita: [1.0]\n",
                                  ["'treatments.attributes'", "monotone"]),
    "error-attribute-typo-key": (MULTI.replace("{monotone: increasing}", "{monotonic: increasing}"),
                                 ["'treatments.attributes.amount.monotonic'", "did you mean 'monotone'?"]),
    "error-attribute-value-text": (MULTI.replace("threshold: 30", "threshold: thirty"),
                                   ["'treatments.levels[2].threshold'", "'thirty'", "number"]),
    "error-levels-identical": (MULTI.replace("{amount: 8,  threshold: 20}", "{amount: 5,  threshold: 20}"),
                               ["'treatments.levels[3]'", "treatments.levels[1]"]),
    "error-attributes-with-amounts": ("treatments:\n  levels: [0, 1]\n  attributes: {amount: {monotone: increasing}}\n",
                                      ["'treatments.attributes'", "only allowed with levels given as mappings"]),
    "error-negative-cost-attribute": (MULTI.replace("{amount: 5,  threshold: 20}", "{amount: -5,  threshold: 20}"),
                                      ["'treatments.levels[1].amount'", "-5", ">= 0"]),
}


@pytest.mark.hostile
@pytest.mark.parametrize("text,words", list(BAD.values()), ids=list(BAD))
def test_bad_attributes_block_is_refused_naming_the_key(tmp_path, text, words):
    with pytest.raises(CampaignConfigError) as err:
        load_text(tmp_path, text)
    for w in words:
        assert w in str(err.value), (w, str(err.value))


@pytest.mark.hostile
@pytest.mark.parametrize("text", [MULTI.replace("  cost: {attribute: amount}\n", ""),
                                  MULTI.replace("{monotone: decreasing}", "{monotone: none}")],
                         ids=["accepted-cost-defaults-to-amount", "accepted-direction-none"])
def test_accepted_attribute_blocks(tmp_path, text):
    c = load_text(tmp_path, text)
    assert c.incentives == (0.0, 5.0, 8.0, 8.0)
    assert c.attribute_signs()[0] == 1


def _events(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"user_id": [f"u{i:04d}" for i in range(n)], "treatment": rng.integers(0, 4, n).astype(str),
                         "response": rng.integers(0, 2, n).astype(float), "age": rng.normal(40, 10, n)})


def test_ingestion_names_levels_by_index_and_refuses_unknown_ones(tmp_path):
    landing, db = tmp_path / "landing", tmp_path / "w.duckdb"
    folder = landing / "c1"
    (folder / "events").mkdir(parents=True)
    (folder / "campaign.yaml").write_text(MULTI)
    frame = _events(40)
    frame.to_parquet(folder / "events" / f"{DAY}.parquet")
    config = load_config(landing, "c1")
    with warehouse.connect(db) as con:
        result = ingest_events_day(con, config, DAY, folder / "events" / f"{DAY}.parquet")
        stored = con.execute("SELECT level, incentive, response, cost FROM rct_events ORDER BY source_row").df()
    assert sum(result.level_counts.values()) == 40
    np.testing.assert_array_equal(stored["level"], frame["treatment"].astype(int))
    np.testing.assert_allclose(stored["incentive"], np.asarray(config.incentives)[stored["level"]])
    np.testing.assert_allclose(stored["cost"], stored["incentive"] * stored["response"])  # cost: redeemed
    frame.loc[3, "treatment"] = "7"
    frame.to_parquet(folder / "events" / f"{DAY + dt.timedelta(days=1)}.parquet")
    with warehouse.connect(db) as con, pytest.raises(IngestError, match="unknown treatment .*7"):
        ingest_events_day(con, config, DAY + dt.timedelta(days=1), folder / "events" / f"{DAY + dt.timedelta(days=1)}.parquet")
    with warehouse.connect(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM rct_events").fetchone()[0] == 40  # nothing of the bad day


def test_dipn_is_skipped_on_multi_attribute_campaigns_with_its_reason(tmp_path):
    reason = registry.get("dipn").applies_to(load_text(tmp_path, MULTI))
    assert reason and "single" in reason and "amount, threshold" in reason
    assert registry.get("dipn").applies_to(load_text(tmp_path, "treatments:\n  levels: [0, 1]\n")) is None


def test_coman_preset_writes_a_multi_attribute_campaign_with_monotone_truth(tmp_path):
    from promo_assets.simulation import SimulationRequest, simulate, truth_arrays
    from promo_assets.simulation.coman import CITIES, CITY_SHAPE

    for incentive in ("coupon", "fee_waiver"):
        s = simulate("coman_spatiotemporal", SimulationRequest(f"c-{incentive}", tmp_path, days=2, users=600, seed=3,
                                                               start=REFERENCE_START),
                     incentive=incentive)
        c = CampaignConfig.load(s.campaign_dir)
        assert c.multi_attribute and c.segments == ("period_of_day", "city") and "coman" in c.models.include
        v, cost = truth_arrays(s.campaign_dir)
        np.testing.assert_allclose(cost, v * np.asarray(c.incentives)[None, :])
        a, signs = c.attribute_matrix(), c.attribute_signs()
        for i in range(c.n_levels):  # a level that is better in every declared direction has a higher truth
            for j in range(c.n_levels):
                if i != j and np.all(signs * (a[j] - a[i]) >= 0):
                    assert np.all(v[:, j] >= v[:, i] - 1e-12), (incentive, i, j)
        events = pd.read_parquet(next((s.campaign_dir / "events").glob("*.parquet")))
        assert set(events["treatment"]) <= set(c.labels)
        pop = pd.read_parquet(next((s.campaign_dir / "population").glob("*.parquet")))
        assert set(pop["period_of_day"]) == {"breakfast", "lunch", "afternoon_tea", "dinner", "midnight_snack"}
    # city curve shapes differ: the convex cities gain more from the last step than from the first
    gain = pd.DataFrame(v[:, 1:] - v[:, :1]).groupby(pop["city"].to_numpy()).mean()
    convex = [c for c, sh in zip(CITIES, CITY_SHAPE) if sh == "convex"]
    concave = [c for c, sh in zip(CITIES, CITY_SHAPE) if sh == "concave"]
    ratio = (gain.iloc[:, 0] / gain.iloc[:, -1])
    assert ratio[concave].min() > ratio[convex].max()


@pytest.mark.slow
def test_multi_attribute_campaign_goes_through_promo_run_to_the_leaderboard(promo_env):
    import yaml

    from promo_assets.cli.main import main

    assert main(["simulate", "--preset", "coman_spatiotemporal", "--campaign", "cs", "--days", "3",
                 "--users", "400", "--seed", "1", "--start", REFERENCE_START.isoformat()]) == 0
    path = promo_env["landing"] / "cs" / "campaign.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["models"]["include"] = ["s_learner", "dipn", "coman"]
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    assert main(["run", "--campaign", "cs", "--no-progress"]) == 0
    with warehouse.connect(promo_env["warehouse"], read_only=True) as con:
        models = {r[0] for r in con.execute("SELECT DISTINCT model FROM policy_evaluation").fetchall()}
        skips = dict(con.execute("SELECT model, reason FROM leaderboard_entries WHERE status = 'skipped'").fetchall())
        seg = con.execute("SELECT model, segment_by, count(*) FROM segment_evaluation GROUP BY ALL").fetchall()
    assert {"s_learner", "coman"} <= models and "dipn" not in models
    assert "single" in skips["dipn"] and "amount, threshold" in skips["dipn"]
    segs = {(m, s) for m, s, _ in seg}
    assert {("coman", "all"), ("coman", "period_of_day"), ("coman", "city"), ("s_learner", "city")} <= segs


@pytest.mark.hostile
@pytest.mark.parametrize("direction", ["downward"], ids=["error-attributes-direction-promo-run-loads-nothing"])
def test_malformed_attributes_block_loads_nothing(promo_env, capsys, direction):
    from promo_assets.cli.main import main

    folder = promo_env["landing"] / "bad"
    (folder / "events").mkdir(parents=True)
    (folder / "campaign.yaml").write_text(MULTI.replace("{monotone: decreasing}", "{monotone: " + direction + "}"))
    _events(30).to_parquet(folder / "events" / f"{DAY}.parquet")
    assert main(["run", "--campaign", "bad", "--no-progress"]) != 0
    err = capsys.readouterr().err
    assert "treatments.attributes.threshold.monotone" in err and repr(direction) in err
    if promo_env["warehouse"].exists():
        with warehouse.connect(promo_env["warehouse"], read_only=True) as con:
            assert con.execute("SELECT count(*) FROM rct_events").fetchone()[0] == 0


def test_coman_preset_has_a_weekday_column_and_a_weekday_effect_in_its_truth(tmp_path):
    """Each day's events carry that day's weekday (the spatio-temporal embedding's third column); the
    truth and the population are as of the last (holdout) day, and a weekend day's curves are higher."""
    from promo_assets.simulation import SimulationRequest, simulate, truth_arrays
    from promo_assets.simulation.coman import build_pool

    s = simulate("coman_spatiotemporal",
                 SimulationRequest("wd", tmp_path, days=3, users=300, seed=5, start="2026-01-01"))  # thu .. sat
    for path in sorted((s.campaign_dir / "events").glob("*.parquet")):
        events = pd.read_parquet(path)
        day = pd.Timestamp(path.stem)
        assert set(events["weekday"]) == {day.day_name().lower()}, path.name
        assert (events["event_time"].dt.normalize() == day).all()
    pop = pd.read_parquet(next((s.campaign_dir / "population").glob("*.parquet")))
    assert set(pop["weekday"]) == {"saturday"}
    v, _ = truth_arrays(s.campaign_dir, pop["user_id"].tolist())
    pool, _ = build_pool(300, 5, "coupon")
    np.testing.assert_allclose(v, pool.on(dt.date(2026, 1, 3)).expected_response)
    thursday = pool.on(dt.date(2026, 1, 1)).expected_response
    assert (v >= thursday - 1e-12).all() and v.mean() > thursday.mean() + 0.01
    from promo_assets.ingestion.frames import load_landing

    loaded = load_landing(tmp_path, "wd", edges=False, merchants=False)
    assert "weekday" in loaded.categorical and {"period_of_day", "city"} <= set(loaded.categorical)

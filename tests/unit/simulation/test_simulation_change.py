"""A planted change (promo_assets.simulation.change): shifted true curves and population from a day
on, a coupon system that applies only part of the decisions, the truth on any day (`truth_on`), the
options kept in campaign.yaml for the closed loop, and bad specifications refused by name."""

from __future__ import annotations

import datetime as dt
import hashlib

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from promo_assets.simulation import (
    Change,
    SimulationError,
    SimulationRequest,
    TruthError,
    respond,
    simulate,
    truth_arrays,
    truth_on,
)
from promo_assets.simulation.demo import CITIES

START = dt.date(2026, 1, 1)
DAY = dt.date(2026, 1, 5)  # the change day: two answered days (3, 4) before it, after 2 RCT days


def _decisions(path, n_users: int, level: int | np.ndarray, propensity: float = 0.9) -> None:
    ids = [f"u{i:07d}" for i in range(n_users)]
    levels = np.broadcast_to(np.asarray(level, dtype=np.int64), (n_users,))
    pd.DataFrame({"user_id": ids, "level": levels, "propensity": propensity}).to_parquet(path)


def _population(campaign_dir, day: dt.date) -> pd.DataFrame:
    return pd.read_parquet(campaign_dir / "population" / f"{day.isoformat()}.parquet")


def test_without_a_change_the_files_reproduce_the_seed(tmp_path):
    """Golden digest of a tiny demo campaign and one answered day, taken before the change options
    existed: adding them changed none of the simulator's values for existing seeds."""
    s = simulate("demo", SimulationRequest("g", tmp_path, days=2, users=200, seed=3, start=START))
    _decisions(tmp_path / "dec.parquet", 200, np.arange(200) % 6, 0.95)
    respond(s.campaign_dir, tmp_path / "dec.parquet", START + dt.timedelta(days=2))
    digest = hashlib.sha256()
    for path in sorted(p for p in s.campaign_dir.rglob("*.parquet")):
        table = pq.read_table(path)
        digest.update(path.relative_to(s.campaign_dir).as_posix().encode())
        for name in table.column_names:
            digest.update(name.encode())
            digest.update(np.asarray(table.column(name).to_pandas().astype(str)).astype("U").tobytes())
    assert "change" not in yaml.safe_load((s.campaign_dir / "campaign.yaml").read_text())["simulation"]
    assert digest.hexdigest() == "2bd643b53c29aad472b1c74030f60cfffc44f2cde633dad5a9e979ccc303595f"


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
    root = tmp_path_factory.mktemp("changed")
    s = simulate("demo", SimulationRequest("c", root, days=2, users=3000, seed=7, start=START),
                 change=Change(day=DAY, response_shift="city=chengdu:uplift=-1,city=beijing:uplift=3",
                               population_shift="city=shenzhen:share=0.2,avg_spend:scale=4:share=0.5", compliance=0.7),
                 daily_active=1.0)
    plain = simulate("demo", SimulationRequest("p", root, days=2, users=3000, seed=7, start=START), daily_active=1.0)
    population_files = sorted(p.name for p in (s.campaign_dir / "population").glob("*.parquet"))
    for day in (START + dt.timedelta(days=2), START + dt.timedelta(days=3)):  # the loop answers days 3 and 4
        _decisions(root / "dec.parquet", 3000, 2)
        respond(s.campaign_dir, root / "dec.parquet", day)
    return root, s, plain, population_files


def test_the_change_is_kept_with_the_simulation_options(changed):
    _, s, _, _ = changed
    block = yaml.safe_load((s.campaign_dir / "campaign.yaml").read_text())["simulation"]
    assert block["change"] == {"day": DAY.isoformat(), "response_shift": "city=chengdu:uplift=-1,city=beijing:uplift=3",
                               "population_shift": "city=shenzhen:share=0.2,avg_spend:scale=4:share=0.5",
                               "compliance": 0.7}


def test_truth_is_unchanged_before_the_day_and_shifted_from_it(changed):
    _, s, plain, _ = changed
    before, before_cost = truth_on(s.campaign_dir, DAY - dt.timedelta(days=1))
    after, after_cost = truth_on(s.campaign_dir, DAY)
    later, _ = truth_on(s.campaign_dir, DAY + dt.timedelta(days=5))
    # before the day: the campaign without a change, and the truth file (as of the last RCT day)
    assert np.array_equal(before, truth_arrays(plain.campaign_dir)[0])
    assert np.array_equal(before, truth_arrays(s.campaign_dir)[0])
    assert np.array_equal(after, later)  # the change stays in force
    pop_before, pop_after = _population(s.campaign_dir, START + dt.timedelta(days=1)), _population(s.campaign_dir, DAY)
    city0, city1 = pop_before["city"].to_numpy(), pop_after["city"].to_numpy()
    stayed = (city0 == city1) & (pop_before["avg_spend"].to_numpy() == pop_after["avg_spend"].to_numpy())
    uplift0, uplift1 = before[:, -1] - before[:, 0], after[:, -1] - after[:, 0]
    # users whose features did not move: chengdu's response to the incentive flips, beijing's triples
    # (clipped to [0, 1]), the other cities' curves are untouched
    cd, bj = stayed & (city1 == "chengdu"), stayed & (city1 == "beijing")
    other = stayed & ~np.isin(city1, ["chengdu", "beijing"])
    assert cd.sum() > 100 and bj.sum() > 100
    assert (uplift0[cd] > 0).all() and (uplift1[cd] < 0).all()
    np.testing.assert_allclose(after[bj], np.clip(before[bj, :1] + 3 * (before[bj] - before[bj, :1]), 0, 1))
    np.testing.assert_array_equal(after[other], before[other])
    # the cost follows the response (cost = incentive x response)
    incentives = np.array([0, 1, 2, 3, 5, 8.0])
    np.testing.assert_allclose(after_cost, after * incentives, atol=1e-12)
    np.testing.assert_allclose(before_cost, before * incentives, atol=1e-12)


def test_population_file_of_the_change_day_has_the_new_city_and_shifted_range(changed):
    _, s, _, rct_files = changed
    # the RCT's last day is not the day before the change: only its population file; answering day 3
    # wrote none, answering day 4 (the day before the change) wrote the change day's
    assert rct_files == [f"{(START + dt.timedelta(days=1)).isoformat()}.parquet"]
    root = s.campaign_dir
    assert sorted(p.name for p in (root / "population").glob("*.parquet")) == [rct_files[0], f"{DAY.isoformat()}.parquet"]
    pop_before = _population(root, START + dt.timedelta(days=1))
    pop = _population(root, DAY)  # written with day 4's answer: the population of the next decision
    assert "shenzhen" not in set(pop_before["city"]) and set(pop_before["city"]) <= set(CITIES)
    share = (pop["city"] == "shenzhen").mean()
    assert 0.17 < share < 0.23
    assert pop["avg_spend"].max() > 2.5 * pop_before["avg_spend"].max()
    assert (pop["user_id"] == pop_before["user_id"]).all()
    # the events of day D (answering a decision for that population) carry the shifted features
    _decisions(root / "dec.parquet", 3000, 2)
    respond(root, root / "dec.parquet", DAY)
    events = pd.read_parquet(root / "events" / f"{DAY.isoformat()}.parquet").set_index("user_id")
    assert (events["city"] == pop.set_index("user_id").loc[events.index, "city"]).all()
    assert (events["city"] == "shenzhen").sum() > 0
    day3 = pd.read_parquet(root / "events" / f"{(START + dt.timedelta(days=2)).isoformat()}.parquet")
    assert "shenzhen" not in set(day3["city"])
    # truth_on knows the new city's users (their curves from their shifted features)
    new_city = pop.loc[pop["city"] == "shenzhen", "user_id"].to_numpy()
    v, c = truth_on(root, DAY, new_city)
    assert v.shape == (new_city.size, 6) and np.isfinite(v).all() and (v >= 0).all() and (v <= 1).all()
    with pytest.raises(TruthError, match="not in the simulated pool"):
        truth_on(root, DAY, ["nobody"])


def test_compliance_gives_the_cheapest_level_to_a_share_of_the_decided_users(tmp_path):
    s = simulate("demo", SimulationRequest("k", tmp_path, days=2, users=4000, seed=2, start=START),
                 change=Change(day=DAY, compliance=0.7), daily_active=0.5)
    root = s.campaign_dir
    _decisions(root / "dec.parquet", 4000, 4, propensity=0.93)
    before = respond(root, root / "dec.parquet", DAY - dt.timedelta(days=1))  # before the change day: all applied
    events = pd.read_parquet(root / "events" / f"{(DAY - dt.timedelta(days=1)).isoformat()}.parquet")
    assert (events["treatment"] == 5.0).all() and before.details["not_applied"] == 0
    after = respond(root, root / "dec.parquet", DAY)
    events = pd.read_parquet(root / "events" / f"{DAY.isoformat()}.parquet")
    cheapest = (events["treatment"] == 0.0).mean()
    assert 0.26 < cheapest < 0.34  # 1 - 0.7, about 2,000 active users
    assert set(events["treatment"]) == {0.0, 5.0}
    assert (events["propensity"] == 0.93).all()  # the decision's propensity, as a real coupon system logs
    assert after.details["not_applied"] == int((events["treatment"] == 0.0).sum())
    assert 1800 < len(events) < 2200  # the same share of decided users is active as without compliance
    assert (events.loc[events["treatment"] == 0.0, "cost"] == 0).all()


def test_compliance_without_a_change_day_applies_from_the_first_answered_day(tmp_path):
    s = simulate("demo", SimulationRequest("k", tmp_path, days=2, users=2000, seed=2, start=START),
                 change=Change(compliance=0.5))
    _decisions(tmp_path / "dec.parquet", 2000, 3)
    respond(s.campaign_dir, tmp_path / "dec.parquet", START + dt.timedelta(days=2))
    events = pd.read_parquet(s.campaign_dir / "events" / f"{(START + dt.timedelta(days=2)).isoformat()}.parquet")
    assert 0.4 < (events["treatment"] == 0.0).mean() < 0.6


def test_a_change_on_or_before_the_last_rct_day_is_in_the_rct_files(tmp_path):
    s = simulate("demo", SimulationRequest("r", tmp_path, days=4, users=1000, seed=1, start=START),
                 change=Change(day=START + dt.timedelta(days=2), population_shift="city=shenzhen:share=0.5"),
                 daily_active=1.0)
    events = {d: pd.read_parquet(s.campaign_dir / "events" / f"{d.isoformat()}.parquet") for d in s.dates}
    assert "shenzhen" not in set(events[START]["city"]) and "shenzhen" not in set(events[s.dates[1]]["city"])
    assert 0.4 < (events[s.dates[2]]["city"] == "shenzhen").mean() < 0.6
    assert "shenzhen" in set(_population(s.campaign_dir, s.dates[-1])["city"])  # the holdout day's population


@pytest.mark.hostile
@pytest.mark.parametrize("kwargs, match", [
    ({"response_shift": "city=chengdu:uplift=-1"}, "need --change-day"),
    ({"day": DAY}, "--change-day needs something to change"),
    ({"day": START, "compliance": 0.5}, "--change-day .* must come after the first simulated day"),
    ({"day": "soon", "compliance": 0.5}, "--change-day must be a date"),
    ({"compliance": 0.0}, r"--compliance must be in \(0, 1\]"),
    ({"compliance": "most"}, "--compliance .* not a number"),
    ({"compliance": float("nan")}, "--compliance .* not a finite number"),
    ({"day": DAY, "response_shift": "city=paris:uplift=0"}, "city has no value 'paris'"),
    ({"day": DAY, "response_shift": "age=30:uplift=0"}, "segment needs a categorical feature"),
    ({"day": DAY, "response_shift": "city=chengdu:gain=2"}, "--response-shift .*expected"),
    ({"day": DAY, "response_shift": "base=-1"}, "base must be >= 0"),
    ({"day": DAY, "response_shift": "city=chengdu:uplift=inf"}, "not a finite number"),
    ({"day": DAY, "response_shift": ""}, "--response-shift must be a non-empty"),
    ({"day": DAY, "population_shift": "planet=mars"}, "--population-shift .*no feature 'planet'"),
    ({"day": DAY, "population_shift": "city:scale=2"}, "'city' is categorical"),
    ({"day": DAY, "population_shift": "age=old"}, "'age' is numeric"),
    ({"day": DAY, "population_shift": "city=x:share=1.5"}, r"share must be in \(0, 1\]"),
    ({"day": DAY, "population_shift": "city=x:scale=2"}, "scale/add are for numeric"),
    ({"day": DAY, "population_shift": "avg_spend:scale=-1"}, "undefined true curves"),
    ({"day": DAY, "population_shift": "share=0.5"}, "a term starts with the feature"),
])
def test_bad_change_options_are_refused_by_name_and_nothing_is_written(tmp_path, kwargs, match):
    with pytest.raises(SimulationError, match=match):
        simulate("demo", SimulationRequest("bad", tmp_path, days=2, users=50, seed=0, start=START),
                 change=Change(**kwargs))
    assert not (tmp_path / "bad").exists()


@pytest.mark.hostile
@pytest.mark.parametrize("kwargs, match", [
    ({"day": DAY, "population_shift": "city=\x1b[31mRED\x1b[0m:share=0.3"},
     r"--population-shift .*holds control character\(s\) \\x1b.*every `promo run` refuses"),
    ({"day": DAY, "population_shift": "city=new\nline:share=0.3"}, r"holds control character\(s\) \\x0a"),
    ({"day": DAY, "response_shift": "city=\tchengdu:uplift=0"}, r"--response-shift .*control character\(s\) \\x09"),
    ({"day": DAY, "population_shift": "avg_spend:scale=1e300"},
     "avg_spend shifted is not a finite number of at most 1e\\+15 in size for .* ingestion refuses"),
    ({"day": DAY, "population_shift": "age:add=1e16"}, "age shifted is not a finite number"),
], ids=["error-population-shift-escape", "error-population-shift-newline", "error-response-shift-tab",
        "error-population-shift-overflow", "error-population-shift-absurd"])
def test_the_simulator_refuses_a_shift_the_pipeline_would_refuse(tmp_path, kwargs, match):
    """A category with control characters, or numbers ingestion refuses: refused before anything is written."""
    with pytest.raises(SimulationError, match=match):
        simulate("demo", SimulationRequest("bad", tmp_path, days=2, users=50, seed=0, start=START),
                 change=Change(**kwargs))
    assert not (tmp_path / "bad").exists()


@pytest.mark.hostile
def test_a_tampered_change_block_and_unsupported_presets_are_refused(tmp_path):
    s = simulate("demo", SimulationRequest("t", tmp_path, days=2, users=50, seed=0, start=START),
                 change=Change(day=DAY, compliance=0.5))
    path = s.campaign_dir / "campaign.yaml"
    body = yaml.safe_load(path.read_text())
    body["simulation"]["change"]["compliance"] = 7
    path.write_text(yaml.safe_dump(body))
    _decisions(tmp_path / "dec.parquet", 50, 1)
    with pytest.raises(SimulationError, match="--compliance must be in"):
        respond(s.campaign_dir, tmp_path / "dec.parquet", START + dt.timedelta(days=2))
    assert not (s.campaign_dir / "events" / f"{(START + dt.timedelta(days=2)).isoformat()}.parquet").exists()
    with pytest.raises(SimulationError, match="cost is a label of its own"):
        simulate("uplift_two_arm", SimulationRequest("u", tmp_path, days=2, users=50, start=START),
                 change=Change(day=DAY, response_shift="base=0.5"))
    # extending a changed campaign without its change (or the reverse) is refused
    plain = simulate("demo", SimulationRequest("q", tmp_path, days=2, users=50, seed=0, start=START))
    with pytest.raises(SimulationError, match="different simulated campaign"):
        simulate("demo", SimulationRequest("q", tmp_path, days=3, users=50, seed=0, start=START),
                 change=Change(day=DAY, compliance=0.5))
    with pytest.raises(SimulationError, match="different simulated campaign"):
        simulate("demo", SimulationRequest("t", tmp_path, days=3, users=50, seed=0, start=START))
    assert plain.campaign_dir.exists()


def test_cli_keeps_the_change_and_refuses_it_with_respond_to(promo_env, capsys, tmp_path):
    from promo_assets.cli.main import main

    assert main(["simulate", "--campaign", "cli", "--days", "2", "--users", "100", "--start", START.isoformat(),
                 "--change-day", DAY.isoformat(), "--response-shift", "city=wuhan:uplift=0",
                 "--population-shift", "age:add=40:share=0.3", "--compliance", "0.8"]) == 0
    block = yaml.safe_load((promo_env["landing"] / "cli" / "campaign.yaml").read_text())["simulation"]["change"]
    assert block == {"day": DAY.isoformat(), "response_shift": "city=wuhan:uplift=0",
                     "population_shift": "age:add=40:share=0.3", "compliance": 0.8}
    capsys.readouterr()
    assert main(["simulate", "--campaign", "cli", "--respond-to", str(tmp_path / "x.parquet"), "--day",
                 "2026-01-03", "--compliance", "0.5"]) == 2
    assert "--compliance cannot be given with --respond-to" in capsys.readouterr().err
    assert main(["simulate", "--campaign", "bad", "--days", "2", "--users", "10", "--start", START.isoformat(),
                 "--change-day", DAY.isoformat(), "--population-shift", "age=old"]) == 2
    assert "--population-shift 'age=old'" in capsys.readouterr().err

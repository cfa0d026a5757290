"""Degenerate campaigns are flagged, not trained blindly: the training frame's data checks (Dagster
asset checks), models skipped with the reason where they cannot learn, stale evaluations not ranked.

`error-*`: a campaign nothing can be learned from (one logged level, a constant response): every
model is skipped with the reason, `promo run` exits 1 naming the check. `accepted-*`: documented
behaviour (a never-logged configured level: a warning, the T-learner / DIPN skipped with the level
named, the others rank; exit 0)."""

from __future__ import annotations

import glob

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest

from promo_assets.config.campaign import CampaignConfig
from promo_assets.causal.checks import cannot_learn, frame_checks
from promo_assets.cli.main import main
from promo_assets.models import registry

DEFAULT_MODELS = ("dipn", "lgbm_s", "lgbm_s_mono", "lgbm_t", "s_learner")


def config(**kw) -> CampaignConfig:
    return CampaignConfig(campaign="c", treatments={"levels": [0.0, 1.0, 2.0]}, **kw)


def frame(levels, response, split="train") -> pd.DataFrame:
    return pd.DataFrame({"level": levels, "response": response, "split": split})


def by_name(checks) -> dict:
    return {c.name: c for c in checks}


# ------------------------------------------------------------------------------------------------
# the checks themselves


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-one-logged-level", "error-no-event", "error-constant-response-0",
                                  "error-constant-response-1", "error-level-below-minimum",
                                  "error-implausible-response-rate", "accepted-healthy-frame"])
def test_frame_checks(case):
    rng = np.random.default_rng(0)
    levels, y, cfg = rng.integers(0, 3, 600), (rng.uniform(size=600) < 0.3).astype(float), config()
    if case == "error-one-logged-level":
        levels = np.zeros(600, int)
    elif case == "error-no-event":
        levels, y = levels[:0], y[:0]
    elif case.startswith("error-constant-response"):
        y = np.full(600, float(case[-1]))
    elif case == "error-level-below-minimum":
        levels = np.where(levels == 2, 1, levels)
        levels[:5] = 2
    elif case == "error-implausible-response-rate":
        y = (rng.uniform(size=600) < 0.98).astype(float)
    checks = by_name(frame_checks(frame(levels, y), cfg))
    reason = cannot_learn(list(checks.values()))
    if case == "accepted-healthy-frame":
        assert all(c.passed for c in checks.values()) and reason is None
    elif case == "error-one-logged-level":
        assert reason.startswith("only level '0' was logged in the training days (600 events)")
        assert checks["events_per_level"].severity == "ERROR"
    elif case == "error-no-event":
        assert reason.startswith("no event was logged in the training days")
    elif case.startswith("error-constant-response"):
        assert reason.startswith(f"the response is {case[-1]} in all 600 training rows: there is nothing to learn")
        assert checks["response_rate"].passed is False and checks["response_rate"].severity == "WARN"
    elif case == "error-level-below-minimum":
        c = checks["events_per_level"]
        assert not c.passed and c.severity == "WARN" and reason is None
        assert "level(s) '2' have fewer than min_events_per_level=30 logged events in the training days (5)" in c.message
    else:
        c = checks["response_rate"]
        assert not c.passed and c.severity == "WARN" and reason is None
        assert "outside campaign.yaml's plausible_response_rate [0.001, 0.95]" in c.message


def test_the_checks_follow_campaign_yaml():
    rng = np.random.default_rng(1)
    levels, y = rng.integers(0, 3, 300), rng.poisson(3.0, 300).astype(float)
    cfg = CampaignConfig.from_dict({"treatments": {"levels": [0, 1, 2]}, "response": "count",
                                    "min_events_per_level": 150, "plausible_response_rate": [0, 2]}, "c")
    checks = by_name(frame_checks(frame(levels, y), cfg))
    assert not checks["events_per_level"].passed and "min_events_per_level=150" in checks["events_per_level"].message
    assert not checks["response_rate"].passed and "[0, 2]" in checks["response_rate"].message
    holdout_only = frame(levels, y, split="holdout")  # the holdout is evaluated, never learned from
    assert cannot_learn(frame_checks(holdout_only, cfg)).startswith("no event was logged in the training days")


# ------------------------------------------------------------------------------------------------
# through `promo run`


def simulate(promo_env, campaign: str, edit) -> None:
    assert main(["simulate", "--campaign", campaign, "--days", "4", "--users", "400", "--start", "2026-01-01"]) == 0
    for path in glob.glob(str(promo_env["landing"] / campaign / "events" / "*.parquet")):
        edit(pd.read_parquet(path)).to_parquet(path, index=False)


def entries(promo_env, campaign: str) -> dict[str, tuple[str, str]]:
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        run = con.execute("SELECT run_id FROM leaderboard_entries WHERE campaign = ? ORDER BY assembled_at DESC LIMIT 1",
                          [campaign]).fetchone()[0]
        rows = con.execute("SELECT model, status, reason FROM leaderboard_entries WHERE campaign = ? AND run_id = ?",
                           [campaign, run]).fetchall()
    return {m: (s, r) for m, s, r in rows}


def check_results(campaign: str) -> dict[str, tuple[bool, str]]:
    instance = dg.DagsterInstance.get()
    out = {}
    for name in ("events_per_level", "response_varies", "response_rate"):
        key = dg.AssetCheckKey(dg.AssetKey("training_frame"), name)
        record = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)[0]
        evaluation = record.event.dagster_event.event_specific_data
        out[name] = (evaluation.passed, evaluation.severity.value)
    return out


@pytest.mark.slow
@pytest.mark.hostile
@pytest.mark.parametrize("case", ["accepted-never-logged-top-level", "accepted-never-logged-control-level"])
def test_a_never_logged_level_is_flagged_and_the_models_handle_or_skip_it(promo_env, capfd, monkeypatch, case):
    monkeypatch.setenv("PROMO_MAX_EPOCHS", "1")  # which models train, skip or rank: not what they learned
    level = 8 if "top" in case else 0
    simulate(promo_env, "c1", lambda df: df[df["treatment"] != level])
    assert main(["run", "--no-progress"]) == 0
    out = "".join(capfd.readouterr())
    warning = (f"c1: data check events_per_level failed (WARN): level(s) '{level}' have fewer than "
               "min_events_per_level=30 logged events in the training days (0)")
    assert warning in out, out[-4000:]
    board = entries(promo_env, "c1")
    skipped = {m for m, (s, _) in board.items() if s == "skipped" and m in DEFAULT_MODELS}
    assert skipped == ({"lgbm_t", "dipn"} if level == 0 else {"lgbm_t"}), board
    assert f"level '{level}' (index {0 if level == 0 else 5}) of campaign 'c1' has no training events" in board["lgbm_t"][1]
    if level == 0:
        assert "DIPN learns its baseline at that level" in board["dipn"][1]
    assert all(board[m][0] == "evaluated" for m in set(DEFAULT_MODELS) - skipped)
    assert check_results("c1")["events_per_level"] == (False, "WARN")
    assert main(["report", "--campaign", "c1"]) == 0
    report = capfd.readouterr().out
    assert "data check events_per_level failed (WARN)" in report and "lgbm_t skipped: level" in report
    with duckdb.connect(str(promo_env["warehouse"])) as con:  # a warehouse written before the data checks
        con.execute("DROP TABLE data_checks")
    assert main(["report", "--campaign", "c1"]) == 0 and "lgbm_t skipped: level" in capfd.readouterr().out


@pytest.mark.slow
@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-only-control-logged", "error-all-responses-0", "error-all-responses-1"])
def test_a_campaign_nothing_can_be_learned_from_skips_every_model(promo_env, capfd, case):
    edit = {"error-only-control-logged": lambda df: df[df["treatment"] == 0],
            "error-all-responses-0": lambda df: df.assign(response=0.0),
            "error-all-responses-1": lambda df: df.assign(response=1.0)}[case]
    simulate(promo_env, "c1", edit)
    assert main(["run", "--no-progress"]) == 1
    out = "".join(capfd.readouterr())
    check = "events_per_level" if "control" in case else "response_varies"
    reason = ("only level '0' was logged in the training days" if "control" in case else
              f"the response is {case[-1]} in all")
    assert f"failures:\n  c1: data check {check} failed (ERROR): {reason}" in out, out[-4000:]
    board = entries(promo_env, "c1")
    for model in DEFAULT_MODELS:
        assert board[model][0] == "skipped" and board[model][1].startswith(reason), (model, board[model])
    assert check_results("c1")[check] == (False, "ERROR")
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:  # nothing was allocated blindly
        assert con.execute("SELECT count(*) FROM allocation").fetchone()[0] == 0
    assert main(["report", "--campaign", "c1"]) == 0  # lines wrapped at 120 columns
    assert " ".join(f"data check {check} failed (ERROR): {reason}".split()) in " ".join(capfd.readouterr().out.split())


def board_rows(text: str) -> list[str]:
    """The lines of the leaderboards that `promo run` / `promo report` print: from each table's header
    (`budget  rank  model ...`) to its `<campaign>: ranked by ...` line."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith("budget "):
            inside = True
        elif inside and ": ranked by " in line:
            inside = False
        elif inside and not line.startswith("---"):
            rows.append(line)
    return rows


@pytest.mark.slow
@pytest.mark.hostile
@pytest.mark.parametrize("case", ["accepted-stale-evaluation-marked-not-ranked"])
def test_a_failed_models_earlier_evaluation_is_marked_stale(promo_env, capfd, monkeypatch, request, case):
    registry.register("flaky", "tests.unit.models.zoo_models:FlakyModel")
    request.addfinalizer(lambda: registry.unregister("flaky"))
    assert main(["simulate", "--campaign", "c1", "--days", "4", "--users", "400", "--start", "2026-01-01"]) == 0
    yaml_path = promo_env["landing"] / "c1" / "campaign.yaml"
    yaml_path.write_text(yaml_path.read_text() + "models:\n  include: [lgbm_s, flaky]\n")
    days = sorted((promo_env["landing"] / "c1" / "events").iterdir())
    days[-1].rename(days[-1].with_suffix(".later"))
    assert main(["run", "--no-progress"]) == 0  # 3 days: flaky evaluated
    assert entries(promo_env, "c1")["flaky"][0] == "evaluated"
    days[-1].with_suffix(".later").rename(days[-1])  # a new day: a new training frame
    monkeypatch.setenv("PROMO_TEST_FLAKY_FAILS", "1")
    capfd.readouterr()
    assert main(["run", "--no-progress"]) == 1
    out = "".join(capfd.readouterr())
    status, reason = entries(promo_env, "c1")["flaky"]
    assert status == "stale" and reason.startswith("stale: its latest evaluation (run ") and "earlier training frame" in reason
    board_lines = board_rows(out)
    assert board_lines and not any(" flaky " in line for line in board_lines)  # not ranked
    assert "flaky not ranked, stale: its latest evaluation" in out
    assert main(["report", "--campaign", "c1"]) == 0
    report = capfd.readouterr().out
    assert "flaky not ranked, stale:" in report and board_rows(report)
    assert not any(" flaky " in line for line in board_rows(report))


@pytest.mark.slow
@pytest.mark.hostile
@pytest.mark.parametrize("case", ["accepted-level-added-to-campaign-yaml-never-logged"])
def test_a_level_added_to_campaign_yaml_runs_to_a_leaderboard(promo_env, capfd, monkeypatch, case):
    """A real RCT (no truth) whose campaign.yaml gains a level nobody was ever given: every model
    predicts it or is skipped naming it; no 'cannot reshape' from the earlier run's coefficients."""
    monkeypatch.setenv("PROMO_MAX_EPOCHS", "1")  # the shapes of what the models predict, not its quality
    assert main(["simulate", "--campaign", "c1", "--days", "4", "--users", "400", "--start", "2026-01-01"]) == 0
    folder = promo_env["landing"] / "c1"
    for path in (folder / "truth").iterdir():
        path.unlink()
    (folder / "truth").rmdir()
    yaml_path = folder / "campaign.yaml"
    yaml_path.write_text(yaml_path.read_text() + "models:\n  include: [lgbm_s, lgbm_t, s_learner]\n")
    assert main(["run", "--no-progress"]) == 0  # 6 levels, every one logged: all three evaluated
    assert {m: s for m, (s, _) in entries(promo_env, "c1").items() if m in ("lgbm_t", "s_learner")} == {
        "lgbm_t": "evaluated", "s_learner": "evaluated"}
    yaml_path.write_text(yaml_path.read_text().replace("  - 8\n", "  - 8\n  - 13\n", 1))
    assert CampaignConfig.load(yaml_path).labels[-1] == "13"
    capfd.readouterr()
    assert main(["run", "--no-progress"]) == 0
    out = "".join(capfd.readouterr())
    assert "cannot reshape" not in out and "Traceback" not in out
    board = entries(promo_env, "c1")
    assert board["lgbm_t"][0] == "skipped" and "level '13' (index 6)" in board["lgbm_t"][1]
    assert board["lgbm_s"][0] == board["s_learner"][0] == "evaluated"
    assert "level(s) '13' have fewer than min_events_per_level=30" in out


@pytest.mark.slow
@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-continuous-response-with-a-1e12-outlier", "error-empty-population-file"])
def test_hidden_causes_are_named_by_promo_run(promo_env, capfd, case):
    assert main(["simulate", "--campaign", "c1", "--days", "4", "--users", "400", "--start", "2026-01-01"]) == 0
    folder = promo_env["landing"] / "c1"
    yaml_path = folder / "campaign.yaml"
    if case == "error-continuous-response-with-a-1e12-outlier":
        yaml_path.write_text(yaml_path.read_text().replace("response: binary", "response: continuous")
                             + "models:\n  include: [s_learner]\n")
        first = sorted((folder / "events").iterdir())[0]
        df = pd.read_parquet(first)
        df.loc[df.index[0], "response"] = 1e12
        df.to_parquet(first, index=False)
        expected = ["s_learner/response_coefficients: s_learner: ", "predicted costs are negative",
                    "cost rule 'redeemed'", "look for extreme or negative values in the events' response column"]
    else:
        yaml_path.write_text(yaml_path.read_text() + "models:\n  include: [lgbm_s]\n")
        population = next((folder / "population").iterdir())
        pd.read_parquet(population).iloc[:0].to_parquet(population, index=False)
        expected = [f"lgbm_s/response_coefficients: {population}: the population file has no users (no rows)"]
    assert main(["run", "--no-progress"]) == 1
    out = "".join(capfd.readouterr())
    failures = out[out.index("failures:"):]
    for text in expected:
        assert text in failures, failures
    assert "solve_ratio" not in out and "chunk source" not in out and "Traceback" not in out

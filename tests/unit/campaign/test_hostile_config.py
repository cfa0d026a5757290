"""Hostile and bad campaign.yaml files, campaign names and too small holdouts (issue #12 items 9, 10, 12).

`error-*` cases must be refused with a CampaignConfigError (or a CLI exit 2) whose message names the
key / value / rule; `accepted-*` cases are documented as accepted and checked for that behaviour.
"""

from __future__ import annotations

import datetime as dt
import logging

import duckdb
import numpy as np
import pytest

from promo_assets.cli.main import main
from promo_assets.config.campaign import (
    CAMPAIGN_NAME_RULE,
    CampaignConfig,
    CampaignConfigError,
    CampaignNameError,
    check_campaign_name,
)
from promo_assets.evaluation import (
    BootstrapInterval,
    EvaluationSettings,
    Holdout,
    LoggedEvents,
    Truth,
    evaluate_policies,
    format_leaderboard,
    leaderboard,
    leaderboard_markdown,
)
from promo_assets.ingestion import discover_campaigns
from promo_assets.simulation import REFERENCE_START, SimulationError, SimulationRequest, simulate
from promo_assets.store import results, warehouse
from tests.conftest import train_only

BASE = "treatments:\n  levels: [0, 1, 2]\nbudget_per_capita: [1.0]\n"
MERCHANTS = "merchants:\n  treatments:\n    levels: [0, 25, 50]\n"


def load_yaml(tmp_path, text: str | bytes) -> CampaignConfig:
    folder = tmp_path / "c1"
    folder.mkdir(exist_ok=True)
    path = folder / "campaign.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return CampaignConfig.load(path)


# (yaml text, words the message must contain)
BAD_CONFIGS = {
    # typos: the closest valid key is named
    "error-typo-holdout_day": (BASE + "holdout_day: 2\n", ["'holdout_day'", "did you mean 'holdout_days'?"]),
    "error-typo-randomised": (BASE + "randomised: false\n", ["'randomised'", "did you mean 'randomized'?"]),
    "error-typo-budget_per_capitaa": (BASE + "budget_per_capitaa: [2.0]\n",
                                      ["'budget_per_capitaa'", "did you mean 'budget_per_capita'?"]),
    "error-typo-nested-merchants-cots": (BASE + MERCHANTS + "  cots: assigned\n",
                                         ["'merchants.cots'", "did you mean 'cost'?"]),
    "error-typo-treatments-level": ("treatments:\n  level: [0, 1]\n", ["'treatments.level'", "did you mean 'levels'?"]),
    "error-unknown-key-far-from-all": (BASE + "zzqqxx: 1\n", ["unknown key 'zzqqxx'", "valid keys", "holdout_days"]),
    # wrong types: never coerced
    "error-holdout_days-two": (BASE + "holdout_days: two\n", ["'holdout_days'", "'two'", "an integer >= 1"]),
    "error-holdout_days-2.7-not-truncated": (BASE + "holdout_days: 2.7\n", ["'holdout_days'", "2.7", "integer"]),
    "error-holdout_days-quoted": (BASE + "holdout_days: '2'\n", ["'holdout_days'", "'2'", "integer"]),
    "error-validation_fraction-list": (BASE + "validation_fraction: [0.2]\n",
                                       ["'validation_fraction'", "[0.2]", "a number in [0, 1)"]),
    "error-ips_clip-high": (BASE + "ips_clip: high\n", ["'ips_clip'", "'high'", "a number >= 1"]),
    "error-max_rejected_fraction-percent": (BASE + "max_rejected_fraction: 5%\n",
                                            ["'max_rejected_fraction'", "'5%'", "a number in [0, 1]"]),
    "error-features-list": (BASE + "features: [age]\n", ["'features'", "['age']", "mapping"]),
    "error-features-unknown-kind": (BASE + "features:\n  age: text\n", ["'features.age'", "'text'", "numeric"]),
    "error-randomized-string-false": (BASE + "randomized: \"false\"\n", ["'randomized'", "'false'", "boolean"]),
    "error-randomized-number": (BASE + "randomized: 0\n", ["'randomized'", "0", "boolean"]),
    "error-budget-text": ("treatments:\n  levels: [0, 1]\nbudget_per_capita: lots\n",
                          ["'budget_per_capita'", "'lots'", "a number > 0"]),
    "error-levels-text": ("treatments:\n  levels: [0, one]\n", ["'treatments.levels[1]'", "'one'"]),
    "error-arms-cost-text": ("treatments:\n  arms: {a: 0, b: cheap}\n", ["'treatments.arms.b'", "'cheap'"]),
    "error-graph-weight": (BASE + "graph:\n  weight: clicks\n", ["'graph.weight'", "'clicks'", "n_payments"]),
    "error-data_quality-unknown-block": (BASE + "data_quality:\n  duplicates: warn\n", ["'data_quality'"]),
    # out of range
    "error-holdout_days-zero": (BASE + "holdout_days: 0\n", ["'holdout_days'", "0", "an integer >= 1"]),
    "error-validation_fraction-one": (BASE + "validation_fraction: 1.0\n", ["'validation_fraction'", "1.0", "[0, 1)"]),
    "error-ips_clip-below-one": (BASE + "ips_clip: 0.5\n", ["'ips_clip'", "0.5", ">= 1"]),
    "error-ips_clip-infinite": (BASE + "ips_clip: .inf\n", ["'ips_clip'", "inf", "finite"]),
    "error-max_rejected_fraction-1.5": (BASE + "max_rejected_fraction: 1.5\n", ["'max_rejected_fraction'", "1.5"]),
    "error-min_holdout_users-zero": (BASE + "min_holdout_users: 0\n", ["'min_holdout_users'", "0", ">= 1"]),
    "error-min_holdout_users-float": (BASE + "min_holdout_users: 50.5\n", ["'min_holdout_users'", "50.5", "integer"]),
    "error-budget-negative": ("treatments:\n  levels: [0, 1]\nbudget_per_capita: -1\n",
                              ["'budget_per_capita", "-1", "greater than 0"]),
    "error-budget-zero-in-list": ("treatments:\n  levels: [0, 1]\nbudget_per_capita: [1.0, 0]\n",
                                  ["'budget_per_capita[1]'", "0", "greater than 0"]),
    "error-budget-empty": ("treatments:\n  levels: [0, 1]\nbudget_per_capita: []\n",
                           ["'budget_per_capita'", "[]", "non-empty"]),
    "error-budget-nan": ("treatments:\n  levels: [0, 1]\nbudget_per_capita: .nan\n", ["'budget_per_capita", "nan", "finite"]),
    "error-ratio_budget-negative": (BASE + "ratio_budget: [20, -5]\n", ["'ratio_budget[1]'", "-5"]),
    "error-levels-empty": ("treatments:\n  levels: []\n", ["'treatments.levels'", "[]", "at least 2"]),
    "error-levels-one": ("treatments:\n  levels: [5]\n", ["'treatments.levels'", "[5]", "at least 2"]),
    "error-levels-not-ascending": ("treatments:\n  levels: [0, 2, 1]\n",
                                   ["'treatments.levels'", "[0, 2, 1]", "strictly ascending"]),
    "error-levels-repeated": ("treatments:\n  levels: [0, 1, 1]\n", ["'treatments.levels'", "strictly ascending"]),
    "error-levels-negative": ("treatments:\n  levels: [-1, 0]\n", ["'treatments.levels[0]'", "-1", ">= 0"]),
    "error-arms-one": ("treatments:\n  arms: {only: 1}\n", ["'treatments.arms'", "at least 2"]),
    "error-levels-and-arms": ("treatments:\n  levels: [0, 1]\n  arms: {a: 0, b: 1}\n",
                              ["'treatments'", "exactly one of 'levels"]),
    "error-treatments-missing": ("cost: redeemed\n", ["missing required key 'treatments'"]),
    "error-empty-file": ("", ["missing required key 'treatments'"]),
    "error-cost-unknown": (BASE + "cost: free\n", ["'cost'", "'free'", "redeemed", "assigned", "column"]),
    "error-response-unknown": (BASE + "response: yesno\n", ["'response'", "'yesno'", "binary"]),
    "error-merchants-levels-descending": (BASE + "merchants:\n  treatments:\n    levels: [50, 25]\n",
                                          ["'merchants.treatments.levels'", "[50, 25]", "strictly ascending"]),
    "error-merchants-without-treatments": (BASE + "merchants:\n  response: count\n",
                                           ["missing required key 'merchants.treatments'"]),
    # monitoring settings that would only fail later, in a run
    "error-monitoring-budget-not-a-budget": ("treatments:\n  levels: [0, 1]\nbudget_per_capita: [1, 2, 3]\n"
                                             "monitoring:\n  budget: 7\n",
                                             ["'monitoring.budget' = 7", "not one of the campaign's budgets",
                                              "'budget_per_capita': 1, 2, 3"]),
    "error-monitoring-stale_weight-zero": (BASE + "monitoring:\n  stale_weight: 0\n",
                                           ["'monitoring.stale_weight'", "0", "(0, 1]"]),
    "error-monitoring-change_explore_share-unaffordable": (
        "treatments:\n  levels: [1, 4, 10]\ncost: assigned\nbudget_per_capita: [1.5, 3]\n"
        "monitoring:\n  change_explore_share: 0.5\n",
        ["'monitoring.change_explore_share' = 0.5", "cannot be paid for at budget 1.5 per capita (cost: assigned)",
         "explored users' levels cost 2.5 per capita"]),
    "error-exploration-share-unaffordable": (
        "treatments:\n  levels: [1, 4, 10]\ncost: assigned\nbudget_per_capita: [1.5, 3]\nexploration:\n  share: 0.2\n",
        ["'exploration.share' = 0.2", "cannot be paid for at budget 1.5 per capita"]),
    "error-yaml-merge-key-bad-value": (BASE + "monitoring:\n  <<: {confidence: 2}\n",
                                       ["'monitoring.confidence'", "2", "(0.5, 1)"]),
    "error-yaml-merge-key-not-a-mapping": (BASE + "monitoring:\n  <<: 3\n",
                                           ["not valid YAML", "expected a mapping or list of mappings for merging"]),
    # not a campaign.yaml at all
    "error-bad-yaml": ("treatments:\n  levels: [0, 1\n", ["not valid YAML", "campaign.yaml"]),
    "error-top-level-list": ("- treatments\n- cost\n", ["top level", "list"]),
    "error-top-level-text": ("just some text\n", ["top level", "str"]),
    "error-duplicate-key": (BASE + "holdout_days: 1\nholdout_days: 3\n", ["not valid YAML", "'holdout_days' is given twice"]),
    "error-not-utf8": (b"treatments:\n  levels: [0, 1]\ncost: \xff\xfe\n", ["UTF-8"]),
    "error-non-text-key": (BASE + "1: one\n", ["top-level keys must be text", "1"]),
}


@pytest.mark.hostile
@pytest.mark.parametrize("text, words", list(BAD_CONFIGS.values()), ids=list(BAD_CONFIGS))
def test_bad_campaign_yaml_is_refused_naming_key_and_value(tmp_path, text, words):
    with pytest.raises(CampaignConfigError) as err:
        load_yaml(tmp_path, text)
    message = str(err.value)
    assert str(tmp_path / "c1" / "campaign.yaml") in message  # names the file
    for word in words:
        assert word in message, (word, message)
    assert "Traceback" not in message and "pydantic" not in message.lower()


def test_every_problem_of_a_file_is_reported_at_once(tmp_path):
    with pytest.raises(CampaignConfigError) as err:
        load_yaml(tmp_path, BASE + "holdout_days: two\nips_clip: high\nrandomised: true\n")
    message = str(err.value)
    assert "3 problems" in message
    assert all(w in message for w in ("'holdout_days'", "'ips_clip'", "did you mean 'randomized'?"))


ACCEPTED_CONFIGS = {
    "accepted-yaml-merge-key": (BASE + "monitoring:\n  <<: {confidence: 0.8, effect_days: 3}\n  effect_days: 5\n",
                                lambda c: (c.monitoring.confidence, c.monitoring.effect_days) == (0.8, 5)),
    "accepted-budget-as-one-number": ("treatments:\n  levels: [0, 1]\nbudget_per_capita: 2\n",
                                      lambda c: c.budget_per_capita == (2.0,)),
    "accepted-integer-where-a-number-is-expected": (BASE + "ips_clip: 10\nvalidation_fraction: 0\n",
                                                    lambda c: c.ips_clip == 10.0 and c.validation_fraction == 0.0),
    "accepted-arm-labels-written-as-numbers": ("treatments:\n  arms: {0: 0, 1: 1.5}\n",
                                               lambda c: c.labels == ("0", "1") and not c.ordered),
    "accepted-no-budget-yet": ("treatments:\n  levels: [0, 1]\n", lambda c: c.budget_per_capita == ()),
    "accepted-simulator-provenance-block": (BASE + "simulation:\n  preset: demo\n  start: 2026-01-01\n",
                                            lambda c: c.simulation["preset"] == "demo"),
}


@pytest.mark.hostile
@pytest.mark.parametrize("text, check", list(ACCEPTED_CONFIGS.values()), ids=list(ACCEPTED_CONFIGS))
def test_documented_accepted_configs(tmp_path, text, check):
    assert check(load_yaml(tmp_path, text))


def test_defaults_and_typed_blocks(tmp_path):
    from promo_assets.config.campaign import MerchantsBlock, ModelsBlock

    config = load_yaml(tmp_path, BASE + MERCHANTS + "ratio_budget: 20\nfeatures:\n  zip: categorical\n")
    assert (config.holdout_days, config.validation_fraction, config.ips_clip) == (1, 0.2, 20.0)
    assert config.min_holdout_users == 100 and config.randomized is True
    assert config.features == {"zip": "categorical"}
    assert config.ratio_budget == (20.0,)
    assert isinstance(config.merchants, MerchantsBlock)
    assert config.merchants.treatments.levels == [0.0, 25.0, 50.0]
    assert config.merchants.cost == "redeemed"  # default filled in
    assert config.graph is None and config.simulation is None  # absent blocks stay absent
    assert config.models == ModelsBlock() and config.models.include is None and config.segments == ()
    assert not hasattr(config, "extra")
    explicit = load_yaml(tmp_path, BASE + "min_holdout_users: 30\nrandomized: false\n")
    assert explicit.min_holdout_users == 30 and explicit.randomized is False


def test_every_simulator_preset_writes_a_valid_campaign_yaml(tmp_path):
    for preset in ("demo", "e2e_synthetic", "dipn_synthetic_1", "bipartite"):
        request = SimulationRequest(f"p-{preset}", tmp_path, days=2, users=60, seed=0, start=dt.date(2026, 1, 1))
        summary = simulate(preset, request)
        config = CampaignConfig.load(summary.campaign_dir)
        assert config.campaign == f"p-{preset}" and config.budget_per_capita


# ------------------------------------------------------------------------------------ campaign names
BAD_NAMES = {
    "error-name-pipe": "a|b",
    "error-name-parent-dir": "../x",
    "error-name-slash": "a/b",
    "error-name-300-chars": "x" * 300,
    "error-name-empty": "",
    "error-name-quote": "it's",
    "error-name-space": "my campaign",
    "error-name-hidden": ".hidden",
    "error-name-newline": "a\nb",
    "error-name-not-text": 7,
}


@pytest.mark.hostile
@pytest.mark.parametrize("name", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
def test_bad_campaign_name_is_refused_by_the_one_rule(name):
    with pytest.raises(CampaignNameError) as err:
        check_campaign_name(name)
    message = str(err.value)
    assert CAMPAIGN_NAME_RULE in message
    shown = f"{name[:60]!r}… (300 characters)" if name == "x" * 300 else repr(name)
    assert f"invalid campaign name {shown}" in message


@pytest.mark.hostile
@pytest.mark.parametrize("name", ["demo", "c1.v2", "A_b-9", "x" * 64], ids=lambda n: f"accepted-name-{n[:12]}")
def test_good_campaign_names_pass(name):
    assert check_campaign_name(name) == name


@pytest.mark.hostile
@pytest.mark.parametrize("name", ["a|b", "it's"], ids=["error-folder-pipe", "error-folder-quote"])
def test_discovery_skips_and_names_an_invalid_folder(tmp_path, caplog, name):
    for folder in ("c1", name):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "campaign.yaml").write_text(BASE)
    with caplog.at_level(logging.WARNING, logger="promo_assets.config.campaign"):
        assert discover_campaigns(tmp_path) == ["c1"]
    assert any(str(tmp_path / name) in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records)


@pytest.mark.hostile
@pytest.mark.parametrize("name", ["", "x" * 300, "../x"], ids=["error-simulate-empty", "error-simulate-300-chars",
                                                               "error-simulate-parent-dir"])
def test_simulate_refuses_bad_names_and_writes_nothing(tmp_path, name):
    landing = tmp_path / "landing"
    landing.mkdir()
    with pytest.raises(SimulationError, match="invalid campaign name"):
        simulate("demo", SimulationRequest(name, landing, days=2, users=50, start=REFERENCE_START))
    assert list(landing.iterdir()) == [] and not (tmp_path / "x").exists()


@pytest.mark.hostile
@pytest.mark.parametrize("argv, words", [
    (["simulate", "--campaign", "x" * 300, "--days", "2", "--users", "50",
      "--start", REFERENCE_START.isoformat()], ["invalid campaign name", "300 characters"]),
    (["simulate", "--campaign", "", "--days", "2", "--users", "50",
      "--start", REFERENCE_START.isoformat()], ["invalid campaign name ''"]),
    (["run", "--campaign", "a|b"], ["--campaign", "invalid campaign name 'a|b'"]),
], ids=["error-cli-simulate-300-chars", "error-cli-simulate-empty", "error-cli-run-pipe"])
def test_cli_refuses_bad_names_with_exit_2(promo_env, capsys, argv, words):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words) and "Traceback" not in err
    assert list(promo_env["landing"].iterdir()) == []


@pytest.mark.hostile
@pytest.mark.parametrize("bad", ["holdout_day: 2\n", "randomized: \"false\"\n"],
                         ids=["error-cli-run-typo", "error-cli-run-string-bool"])
def test_promo_run_checks_every_campaign_yaml_and_runs_the_others(promo_env, capsys, bad):
    assert main(["simulate", "--campaign", "good", "--days", "2", "--users", "50", "--start", "2026-01-01"]) == 0
    assert main(["simulate", "--campaign", "zbad", "--days", "2", "--users", "50", "--start", "2026-01-01"]) == 0
    path = promo_env["landing"] / "zbad" / "campaign.yaml"
    path.write_text(path.read_text() + bad)
    capsys.readouterr()
    assert main(["run", "--ingest-only", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "campaign(s) zbad not run" in err and str(path) in err and bad.split(":")[0] in err
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:  # only the good campaign was run
        assert con.execute("SELECT DISTINCT campaign FROM rct_events").fetchall() == [("good",)]
    path.write_text(path.read_text().replace(bad, ""))
    (promo_env["landing"] / "good" / "campaign.yaml").write_text(bad)
    assert main(["run", "--campaign", "good", "--no-progress"]) == 2  # only bad campaigns: nothing was run
    assert "nothing was run" in capsys.readouterr().err


def test_a_config_for_an_invalid_campaign_name_is_refused():
    with pytest.raises(CampaignNameError, match=r"invalid campaign name 'a\|b'"):
        CampaignConfig.from_dict({"treatments": {"levels": [0, 1]}}, campaign="a|b")


# ------------------------------------------------------------------------------------ holdout too small
def _evaluation(n: int, min_users: int | None):
    rng = np.random.default_rng(1)
    v = np.sort(rng.uniform(0, 0.5, (n, 3)), axis=1)
    c = np.broadcast_to(np.arange(3.0), v.shape).copy()
    t = rng.integers(0, 3, n)
    y = (rng.uniform(size=n) < v[np.arange(n), t]).astype(float)
    return evaluate_policies({"m": ("v1", v, c)}, Holdout(LoggedEvents(t, y, c[np.arange(n), t], 1 / 3), Truth(v, c)),
                             EvaluationSettings([1.0], "c1", eom_interval=BootstrapInterval(20),
                                                min_holdout_users=min_users))


@pytest.mark.hostile
@pytest.mark.parametrize("n", [5, 40, 99], ids=["accepted-holdout-5-users", "accepted-holdout-40-users",
                                                "accepted-holdout-99-users"])
def test_a_too_small_holdout_is_flagged_not_ranked(n):
    rows = _evaluation(n, min_users=100)
    assert rows["too_small"].all() and (rows["n_users"] == n).all()  # evaluated, but flagged
    board = leaderboard(rows)
    assert board["note"].str.startswith(f"too small to evaluate ({n} holdout users)").all()
    assert "% oracle" not in board.columns  # no "107.8 % of the oracle"
    text, md = format_leaderboard(rows), leaderboard_markdown(rows)
    for out in (text, md):
        assert f"too small to evaluate ({n} holdout users)" in out and "min_holdout_users" in out
        assert "%" not in out.split("too small")[0].split("\n", 1)[1]  # no percentage in the rows


def test_a_large_enough_holdout_is_ranked_against_the_oracle():
    rows = _evaluation(300, min_users=100)
    assert not rows["too_small"].any()
    board = leaderboard(rows)
    assert "note" not in board.columns and board["% oracle"].str.endswith("%").all()
    assert "too small" not in format_leaderboard(rows)


def test_leaderboard_of_rows_written_before_the_flag_existed():
    board = leaderboard(_evaluation(300, min_users=None).drop(columns=["too_small"]))
    assert "note" not in board.columns and len(board) == 2 and board["% oracle"].str.endswith("%").all()


def test_warehouse_gets_the_too_small_column_also_when_it_existed_before(tmp_path):
    path = tmp_path / "w.duckdb"
    with warehouse.connect(path) as con:
        con.execute("ALTER TABLE policy_evaluation DROP COLUMN too_small")  # a warehouse from before
        con.execute("DROP TABLE warehouse_schema")  # ... the column and the schema marker
    with warehouse.connect(path) as con:
        assert warehouse.table_columns(con, "policy_evaluation")["too_small"] == "BOOLEAN"
        results.start(con, "c1", "r1")
        with warehouse.registered(con, "eval_df", _evaluation(40, min_users=100).assign(run_id="r1")):
            con.execute(warehouse.sql("frames", "insert_evaluation"))
        results.finish(con, "c1", "r1", succeeded=True)
        board = con.execute("SELECT * FROM policy_evaluation WHERE campaign = ? AND run_id = ?", ["c1", "r1"]).df()
    assert "too small to evaluate (40 holdout users)" in format_leaderboard(board)
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT bool_and(too_small) FROM policy_evaluation").fetchone()[0] is True


def test_schema_statements_run_only_when_the_recorded_schema_hash_differs(tmp_path):
    """ensure_schema skips the schema statements for a warehouse already brought up to this schema
    (its hash in warehouse_schema) and runs them again when the recorded hash is another one's."""
    path = tmp_path / "w.duckdb"
    with warehouse.connect(path) as con:
        [(recorded,)] = con.execute("SELECT schema_hash FROM warehouse_schema").fetchall()
        con.execute("ALTER TABLE policy_evaluation DROP COLUMN too_small")
    with warehouse.connect(path) as con:  # same hash: the statements did not run
        assert "too_small" not in warehouse.table_columns(con, "policy_evaluation")
        con.execute("UPDATE warehouse_schema SET schema_hash = 'an older schema'")
    with warehouse.connect(path) as con:  # another hash: they ran, and the current hash is recorded
        assert warehouse.table_columns(con, "policy_evaluation")["too_small"] == "BOOLEAN"
        assert con.execute("SELECT schema_hash FROM warehouse_schema").fetchall() == [(recorded,)]


@pytest.mark.slow
@pytest.mark.hostile
@pytest.mark.parametrize("users", [120], ids=["accepted-pipeline-holdout-too-small"])
def test_promo_run_flags_a_too_small_holdout_in_report_and_ui(promo_env, monkeypatch, capsys, users):
    monkeypatch.setenv("PROMO_MAX_EPOCHS", "1")  # the flag is about the holdout's size, whichever models
    assert main(["simulate", "--campaign", "tiny", "--days", "3", "--users", str(users), "--start", "2026-01-01"]) == 0
    train_only(promo_env["landing"] / "tiny" / "campaign.yaml")
    assert main(["run", "--no-progress"]) == 0
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        n, flagged = con.execute("SELECT max(n_users), bool_and(too_small) FROM policy_evaluation").fetchone()
    assert n < 100 and flagged is True
    capsys.readouterr()
    assert main(["report", "--campaign", "tiny"]) == 0
    flat = " ".join(capsys.readouterr().out.split())  # the note column is wrapped to fit 120 columns
    assert f"too small to evaluate ({n} holdout users)" in flat and "min_holdout_users" in flat
    import dagster as dg

    event = dg.DagsterInstance.get().get_latest_materialization_event(dg.AssetKey("leaderboard"))
    assert "too small to evaluate" in event.asset_materialization.metadata["leaderboard_markdown"].value


@pytest.mark.hostile
@pytest.mark.parametrize("command", ["report", "forget"], ids=["error-report-name", "error-forget-name"])
def test_report_and_forget_refuse_a_bad_campaign_name(promo_env, capsys, command):
    extra = ["--day", "2026-01-01"] if command == "forget" else []
    assert main([command, "--campaign", "a|b", *extra]) == 2
    err = capsys.readouterr().err
    assert "--campaign: invalid campaign name 'a|b'" in err and "Traceback" not in err

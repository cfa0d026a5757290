"""The model zoo (issue #14): one registry, one asset chain per model, chains that skip or fail alone."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml

from promo_assets.cli.main import main
from promo_assets.defs.common import model_key, model_of_key
from promo_assets.models import registry
from tests.conftest import PLUMBING_MODELS, train_only
from promo_assets.simulation import REFERENCE_START


def _query(env, statement: str, params=None):
    with duckdb.connect(str(env["warehouse"]), read_only=True) as con:
        return con.execute(statement, params or []).fetchall()


def test_promo_models_lists_every_registered_model(capsys):
    """`promo models` prints every registered model (the docs' model reference is generated from the
    same registry: tests/project/test_docs.py)."""
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in registry.names():
        assert name in out


def test_definitions_have_one_chain_per_registered_model():
    from promo_assets.definitions import build_defs

    graph = build_defs().resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    for name in registry.names():
        model = registry.get(name)
        phases = ["model"] if len(model.phases) == 1 else list(model.phases)
        prefix = "" if model.default else "optional/"  # the chains off by default sit under optional/
        chain = [f"{prefix}{name}/{p}" for p in phases] + [f"{prefix}{name}/{s}" for s in
                                                            ("response_coefficients", "budget_dual", "allocation",
                                                             "policy_evaluation")]
        assert set(chain) <= keys, (name, set(chain) - keys)
        for up, down in zip(chain, chain[1:]):
            assert dg.AssetKey.from_user_string(up) in graph.get(dg.AssetKey.from_user_string(down)).parent_keys
    board = graph.get(dg.AssetKey("leaderboard")).parent_keys
    assert {model_key(n, "policy_evaluation") for n in registry.names()} <= board
    # the catalog sorts by key: the chains off by default sit in one `optional` folder, the others first
    assert {model_of_key(k) for k in graph.get_all_asset_keys() if k.path[0] == "optional"} == \
        {n for n in registry.names() if not registry.get(n).default}
    assert dg.AssetKey(["gnn_hazard", "model"]) in graph.get(dg.AssetKey(["gnn_hazard", "merchant_coefficients"])).parent_keys


def test_a_failed_step_of_an_optional_chain_is_that_models_failure():
    """Step keys join the key's parts with '__': `optional__cmnn__model` is cmnn's chain, so a run in
    which only it failed is 'partial' (the other models' rows count), not failed."""
    from promo_assets.defs.common import failed_models

    assert failed_models(["optional__cmnn__model", "dipn__bias_net", "gnn_hazard__joint_allocation"]) == \
        ["cmnn", "dipn", "gnn_hazard"]
    assert failed_models(["optional__cmnn__model", "leaderboard"]) is None
    assert failed_models(["optional__not_a_model__model"]) is None
    assert model_of_key(model_key("cmnn", "policy_evaluation")) == "cmnn" and model_of_key(dg.AssetKey("decisions")) is None


def _arms_campaign(landing: Path, days: int = 3, users: int = 300, seed: int = 0) -> None:
    """A three-arm RCT with string labels and `cost: assigned`, by hand in the landing format."""
    rng = np.random.default_rng(seed)
    folder = landing / "mail"
    (folder / "events").mkdir(parents=True)
    (folder / "campaign.yaml").write_text(yaml.safe_dump({
        "treatments": {"arms": {"No E-Mail": 0, "Mens E-Mail": 1, "Womens E-Mail": 1}},
        "cost": "assigned", "response": "binary", "budget_per_capita": [0.5], "min_holdout_users": 50}))
    arms = np.array(["No E-Mail", "Mens E-Mail", "Womens E-Mail"])
    for d in range(days):
        age = rng.integers(18, 70, users)
        women = rng.random(users) < 0.5
        arm = rng.integers(0, 3, users)
        p = 0.05 + 0.08 * ((arm == 1) & ~women) + 0.10 * ((arm == 2) & women) + 0.001 * (age - 18)
        pd.DataFrame({"user_id": [f"u{d}_{i}" for i in range(users)], "treatment": arms[arm],
                      "response": (rng.random(users) < p).astype(int), "age": age,
                      "gender": np.where(women, "f", "m")}).to_csv(folder / "events" / f"2026-03-0{d + 1}.csv", index=False)


@pytest.mark.slow
def test_three_arm_campaign_skips_dipn_and_gnn_hazard_with_their_reasons(promo_env, capsys):
    _arms_campaign(promo_env["landing"])
    assert main(["run", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "mail: dipn skipped: needs ordered incentive levels" in out
    assert "mail: gnn_hazard skipped: needs a customer–merchant campaign" in out
    evaluated = {r[0] for r in _query(promo_env, "SELECT DISTINCT model FROM policy_evaluation")}
    assert {"s_learner", "lgbm_s", "lgbm_t", "random"} <= evaluated
    assert not {"dipn", "gnn_hazard", "lgbm_s_mono"} & evaluated
    assert _query(promo_env, "SELECT count(*) FROM allocation WHERE model = 's_learner'")[0][0] > 0
    # known from campaign.yaml, so their chains are not in the run: no skip to record, no observation;
    # the leaderboard (one run with the chains) lists every one with its reason
    assert _query(promo_env, "SELECT count(*) FROM model_skips")[0][0] == 0
    skips = dict(_query(promo_env, "SELECT model, reason FROM leaderboard_entries WHERE status = 'skipped'"))
    off = _off_by_default()
    assert set(skips) == {"dipn", "gnn_hazard", "lgbm_s_mono", *off} and "unordered arms" in skips["dipn"]
    assert all(f"mail: {m} skipped: off by default" in out for m in off)
    assert "ordered incentive levels" in skips["lgbm_s_mono"]
    instance = dg.DagsterInstance.get()
    assert instance.get_latest_materialization_event(dg.AssetKey(["dipn", "bias_net"])) is None
    runs = instance.get_runs()
    # the ingestion, chains and leaderboard in one run, then the champion, decisions and outbox
    assert sorted(r.job_name for r in runs) == ["decision_job", "refresh_job"]  # REFRESH_ORDER, as jobs.py declares
    meta = instance.get_latest_materialization_event(dg.AssetKey("leaderboard")).asset_materialization.metadata
    compact = [v for k, v in meta.items() if k.startswith("leaderboard at budget ")]
    assert compact and all({r.data["model"] for r in t.value.records} == {"s_learner", "lgbm_s", "lgbm_t", "random"}
                           for t in compact)
    reasons = {r.data["model"]: r.data["reason"] for r in meta["not_evaluated"].value.records}
    assert "unordered arms" in reasons["dipn"] and "merchants" in reasons["gnn_hazard"]
    # each chain's assets say why, also the ones `promo run` left out of its run
    for asset in (["optional", "cmnn", "model"], ["optional", "cmnn", "policy_evaluation"], ["gnn_hazard", "allocation"]):
        seen = instance.fetch_observations(dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=["mail"]),
                                           limit=1).records
        assert seen and "skipped_reason" in seen[0].asset_observation.metadata, asset
    assert main(["report", "--campaign", "mail"]) == 0
    out = capsys.readouterr().out
    assert "dipn skipped: needs ordered incentive levels" in out and "s_learner" in out and "random" in out


def _off_by_default() -> set[str]:
    """The registered models a campaign without a `models:` block skips (`default = False`)."""
    return {n for n in registry.names() if not registry.get(n).default}


@pytest.fixture
def failing_model():
    registry.register("failing", "tests.unit.models.zoo_models:FailingModel")
    yield "failing"
    registry.unregister("failing")


# the models trained next to the failing one: two LightGBM chains, whose training takes a fraction of
# a second; whether a chain fails alone does not depend on which model the others are
BESIDE_FAILING = PLUMBING_MODELS


@pytest.mark.slow
def test_a_failing_model_fails_alone(promo_env, monkeypatch, capsys, failing_model):
    monkeypatch.setenv("PROMO_MAX_EPOCHS", "1")
    assert main(["simulate", "--preset", "demo", "--campaign", "demo", "--days", "3", "--users", "250",
                 "--seed", "1", "--start", REFERENCE_START.isoformat()]) == 0
    train_only(promo_env["landing"] / "demo" / "campaign.yaml", (failing_model, *BESIDE_FAILING))
    assert main(["run", "--no-progress"]) == 1
    captured = capsys.readouterr()
    failures = captured.err[captured.err.index("failures:"):]
    assert "demo: failing/model: failing: campaign 'demo' has no column 'loyalty_tier' (test model)" in failures
    assert "Error occurred while executing op" not in captured.out + captured.err
    for model in BESIDE_FAILING:  # every other model's allocation and evaluation completed
        assert _query(promo_env, "SELECT count(*) FROM allocation WHERE model = ?", [model])[0][0] > 0, model
        assert _query(promo_env, "SELECT count(eom_value) FROM policy_evaluation WHERE model = ?", [model])[0][0] > 0
    assert _query(promo_env, "SELECT count(*) FROM model_registry WHERE model = 'failing'") == [(0,)]
    statuses = [r[0] for r in _query(promo_env, "SELECT status FROM result_runs ORDER BY started_at")]
    # the models' run (one chain failed), the leaderboard's run, the decisions' run
    assert statuses == ["partial", "succeeded", "succeeded"]
    board = {r[0]: r[1] for r in _query(promo_env, "SELECT model, status FROM leaderboard_entries")}
    not_listed = set(registry.names()) - {failing_model, *BESIDE_FAILING}
    assert board == {**{m: "evaluated" for m in (*BESIDE_FAILING, "random")}, "failing": "missing",
                     **{m: "skipped" for m in not_listed}}
    assert main(["report", "--campaign", "demo"]) == 0
    out = capsys.readouterr().out
    assert all(m in out for m in BESIDE_FAILING) and "failing not evaluated" in out


# --------------------------------------------------------------------------------------------
# campaign.yaml `models:` — which models a campaign trains, and their hyper-parameters

@pytest.fixture
def tuned():
    registry.register("tuned", "tests.unit.models.zoo_models:TunedModel")
    yield registry.get("tuned")
    registry.unregister("tuned")


def _config(models, tmp_path):
    """campaign.yaml with this `models:` block, loaded as the pipeline loads it (the schema, then the
    registry's check of the block)."""
    from promo_assets.ingestion import load_config

    (tmp_path / "c1").mkdir(exist_ok=True)
    (tmp_path / "c1" / "campaign.yaml").write_text(yaml.safe_dump({"treatments": {"levels": [0, 1, 2]}, "models": models}))
    return load_config(tmp_path, "c1")


def test_models_block_selects_and_tunes(tuned, tmp_path):
    from promo_assets.config.campaign import CampaignConfig

    plain = CampaignConfig.from_dict({"treatments": {"levels": [0, 1, 2]}}, "c1")
    assert registry.not_selected("s_learner", plain) is None
    assert "off by default" in registry.not_selected("tuned", plain)
    assert registry.for_campaign("tuned", plain).get_params() == {"gamma": 1.0, "steps": 10, "mode": "fd"}

    config = _config({"include": ["tuned", "s_learner"], "params": {"tuned": {"gamma": 2, "mode": "nes"}}}, tmp_path)
    assert registry.not_selected("tuned", config) is None and registry.not_selected("s_learner", config) is None
    assert registry.not_selected("dipn", config) == "not listed in campaign.yaml models.include"
    assert registry.for_campaign("tuned", config).get_params() == {"gamma": 2, "steps": 10, "mode": "nes"}
    assert registry.not_selected("dipn", _config({"exclude": ["dipn"]}, tmp_path)) == "excluded by campaign.yaml models.exclude"


@pytest.mark.hostile
@pytest.mark.parametrize("models, expected", [
    ({"include": ["s_lerner"]}, "'models.include': unknown model 's_lerner' (did you mean 's_learner'?)"),
    ({"exclude": ["xgboost"]}, "'models.exclude': unknown model 'xgboost'"),
    ({"params": {"tuned": {"gama": 2}}}, "unknown key 'models.params.tuned.gama' (did you mean 'gamma'?)"),
    ({"params": {"tuned": {"gamma": "big"}}}, "'models.params.tuned.gamma' = 'big' (str): expected float"),
    ({"params": {"tuned": {"steps": 2.5}}}, "'models.params.tuned.steps' = 2.5 (float): expected int"),
    ({"params": {"tuned": {"gamma": -1}}}, "'models.params.tuned': gamma = -1: expected a number > 0"),
    ({"params": {"nope": {}}}, "'models.params': unknown model 'nope'"),
    ({"inclde": ["tuned"]}, "unknown key 'models.inclde' (did you mean 'include'?)"),
], ids=["error-model-typo", "error-unknown-model", "error-param-typo", "error-param-type", "error-int-param",
        "error-param-value", "error-params-unknown-model", "error-block-key-typo"])
def test_models_block_refuses_bad_entries(tuned, models, expected, tmp_path):
    from promo_assets.config.campaign import CampaignConfigError

    with pytest.raises(CampaignConfigError) as err:
        _config(models, tmp_path)
    assert str(err.value).startswith(str(tmp_path / "c1" / "campaign.yaml"))
    assert expected in str(err.value)


def test_the_campaign_schema_knows_no_model_the_registry_checks_the_block():
    """campaign.py validates the `models:` block's shape only (it imports nothing of the models); the
    names and hyper-parameters are the registry's to check, where the pipeline loads the file."""
    from promo_assets.config.campaign import CampaignConfig

    config = CampaignConfig.from_dict({"treatments": {"levels": [0, 1]}, "models": {"include": ["xgboost"]}}, "c1")
    assert config.models.include == ["xgboost"]
    assert registry.check_models_block(config.models) == [
        "'models.include': unknown model 'xgboost' (registered models: " + ", ".join(registry.names()) + ")"]


@pytest.mark.hostile
@pytest.mark.parametrize("champion, expected", [
    ({"pin": "lgbm_s_mon"}, "'champion.pin': unknown model 'lgbm_s_mon' (did you mean 'lgbm_s_mono'?)"),
    ({"candidates": ["s_learner", "nope"]}, "'champion.candidates': unknown model 'nope' (registered models:"),
], ids=["error-pin-unknown-model", "error-candidate-unknown-model"])
def test_champion_block_names_registered_models(champion, expected, tmp_path):
    """campaign.py checks the champion block's shape; the registry checks the names it gives, where
    the pipeline loads the file."""
    from promo_assets.config.campaign import CampaignConfig, CampaignConfigError
    from promo_assets.ingestion import load_config

    (tmp_path / "c1").mkdir()
    (tmp_path / "c1" / "campaign.yaml").write_text(yaml.safe_dump({"treatments": {"levels": [0, 1, 2]},
                                                                    "champion": champion}))
    assert CampaignConfig.load(tmp_path / "c1" / "campaign.yaml").champion.model_dump()["pin"] == champion.get("pin")
    with pytest.raises(CampaignConfigError) as err:
        load_config(tmp_path, "c1")
    assert expected in str(err.value)

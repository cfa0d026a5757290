"""campaign.yaml is parsed and validated once per campaign and run: every asset gets the typed
CampaignConfig from `LandingResource.config` (`ingestion.cached_config`, keyed by the file's content
hash), never by parsing the file again."""

from __future__ import annotations

import ast
from pathlib import Path

import dagster as dg
import pytest

from promo_assets.config.campaign import CampaignConfig, CampaignConfigError
from promo_assets.cli.main import main
from promo_assets.ingestion import cached_config

DEFS = Path(__file__).resolve().parents[2] / "promo_assets" / "defs"


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The campaigns whose campaign.yaml was validated (CampaignConfig.from_dict), in order."""
    seen: list[str] = []
    original = CampaignConfig.from_dict.__func__

    def counting(cls, raw, campaign, source="campaign.yaml"):
        seen.append(campaign)
        return original(cls, raw, campaign, source)

    monkeypatch.setattr(CampaignConfig, "from_dict", classmethod(counting))
    return seen


def test_the_same_content_is_parsed_once_and_a_change_is_read(promo_env, parses):
    folder = promo_env["landing"] / "c1"
    assert main(["simulate", "--campaign", "c1", "--days", "2", "--users", "200", "--start", "2026-01-01"]) == 0
    parses.clear()
    first = cached_config(promo_env["landing"], "c1")
    assert cached_config(promo_env["landing"], "c1") is first and parses == ["c1"]
    text = (folder / "campaign.yaml").read_text()
    (folder / "campaign.yaml").write_text(text + "\n# edited\n")
    assert cached_config(promo_env["landing"], "c1") is not first and parses == ["c1", "c1"]
    (folder / "campaign.yaml").write_text(text + "\nnot_a_key: 1\n")
    with pytest.raises(CampaignConfigError, match="not_a_key"):
        cached_config(promo_env["landing"], "c1")


def test_a_chain_run_parses_the_campaign_config_once(promo_env, parses, monkeypatch):
    """One run materializing ingestion → causal → outcome model → one model's whole chain."""
    from promo_assets.definitions import build_defs
    from promo_assets.defs.common import campaign_partitions, make_resources

    monkeypatch.setenv("PROMO_MAX_EPOCHS", "1")
    assert main(["simulate", "--campaign", "c1", "--days", "4", "--users", "400", "--start", "2026-01-01"]) == 0
    defs = build_defs(["lgbm_s"])
    keys = ["rct_events", "propensity", "training_frame", "outcome_model", "lgbm_s/model",
            "lgbm_s/response_coefficients", "lgbm_s/budget_dual", "lgbm_s/allocation", "lgbm_s/policy_evaluation"]
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(campaign_partitions.name, ["c1"])
    parses.clear()
    result = dg.materialize(list(defs.assets), selection=[dg.AssetKey.from_user_string(k) for k in keys],
                            partition_key="c1", resources=make_resources(), instance=instance)
    assert result.success
    done = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert set(keys) <= done
    assert parses == ["c1"], f"campaign.yaml validated {len(parses)} times in one run of {len(keys)} assets"


def test_definitions_read_configs_only_through_the_landing_resource():
    """No definitions module (promo_assets/defs/) parses campaign.yaml itself (load_config / CampaignConfig.load / from_dict)."""
    banned = {"load_config", "load", "from_dict", "read_campaign_yaml"}
    offenders = []
    paths = sorted(DEFS.rglob("*.py"))
    assert len(paths) > 10, paths
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
                if name == "load_config" or name == "read_campaign_yaml" or (name in banned and owner == "CampaignConfig"):
                    offenders.append(f"{path.relative_to(DEFS)}:{node.lineno} {name}")
    assert not offenders, offenders

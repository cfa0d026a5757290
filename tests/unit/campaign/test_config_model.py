"""The campaign config is one frozen pydantic model whose keys are campaign.yaml's keys: values are
normalised once where the file is read, and a record of an earlier version still loads."""

from __future__ import annotations

import pydantic
import pytest

from promo_assets.config.campaign import CampaignConfig, CampaignConfigError, ConstraintsBlock, ModelsBlock


def test_the_budgets_are_floats_once_and_an_absent_block_is_its_defaults():
    c = CampaignConfig.from_dict({"treatments": {"levels": [0, 1, 2]}, "budget_per_capita": 2}, "demo")
    assert c.budget_per_capita == (2.0,) and all(type(b) is float for b in c.budget_per_capita)
    assert c.incentives == (0.0, 1.0, 2.0) and c.labels == ("0", "1", "2") and c.ordered
    assert c.models == ModelsBlock() and c.segments == () and c.features == {} and c.constraints is None
    assert c.plausible_response_rate == (0.001, 0.95)  # the binary response's default
    several = CampaignConfig.from_dict({"treatments": {"levels": [0, 1]}, "budget_per_capita": [1, 2.5]}, "demo")
    assert several.budget_per_capita == (1.0, 2.5)
    # an empty constraints block is no constraint; a filled one stays typed
    assert CampaignConfig.from_dict({"treatments": {"levels": [0, 1]}, "constraints": {}}, "d").constraints is None
    capped = CampaignConfig.from_dict({"treatments": {"levels": [0, 1]}, "constraints": {
        "groups": {"north": {"feature": "city", "equals": "n", "budget_per_capita": 0.5}}}}, "d")
    assert isinstance(capped.constraints, ConstraintsBlock) and capped.constraints.groups["north"].feature == "city"


def test_the_fields_are_the_file_keys_and_the_config_is_frozen():
    from promo_assets.config import campaign

    source = campaign.__file__
    text = open(source).read()
    for old in ("budgets_per_capita:", "period_budget", "constraint_settings", "class CampaignYaml"):
        assert old not in text, f"{old} is back in {source}: the config keeps the file's keys"
    c = CampaignConfig.from_dict({"treatments": {"levels": [0, 1]}}, "demo")
    with pytest.raises(pydantic.ValidationError):
        c.holdout_days = 3
    assert set(CampaignConfig.model_fields) - set(CampaignConfig.NOT_IN_FILE) >= {"budget_per_capita", "budget",
                                                                                 "constraints", "treatments"}


def test_the_file_cannot_name_its_campaign():
    with pytest.raises(CampaignConfigError, match="unknown key 'campaign'.*named by its folder"):
        CampaignConfig.from_dict({"treatments": {"levels": [0, 1]}, "campaign": "other"}, "demo")


@pytest.mark.parametrize("record, levels, labels", [
    ({"campaign": "a", "incentives": [0, 1, 2], "labels": ["0", "1", "2"], "ordered": True, "cost": "redeemed",
      "response": "binary", "budgets_per_capita": [1.5]}, (0.0, 1.0, 2.0), ("0", "1", "2")),
    ({"campaign": "b", "incentives": [0, 1], "labels": ["none", "mail"], "ordered": False, "cost": "assigned",
      "response": "count"}, (0.0, 1.0), ("none", "mail")),
    ({"campaign": "m", "incentives": [0, 5, 8], "labels": ["0", "1", "2"], "ordered": False,
      "attributes": ["amount", "threshold"], "directions": ["increasing", "decreasing"],
      "level_attributes": [[0, 0], [5, 20], [8, 30]], "budgets_per_capita": []}, (0.0, 5.0, 8.0), ("0", "1", "2")),
], ids=["ordered", "arms", "multi-attribute"])
def test_a_record_of_the_earlier_version_still_loads(record, levels, labels):
    """Model artefacts stored before the config became one model keep its earlier fields."""
    c = CampaignConfig.from_record(record)
    assert c.incentives == levels and c.labels == labels and c.campaign == record["campaign"]
    assert c.budget_per_capita == tuple(float(b) for b in record.get("budgets_per_capita", ()))
    assert CampaignConfig.from_record(c.to_dict()) == c
    if "attributes" in record:
        assert c.attributes == ("amount", "threshold") and c.level_attributes[2] == (8.0, 30.0)

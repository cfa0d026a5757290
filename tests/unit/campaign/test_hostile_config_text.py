"""campaign.yaml text that would reach a terminal, the outbox or the UI as markup or escape sequences,
dates that do not exist in `budget:`, and a `constraints` group on a column the events do not have.

`error-*` cases are refused with a CampaignConfigError (or `promo run` exit 2) naming the key.
"""

from __future__ import annotations

import datetime as dt

import pytest
import yaml

from promo_assets.config.campaign import CampaignConfig, CampaignConfigError
from promo_assets.simulation import SimulationRequest, simulate

BASE = "treatments:\n  levels: [0, 1, 2]\nbudget_per_capita: [1.0]\n"
GROUP = "constraints:\n  groups:\n    {name}: {{feature: {feature}, equals: {equals}, budget_per_capita: 0.5}}\n"


def load_yaml(tmp_path, text: str) -> CampaignConfig:
    folder = tmp_path / "c1"
    folder.mkdir(exist_ok=True)
    (folder / "campaign.yaml").write_text(text)
    return CampaignConfig.load(folder / "campaign.yaml")


CONTROL = {  # yaml text, the key named, the character shown
    "error-arm-label-terminal-escape": ('treatments:\n  arms: {"\\e[31mred\\e]0;title\\a": 0, b: 1}\n',
                                        "treatments.arms.", "\\x1b"),
    "error-arm-label-c1-csi": ('treatments:\n  arms: {"a\\x9b31m": 0, b: 1}\n', "treatments.arms.", "\\x9b"),
    "error-arm-label-newline": ('treatments:\n  arms: {"a\\nb": 0, b: 1}\n', "treatments.arms.", "\\x0a"),
    "error-group-name-tab": (BASE + GROUP.format(name='"g\\t1"', feature="city", equals="x"), "constraints.groups.",
                             "\\x09"),
    "error-group-equals-nul": (BASE + GROUP.format(name="g1", feature="city", equals='"x\\0"'),
                               "'constraints.groups.g1.equals'", "\\x00"),
    "error-segment-delete": (BASE + 'segments: ["city\\x7f"]\n', "'segments[0]'", "\\x7f"),
    "error-feature-name-bell": (BASE + 'features: {"age\\a": numeric}\n', "features.age", "\\x07"),
}


@pytest.mark.hostile
@pytest.mark.parametrize("text, key, shown", list(CONTROL.values()), ids=list(CONTROL))
def test_control_characters_in_campaign_yaml_are_refused_naming_the_key(tmp_path, text, key, shown):
    with pytest.raises(CampaignConfigError) as err:
        load_yaml(tmp_path, text)
    message = str(err.value)
    assert key in message and shown in message and "control character" in message, message
    assert "\x1b" not in message and "\x9b" not in message and "\x07" not in message  # shown escaped, never raw


DATES = {
    "error-budget-start-feb-30": ("start: 2026-02-30, end: 2026-03-05", "'budget.start' = '2026-02-30'"),
    "error-budget-end-feb-29-non-leap": ("start: 2026-02-01, end: 2026-02-29", "'budget.end' = '2026-02-29'"),
    "error-budget-start-month-13": ("start: 2026-13-01, end: 2027-01-05", "'budget.start' = '2026-13-01'"),
    "error-budget-end-day-00": ("start: 2026-02-01, end: 2026-03-00", "'budget.end' = '2026-03-00'"),
}


@pytest.mark.hostile
@pytest.mark.parametrize("period, words", list(DATES.values()), ids=list(DATES))
def test_an_impossible_date_in_budget_is_refused_naming_the_key(tmp_path, period, words):
    with pytest.raises(CampaignConfigError) as err:
        load_yaml(tmp_path, BASE + f"budget: {{total: 100, {period}}}\n")
    assert words in str(err.value) and "a date YYYY-MM-DD" in str(err.value), str(err.value)


def test_real_dates_in_budget_are_still_dates(tmp_path):
    config = load_yaml(tmp_path, BASE + "budget: {total: 100, start: 2028-02-29, end: 2028-03-05}\n")
    assert config.budget.start == dt.date(2028, 2, 29)
    assert yaml.safe_load("d: 2026-02-28")["d"] == dt.date(2026, 2, 28)  # PyYAML's own loader untouched


# ------------------------------------------------------------------ constraints group on a missing column
@pytest.mark.hostile
@pytest.mark.parametrize("feature", ["no_such_column", "user_id"], ids=["error-constraints-group-missing-column",
                                                                       "error-constraints-group-on-user_id"])
def test_promo_run_refuses_a_group_cap_on_a_missing_column_before_anything_runs(promo_env, capsys, feature):
    from promo_assets.cli.main import main

    simulate("demo", SimulationRequest("c1", promo_env["landing"], 2, 200, 1, start=dt.date(2026, 1, 1)))
    path = promo_env["landing"] / "c1" / "campaign.yaml"
    path.write_text(path.read_text() + GROUP.format(name="big_city", feature=feature, equals="x"))
    capsys.readouterr()
    assert main(["run", "--campaign", "c1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"'constraints.groups.big_city.feature' = '{feature}'" in err, err
    assert "the events day files of campaign 'c1' have no such feature column" in err and "Binder" not in err
    assert not promo_env["outbox"].exists() or not any(promo_env["outbox"].rglob("*"))  # no outbox written
    assert not promo_env["warehouse"].exists()  # nothing ran: no decisions (nor anything else) stored
    assert main(["export", "--campaign", "c1"]) == 2  # and nothing to export

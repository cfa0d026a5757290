"""The champion's headline is worded by its interval: 'better' or 'worse' only when it excludes 0; it
names the confidence and says that the comparison is reported, the choice made on the decision loss."""

import math

from promo_assets.evaluation.champion import headline_text, stored_headline, verdict_words


def test_an_interval_that_contains_zero_is_not_distinguishable():
    assert verdict_words(0.0764, -0.0401, 0.1929, "lgbm_s_mono") == (
        "not distinguishable from lgbm_s_mono: +0.0764 [-0.0401, +0.1929]")
    assert verdict_words(0.05, 0.01, 0.09, "x") == "better than x by 0.0500 [+0.0100, +0.0900]"
    assert verdict_words(-0.05, -0.09, -0.01, "x") == "worse than x by 0.0500 [-0.0900, -0.0100]"
    head = headline_text("lgbm_s", [1.0], {"reference": "lgbm_s_mono", "difference": 0.0764, "low": -0.0401,
                                           "high": 0.1929})
    assert "better" not in head and "not distinguishable from lgbm_s_mono" in head


def test_the_headline_names_the_confidence_and_that_it_is_only_reported():
    head = headline_text("blend(a+b)", [0.5, 1.0], {"reference": "a", "difference": -0.02, "low": -0.03,
                                                    "high": -0.01}, 0.8)
    assert head.startswith("deploy: blend(a+b) at budget 0.5, 1 — worse than a by 0.0200 [-0.0300, -0.0100]")
    assert "80% interval" in head and "reported only: the choice is made on the decision loss" in head
    assert headline_text("a", [1.0], {"reference": None, "difference": math.nan}) == "deploy: a at budget 1"


def test_stored_headline_reads_a_champion_row():
    row = {"champion_reference": "a", "champion_difference": 0.1, "champion_difference_low": 0.05,
           "champion_difference_high": 0.15}
    assert stored_headline(row) == {"reference": "a", "difference": 0.1, "low": 0.05, "high": 0.15}
    empty = stored_headline({"champion_reference": None, "champion_difference": math.nan})
    assert empty["reference"] is None and empty["difference"] is None
    assert headline_text("b", [1.0], empty, 0.9) == "deploy: b at budget 1"

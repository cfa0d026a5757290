"""The champion's headline is worded by its interval: 'better' or 'worse' only when it excludes 0."""

from promo_assets.evaluation.champion import headline_text, verdict_words


def test_an_interval_that_contains_zero_is_not_distinguishable():
    assert verdict_words(0.0764, -0.0401, 0.1929, "lgbm_s_mono") == (
        "not distinguishable from lgbm_s_mono: +0.0764 [-0.0401, +0.1929]")
    assert verdict_words(0.05, 0.01, 0.09, "x") == "better than x by 0.0500 [+0.0100, +0.0900]"
    assert verdict_words(-0.05, -0.09, -0.01, "x") == "worse than x by 0.0500 [-0.0900, -0.0100]"
    head = headline_text("lgbm_s", [1.0], {"reference": "lgbm_s_mono", "difference": 0.0764, "low": -0.0401,
                                           "high": 0.1929})
    assert "better" not in head and "not distinguishable from lgbm_s_mono" in head

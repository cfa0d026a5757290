"""Segment evaluation (issue #17, Deliver 6): curve MAE / MSE / KL / correlation against the truth and
true value vs the oracle, per segment value and overall; campaign.yaml `segments:`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promo_assets.config.campaign import CampaignConfig, CampaignConfigError
from promo_assets.evaluation.segments import (
    SEGMENT_COLUMNS, plot_segment_curves, segment_curves, segment_evaluation, truth_curve_metrics,
)
from promo_assets.evaluation.records import Truth
from promo_assets.evaluation.truth import oracle_policy


def test_truth_curve_metrics_by_hand():
    t = np.array([[0.2, 0.4], [0.5, 0.5]])
    p = np.array([[0.3, 0.4], [0.5, 0.7]])
    m = truth_curve_metrics(p, t)
    assert m["curve_mae"] == pytest.approx(0.3 / 4) and m["curve_mse"] == pytest.approx(0.05 / 4)
    kl = (0.2 * np.log(0.2 / 0.3) + 0.8 * np.log(0.8 / 0.7) + 0.5 * np.log(0.5 / 0.7) + 0.5 * np.log(0.5 / 0.3)) / 4
    assert m["kl"] == pytest.approx(kl)
    assert m["corr"] == pytest.approx(np.corrcoef(p.ravel(), t.ravel())[0, 1])
    perfect = truth_curve_metrics(t, t)
    assert perfect["curve_mae"] == 0 and perfect["kl"] == pytest.approx(0, abs=1e-12) and perfect["corr"] == pytest.approx(1)
    cont = truth_curve_metrics(2 * t, t, binary=False)
    assert cont["kl"] == pytest.approx(0, abs=1e-12)  # same shape of the mean curve


def test_segment_evaluation_rows_and_oracle():
    rng = np.random.default_rng(0)
    n, k = 300, 4
    t = np.sort(rng.uniform(0.05, 0.6, (n, k)), axis=1)
    c = t * np.arange(k)
    p = np.clip(t + rng.normal(0, 0.05, (n, k)), 0.01, 0.99)
    seg = pd.DataFrame({"city": rng.choice(["a", "b"], n), "period_of_day": rng.choice(["x", "y", "z"], n)})
    oracle = oracle_policy(t, c, 0.5)
    table = segment_evaluation("m", "v1", seg, p, Truth(t, c), {0.5: oracle, 9.0: "infeasible"})
    assert list(table.columns) == list(SEGMENT_COLUMNS)
    assert len(table) == 1 + 2 + 3  # all, 2 cities, 3 periods; the infeasible budget is skipped
    overall = table[table["segment_by"] == "all"].iloc[0]
    assert overall["n_users"] == n and overall["pct_oracle"] == pytest.approx(100.0)  # the oracle's own decision
    assert overall["curve_mae"] == pytest.approx(np.abs(p - t).mean())
    a = table[(table["segment_by"] == "city") & (table["segment_value"] == "a")].iloc[0]
    mask = seg["city"].to_numpy() == "a"
    assert a["n_users"] == mask.sum() and a["curve_mse"] == pytest.approx(((p - t)[mask] ** 2).mean())
    assert a["true_value"] == pytest.approx(t[mask][np.arange(mask.sum()), oracle[mask]].mean())
    none = segment_evaluation("m", "v1", seg, p, Truth(t, c), {0.5: np.zeros(n, dtype=int)})
    assert (none["pct_oracle"] < 100).all()
    curves = {col: segment_curves(seg, p, t, col) for col in seg.columns}
    np.testing.assert_allclose(curves["city"]["a"][1], t[mask].mean(axis=0))
    assert plot_segment_curves(curves, ["0", "1", "2", "3"]).startswith(b"\x89PNG")


@pytest.mark.hostile
@pytest.mark.parametrize("segments,words", [
    (["city", "city"], ["'segments'", "'city' given more than once"]),
    ("city", ["'segments'", "'city'", "a list of feature column names"]),
    ([""], ["'segments[0]'", "at least 1 character"]),
], ids=["error-segments-repeated", "error-segments-not-a-list", "error-segments-empty-name"])
def test_bad_segments_are_refused(segments, words):
    with pytest.raises(CampaignConfigError) as err:
        CampaignConfig.from_dict({"treatments": {"levels": [0, 1]}, "segments": segments}, "c1")
    for w in words:
        assert w in str(err.value), (w, str(err.value))


def test_segments_key_is_read():
    c = CampaignConfig.from_dict({"treatments": {"levels": [0, 1]}, "segments": ["period_of_day", "city"]}, "c1")
    assert c.segments == ("period_of_day", "city")
    assert CampaignConfig.from_dict({"treatments": {"levels": [0, 1]}}, "c1").segments == ()


def test_feature_names_the_presets_use_are_not_reserved():
    """Every warehouse column is a reserved name at ingestion: a table column named like a common
    feature (segment_evaluation's `segment` once did) would refuse the bipartite and dfcl_discount
    presets' `segment` column and every user campaign with one."""
    from promo_assets.ingestion import reserved_columns

    assert not {"segment", "city", "period_of_day", "weekday", "age", "amount_spent"} & reserved_columns()

"""Cross-fitted evidence for the champion (promo_assets.decisions.crossfit): the folds, and that a
fold's predictions come from fits that never saw its events."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promo_assets.config.campaign import CampaignConfig
from promo_assets.decisions.crossfit import (
    Folds,
    cross_fitted_evidence,
    epoch_caps,
    fold_of_rows,
    full_fit_epochs,
    refit_model,
    refitted_models,
)
from promo_assets.evaluation.eom import EvaluationError

K = 3


def _frame(users: int = 120, days: int = 4, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(days):
        for u in rng.choice(users, users // 2, replace=False):
            level = int(rng.integers(K))
            x = float(u % 7)
            y = float(rng.random() < 0.1 + 0.05 * level + 0.01 * x)
            rows.append({"event_date": pd.Timestamp("2026-01-01") + pd.Timedelta(days=d), "user_id": f"u{u}",
                         "level": level, "response": y, "cost": y * level, "propensity": 1 / K,
                         "split": "holdout" if d == days - 1 else ("validation" if u % 5 == 0 else "train"),
                         "ips_weight": 1.0, "x": x, "city": "a" if u % 2 else "b"})
    return pd.DataFrame(rows)


def _config() -> CampaignConfig:
    return CampaignConfig.from_dict({"treatments": {"levels": [0, 1, 2]}, "budget_per_capita": 0.5}, "c1")


class Recording:
    """A stand-in model: remembers the users and days it was fitted on, predicts a constant."""

    fits: list = []

    def __init__(self, data):
        self.users = set(data.frame["user_id"])
        self.days = set(data.frame["event_date"])
        self.splits = set(data.frame["split"].astype(str))
        Recording.fits.append(self)

    def predict(self, rows):
        Recording.scored.append((self, set(rows["user_id"]), set(rows["event_date"])))
        n = len(rows)
        return np.full((n, K), 0.2), np.full((n, K), 0.1)


def _recording():
    Recording.fits, Recording.scored = [], []
    return lambda name, data: Recording(data)


def test_user_folds_are_stable_groups_of_users():
    frame = _frame()
    fold = fold_of_rows(frame, 3, "user")
    assert set(np.unique(fold)) == {0, 1, 2}
    per_user = pd.Series(fold).groupby(frame["user_id"].to_numpy()).nunique()
    assert (per_user == 1).all()  # a user's events are all in one fold
    assert np.array_equal(fold, fold_of_rows(frame.sample(frac=1, random_state=1).sort_index(), 3, "user"))


def test_day_folds_are_rolling_origin_blocks():
    frame = _frame(days=7)
    fold = fold_of_rows(frame, 3, "day")
    by_day = pd.Series(fold).groupby(frame["event_date"].to_numpy()).agg(["min", "max"])
    assert (by_day["min"] == by_day["max"]).all()  # a day is in one block
    assert list(by_day["min"]) == sorted(by_day["min"])  # blocks follow the calendar
    assert by_day["min"].iloc[0] == -1  # the first block is never scored


def test_bad_fold_settings_are_refused_by_name():
    with pytest.raises(EvaluationError, match="champion.folds"):
        fold_of_rows(_frame(), 1, "user")
    with pytest.raises(EvaluationError, match="champion.fold_by"):
        fold_of_rows(_frame(), 3, "week")
    one_day = _frame(days=2)
    with pytest.raises(EvaluationError, match="at least two training days"):
        fold_of_rows(one_day[one_day["split"] != "holdout"], 3, "day")


@pytest.mark.parametrize("by", ["user", "day"])
def test_no_fold_is_scored_by_a_fit_that_saw_it(by):
    frame = _frame(days=6)
    xf = cross_fitted_evidence(frame, ["x"], ["city"], _config(), ["lgbm_s"], folds=Folds(3, by),
                               fit_model=_recording())
    assert xf.evidence is not None and xf.models == ["lgbm_s"]
    assert Recording.scored and len(Recording.fits) == len(Recording.scored)
    for fit, users, days in Recording.scored:
        assert "holdout" not in fit.splits  # the holdout is never learned from
        if by == "user":
            assert not users & fit.users  # the scored users were not seen by this fit
        else:
            assert max(fit.days) < min(days)  # rolling origin: fitted on earlier days only
    learning = frame[frame["split"] != "holdout"]
    assert xf.n == sum(xf.scored) and xf.n <= len(learning)
    if by == "user":
        assert xf.n == len(learning)  # every training-day event is scored once
    assert np.allclose(xf.evidence.propensity, 1 / K)  # the logged propensities, as on the holdout


def test_outcome_model_is_refitted_out_of_fold():
    """The pseudo-outcomes' outcome model is fitted per fold too: a fold's direct-method predictions
    change when only that fold's own responses change (they would if it had been learned from)."""
    frame = _frame(users=200, days=4)
    a = cross_fitted_evidence(frame, ["x"], ["city"], _config(), ["lgbm_s"], folds=Folds(2, "user"),
                             fit_model=_recording())
    fold = fold_of_rows(frame[frame["split"] != "holdout"].reset_index(drop=True), 2, "user")
    flipped = frame.copy()
    learn = flipped["split"] != "holdout"
    idx = flipped.index[learn][fold == 0]
    flipped.loc[idx, "response"] = 1 - flipped.loc[idx, "response"]
    flipped.loc[idx, "cost"] = flipped.loc[idx, "response"] * flipped.loc[idx, "level"]
    b = cross_fitted_evidence(flipped, ["x"], ["city"], _config(), ["lgbm_s"], folds=Folds(2, "user"),
                              fit_model=_recording())
    first = a.evidence.source == "fold 0"
    assert np.allclose(a.evidence.dm_values[first], b.evidence.dm_values[first])  # fold 0 never saw itself
    assert not np.allclose(a.evidence.dm_values[~first], b.evidence.dm_values[~first])  # fold 1 learned from it


def test_only_cheap_models_are_refitted_by_default():
    assert refitted_models(["s_learner", "lgbm_s", "dipn", "lgbm_t"], None) == ["lgbm_s", "lgbm_t"]
    assert refitted_models(["s_learner", "lgbm_s"], ["s_learner"]) == ["s_learner"]
    xf = cross_fitted_evidence(_frame(), ["x"], ["city"], _config(), ["dipn"], folds=Folds(2))
    assert xf.evidence is None and xf.models == []


def test_a_fold_fit_is_capped_at_its_full_fits_best_epochs():
    """fold_epochs full_fit: each '<phase>best_epoch' the full fit recorded caps '<phase>max_epochs' (at
    least 1); a model without epochs (LightGBM) is fitted as configured; a real torch refit stops there."""
    dipn = {"best_epoch": 13, "epochs": 19, "seconds_per_epoch": 0.3, "bias_epochs": 60, "bias_best_epoch": 60}
    assert full_fit_epochs("dipn", dipn) == {"max_epochs": 13, "bias_max_epochs": 60}
    assert full_fit_epochs("s_learner", {"best_epoch": 0, "epochs": 6}) == {"max_epochs": 1}
    assert full_fit_epochs("lgbm_s", {"best_epoch": 4}) == {} and full_fit_epochs("s_learner", {}) == {}
    frame = _frame(users=300, days=4)
    caps = epoch_caps({"s_learner": {"best_epoch": 2, "epochs": 8}, "lgbm_s": {}})
    assert caps == {"s_learner": {"max_epochs": 2}} and epoch_caps(None) == {}
    fit, fitted = refit_model(_config(), caps), []

    def recording(name, data):
        fitted.append(fit(name, data))
        return fitted[-1]

    capped = cross_fitted_evidence(frame, ["x"], ["city"], _config(), ["s_learner"],
                                   folds=Folds(2, "user", ("s_learner",)), fit_model=recording)
    assert capped.models == ["s_learner"] and len(fitted) == 2
    assert all(m.metrics_["epochs"] <= 2 for m in fitted)  # uncapped, early stopping alone waits 6 epochs


def test_real_lightgbm_refits_give_out_of_fold_coefficients():
    xf = cross_fitted_evidence(_frame(users=300, days=4), ["x"], ["city"], _config(), ["lgbm_s"], folds=Folds(2))
    v, c = xf.evidence.coefficients["lgbm_s"]
    assert v.shape == (xf.n, K) and np.isfinite(v).all() and np.isfinite(c).all()
    assert set(xf.evidence.source) == {"fold 0", "fold 1"}


def test_one_training_day_or_a_failing_refit_falls_back_without_failing():
    """Day folds on a single training day: no cross-fitted evidence (the holdout only), said why; a model
    whose refit fails is left out of the cross-fitted evidence, with the reason, the others kept."""
    two_days = _frame(days=2)
    xf = cross_fitted_evidence(two_days, ["x"], ["city"], _config(), ["lgbm_s"], folds=Folds(3, "day"),
                               fit_model=_recording())
    assert xf.evidence is None and "at least two training days" in xf.skipped[0]
    with pytest.raises(EvaluationError, match="champion.folds"):
        cross_fitted_evidence(two_days, ["x"], ["city"], _config(), ["lgbm_s"], folds=Folds(1, "day"))

    def flaky(name, data):
        if name == "lgbm_t":
            raise RuntimeError("too few rows at level 2")
        return Recording(data)

    Recording.fits, Recording.scored = [], []
    xf = cross_fitted_evidence(_frame(), ["x"], ["city"], _config(), ["lgbm_s", "lgbm_t"], folds=Folds(2),
                               fit_model=flaky)
    assert xf.models == ["lgbm_s"] and list(xf.evidence.coefficients) == ["lgbm_s"]
    assert any("lgbm_t could not be refitted" in why and "too few rows" in why for why in xf.skipped)


@pytest.mark.hostile
def test_bad_cross_fitting_settings_are_refused_when_the_file_is_loaded(tmp_path):
    import yaml

    from promo_assets.config.campaign import CampaignConfigError
    from promo_assets.ingestion import load_config

    for block, key in (({"evidence": "everything"}, "champion.evidence"), ({"folds": 1}, "champion.folds"),
                       ({"fold_by": "week"}, "champion.fold_by"), ({"refit": ["lgbm_z"]}, "champion.refit")):
        (tmp_path / "c1").mkdir(exist_ok=True)
        (tmp_path / "c1" / "campaign.yaml").write_text(yaml.safe_dump({"treatments": {"levels": [0, 1, 2]},
                                                                       "champion": block}))
        with pytest.raises((CampaignConfigError, ValueError), match=key.replace(".", r"\.")):
            load_config(tmp_path, "c1")
    block = _config().champion
    assert (block.evidence, block.fold_by, block.folds, block.refit, block.fold_epochs) == (
        "cross_fitted", "day", 3, None, "full_fit")


def test_the_champion_log_names_the_epoch_caps_of_the_refitted_models_only(monkeypatch):
    """A torch candidate that is not refitted (the default refit: the LightGBM models) is neither capped
    nor said to be; listed in champion.refit, its fold fits get its full fit's epochs and the log says so."""
    import types

    from promo_assets.decisions import champion_run, crossfit

    handed = []
    monkeypatch.setattr(crossfit, "cross_fitted_evidence",
                        lambda *a, **kw: handed.append(kw["fit_model"]) or crossfit.CrossFit(None, [], "day", 3))
    monkeypatch.setattr(crossfit, "refit_model", lambda config, caps: caps)
    inputs = champion_run.ChampionInputs(None, None, {"dipn": "v1", "lgbm_s": "v1"}, None, frozenset())
    learning = champion_run.Learning(_frame(), ["x"], ["city"], {"dipn": {"best_epoch": 5, "bias_best_epoch": 9},
                                                                "lgbm_s": {}})
    for refit, said in ((None, []), (["dipn", "lgbm_s"], ["dipn max_epochs 5, bias_max_epochs 9"])):
        block = types.SimpleNamespace(candidates=None, folds=3, fold_by="day", refit=refit)
        lines = []
        champion_run.with_cross_fitted(inputs, learning, types.SimpleNamespace(champion=block), lines.append)
        assert [line.split("epochs: ", 1)[1] for line in lines if "full fits' epochs" in line] == said
        assert handed[-1] == ({} if refit is None else {"dipn": {"max_epochs": 5, "bias_max_epochs": 9}})

"""LightGBM boosters compiled for scoring (promo_assets.models.forest) give exactly LightGBM's own
predictions (bitwise: the same float64 sums in the same order, the same transform), on rows that
reach every kind of split: numeric splits whose missing type is None, Zero and NaN, categorical
splits, NaN / tiny / negative / unseen values; one booster at several values of its level column
equals LightGBM on the N x K grid; a booster the kernel does not reproduce is not compiled."""

from __future__ import annotations

import numpy as np
import pytest

lgb = pytest.importorskip("lightgbm")

from promo_assets.models.forest import Forest, from_boosters  # noqa: E402

PARAMS = {"num_leaves": 7, "min_data_in_leaf": 5, "verbosity": -1, "num_threads": 1, "deterministic": True,
          "seed": 0, "max_bin": 31}


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.normal(size=n), rng.uniform(-1, 1, size=n), rng.integers(0, 6, size=n).astype(float),
                         rng.choice([0.0, 1.0, 2.0, 5.0], size=n)])  # last column: a level
    x[rng.random(n) < 0.1, 0] = np.nan
    x[rng.random(n) < 0.2, 1] = 0.0
    logit = -0.5 + x[:, 1] + 0.3 * (x[:, 2] % 3) + 0.2 * x[:, 3] + np.nan_to_num(x[:, 0])
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(float)
    return x, y, logit


def _train(objective, y, x, categorical=(2,), **extra):
    params = {**PARAMS, "objective": objective, **extra}
    return lgb.train(params, lgb.Dataset(x, y, categorical_feature=list(categorical), params={"verbosity": -1}),
                     num_boost_round=15)


def _rows(n=3000, seed=5):
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.normal(size=n), rng.uniform(-1.5, 1.5, size=n), rng.integers(-2, 40, size=n) + 0.0,
                         rng.choice([0.0, 1.0, 2.0, 5.0, 3.5], size=n)])
    x[rng.random(n) < 0.1, 0] = np.nan
    x[rng.random(n) < 0.1, 1] = np.nan
    x[rng.random(n) < 0.1, 1] = 1e-40  # read as 0 by LightGBM
    x[rng.random(n) < 0.05, 2] = np.nan
    x[rng.random(n) < 0.05, 2] = -0.5  # (int) -0.5 is category 0
    return x


@pytest.mark.parametrize("objective,extra", [("cross_entropy", {}), ("binary", {"sigmoid": 0.7}), ("poisson", {}),
                                             ("regression", {}), ("regression", {"zero_as_missing": True}),
                                             ("regression", {"use_missing": False})])
def test_the_forest_predicts_exactly_as_lightgbm(objective, extra):
    x, y, logit = _data()
    target = np.exp(logit) / 3 if objective == "poisson" else (logit if objective == "regression" else y)
    booster = _train(objective, target, x, **extra)
    forest = from_boosters([booster], [booster.model_to_string()])
    assert forest is not None
    rows = _rows()
    want = booster.predict(rows, num_threads=1)
    np.testing.assert_array_equal(forest.predict(rows)[:, 0], want)
    np.testing.assert_array_equal(forest.predict(rows[:1])[:, 0], want[:1])  # one row
    # the booster at each level value (its last column): the N x K grid LightGBM scores
    levels = np.array([0.0, 1.0, 2.0, 5.0])
    grid = np.column_stack([np.repeat(rows[:, :3], len(levels), axis=0), np.tile(levels, len(rows))])
    np.testing.assert_array_equal(forest.predict(np.ascontiguousarray(rows[:, :3]), levels),
                                  booster.predict(grid, num_threads=1).reshape(len(rows), len(levels)))


@pytest.mark.parametrize("levels,categorical", [([0.0, 1.0, 2.0, 5.0], (2,)), ([0.0, 1.0, 2.0, 3.0], (2, 3)),
                                               ([3.0, 0.0, 7.0], (2, 3))])
def test_every_level_in_one_walk_as_lightgbm(levels, categorical):
    """An S-learner's booster at each value of its level column (numeric, or categorical as for arms
    without order; a value never seen goes right), one walk per row: checked by `from_boosters` itself
    and here on other rows."""
    x, y, _ = _data()
    if 3 in categorical:
        x[:, 3] = np.random.default_rng(1).integers(0, 4, len(x))
        y = (y + (x[:, 3] == 2)) % 2
    booster = _train("cross_entropy", y, x, categorical)
    forest = from_boosters([booster], [booster.model_to_string()], np.array(levels))
    assert forest is not None
    assert ((forest.feat == 3) & ((forest.dtype & 1) == (1 if 3 in categorical else 0))).sum() > 2
    rows = np.ascontiguousarray(_rows()[:, :3])
    grid = np.column_stack([np.repeat(rows, len(levels), axis=0), np.tile(levels, len(rows))])
    np.testing.assert_array_equal(forest.predict(rows, np.array(levels)),
                                  booster.predict(grid, num_threads=1).reshape(len(rows), len(levels)))


def test_several_boosters_side_by_side():
    x, y, logit = _data()
    boosters = [_train("cross_entropy", y, x, seed=s, learning_rate=0.1 * (s + 1)) for s in range(3)]
    forest = from_boosters(boosters, [b.model_to_string() for b in boosters])
    rows = _rows()
    np.testing.assert_array_equal(forest.predict(rows), np.column_stack([b.predict(rows, num_threads=1) for b in boosters]))


def test_what_the_kernel_does_not_reproduce_is_not_compiled():
    x, y, _ = _data()
    multi = lgb.train({**PARAMS, "objective": "multiclass", "num_class": 3},
                      lgb.Dataset(x, (np.nan_to_num(x[:, 1]) > 0) + (y > 0), params={"verbosity": -1}),
                      num_boost_round=3)
    assert from_boosters([multi], [multi.model_to_string()]) is None
    huber = _train("huber", y, x)
    assert from_boosters([huber], [huber.model_to_string()]) is None
    one = _train("cross_entropy", y, x)
    # a text that disagrees with its booster (a leaf value changed) is refused by the probe check
    text = one.model_to_string()
    head, tail = text.split("leaf_value=", 1)
    first, rest = tail.split(" ", 1)
    changed = head + "leaf_value=" + repr(float(first) + 0.5) + " " + rest
    assert Forest.from_texts([changed]) is not None and from_boosters([one], [changed]) is None
    with pytest.raises(ValueError, match="reads 4 features"):
        from_boosters([one], [text]).predict(np.zeros((2, 3)))


def test_many_level_values_in_the_many_row_walk():
    """70 level values (more than the one-row walk's masks hold): the many-row walk's copies of each
    tree, one per distinct way the levels go at its level splits, still give LightGBM's numbers."""
    x, y, _ = _data()
    booster = _train("cross_entropy", y, x)
    levels = np.linspace(-0.5, 5.5, 70)
    forest = from_boosters([booster], [booster.model_to_string()], levels)
    assert forest is not None
    rows = np.ascontiguousarray(_rows(400)[:, :3])
    grid = np.column_stack([np.repeat(rows, len(levels), axis=0), np.tile(levels, len(rows))])
    want = booster.predict(grid, num_threads=1).reshape(len(rows), len(levels))
    np.testing.assert_array_equal(forest.predict(rows, levels), want)
    np.testing.assert_array_equal(forest.predict(rows[:3], levels), want[:3])


def test_trees_of_more_than_64_leaves_are_walked():
    """A tree of more than 64 leaves (one bit per leaf no longer fits a mask) is walked instead, for
    many rows too: still LightGBM's numbers; trees of up to 64 leaves keep the masks."""
    x, y, _ = _data(3000)
    big = _train("cross_entropy", y, x, num_leaves=100, min_data_in_leaf=2, max_bin=255)
    forest = from_boosters([big], [big.model_to_string()], np.array([0.0, 1.0, 2.0, 5.0]))
    assert forest is not None and np.diff(forest.tree_leaf).max() > 64
    assert forest._walk[2] is None
    rows = _rows()
    np.testing.assert_array_equal(forest.predict(rows)[:, 0], big.predict(rows, num_threads=1))
    small = _train("cross_entropy", y, x)
    assert from_boosters([small], [small.model_to_string()])._walk[2] is not None

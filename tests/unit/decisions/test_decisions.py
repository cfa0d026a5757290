"""Decisions out: exploration with propensities, the checks on what leaves the system, the atomic
outbox, and the simulated population answering an exported decision file."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from promo_assets.decisions import (
    DECISION_COLUMNS,
    DecisionError,
    Exploration,
    OutboxError,
    check_decisions,
    decide_with_exploration,
    decision_frame,
    read_manifest,
    verify,
    write_outbox,
)
from promo_assets.simulation import SimulationError, SimulationRequest, respond, simulate, truth_arrays, truth_user_ids

LABELS = ("0", "1", "2", "5")
INCENTIVES = (0.0, 1.0, 2.0, 5.0)
DAY = dt.date(2026, 3, 1)


def curves(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.05, 0.4, n)[:, None]
    lift = rng.uniform(0.0, 0.4, n)[:, None] * (1 - np.exp(-np.asarray(INCENTIVES)[None, :] / rng.uniform(1, 4, n)[:, None]))
    v = base + lift
    return v, v * np.asarray(INCENTIVES)


def test_exploration_share_propensities_and_budget():
    v, c = curves()
    d = decide_with_exploration(v, c, 1.0, Exploration(share=0.1, seed=3), DAY)
    n = len(v)
    assert d.explore.sum() == 200 and d.share == pytest.approx(0.1)
    assert d.cost.sum() <= 1.0 * n + 1e-9  # the explored users' cost is taken off the budget first
    follow = ~d.explore | (d.levels == d.policy_levels)
    assert np.allclose(d.propensity[follow], 0.9 + 0.1 / 4)  # (1 - s) + s / K
    assert np.allclose(d.propensity[~follow], 0.1 / 4)  # s mix[level]
    assert 0 < d.value_given_up_per_capita < 0.05
    assert d.full_value_per_capita >= d.value_per_capita
    none = decide_with_exploration(v, c, 1.0, Exploration(share=0.0), DAY)
    assert not none.explore.any() and np.all(none.propensity == 1.0) and none.value_given_up_per_capita == pytest.approx(0)


def test_written_propensity_is_the_frequency_of_the_level_over_redrawn_days():
    """The propensity written is the probability with which the mechanism gives each user its level:
    over 400 days (each day its own draw) the frequency with which one user gets each level matches
    (1 - s) 1{level = policy's} + s mix[level] within binomial noise."""
    v, c = curves(400, 1)
    mix = (0.4, 0.3, 0.2, 0.1)
    ex = Exploration(share=0.25, seed=5, mix=mix)
    counts = np.zeros((len(v), 4))
    expected = np.zeros((len(v), 4))
    for d in range(400):
        dec = decide_with_exploration(v, c, 1.5, ex, DAY + dt.timedelta(days=d))
        counts[np.arange(len(v)), dec.levels] += 1
        expected[np.arange(len(v)), dec.policy_levels] += 0.75
        expected += 0.25 * np.asarray(mix)
    freq, prob = counts.sum(axis=0) / counts.sum(), expected.sum(axis=0) / expected.sum()
    assert np.allclose(freq, prob, atol=0.01)


@pytest.mark.hostile
@pytest.mark.parametrize("key", ["exploration.share", "monitoring.change_explore_share"],
                         ids=["error-exploration-share-unaffordable", "error-change-explore-share-unaffordable"])
def test_exploration_that_the_budget_cannot_pay_for_is_refused_naming_the_key_of_the_share(key):
    """After a detected change the share is monitoring.change_explore_share's, and the message names it."""
    v, c = curves()
    with pytest.raises(DecisionError, match=f"cannot pay for the exploration share 0.5.*lower {key},"):
        decide_with_exploration(v, c, 0.05, Exploration(share=0.5, mix=(0, 0, 0, 1), share_key=key), DAY)


def frame_of(v, c, budget=1.0, share=0.1):
    d = decide_with_exploration(v, c, budget, Exploration(share=share, seed=1), DAY)
    return decision_frame([f"u{i}" for i in range(len(v))], d, LABELS, INCENTIVES, "m", "v1")


def failing(frame, users, **kw):
    args = dict(users=users, budget_per_capita=1.0, labels=LABELS, incentives=INCENTIVES, max_user_cost=5.0,
                share=0.1, tolerance=0.005)
    args.update(kw)
    return {o.name for o in check_decisions(frame, **args) if not o.passed}


def test_checks_pass_on_a_decision_and_catch_each_fault():
    v, c = curves()
    frame = frame_of(v, c)
    users = frame["user_id"].tolist()
    assert failing(frame, users) == set()
    assert failing(pd.concat([frame, frame.iloc[:1]]), users) >= {"every_user_once"}
    assert "every_user_once" in failing(frame.iloc[1:], users)
    over = frame.assign(predicted_cost=frame["predicted_cost"] * 3)
    assert "spend_within_budget" in failing(over, users)
    bad = frame.copy()
    bad.loc[0, "level"] = 7
    assert "valid_levels" in failing(bad, users)
    mislabeled = frame.copy()
    mislabeled.loc[0, "label"] = "99"
    assert "valid_levels" in failing(mislabeled, users)
    nan = frame.copy()
    nan.loc[3, "predicted_response"] = np.nan
    assert "no_missing_values" in failing(nan, users)
    zero = frame.copy()
    zero.loc[3, "propensity"] = 0.0
    assert "no_missing_values" in failing(zero, users)
    assert "exploration_share" in failing(frame, users, share=0.2)


# ------------------------------------------------------------------------------ the outbox
def test_outbox_is_written_with_a_manifest_and_checksums(tmp_path):
    v, c = curves(50)
    files = {b: frame_of(v, c, b) for b in (0.5, 1.0)}
    folder = write_outbox(tmp_path, "camp", "2026-03-01", files, {"campaign": "camp", "budgets": []}, fmt="csv")
    assert sorted(p.name for p in folder.iterdir()) == ["0.5.csv", "1.csv", "manifest.json"]
    m = read_manifest(folder)
    assert [e["file"] for e in m["budgets"]] == ["0.5.csv", "1.csv"] and m["budgets"][0]["rows"] == 50
    assert verify(folder) == []
    assert list(pd.read_csv(folder / "1.csv").columns) == list(DECISION_COLUMNS)
    (folder / "1.csv").write_text("tampered\n")
    assert any("checksum" in p for p in verify(folder))


def test_outbox_that_is_not_writable_leaves_nothing(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    v, c = curves(20)
    with pytest.raises(OutboxError, match="cannot write the outbox"):
        write_outbox(blocker / "outbox", "camp", "2026-03-01", {1.0: frame_of(v, c)}, {"budgets": []})
    assert blocker.read_text() == "not a folder"


KILLED_WRITER = textwrap.dedent("""
    import sys, time, numpy as np, pandas as pd
    from pathlib import Path
    from promo_assets.decisions import outbox
    real = outbox._write_frame
    def slow(frame, path, fmt):
        real(frame, path, fmt)
        print("WROTE", path.name, flush=True)
        time.sleep(60)  # killed here, after the first file, before the manifest and the rename
    outbox._write_frame = slow
    frame = pd.read_parquet(sys.argv[2])
    outbox.write_outbox(Path(sys.argv[1]), "camp", "2026-03-01", {1.0: frame, 2.0: frame}, {"budgets": []})
""")


def test_a_kill_during_the_write_leaves_the_previous_folder_complete(tmp_path):
    """SIGKILL after the first file of a new export: the date folder is still the previous complete
    export (its checksums verify), the half-written one is only a hidden temporary folder, and the next
    write removes it."""
    v, c = curves(30)
    old = frame_of(v, c)
    write_outbox(tmp_path, "camp", "2026-03-01", {1.0: old}, {"budgets": [], "note": "old"})
    src = tmp_path / "new.parquet"
    frame_of(v, c, 2.0).to_parquet(src)
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(tmp_path), str(src)], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
                                str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH")]))})
    assert proc.stdout.readline().startswith("WROTE")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    folder = tmp_path / "camp" / "2026-03-01"
    assert read_manifest(folder)["note"] == "old" and verify(folder) == []
    assert sorted(p.name for p in folder.iterdir()) == ["1.parquet", "manifest.json"]
    leftovers = [p for p in (tmp_path / "camp").iterdir() if p.name.startswith(".")]
    assert leftovers and all(".tmp-" in p.name for p in leftovers)
    write_outbox(tmp_path, "camp", "2026-03-01", {1.0: old}, {"budgets": [], "note": "next"})
    assert not [p for p in (tmp_path / "camp").iterdir() if p.name.startswith(".")]
    assert read_manifest(folder)["note"] == "next"


# ------------------------------------------------------------------ the simulator answers
def test_simulated_population_answers_an_exported_decision(tmp_path):
    simulate("demo", SimulationRequest("d", tmp_path, 2, 600, 4, start=dt.date(2026, 1, 1)))
    ids = truth_user_ids(tmp_path / "d")
    tv, tc = truth_arrays(tmp_path / "d")
    d = decide_with_exploration(tv, tc, 1.0, Exploration(share=0.2, seed=2), dt.date(2026, 1, 3))
    frame = decision_frame(ids, d, [str(x) for x in (0, 1, 2, 3, 5, 8)], (0, 1, 2, 3, 5, 8), "oracle", "truth")
    frame.to_parquet(tmp_path / "dec.parquet")
    s = respond(tmp_path / "d", tmp_path / "dec.parquet", dt.date(2026, 1, 3))
    events = pd.read_parquet(tmp_path / "d" / "events" / "2026-01-03.parquet")
    assert 200 < len(events) < 400  # daily_active 0.5 of the decided users
    merged = events.merge(frame, on="user_id")
    assert np.allclose(merged["treatment"], merged["incentive"])  # each at its decided level
    assert np.allclose(merged["propensity_x"], merged["propensity_y"])  # the decision's propensity logged
    assert s.details["true_value_per_decided_user"] == pytest.approx(d.value_per_capita, rel=0.05)
    with pytest.raises(SimulationError, match="already has events"):
        respond(tmp_path / "d", tmp_path / "dec.parquet", dt.date(2026, 1, 3))
    frame.assign(user_id="stranger").iloc[:1].to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(SimulationError, match="not in the simulated population"):
        respond(tmp_path / "d", tmp_path / "bad.parquet", dt.date(2026, 1, 4))
    frame.assign(propensity=0.0).to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(SimulationError, match="propensities"):
        respond(tmp_path / "d", tmp_path / "bad.parquet", dt.date(2026, 1, 4))
    with pytest.raises(SimulationError, match="preset 'demo'"):
        respond(tmp_path / "d", tmp_path / "dec.parquet", dt.date(2026, 1, 4), preset="dfcl_discount")


def test_cli_respond_to_needs_a_day_and_names_what_is_wrong(promo_env, capsys):
    from promo_assets.cli.main import main

    assert main(["simulate", "--preset", "demo", "--campaign", "d", "--days", "2", "--users", "200",
                 "--start", "2026-01-01"]) == 0
    ids = truth_user_ids(promo_env["landing"] / "d")
    frame = pd.DataFrame({"user_id": ids, "level": 1, "propensity": 1.0})
    frame.to_csv(promo_env["landing"].parent / "dec.csv", index=False)
    dec = str(promo_env["landing"].parent / "dec.csv")
    capsys.readouterr()
    assert main(["simulate", "--campaign", "d", "--respond-to", dec]) == 2
    assert "--respond-to FILE and --day" in capsys.readouterr().err
    assert main(["simulate", "--campaign", "d", "--respond-to", dec, "--day", "2026-01-02"]) == 2
    assert "already has events" in capsys.readouterr().err
    assert main(["simulate", "--campaign", "nope", "--respond-to", dec, "--day", "2026-01-03"]) == 2
    assert "not a simulated campaign" in capsys.readouterr().err
    assert main(["simulate", "--campaign", "d", "--respond-to", dec, "--day", "2026-01-03"]) == 0
    assert "answering 200 decisions" in capsys.readouterr().out
    written = pd.read_parquet(promo_env["landing"] / "d" / "events" / "2026-01-03.parquet")
    assert (written["treatment"] == 1.0).all() and (written["propensity"] == 1.0).all()

"""The one landing reader (`ingestion.frames.load_landing`) and the one training-frame builder
(`causal.build_training_frame`) that the benchmarks and the graph code use."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from promo_assets.causal import assign_split, build_training_frame, ips_weights, randomized_propensity
from promo_assets.ingestion import IngestError
from promo_assets.ingestion.frames import latest_day_file, load_landing

DAY1, DAY2 = dt.date(2026, 3, 1), dt.date(2026, 3, 2)
YAML = "treatments:\n  arms: {{none: 0, small: 1, big: 4}}\ncost: {cost}\nresponse: binary\nbudget_per_capita: [1.0]\nholdout_days: 1\n"


def write(landing: Path, cost: str = "assigned", frames: dict | None = None) -> Path:
    folder = landing / "c1"
    (folder / "events").mkdir(parents=True)
    (folder / "campaign.yaml").write_text(YAML.format(cost=cost))
    rng = np.random.default_rng(0)
    for day in (DAY1, DAY2):
        n = 60
        frame = pd.DataFrame({
            "user_id": [f"u{i:03d}" for i in range(n)],
            "treatment": rng.choice(["none", "small", "big"], n),
            "response": rng.integers(0, 2, n).astype(float),
            "age": rng.normal(40, 10, n),
            "city": rng.choice(["x", "y"], n),
        })
        (frames or {}).get(day, lambda f: f)(frame).to_parquet(folder / "events" / f"{day}.parquet")
    return folder


@pytest.mark.parametrize("cost", ["assigned", "redeemed"])
def test_load_landing_applies_the_pipelines_level_mapping_and_cost_rule(tmp_path, cost):
    folder = write(tmp_path, cost)
    loaded = load_landing(tmp_path, "c1")
    ev = loaded.events
    assert len(ev) == 120 and loaded.numeric == ["age"] and loaded.categorical == ["city"]
    assert loaded.edges is None and loaded.merchant_events is None and set(loaded.rejected.values()) == {0}
    raw = pd.concat([pd.read_parquet(p) for p in sorted((folder / "events").glob("*.parquet"))], ignore_index=True)
    np.testing.assert_array_equal(ev["level"], raw["treatment"].map({"none": 0, "small": 1, "big": 2}))
    np.testing.assert_array_equal(ev["incentive"], raw["treatment"].map({"none": 0.0, "small": 1.0, "big": 4.0}))
    expected_cost = ev["incentive"] * (ev["response"] if cost == "redeemed" else 1.0)
    np.testing.assert_allclose(ev["cost"], expected_cost)


def test_build_training_frame_is_propensity_split_and_weights(tmp_path):
    write(tmp_path)
    loaded = load_landing(tmp_path, "c1")
    frame = build_training_frame(loaded.events, loaded.config, loaded.numeric, loaded.categorical)
    p = randomized_propensity(loaded.events, 3)
    np.testing.assert_allclose(frame["propensity"], p)
    split = assign_split(loaded.events, holdout_days=1, validation_fraction=loaded.config.validation_fraction)
    assert list(frame["split"]) == list(split.astype(str))
    assert set(frame.loc[frame["event_date"].dt.date == DAY2, "split"]) == {"holdout"}
    np.testing.assert_allclose(frame["ips_weight"], ips_weights(p, clip=loaded.config.ips_clip))


def test_benchmark_frames_are_the_production_path(tmp_path):
    """benchmarks/_model_frames.py is a thin call to the landing reader and the causal builder."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    try:
        import _model_frames
    finally:
        sys.path.pop(0)
    folder = write(tmp_path)
    (folder / "population").mkdir()
    pd.DataFrame({"user_id": ["u1", "u2", "u1"], "age": [1.0, 2.0, 3.0]}).to_parquet(folder / "population" / f"{DAY2}.parquet")
    events, config, numeric, categorical = _model_frames.load_events(folder)
    pd.testing.assert_frame_equal(events, load_landing(tmp_path, "c1").events)
    frame, *_ = _model_frames.load_training_frame(folder)
    assert {"split", "ips_weight", "propensity"} <= set(frame.columns)
    pop = _model_frames.load_population(folder)
    assert list(pop["user_id"]) == ["u2", "u1"] and list(pop["age"]) == [2.0, 3.0]
    assert latest_day_file(tmp_path, "c1", "population")[1].endswith(f"{DAY2}.parquet")


@pytest.mark.hostile
@pytest.mark.parametrize("case", [
    pytest.param("unknown_arm", id="error-unknown-treatment-names-file"),
    pytest.param("no_response", id="error-missing-column-names-file"),
    pytest.param("no_events", id="error-no-event-files-names-folder"),
])
def test_load_landing_refuses_what_the_pipeline_refuses(tmp_path, case):
    def bad(frame):
        if case == "unknown_arm":
            return frame.assign(treatment=np.where(np.arange(len(frame)) == 3, "huge", frame["treatment"]))
        return frame.drop(columns="response")

    folder = write(tmp_path, frames={DAY2: bad})
    if case == "no_events":
        for p in (folder / "events").iterdir():
            p.unlink()
    with pytest.raises(IngestError) as err:
        load_landing(tmp_path, "c1")
    msg = str(err.value)
    if case == "unknown_arm":
        assert f"{DAY2}.parquet" in msg and "treatment" in msg and "huge" in msg
    elif case == "no_response":
        assert f"{DAY2}.parquet" in msg and "'response'" in msg
    else:
        assert "events" in msg and "no events day files" in msg

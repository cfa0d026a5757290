"""The artefact store as a trust boundary: nothing in it is unpickled or run, every load is checked
against the content hash in the file's name, a tampered or truncated file counts as missing and is
replaced by the next save.

`error-*` cases: the file is refused (ArtifactMissingError / ModelInputError naming it), no code
runs; `accepted-*` cases: documented behaviour (a save replaces a tampered file, with a warning).
"""

from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import torch

from promo_assets.store import artifacts
from promo_assets.store.artifacts import ArtifactMissingError
from promo_assets.config.campaign import CampaignConfig
from promo_assets.models import ModelInputError, TrainingData, load_model, registry


class _Evil:
    """Unpickling this runs a command that creates `marker` (what the crafted artefact of the issue did)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def crafted(marker: Path, how: str) -> bytes:
    if how == "torch-zip":
        import io

        buf = io.BytesIO()
        torch.save({"format": 1, "payload": _Evil(marker)}, buf)
        return buf.getvalue()
    return pickle.dumps(_Evil(marker))


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("PROMO_ARTIFACTS_DIR", str(tmp_path / "store"))
    return tmp_path / "store"


def small_model():
    """A trained s_learner (1 epoch) on a tiny frame, and its campaign config."""
    rng = np.random.default_rng(0)
    n = 300
    frame = pd.DataFrame({"x": rng.normal(size=n), "level": rng.integers(0, 3, n),
                          "response": rng.integers(0, 2, n).astype(float), "ips_weight": 1.0,
                          "split": np.where(np.arange(n) < 240, "train", "validation")})
    config = CampaignConfig(campaign="t", treatments={"levels": [0.0, 1.0, 2.0]})
    return registry.create("s_learner", {"max_epochs": 1}).fit(TrainingData(config, frame, ["x"], [])).model_, frame


# ------------------------------------------------------------------------------------------------
# the crafted pickle of the issue


@pytest.mark.hostile
@pytest.mark.parametrize("how", ["pickle", "torch-zip"])
@pytest.mark.parametrize("case", ["error-crafted-pickle-under-a-stored-version",
                                  "error-crafted-pickle-named-by-its-own-hash"])
def test_a_crafted_pickle_never_runs(store, tmp_path, case, how):
    marker = tmp_path / "PWNED"
    data = crafted(marker, how)
    if case == "error-crafted-pickle-under-a-stored-version":  # replaces a genuine model's file
        model, _ = small_model()
        version = model.save()
        path = artifacts.artifact_path("model", version)
        path.write_bytes(data)
        with pytest.raises(ArtifactMissingError, match=f"{path} does not match its content hash"):
            load_model(version)
    else:  # a writer who computed the hash: passes the check, still never unpickled
        version, path = artifacts.save_bytes(data, "model")
        with pytest.raises(ModelInputError, match=f"{path} is not a promo_assets artefact"):
            load_model(version)
        with pytest.raises(ModelInputError, match="is not a LightGBM baseline artefact"):
            registry.get("lgbm_s").load(version)
    assert not marker.exists(), "the crafted artefact ran its command"


# ------------------------------------------------------------------------------------------------
# verification and replacement


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-truncated-torch-artefact", "error-truncated-lightgbm-artefact",
                                  "error-one-byte-changed", "error-empty-file"])
def test_a_damaged_artefact_is_missing_naming_the_file(store, case):
    if "lightgbm" in case:
        _, frame = small_model()
        config = CampaignConfig(campaign="t", treatments={"levels": [0.0, 1.0, 2.0]})
        model = registry.create("lgbm_s").fit(TrainingData(config, frame, ["x"], [])).model_
    else:
        model, _ = small_model()
    version = model.save()
    path = artifacts.artifact_path("model", version)
    data = path.read_bytes()
    if "truncated" in case:
        path.write_bytes(data[: len(data) // 2])
    elif case == "error-one-byte-changed":
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    else:
        path.write_bytes(b"")
    loader = registry.get("lgbm_s").load if "lightgbm" in case else load_model
    with pytest.raises((ArtifactMissingError, ModelInputError)) as err:
        loader(version)
    assert str(path) in str(err.value) and "does not match its content hash" in str(err.value)
    assert "PytorchStreamReader" not in str(err.value) and "not a LightGBM baseline" not in str(err.value)


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["accepted-save-replaces-a-tampered-file", "accepted-save-replaces-a-truncated-file",
                                  "accepted-save-replaces-a-symlink"])
def test_a_save_over_a_damaged_file_replaces_it_with_a_warning(store, tmp_path, caplog, case):
    model, frame = small_model()
    version = model.save()
    path = artifacts.artifact_path("model", version)
    good = path.read_bytes()
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"not yours")
    if case == "accepted-save-replaces-a-tampered-file":
        path.write_bytes(crafted(tmp_path / "PWNED", "pickle"))
    elif case == "accepted-save-replaces-a-truncated-file":
        path.write_bytes(good[:100])
    else:
        path.unlink()
        path.symlink_to(outside)
    with caplog.at_level(logging.WARNING, logger="promo_assets.store.artifacts"):
        assert model.save() == version
    assert f"{path} did not match its content hash" in caplog.text
    assert not path.is_symlink() and path.read_bytes() == good
    assert outside.read_bytes() == b"not yours"  # the link was replaced, not what it pointed to
    again = load_model(version)
    np.testing.assert_array_equal(again.predict(frame)[0], model.predict(frame)[0])
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-symlinked-artefact", "error-fifo-artefact"])
def test_links_and_special_files_in_the_store_are_not_followed_or_opened(store, tmp_path, case):
    model, _ = small_model()
    version = model.save()
    path = artifacts.artifact_path("model", version)
    copy = tmp_path / "copy.bin"
    copy.write_bytes(path.read_bytes())
    path.unlink()
    if case == "error-symlinked-artefact":  # even to the right bytes: links are not followed
        path.symlink_to(copy)
    else:
        os.mkfifo(path)  # opening it would block forever
    with pytest.raises(ArtifactMissingError, match=f"{path} not a regular file"):
        load_model(version)


@pytest.mark.hostile
@pytest.mark.parametrize("version", ["../../etc/passwd", "0123", "0123456789ABCDEF", "0123456789abcdef/../x"],
                         ids=["error-version-path", "error-version-short", "error-version-upper", "error-version-dots"])
def test_a_version_that_could_name_another_path_is_refused(store, version):
    with pytest.raises(ValueError, match="artefact version must be 16 lower-case hex digits"):
        artifacts.load_bytes("model", version)


def test_objects_round_trip_as_data(store):
    obj = {"t": torch.arange(6.0).reshape(2, 3), "ids": np.asarray(["a", "b"], dtype=object),
           "f": np.arange(3, dtype=np.float32), "tuple": (1, 2.5, None), "int_keys": {1: "x"}, "nan": float("nan"),
           "np_scalar": np.float64(2.0), "nested": [{"k": [True, "s"]}]}
    version, path = artifacts.save_object(obj, "test")
    assert artifacts.save_object(obj, "test") == (version, path)  # deterministic: same bytes, same version
    got = artifacts.load_object("test", version)
    assert torch.equal(got["t"], obj["t"]) and got["ids"].tolist() == ["a", "b"] and got["ids"].dtype == object
    assert got["f"].dtype == np.float32 and got["tuple"] == (1, 2.5, None) and got["int_keys"] == {1: "x"}
    assert np.isnan(got["nan"]) and got["np_scalar"] == 2.0 and got["nested"] == [{"k": [True, "s"]}]
    with pytest.raises(TypeError, match="cannot store a object in an artefact"):
        artifacts.save_object({"x": object()}, "test")


def test_a_model_saved_and_loaded_predicts_the_same(store):
    model, frame = small_model()
    version = model.save()
    assert version == model.version
    again = load_model(version)
    for a, b in zip(again.predict(frame), model.predict(frame)):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------------------------
# through `promo run`


def registered_versions(warehouse: Path) -> dict[str, str]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute("SELECT model, model_version FROM model_registry ORDER BY trained_at").fetchall()
    return dict(rows)


@pytest.mark.slow
@pytest.mark.hostile
@pytest.mark.parametrize("case", ["accepted-crafted-pickle-reported-and-replaced-by-promo-run"])
def test_promo_run_replaces_a_crafted_pickle_without_running_it(promo_env, monkeypatch, capfd, tmp_path, case):
    from promo_assets.cli.main import main

    monkeypatch.setenv("PROMO_MAX_EPOCHS", "1")  # the artefacts' files are the point, not what they learned
    assert main(["simulate", "--campaign", "c1", "--days", "3", "--users", "200", "--start", "2026-01-01"]) == 0
    yaml_path = promo_env["landing"] / "c1" / "campaign.yaml"
    yaml_path.write_text(yaml_path.read_text() + "models:\n  include: [s_learner, lgbm_s]\n")
    assert main(["run", "--no-progress"]) == 0
    versions = registered_versions(promo_env["warehouse"])
    marker = tmp_path / "PWNED"
    paths = {m: promo_env["artifacts"] / "model" / f"{versions[m]}.bin" for m in ("s_learner", "lgbm_s")}
    good = {m: p.read_bytes() for m, p in paths.items()}
    for p in paths.values():
        p.write_bytes(crafted(marker, "torch-zip"))
    capfd.readouterr()
    assert main(["run", "--no-progress"]) == 0
    out = "".join(capfd.readouterr())
    assert not marker.exists(), "the crafted artefact ran its command"
    for m, p in paths.items():
        assert f"{p} did not match its content hash" in out, out[-3000:]
        assert p.read_bytes() == good[m]  # the re-trained artefact (training is deterministic)
    assert registered_versions(promo_env["warehouse"]) == versions
    assert "Traceback" not in out

"""Where a model stands on the leaderboard, from what was recorded of its chain (domain code, no
Dagster): left out, skipped, missing, stale or evaluated."""

from __future__ import annotations

from promo_assets.evaluation.board import ChainRecord, board_entry


def test_a_model_left_out_or_skipped_is_skipped_with_its_reason():
    assert board_entry("m", ChainRecord(left_out="not in models.include"), "f1")["reason"] == "not in models.include"
    skipped = board_entry("m", ChainRecord(skipped_reason="no merchants"), "f1")
    assert (skipped["status"], skipped["reason"], skipped["model_version"]) == ("skipped", "no merchants", None)


def test_a_model_without_an_evaluation_is_missing():
    entry = board_entry("m", ChainRecord(), "f1")
    assert entry["status"] == "missing" and "no evaluation yet" in entry["reason"]


def test_an_evaluation_of_another_training_frame_is_stale_and_not_ranked():
    record = ChainRecord(model_version="v1", evaluation_run_id="abcdef123456", frame_version="f0")
    stale = board_entry("m", record, "f1")
    assert stale["status"] == "stale" and "run abcdef12" in stale["reason"] and "(f0, now f1)" in stale["reason"]
    assert (stale["model_version"], stale["evaluation_run_id"]) == ("v1", "abcdef123456")
    assert board_entry("m", record, "f0")["status"] == "evaluated"
    assert board_entry("m", ChainRecord(model_version="v1", evaluation_run_id="r"), "f1")["status"] == "evaluated"

"""One rule for user ids (ingestion's SQL and `promo_assets.ingestion.ids`, which `promo simulate
--respond-to` and `promo serve` use) and a missing or NaN propensity in a file that logs propensities.

`error-*` cases are refused naming the column and the problem; `accepted-*` cases load as
docs/data-contract.md says.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from promo_assets.store import warehouse
from promo_assets.ingestion import IngestError, ingest_events_day, load_config
from promo_assets.ingestion.ids import clean_user_id, clean_user_ids, user_id_problem

DAY = dt.date(2026, 3, 2)
YAML = "treatments:\n  levels: [0, 1]\nbudget_per_capita: [1.0]\n"

IDS = {  # raw id -> (stored id, or None when refused)
    "accepted-id-spaces-around": (" u0000028 ", "u0000028"),
    "accepted-id-tab-and-newline-around": ("\tu7\r\n", "u7"),
    "accepted-id-integer": (42, "42"),
    "accepted-id-space-inside": ("u 1", "u 1"),
    "error-id-nul-inside": ("u\x001", None),
    "error-id-escape-inside": ("u\x1b[31m1", None),
    "error-id-blank": ("  \t ", None),
}


def _ingest(tmp_path, events: pd.DataFrame, fmt: str = "parquet"):
    folder = tmp_path / "landing" / "c1"
    (folder / "events").mkdir(parents=True)
    (folder / "campaign.yaml").write_text(YAML)
    path = folder / "events" / f"{DAY}.{fmt}"
    events.to_parquet(path) if fmt == "parquet" else events.to_csv(path, index=False)
    with warehouse.connect(tmp_path / "w.duckdb") as con:
        result = ingest_events_day(con, load_config(tmp_path / "landing", "c1"), DAY, path)
        stored = [r[0] for r in con.execute("SELECT user_id FROM rct_events ORDER BY user_id").fetchall()]
    return result, stored


@pytest.mark.hostile
@pytest.mark.parametrize("raw, expected", list(IDS.values()), ids=list(IDS))
def test_ingestion_and_the_python_rule_agree_on_every_id(tmp_path, raw, expected):
    ids = [raw, "other"] if not isinstance(raw, int) else [raw, 7]
    events = pd.DataFrame({"user_id": ids, "treatment": [0, 1], "response": [0.0, 1.0]})
    if expected is None:
        with pytest.raises(IngestError) as err:
            _ingest(tmp_path, events)
        assert "column 'user_id'" in str(err.value)
        assert user_id_problem(raw) in str(err.value)  # the same reason, word for word
        with pytest.raises(ValueError, match="user_id"):
            clean_user_id(raw)
    else:
        _, stored = _ingest(tmp_path, events)
        assert expected in stored and clean_user_id(raw) == expected


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-ids-batch-names-the-first-bad-row"])
def test_clean_user_ids_names_the_first_refused_row(case):
    with pytest.raises(ValueError) as err:
        clean_user_ids(["u1", " u2 ", "u\n3", None])
    assert "2 user_id value(s) refused; the first at row 3: 'u\\n3'" in str(err.value)
    assert clean_user_ids([" u1 ", 5]) == ["u1", "5"]


PROPENSITY = {
    "error-propensity-null-in-parquet": ("parquet", [0.5, np.nan, 0.5], "'NULL'"),
    "error-propensity-empty-csv-cell": ("csv", [0.5, None, 0.5], "'NULL'"),
    "error-propensity-nan-text-csv": ("csv", ["0.5", "NaN", "0.5"], "outside 0 < p <= 1"),
}


@pytest.mark.hostile
@pytest.mark.parametrize("fmt, values, words", list(PROPENSITY.values()), ids=list(PROPENSITY))
def test_a_missing_or_nan_propensity_is_refused_as_respond_refuses_it(tmp_path, fmt, values, words):
    events = pd.DataFrame({"user_id": ["a", "b", "c"], "treatment": [0, 1, 1], "response": [0.0, 1.0, 0.0],
                           "propensity": values})
    with pytest.raises(IngestError) as err:
        _ingest(tmp_path, events, fmt)
    message = str(err.value)
    assert "column 'propensity'" in message and "first at row 2" in message and words in message, message
    assert "nothing was loaded" in message

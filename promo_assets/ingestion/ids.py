"""The one rule for user ids, wherever an id enters: the landing folder's events, edges and population
files (applied in SQL: sql/ingest.sql `typed_required` / `check_required`, sql/frames.sql), a decision
file answered by `promo simulate --respond-to`, a request to `promo serve`.

An id is the value's text (an integer id 42 is '42') with spaces, tabs, carriage returns and
newlines trimmed from both ends (ID_TRIM, as DuckDB's `trim(x, E' \\t\\n\\r')`); it is refused when
nothing is left or when a control character (U+0000..U+001F, U+007F) remains inside. So `" u1 "`
and `"u1"` are one user everywhere. `MAX_NUMBER` is ingestion's bound on the size of a number.

No dagster here (domain code).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

ID_TRIM = " \t\n\r"
#: The largest |number| ingestion accepts (response, cost and numeric features; sql/ingest.sql refuses NaN,
#: inf and larger values); `promo serve` and the simulator's shifts keep the same bound.
MAX_NUMBER = 1e15
_CONTROL_INSIDE = re.compile(r"[\x00-\x1f\x7f]")


def user_id_problem(value: Any) -> str | None:
    """Why `value` is not a user id (the landing folder's reasons, word for word), or None."""
    if value is None or (isinstance(value, float) and value != value):
        return "missing"
    text = str(value).strip(ID_TRIM)
    if not text:
        return "missing"
    if _CONTROL_INSIDE.search(text):
        return "a control character inside the id, such as NUL, tab or newline"
    return None


def clean_user_id(value: Any) -> str:
    """The user id of `value` (module docstring); ValueError with the reason when it is not one."""
    problem = user_id_problem(value)
    if problem is not None:
        raise ValueError(f"user_id {value!r}: {problem}")
    return str(value).strip(ID_TRIM)


def clean_user_ids(ids: Iterable[Any]) -> list[str]:
    """`clean_user_id` of every value; ValueError naming how many are refused, the first one's
    position (0-based) and its value and reason."""
    out, bad = [], []
    for i, v in enumerate(ids):
        problem = user_id_problem(v)
        if problem is None:
            out.append(str(v).strip(ID_TRIM))
        else:
            bad.append((i, v, problem))
    if bad:
        i, v, problem = bad[0]
        raise ValueError(f"{len(bad)} user_id value(s) refused; the first at row {i + 1}: {v!r}: {problem}")
    return out

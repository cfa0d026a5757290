"""How `promo` prints what it lists: aligned text tables that fit a width (long cells wrapped onto
more lines), CSV and JSON. No command's logic here, only the rendering, so every command formats
its tables the same way."""

from __future__ import annotations

import csv
import io
import json
import math
import textwrap
from typing import Any, Iterable, Sequence

FORMATS = ("table", "csv", "json")
MIN_WRAPPED = 12  # a wrapped column is never made narrower than this (or its header)


def fit_widths(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int | None,
               wrap: Iterable[str] = ()) -> list[int]:
    """Column widths: each column's longest cell; when the table (columns two spaces apart) is wider
    than `width`, the columns named in `wrap` give up the difference, the widest first, down to
    MIN_WRAPPED (or their header's length)."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    if width is None:
        return widths
    wrapped = [i for i, h in enumerate(headers) if h in set(wrap)]
    excess = sum(widths) + 2 * (len(widths) - 1) - width
    while excess > 0:
        room = [i for i in wrapped if widths[i] > max(MIN_WRAPPED, len(headers[i]))]
        if not room:
            break
        i = max(room, key=lambda j: widths[j])
        others = [widths[j] for j in room if j != i]
        floor = max(MIN_WRAPPED, len(headers[i]), max(others, default=0))
        cut = min(excess, widths[i] - floor) or 1
        widths[i] -= cut
        excess -= cut
    return widths


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, width: int | None = None,
               wrap: Iterable[str] = (), right: Iterable[str] = ()) -> list[str]:
    """The lines of an aligned table: a header, a rule of dashes, one or more lines per row (the cells
    of the `wrap` columns wrapped at word boundaries so the table fits `width`); the `right` columns
    are right-aligned. Trailing blanks are stripped."""
    cells = [["" if v is None else str(v) for v in r] for r in rows]
    headers = list(headers)
    widths = fit_widths(headers, cells, width, wrap)
    right = set(right)

    def lines_of(values: Sequence[str]) -> list[str]:
        parts = [textwrap.wrap(v, w) or [""] if len(v) > w else [v] for v, w in zip(values, widths)]
        out = []
        for k in range(max(len(p) for p in parts)):
            out.append("  ".join((p[k] if k < len(p) else "").rjust(w) if h in right else
                                 (p[k] if k < len(p) else "").ljust(w)
                                 for p, w, h in zip(parts, widths, headers)).rstrip())
        return out

    out = lines_of(headers) + ["  ".join("-" * w for w in widths)]
    for r in cells:
        out += lines_of(r)
    return out


def wrap_lines(lines: Iterable[str], width: int) -> list[str]:
    """Text lines wrapped at `width`; a continuation is indented two more than its line."""
    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()))
        out += textwrap.wrap(line.strip(), width, initial_indent=indent, subsequent_indent=indent + "  ",
                             break_on_hyphens=False)
    return out


def plain(value: Any) -> Any:
    """A value JSON and CSV can carry: NaN/NA as None, numpy scalars as Python ones, tuples as lists,
    dates and times in ISO 8601, other objects as their text."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item") and not hasattr(value, "__len__"):  # a numpy scalar
        value = value.item()
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, int):
        return value
    try:
        import pandas as pd

        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def to_json(data: Any) -> str:
    return json.dumps(plain(data), indent=2, ensure_ascii=False) + "\n"


def to_csv(records: Sequence[dict], columns: Sequence[str] | None = None) -> str:
    """Records as CSV with a header; a list or dict cell is written as JSON."""
    columns = list(columns or (records[0].keys() if records else []))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for r in records:
        row = [plain(r.get(c)) for c in columns]
        writer.writerow(["" if v is None else json.dumps(v) if isinstance(v, (list, dict)) else v for v in row])
    return buffer.getvalue()

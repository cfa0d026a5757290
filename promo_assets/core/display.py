"""Values on their way to a person (the Dagster UI's metadata, a report): a value as table text
(`shown_text`), a nested dict flattened to `a.b` names (`flatten`), any result as plain JSON values
(`jsonable`) and a PNG as inline Markdown (`png_markdown`).

What an asset shows is built in the domain rooms as plain values: numbers, text, `Markdown` (text to
render as Markdown: `md_table`, `kv_table`, a plot by `png_markdown`), a `Table` (typed columns, an
optional description each, and records: `rows_table`), and a `CheckResult` per asset check.
`promo_assets.defs.common.metadata` / `check_results` turn them into Dagster's metadata values and
check results. No dagster here (domain code).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

from promo_assets.core.text import markdown_text


def shown_text(value: Any, text: Callable[[Any], str] = markdown_text) -> str:
    """A value as table text: floats to 4 significant digits, dicts and lists joined, text through
    `text` (escaped for Markdown by default)."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{text(k)}: {shown_text(x, text)}" for k, x in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(shown_text(x, text) for x in value)
    return text(value)


def flatten(entries: dict, prefix: str = "") -> dict:
    """A nested dict as one level, the names joined by dots ('a.b')."""
    out = {}
    for k, v in entries.items():
        name = f"{prefix}{k}"
        out.update(flatten(v, f"{name}.") if isinstance(v, dict) else {name: v})
    return out


def jsonable(obj):
    """`obj` as plain JSON values (numpy arrays and scalars as lists and numbers, anything else as text)."""
    return json.loads(json.dumps(obj, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))




class Markdown(str):
    """Text shown as Markdown (a table, a plot); any other `str` is shown as plain text."""


def png_markdown(png: bytes, title: str) -> Markdown:
    """A PNG as Markdown: its title in bold, then the image inline (a data URL)."""
    return Markdown(f"**{title}**\n\n![{title}](data:image/png;base64,{base64.b64encode(png).decode()})")


class Column(NamedTuple):
    """A table's column: its name, its type (one of Dagster's table column types: 'string', 'float',
    'int', 'bool', 'date') and what it means (None: nothing said)."""

    name: str
    type: str
    description: str | None = None


@dataclass(frozen=True)
class Table:
    """A table for people: its `columns` (a Column, or the same as a plain (name, type[, description])
    tuple) and `records`, one dict per row by column name (None: an empty cell)."""

    columns: Sequence[Column | tuple[str, ...]]
    records: list[dict]


@dataclass(frozen=True)
class CheckResult:
    """What an asset check found: its `name`, whether it `passed`, a `description` (None: the check's
    own), its `severity` ('ERROR', 'WARN'; None: the check's default) and `metadata` (shown values)."""

    name: str
    passed: bool
    description: str | None = None
    severity: str | None = None
    metadata: dict = field(default_factory=dict)


def md_table(rows: list[dict]) -> Markdown:
    """Rows as a Markdown table: every name and text value escaped (`promo_assets.core.text.markdown_text`:
    a label, category or column name from data renders as text, never as a link, image or tag)."""
    if not rows:
        return Markdown("(none)")
    cols = list(rows[0])
    lines = ["| " + " | ".join(markdown_text(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(shown_text(r[c]) for c in cols) + " |")
    return Markdown("\n".join(lines))


def kv_table(entries: dict, what: str = "value") -> Markdown:
    """A dict (nested dicts flattened as 'a.b') as a two-column table for people: name | value, floats
    to 4 significant digits, lists joined; never a JSON string or a dict repr."""
    return md_table([{"name": k, what: v.item() if hasattr(v, "item") else v} for k, v in flatten(dict(entries)).items()])


def rows_table(rows: list[dict]) -> Table | Markdown:
    """Plain rows as a typed table (numbers as float columns to 4 significant digits, NaN or None as an
    empty cell, the rest as text): every value shown as text, never as Markdown. No rows: '(none)'."""
    if not rows:
        return Markdown("(none)")
    cols = list(rows[0])

    def missing(v) -> bool:
        return v is None or (isinstance(v, float) and v != v)

    kinds = {c: "float" if all(missing(r.get(c)) or (isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool))
                               for r in rows) else "string" for c in cols}
    records = [{c: (None if missing(r.get(c)) else float(f"{r[c]:.4g}")) if kinds[c] == "float"
                else ("" if missing(r.get(c)) else str(r[c])) for c in cols} for r in rows]
    return Table([(str(c), kinds[c]) for c in cols], records)


def for_people(value):
    """A value a person can read: scalars as they are (floats rounded to 4 significant digits), dicts
    as a name | value table, lists joined by commas."""
    if hasattr(value, "item") and not isinstance(value, (list, dict)):
        value = value.item()
    if isinstance(value, bool) or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return kv_table(value)
    if isinstance(value, (list, tuple)):
        return shown_text(list(value), str)  # plain text: nothing to escape
    return str(value)


"""Text from data on its way out: into Markdown (Dagster metadata), into a CSV cell (a spreadsheet),
or checked for control characters (a terminal, the outbox).

Values read from files or campaign.yaml (arm labels, category values, column names, constraint
names, rejected raw values) may hold anything. Each sink gets one function here:

- `markdown_text`: a value shown as text inside Markdown: HTML's `& < >` become entities and the
  Markdown punctuation that makes links, images, code, tables and autolinks (`\\ ` * [ ] ( ) ! | ~ #
  : @`, the dot of `www.`) is backslash-escaped; line breaks become spaces. The rendered text reads
  as the value, and nothing of it renders as a link, an image or a tag.
- `csv_cell` / `csv_uncell`: the OWASP rule against formula injection: a text cell that starts with
  `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading `'`; so does one that starts with `'`
  itself, so that `csv_uncell` (drop one leading `'`) gives back exactly the value written.
- `control_characters`: the control characters in a text (C0, DEL, C1), for refusing them where the
  text enters (campaign.yaml, ingestion), so they never reach a terminal or the outbox.

No dagster here (domain code).
"""

from __future__ import annotations

import re
from typing import Any

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

_MD_ESCAPE = re.compile(r"([\\`*\[\]|~#:@])")
_WWW = re.compile(r"(?i)(www)\.")
# Renderers that linkify the text after parsing (GFM's autolink literals, as remark-gfm does in the
# Dagster UI) see through backslash escapes: a zero-width space breaks `http://`, `www.` and `a@b`.
_AUTOLINK = re.compile(r"(?i)(https?|ftp|mailto|xmpp|www)(?=[:.])|(?<=@)")
ZERO_WIDTH_SPACE = "\u200b"
_BREAKS = re.compile(r"[\r\n\x0b\x0c\x85\u2028\u2029]+")


def markdown_text(value: Any) -> str:
    """`value` as text that Markdown (CommonMark + GFM, HTML allowed) renders literally: no link,
    image, tag, code span, autolink or table cell break comes out of it (module docstring)."""
    text = _BREAKS.sub(" ", str(value))
    text = _AUTOLINK.sub(lambda m: (m.group(1) or "") + ZERO_WIDTH_SPACE, text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_ESCAPE.sub(r"\\\1", text)
    return _WWW.sub(r"\1\\.", text)


def csv_cell(value: Any) -> Any:
    """A text value made safe for a spreadsheet cell (OWASP: a leading `'` before `= + - @`, tab or
    carriage return; and before a leading `'`, so `csv_uncell` restores it exactly); other values as
    they are."""
    if isinstance(value, str) and value and (value[0] in FORMULA_START or value[0] == "'"):
        return "'" + value
    return value


def csv_uncell(value: Any) -> Any:
    """`csv_cell`'s inverse: a text value that starts with `'` loses that one character."""
    if isinstance(value, str) and value.startswith("'"):
        return value[1:]
    return value


def control_characters(text: str) -> list[str]:
    """The distinct control characters in `text` (C0 incl. tab and newline, DEL, C1), as escapes
    (`\\x1b`), in order of appearance; [] when there is none."""
    seen: list[str] = []
    for ch in CONTROL.findall(text):
        shown = f"\\x{ord(ch):02x}"
        if shown not in seen:
            seen.append(shown)
    return seen

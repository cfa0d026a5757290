"""Values on their way to a person (the Dagster UI's metadata, a report): a value as table text
(`shown_text`), a nested dict flattened to `a.b` names (`flatten`), any result as plain JSON values
(`jsonable`) and a PNG as inline Markdown (`png_markdown`). No dagster here (domain code).
"""

from __future__ import annotations

import base64
import json
from typing import Any, Callable

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


def png_markdown(png: bytes, title: str) -> str:
    """A PNG as Markdown: its title in bold, then the image inline (a data URL)."""
    return f"**{title}**\n\n![{title}](data:image/png;base64,{base64.b64encode(png).decode()})"

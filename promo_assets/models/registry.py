"""The one model registry. Adding a model: write its `ResponseModel` class in its own module and add
one line to `BUILTIN` below (README, "Adding a model"). The asset graph (one chain of assets per
model, key prefix = the model's name), the CLI, the benchmarks and the README's model table are all
generated from here.

Entries are "module:Class" paths so that a model's heavy imports (torch_geometric, lightgbm) load
only when that model is used; a module that defines a model must not import them at its top.
"""

from __future__ import annotations

import importlib
import re

from promo_assets.models.errors import ModelInputError
from promo_assets.models.protocol import ResponseModel

# name -> "module:Class", in leaderboard order
BUILTIN: dict[str, str] = {
    "s_learner": "promo_assets.models.s_learner:SLearner",
    "dipn": "promo_assets.models.dipn:DIPN",
    "gnn_hazard": "promo_assets.models.gnn_hazard:GnnHazard",
    "lgbm_s": "promo_assets.models.lgbm:LGBMSLearner",
    "lgbm_s_mono": "promo_assets.models.lgbm:LGBMSLearnerMonotone",
    "lgbm_t": "promo_assets.models.lgbm:LGBMTLearner",
}

_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
_extra: dict[str, str] = {}  # registered at run time (tests, plug-ins): register()
_cache: dict[str, ResponseModel] = {}


def names() -> tuple[str, ...]:
    """Registered model names, built-ins first."""
    return tuple(BUILTIN) + tuple(n for n in _extra if n not in BUILTIN)


def get(name: str) -> ResponseModel:
    """The model registered as `name` (instantiated once)."""
    if name not in _cache:
        path = BUILTIN.get(name) or _extra.get(name)
        if path is None:
            raise ModelInputError(f"unknown model {name!r}; registered models: {', '.join(names())}")
        module, _, cls = path.partition(":")
        model = getattr(importlib.import_module(module), cls)()
        if model.name != name:
            raise ModelInputError(f"registry entry {name!r} -> {path} names itself {model.name!r}")
        _cache[name] = model
    return _cache[name]


def models() -> list[ResponseModel]:
    return [get(n) for n in names()]


def table_markdown() -> str:
    """The model table of README "Adding a model" (`promo models` prints it), one row per model."""
    lines = ["| model | assets (key prefix = model) | applies to | source | what it is |", "|---|---|---|---|---|"]
    for m in models():
        phases = ["model"] if len(m.phases) == 1 else list(m.phases)
        assets = " → ".join(f"`{m.name}/{p}`" for p in phases) + " → coefficients, dual, allocation, evaluation"
        lines.append(f"| `{m.name}` | {assets} | {m.applies} | {m.source} | {m.title} |")
    return "\n".join(lines) + "\n"


def import_all() -> None:
    """Import every registered model's module (their torch architectures register themselves on
    import: what `models.base` needs to rebuild a stored artefact)."""
    for name in names():
        get(name)


def register(name: str, path: str) -> None:
    """Register a model class outside the built-ins ("module:Class"), e.g. a test model."""
    if not _NAME.fullmatch(name):
        raise ModelInputError(f"model name {name!r}: lower-case letters, digits and '_' (at most 32)")
    if name in BUILTIN:
        raise ModelInputError(f"model name {name!r} is a built-in model")
    _extra[name] = path
    _cache.pop(name, None)


def unregister(name: str) -> None:
    _extra.pop(name, None)
    _cache.pop(name, None)

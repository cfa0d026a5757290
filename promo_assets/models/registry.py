"""The one model registry. Adding a model: write its `ResponseModel` class in its own module and add
one line to `BUILTIN` below (docs/models.md, "Adding a model"). The asset graph (one chain of assets per
model, key prefix = the model's name), the CLI, the benchmarks and the docs' model reference are all
generated from here.

Entries are "module:Class" paths so that a model's heavy imports (torch_geometric, lightgbm) load
only when that model is used; a module that defines a model must not import them at its top.
"""

from __future__ import annotations

import difflib
import importlib
import re
from typing import Any, Mapping

from promo_assets.config.campaign import ModelsBlock
from promo_assets.models.errors import ModelInputError
from promo_assets.models.protocol import ResponseModel, same_kind, unknown_params

# name -> "module:Class", in leaderboard order
BUILTIN: dict[str, str] = {
    "s_learner": "promo_assets.models.s_learner:SLearner",
    "dipn": "promo_assets.models.dipn:DIPN",
    "gnn_hazard": "promo_assets.graph.gnn_hazard:GnnHazard",
    "lgbm_s": "promo_assets.models.lgbm:LGBMSLearner",
    "lgbm_s_mono": "promo_assets.models.lgbm:LGBMSLearnerMonotone",
    "lgbm_t": "promo_assets.models.lgbm:LGBMTLearner",
    "dnn_m": "promo_assets.models.monotone_models:DNNM",
    "fpm": "promo_assets.models.monotone_models:FPM",
    "cmnn": "promo_assets.models.monotone_models:CMNN",
    "coman": "promo_assets.models.coman:CoMAN",
    "e2e_fd": "promo_assets.models.e2e:E2EFiniteDifference",
    "e2e_nes": "promo_assets.models.e2e:E2ENaturalEvolution",
    "dfcl_pl": "promo_assets.models.dfcl:DFCLPolicyLearning",
    "dfcl_mer": "promo_assets.models.dfcl:DFCLMaxEntropy",
    "dfcl_ifd": "promo_assets.models.dfcl:DFCLFiniteDifference",
    "logistic_s": "promo_assets.models.sklearn_logistic:LogisticSLearner",
}

_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
_extra: dict[str, str] = {}  # registered at run time (tests, plug-ins): register()
_cache: dict[str, type[ResponseModel]] = {}


def names() -> tuple[str, ...]:
    """Registered model names, built-ins first."""
    return tuple(BUILTIN) + tuple(n for n in _extra if n not in BUILTIN)


def get(name: str) -> type[ResponseModel]:
    """The model class registered as `name` (its class attributes describe it; `create` builds one)."""
    if name not in _cache:
        path = BUILTIN.get(name) or _extra.get(name)
        if path is None:
            raise ModelInputError(f"unknown model {name!r}; registered models: {', '.join(names())}")
        module, _, attr = path.partition(":")
        cls = getattr(importlib.import_module(module), attr)
        if not (isinstance(cls, type) and issubclass(cls, ResponseModel)):
            raise ModelInputError(f"registry entry {name!r} -> {path} is not a ResponseModel class")
        if cls.name != name:
            raise ModelInputError(f"registry entry {name!r} -> {path} names itself {cls.name!r}")
        _cache[name] = cls
    return _cache[name]


def models() -> list[type[ResponseModel]]:
    """Every registered model class, in `names()` order."""
    return [get(n) for n in names()]


def create(name: str, params: Mapping[str, Any] | None = None) -> ResponseModel:
    """An unfitted model `name` with hyper-parameters `params` (the others at their defaults).
    ModelInputError naming each unknown parameter (with the close match) or refused value."""
    cls = get(name)
    params = dict(params or {})
    unknown = [p for p in params if p not in cls.param_names()]
    if unknown:
        raise ModelInputError(unknown_params(name, unknown, cls.param_names()))
    model = cls(**params)
    problems = model.check_params()
    if problems:
        raise ModelInputError(f"{name}: " + "; ".join(problems))
    return model


def for_campaign(name: str, config, **overrides: Any) -> ResponseModel:
    """Model `name` built with campaign.yaml's `models.params.<name>` (validated when the file was
    loaded), updated with `overrides` (e.g. a benchmark's seed)."""
    return create(name, {**(config.models.params.get(name) or {}), **overrides})


def table_markdown() -> str:
    """The model table that `promo models` prints, one row per model."""
    lines = ["| model | assets (key prefix = model) | applies to | trained by default | hyper-parameters (`models.params`) "
             "| source | what it is |", "|---|---|---|---|---|---|---|"]
    for m in models():
        phases = ["model"] if len(m.phases) == 1 else list(m.phases)
        assets = " → ".join(f"`{m.name}/{p}`" for p in phases) + " → coefficients, dual, allocation, evaluation"
        params = ", ".join(f"`{k}` = {v!r}" for k, v in m.defaults().items()) or "—"
        lines.append(f"| `{m.name}` | {assets} | {m.applies} | {'yes' if m.default else 'no'} | {params} "
                     f"| {m.source} | {m.title} |")
    return "\n".join(lines) + "\n"


def records() -> list[dict]:
    """Every registered model as plain data (`promo models --format csv|json`): name, what it is,
    the campaigns it applies to, whether it is trained by default, its assets, hyper-parameters with
    their defaults, response types, whether it needs the customer-merchant graph, and its paper."""
    out = []
    for m in models():
        phases = ["model"] if len(m.phases) == 1 else list(m.phases)
        out.append({
            "model": m.name, "title": m.title, "applies_to": m.applies, "default": bool(m.default),
            "assets": [f"{m.name}/{p}" for p in phases]
            + [f"{m.name}/{s}" for s in ("response_coefficients", "budget_dual", "allocation", "policy_evaluation")],
            "params": dict(m.defaults()), "kinds": [m.kinds] if isinstance(m.kinds, str) else list(m.kinds),
            "needs_graph": bool(m.needs_graph), "source": m.source,
        })
    return out


def not_selected(name: str, config) -> str | None:
    """None when campaign.yaml's `models:` block selects model `name`, else the reason it does not:
    listed in `exclude`, left out of `include`, or (no `include`) not a default model."""
    block = config.models
    if name in block.exclude:
        return "excluded by campaign.yaml models.exclude"
    include = block.include
    if include is not None:
        return None if name in include else "not listed in campaign.yaml models.include"
    if not get(name).default:
        return "off by default: list it in campaign.yaml models.include to train it"
    return None


def skip_reason(name: str, config) -> str | None:
    """None when model `name` is trained for the campaign, else why not, known from campaign.yaml
    alone: its `models:` block leaves it out (`not_selected`), or the model does not apply
    (`applies_to`, e.g. gnn_hazard without a `merchants:` block). The model phase asset skips on it,
    `promo run` leaves such a model's chain out of its run and the leaderboard lists the reason."""
    return not_selected(name, config) or get(name).applies_to(config)


def check_models_block(block: ModelsBlock | Mapping[str, Any]) -> list[str]:
    """Problems of campaign.yaml's `models:` block (`CampaignConfig.models`, or the same as a mapping):
    unknown model names, unknown hyper-parameters, a value of the wrong kind, what the model's
    `check_params` refuses; each naming the key. The pipeline calls it where it loads a campaign's
    config (`promo_assets.ingestion.load_config`); campaign.py itself never imports the models."""
    if not isinstance(block, ModelsBlock):
        block = ModelsBlock.model_validate(dict(block))
    known = names()
    problems = []

    def unknown(key: str, name: str) -> str:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"did you mean '{close[0]}'?" if close else f"registered models: {', '.join(known)}"
        return f"'{key}': unknown model {name!r} ({hint})"

    for key, listed in (("include", block.include), ("exclude", block.exclude)):
        problems += [unknown(f"models.{key}", n) for n in (listed or ()) if n not in known]
    for name, given in (block.params or {}).items():
        if name not in known:
            problems.append(unknown("models.params", name))
            continue
        cls = get(name)
        defaults = cls.defaults()
        own = []
        for param, value in given.items():
            key = f"models.params.{name}.{param}"
            if param not in defaults:
                close = difflib.get_close_matches(param, list(defaults), n=1, cutoff=0.6)
                hint = (f"did you mean '{close[0]}'?" if close else
                        f"its hyper-parameters: {', '.join(defaults) or 'none'}")
                own.append(f"unknown key '{key}' ({hint})")
            elif not same_kind(defaults[param], value):
                own.append(f"'{key}' = {value!r} ({type(value).__name__}): expected "
                           f"{type(defaults[param]).__name__} like the default {defaults[param]!r}")
        if not own:  # values are checked once names and kinds are right
            own = [f"'models.params.{name}': {p}" for p in cls(**given).check_params()]
        problems += own
    return problems


def check_champion_block(block) -> list[str]:
    """Problems of campaign.yaml's `champion:` block (`CampaignConfig.champion`): a pinned or
    candidate model that is not registered, naming the key and the closest registered name."""
    known = names()
    out = []
    for key, listed in (("champion.pin", [block.pin] if block.pin else []),
                        ("champion.candidates", block.candidates or []),
                        ("champion.refit", getattr(block, "refit", None) or [])):
        for name in listed:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
                hint = f"did you mean '{close[0]}'?" if close else f"registered models: {', '.join(known)}"
                out.append(f"'{key}': unknown model {name!r} ({hint})")
    return out


def check_config(config) -> list[str]:
    """What only the registry can check of a parsed campaign.yaml: its `models:` block
    (`check_models_block`) and the models its `champion:` block names (`check_champion_block`)."""
    return check_models_block(config.models) + check_champion_block(config.champion)


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

"""Pages of the documentation generated from the code at build time (mkdocs-gen-files runs this), so
they cannot drift from it:

- reference/campaign-yaml.md  from the pydantic schema of campaign.yaml (promo_assets.config.campaign.CampaignConfig):
                              every key, what it accepts, its default and its meaning (the field's docstring);
- reference/cli.md            from the argument parser (promo_assets.cli.main.build_parser): every command and option;
- reference/models.md         from the model registry (promo_assets.models.registry): every model, its paper,
                              what it applies to, its assets, its hyper-parameters and their defaults;
- benchmarks.md               from the result files in benchmarks/results/ (benchmarks/_results.py writes them).

A schema key without a docstring, or a benchmark script without a module docstring, stops the build.
Pages that other parts of the project write (decisions.md, operations.md) get a short placeholder
here only while the folder does not have them.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import sys
import textwrap
from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def cell(text: object) -> str:
    """Text fit for one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: object) -> str:
    text = str(text)
    if not text:
        return "`\"\"`"
    tick = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{tick}{pad}{text}{pad}{tick}"


# ------------------------------------------------------------------------------------------------
# campaign.yaml, from the schema

def yaml_value(value: object) -> str:
    """A default as it is written in campaign.yaml (true, [], {}, 20.0; a block as its mapping)."""
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    return value if isinstance(value, str) else json.dumps(value)


def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of a class body (a string literal right after `name: type = ...`)."""
    out: dict[str, str] = {}
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    for node, after in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            out[node.target.id] = inspect.cleandoc(after.value.value)
    return out


def schema_rows(model, prefix: str, blocks: list) -> list[tuple]:
    from pydantic_core import PydanticUndefined

    from promo_assets.config.campaign import _is_mapping, _submodel

    docs = field_docs(model)
    rows = []
    for name, info in model.model_fields.items():
        if name in getattr(model, "NOT_IN_FILE", ()):
            continue
        key = f"{prefix}{name}"
        if name not in docs:
            raise SystemExit(f"docs: campaign.yaml key '{key}' ({model.__name__}.{name}) has no docstring; "
                             "write what it means right under the field in promo_assets/config/campaign.py")
        if info.is_required():
            default = "required"
        elif info.default_factory is not None:
            default = code(yaml_value(info.default_factory()))
        elif info.default is None:
            default = "—"
        elif info.default is not PydanticUndefined:
            default = code(yaml_value(info.default))
        rows.append((key, info.description or "", default, docs[name]))
        sub = _submodel(info.annotation)
        if sub is not None:
            blocks.append((sub, f"{key}.<name>." if _is_mapping(info.annotation) else f"{key}."))
    return rows


def campaign_yaml_page() -> str:
    from promo_assets.config.campaign import CampaignConfig

    out = [
        "# campaign.yaml reference",
        "",
        "Generated from the schema that checks the file (`promo_assets.config.campaign.CampaignConfig`, pydantic, strict):",
        "every key the file may have, what it accepts, its default and what it means. A key not listed here is",
        "refused with the closest valid one. How the checks report problems, and worked examples, are in",
        "[The data contract](../data-contract.md).",
        "",
    ]
    blocks: list = [(CampaignConfig, "")]
    seen = set()
    while blocks:
        model, prefix = blocks.pop(0)
        if (model, prefix) in seen:
            continue
        seen.add((model, prefix))
        title = "Top level" if not prefix else f"`{prefix.rstrip('.')}`"
        out += [f"## {title}", ""]
        if model.__doc__ and prefix:
            doc = inspect.cleandoc(model.__doc__)
            if not doc.startswith("Strict"):
                out += [doc, ""]
        out += ["| key | accepts | default | meaning |", "|---|---|---|---|"]
        for key, accepts, default, meaning in schema_rows(model, prefix, blocks):
            out.append(f"| `{key}` | {cell(accepts)} | {cell(default)} | {cell(meaning)} |")
        out.append("")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------
# the command line, from the parser

def option_row(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest}`"
    if action.nargs == 0:
        arg = ""
    elif action.choices:
        arg = " \\| ".join(f"`{c}`" for c in action.choices)
    else:
        arg = f"`{action.metavar or action.dest.upper()}`"
    if action.nargs in ("+", "*") or isinstance(action, argparse._AppendAction):
        arg += " (repeatable)" if isinstance(action, argparse._AppendAction) else " (one or more)"
    default = ""
    if action.default is not None and action.default is not False and action.default != argparse.SUPPRESS \
            and action.nargs != 0:
        default = code(action.default)
    required = "required" if action.required else ""
    help_text = formatter._expand_help(action) if action.help else ""
    return f"| {names} | {arg} | {cell(default)} | {required} | {cell(help_text)} |"


def cli_page() -> str:
    from promo_assets.cli.main import build_parser

    parser = build_parser()
    formatter = parser._get_formatter()
    out = [
        "# Command line reference",
        "",
        "Generated from `promo`'s argument parser (`promo_assets.cli.main.build_parser()`), so it lists exactly",
        "what `promo --help` and `promo COMMAND --help` accept. Where the commands fit in a day's work:",
        "[Getting started](../getting-started.md). The path options `--landing`, `--warehouse` and",
        "`--dagster-home` override, for one command, the environment variables of",
        "[Settings](../settings.md) (`PROMO_LANDING_DIR`, `PROMO_WAREHOUSE`, `DAGSTER_HOME`).",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
    ]
    if parser.description:
        out += [parser.description, ""]
    top = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    if top:
        out += ["| option | argument | default | required | what it does |", "|---|---|---|---|---|"]
        out += [option_row(a, formatter) for a in top] + [""]
    if parser.epilog:  # the exit codes; every command's --help repeats them, this page shows them once
        out += ["```text", parser.epilog.strip(), "```", ""]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    for name, sp in sub.choices.items():
        out += [f"## `promo {name}`", ""]
        if helps.get(name):
            out += [helps[name][0].upper() + helps[name][1:] + ".", ""]
        if sp.description and sp.description != helps.get(name):
            out += [sp.description, ""]
        out += ["```text", sp.format_usage().strip(), "```", ""]
        sp_formatter = sp._get_formatter()
        actions = [a for a in sp._actions if not isinstance(a, argparse._HelpAction)]
        if actions:
            out += ["| option | argument | default | required | what it does |", "|---|---|---|---|---|"]
            out += [option_row(a, sp_formatter) for a in actions] + [""]
        epilog = (sp.epilog or "").replace(parser.epilog or "\0", "").strip()
        if epilog:
            out += ["```text", epilog, "```", ""]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------
# the models, from the registry

def models_page() -> str:
    from promo_assets.models import registry

    out = [
        "# Model reference",
        "",
        "Generated from the model registry (`promo_assets.models.registry`): every registered model, the paper it",
        "implements, the campaigns it applies to, its assets and its hyper-parameters with their defaults",
        "(set them per campaign in [campaign.yaml](campaign-yaml.md) `models.params.<model>`). Which model to",
        "pick, and what each one assumes: [Models](../models.md).",
        "",
        "| model | what it is | applies to | trained by default |",
        "|---|---|---|---|",
    ]
    models = registry.models()
    for m in models:
        out.append(f"| [`{m.name}`](#{m.name}) | {cell(m.title)} | {cell(m.applies)} "
                   f"| {'yes' if m.default else 'no'} |")
    out.append("")
    for m in models:
        phases = ["model"] if len(m.phases) == 1 else list(m.phases)
        k = ("" if m.default else "optional/") + m.name  # the chains off by default: optional/<model>/...
        assets = " → ".join(f"`{k}/{p}`" for p in phases) + (
            f" → `{k}/response_coefficients` → `{k}/budget_dual` → `{k}/allocation` → `{k}/policy_evaluation`")
        out += [f"## {m.name}", "", f"**{m.title}**", ""]
        doc = inspect.getdoc(m)
        if doc and doc != inspect.getdoc(m.__mro__[1]):
            out += [doc, ""]
        out += [
            f"- **Source:** {m.source}",
            f"- **Applies to:** {m.applies}",
            f"- **Response types:** {', '.join(m.kinds) if not isinstance(m.kinds, str) else m.kinds}",
            f"- **Needs the customer–merchant graph:** {'yes' if m.needs_graph else 'no'}",
            f"- **Trained by default:** {'yes' if m.default else 'no (list it in campaign.yaml `models.include`)'}",
            f"- **Assets:** {assets}",
            "",
        ]
        defaults = m.defaults()
        if defaults:
            out += [f"Constructor: `{m.__name__}(**params)`; campaign.yaml's `models.params.{m.name}` gives its "
                    "arguments.", "",
                    "| hyper-parameter | default |", "|---|---|"]
            out += [f"| `{k}` | {cell(code(repr(v)))} |" for k, v in defaults.items()]
        else:
            out.append("No hyper-parameters.")
        out.append("")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------
# benchmark results, from benchmarks/results/*.json

def figure(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        return code(json.dumps(value))
    return str(value)


def benchmarks_page() -> str:
    from _results import RESULTS, load_results

    results = load_results(RESULTS)
    scripts = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))
    recorded = {r["benchmark"] for r in results}
    out = [
        "# Benchmark results",
        "",
        "Generated from the result files in `benchmarks/results/`: each benchmark script writes what it measured",
        "there as JSON (`benchmarks/_results.py`), with the command, the commit, the date and the machine's load.",
        "A figure in this documentation is one of these. Timings depend on the machine and its load, so each",
        "table says both; rerun the command to check on yours.",
        "",
        "| script | what it measures | latest result |",
        "|---|---|---|",
    ]
    for path in scripts:
        module = ast.parse(path.read_text())
        doc = ast.get_docstring(module)
        if not doc:
            raise SystemExit(f"docs: {path.relative_to(ROOT)} has no module docstring saying what it measures")
        first = doc.split("\n\n")[0]
        mine = [r for r in results if r["benchmark"] == path.stem]
        latest = ", ".join(f"[{r['date'][:10]}](#{anchor(r)})" for r in mine) if mine else "not recorded yet"
        out.append(f"| `benchmarks/{path.name}` | {cell(first)} | {latest} |")
    out.append("")
    stray = sorted(recorded - {p.stem for p in scripts})
    if stray:
        raise SystemExit(f"docs: benchmarks/results has results of no script: {', '.join(stray)}")
    for r in results:
        title = r["benchmark"] + (f" ({r['tag']})" if r.get("tag") else "")
        out += [f"## {title} {{#{anchor(r)}}}", ""]
        if r.get("headline"):
            out += ["| figure | value |", "|---|---|"]
            out += [f"| {cell(k)} | {cell(figure(v))} |" for k, v in r["headline"].items()] + [""]
        load = f"{r['load_start'][0]:.2f} at the start, {r['load_end'][0]:.2f} at the end (1-minute load average)"
        env = ", ".join(f"{k}={v}" for k, v in (r.get("env") or {}).items())
        commit = (r.get("git_commit") or "unknown")[:10] + (" (with uncommitted changes)" if r.get("modified_code") else "")
        out += [
            f"- **Command:** `{r['command']}`" + (f" with {env}" if env else ""),
            f"- **Commit:** `{commit}`; **date:** {r['date']}; **took:** {r['seconds']:.0f} s",
            f"- **Machine:** {r['cpu_count']} cores, load {load}",
            f"- **Every figure:** `benchmarks/results/{r['_file']}`",
            "",
        ]
    return "\n".join(out)


def anchor(result: dict) -> str:
    return "result-" + result["_file"].removesuffix(".json").replace("_", "-").replace("--", "-")


# ------------------------------------------------------------------------------------------------

PLACEHOLDERS = {
    "decisions.md": ("# The champion, the decision export and online decisions\n\n"
                     "This page is being written. Until then: [The champion and online decisions](champion.md).\n"),
    "operations.md": ("# Operations: trust boundaries\n\n"
                      "This page is being written. Until then: [Settings, recovery and retention](settings.md).\n"),
}


def main() -> None:
    pages = {
        "reference/campaign-yaml.md": campaign_yaml_page(),
        "reference/cli.md": cli_page(),
        "reference/models.md": models_page(),
        "benchmarks.md": benchmarks_page(),
    }
    docs = Path(__file__).resolve().parent
    pages |= {name: text for name, text in PLACEHOLDERS.items() if not (docs / name).exists()}
    for name, text in pages.items():
        with mkdocs_gen_files.open(name, "w") as fh:
            fh.write(text)


if __name__ in ("__main__", "<run_path>"):  # mkdocs-gen-files runs it with runpy.run_path
    main()

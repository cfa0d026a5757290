"""The documentation site (mkdocs.yml, docs/): the pages generated from the code cover all of it, and
the strict build passes, fails on a broken link, and references nothing on the network."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).with_name("mkdocs")
# the banner MkDocs' plugins print about a future MkDocs 2.0; not a warning of this site
QUIET = {"DISABLE_MKDOCS_2_WARNING": "true", "NO_MKDOCS_2_WARNING": "1"}


def missing(what: str):
    """Without the docs extra the docs tests skip, except in CI, which must build the docs."""
    message = f"{what} is not installed (bash scripts/setup.sh installs the docs extra)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def gen_pages():
    if importlib.util.find_spec("mkdocs_gen_files") is None:
        missing("mkdocs-gen-files")
    spec = importlib.util.spec_from_file_location("gen_pages", ROOT / "docs" / "gen_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def schema_keys(model, prefix=""):
    from promo_assets.config.campaign import _is_mapping, _submodel

    for name, info in model.model_fields.items():
        if name in getattr(model, "NOT_IN_FILE", ()):
            continue
        key = f"{prefix}{name}"
        yield key
        sub = _submodel(info.annotation)
        if sub is not None:
            yield from schema_keys(sub, f"{key}.<name>." if _is_mapping(info.annotation) else f"{key}.")


def test_campaign_yaml_reference_lists_every_schema_key_with_its_meaning():
    from promo_assets.config.campaign import CampaignConfig

    page = gen_pages().campaign_yaml_page()
    keys = list(schema_keys(CampaignConfig))
    assert len(keys) > 30
    for key in keys:
        row = next((line for line in page.splitlines() if line.startswith(f"| `{key}` |")), None)
        assert row, f"campaign.yaml key {key} missing from the reference"
        meaning = row.rstrip(" |").rsplit("|", 1)[1].strip()
        assert len(meaning) > 10, f"{key}: no meaning ({row})"


def test_a_schema_key_without_a_docstring_stops_the_build(monkeypatch):
    module = gen_pages()
    from promo_assets.config.campaign import CampaignConfig

    real = module.field_docs
    monkeypatch.setattr(module, "field_docs",
                        lambda cls: {k: v for k, v in real(cls).items() if not (cls is CampaignConfig and k == "ips_clip")})
    with pytest.raises(SystemExit, match="ips_clip"):
        module.campaign_yaml_page()


def test_cli_reference_lists_every_command_and_option():
    from promo_assets.cli.main import build_parser

    page = gen_pages().cli_page()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert len(sub.choices) >= 5
    for name, sp in sub.choices.items():
        assert f"## `promo {name}`" in page
        section = page.split(f"## `promo {name}`", 1)[1].split("\n## ", 1)[0]
        for action in sp._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}`" in section, f"promo {name} {option} missing from the CLI reference"
    assert "`--version`" in page


def test_model_reference_lists_every_model_and_hyper_parameter():
    from promo_assets.models import registry

    page = gen_pages().models_page()
    for model in registry.models():
        section = page.split(f"\n## {model.name}\n", 1)[1].split("\n## ", 1)[0]
        assert model.source in section and model.applies in section
        for key, default in model.defaults().items():
            assert f"| `{key}` |" in section and repr(default).replace("|", "\\|") in section, (model.name, key)


def test_benchmarks_page_has_a_table_per_result_file():
    module = gen_pages()
    page = module.benchmarks_page()
    results = sorted((ROOT / "benchmarks" / "results").glob("*.json"))
    for path in results:
        assert f"`benchmarks/results/{path.name}`" in page
    for script in (ROOT / "benchmarks").glob("[a-z]*.py"):
        assert f"`benchmarks/{script.name}`" in page


def mkdocs_build(config_dir: Path, site: Path) -> subprocess.CompletedProcess:
    if not MKDOCS.exists():
        missing("mkdocs")
    return subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(site)], cwd=config_dir,
                          capture_output=True, text=True, timeout=600, env={**os.environ, **QUIET})


@pytest.mark.slow
def test_docs_build_strict_and_offline(tmp_path):
    """`mkdocs build --strict` passes, and the built site loads nothing from the network: no web
    fonts, no scripts or style sheets from a CDN."""
    proc = mkdocs_build(ROOT, tmp_path / "site")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    log = proc.stdout + proc.stderr
    assert "WARNING -" not in log, log[-3000:]
    remote = re.compile(r"""(<(?:script|link|img|iframe)[^>]*(?:src|href)=["'](?:https?:)?//)|(@import\s+url\(["']?https?:)""")
    offenders = []
    for page in (tmp_path / "site").rglob("*"):
        if page.suffix in (".html", ".css") and remote.search(page.read_text(errors="replace")):
            offenders.append(str(page.relative_to(tmp_path / "site")))
    assert not offenders, f"pages loading something from the network: {offenders[:10]}"
    for name in ("index.html", "reference/campaign-yaml.html", "reference/cli.html", "reference/models.html",
                 "benchmarks.html", "api.html"):
        assert (tmp_path / "site" / name).stat().st_size > 5000, name


@pytest.mark.slow
def test_docs_build_fails_on_a_broken_link_and_a_page_missing_from_the_nav(tmp_path):
    """The same build with a link to a page that does not exist and a page that the navigation
    leaves out fails, naming both."""
    work = tmp_path / "copy"
    work.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", work)
    shutil.copytree(ROOT / "docs", work / "docs")
    for name in ("promo_assets", "benchmarks"):  # what the generator and the API page read
        (work / name).symlink_to(ROOT / name)
    page = work / "docs" / "evaluation.md"
    page.write_text(page.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    (work / "docs" / "orphan.md").write_text("# A page nobody can reach\n")
    proc = mkdocs_build(work, tmp_path / "site")
    assert proc.returncode != 0
    log = proc.stdout + proc.stderr
    assert "contains a link 'no-such-page.md'" in log and "orphan.md" in log, log[-3000:]


ISSUE_NUMBER = re.compile(r"(?i)\bissues?\s*#?\d+|(?<![\w&/])#\d+\b")


def test_user_documentation_names_no_issue_numbers():
    """The README, the hand-written pages and the generated ones speak to users: no issue numbers."""
    module = gen_pages()
    texts = {"README.md": (ROOT / "README.md").read_text()}
    texts |= {f"docs/{p.name}": p.read_text() for p in (ROOT / "docs").glob("*.md")}
    texts |= {"campaign-yaml": module.campaign_yaml_page(), "cli": module.cli_page(), "models": module.models_page(),
              "benchmarks": module.benchmarks_page()}
    found = {name: ISSUE_NUMBER.findall(text) for name, text in texts.items()}
    assert not {k: v for k, v in found.items() if v}, found


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200 and max(len(line) for line in lines) <= 400
    # the two set-up commands come first
    assert lines[2] == "```bash" and lines[5] == "```", lines[:6]
    assert lines[3].startswith("bash scripts/demo.sh") and lines[4].startswith("bash scripts/test.sh")

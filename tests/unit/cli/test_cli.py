"""`promo`'s command line as a user meets it: --help that fits 100 columns and lists the exit codes and
every preset, the path options that override the environment, `promo models` and `promo report` as
terminal tables (`promo report` within 120 columns) and as CSV / JSON for machines."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

import promo_assets.cli.main as cli
from promo_assets.cli.main import main
from promo_assets.cli.format import plain, text_table, to_csv, to_json, wrap_lines
from promo_assets.models import registry
from promo_assets.simulation import REFERENCE_START

START = REFERENCE_START


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}


# --------------------------------------------------------------------------------------------
# --help


@pytest.mark.parametrize("columns", ["60", "100", "250"])
def test_every_help_fits_100_columns_and_shows_the_exit_codes(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    parser = cli.build_parser()
    helps = {"promo": parser.format_help()} | {f"promo {n}": p.format_help() for n, p in subparsers(parser).items()}
    assert set(helps) == {"promo", "promo simulate", "promo export", "promo run", "promo forget", "promo report",
                          "promo models"} | {f"promo {n}" for n in subparsers(parser)}
    for name, text in helps.items():
        wide = [line for line in text.splitlines() if len(line) > 100]
        assert not wide, f"{name} --help with COLUMNS={columns}: {wide}"
        assert "exit codes:" in text and "\n  2    bad usage" in text and "130  interrupted" in text, name


def test_simulate_help_lists_every_preset_from_the_registry(monkeypatch):
    from promo_assets import simulation

    extra = simulation.Preset("zz_test_preset", "a preset registered by this test only")
    monkeypatch.setitem(simulation.PRESETS, extra.name, extra)
    text = subparsers(cli.build_parser())["simulate"].format_help()
    for name, preset in simulation.PRESETS.items():
        line = next((ln for ln in text.splitlines() if ln.startswith(f"  {name} ")), None)
        assert line, f"preset {name} not listed"
        assert " ".join(preset.description.split())[:20] in " ".join(text.split())
    assert "dfcl_discount" in text and "uplift_two_arm" in text and "zz_test_preset" in text


def test_path_options_on_every_command_that_uses_them():
    commands = subparsers(cli.build_parser())
    paths = {"--landing", "--warehouse", "--dagster-home"}
    expected = {"simulate": {"--landing"}, "export": {"--landing", "--warehouse"}, "run": paths, "forget": paths,
                "report": paths, "models": set()}
    for name, wanted in expected.items():
        assert options(commands[name]) & paths == wanted, name


# --------------------------------------------------------------------------------------------
# the path options override the environment


@pytest.fixture
def elsewhere(promo_env, tmp_path):
    """promo_env's folders are the environment's; the options point at these instead."""
    other = {"landing": tmp_path / "other_landing", "warehouse": tmp_path / "other" / "w.duckdb",
             "dagster_home": tmp_path / "other_home"}
    other["landing"].mkdir()
    return other


def test_landing_option_overrides_the_environment(promo_env, elsewhere, capsys):
    assert main(["simulate", "--landing", str(elsewhere["landing"]), "--users", "50", "--days", "2",
                 "--start", START.isoformat()]) == 0
    assert (elsewhere["landing"] / "demo" / "campaign.yaml").is_file()
    assert not (promo_env["landing"] / "demo").exists()
    # `promo run` reads the landing folder of the option, not of PROMO_LANDING_DIR (which is empty)
    capsys.readouterr()
    empty = elsewhere["landing"].parent / "empty"
    empty.mkdir()
    assert main(["run", "--landing", str(empty), "--no-progress"]) == 2
    assert f"no campaigns under {empty}" in capsys.readouterr().err


def test_warehouse_and_dagster_home_options_override_the_environment(promo_env, elsewhere, capsys):
    missing = elsewhere["warehouse"]
    assert main(["report", "--warehouse", str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err
    assert main(["forget", "--campaign", "demo", "--day", START.isoformat(), "--warehouse", str(missing),
                 "--dagster-home", str(elsewhere["dagster_home"])]) == 2
    assert f"no warehouse at {missing}" in capsys.readouterr().err
    assert os.environ["DAGSTER_HOME"] == str(elsewhere["dagster_home"])  # what the in-process runs open


def test_export_reads_the_landing_folder_and_warehouse_of_the_options(promo_env, elsewhere, capsys):
    assert main(["export", "--campaign", "demo", "--landing", str(elsewhere["landing"])]) == 2
    assert f"{elsewhere['landing'] / 'demo' / 'campaign.yaml'}: campaign.yaml not found" in capsys.readouterr().err
    assert main(["simulate", "--landing", str(elsewhere["landing"]), "--users", "50", "--days", "2",
                 "--start", REFERENCE_START.isoformat()]) == 0
    assert main(["export", "--campaign", "demo", "--landing", str(elsewhere["landing"]),
                 "--warehouse", str(elsewhere["warehouse"])]) == 2
    assert f"warehouse {elsewhere['warehouse']} does not exist yet" in capsys.readouterr().err


def test_relative_path_options_are_made_absolute(promo_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(["report", "--warehouse", "w.duckdb", "--landing", "land"])
    cli._apply_path_options(args)
    assert os.environ["PROMO_WAREHOUSE"] == str(tmp_path / "w.duckdb")
    assert os.environ["PROMO_LANDING_DIR"] == str(tmp_path / "land")
    assert os.environ["DAGSTER_HOME"] == str(promo_env["dagster_home"])  # not given: unchanged


# --------------------------------------------------------------------------------------------
# promo models


@pytest.mark.parametrize("columns", [80, 100])
def test_models_table_fits_the_terminal_and_lists_every_model(capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "|" not in out.splitlines()[0] and out.splitlines()[0].split() == ["model", "default", "applies", "to",
                                                                              "what", "it", "is"]
    assert max(len(line) for line in out.splitlines()) <= columns
    firsts = [line.split()[0] for line in out.splitlines()[2:] if line[:1] not in (" ", "")]
    assert firsts[:len(registry.names())] == list(registry.names())


def test_models_markdown_csv_and_json(capsys):
    assert main(["models", "--format", "markdown"]) == 0
    assert capsys.readouterr().out == registry.table_markdown()
    assert main(["models", "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["model"] for r in records] == list(registry.names())
    tuned = next(r for r in records if registry.get(r["model"]).defaults())
    assert tuned["params"] == plain(registry.get(tuned["model"]).defaults()) and tuned["params"]
    dipn = next(r for r in records if r["model"] == "dipn")
    assert dipn["assets"][-1] == "dipn/policy_evaluation" and dipn["default"] is True
    assert main(["models", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["model"] for r in rows] == list(registry.names())
    assert json.loads(rows[0]["params"]) == records[0]["params"]


# --------------------------------------------------------------------------------------------
# the formatting helpers


def test_text_table_wraps_the_named_columns_to_fit():
    rows = [("a", "1.0", "word " * 30), ("bb", "22.5", "short")]
    lines = text_table(["name", "value", "note"], rows, width=40, wrap=["note"], right=["value"])
    assert max(len(line) for line in lines) <= 40 and len(lines) > 4
    assert lines[2].startswith("a       1.0  word") and lines[-1].startswith("bb     22.5  short")
    unbounded = text_table(["name", "value", "note"], rows)
    assert len(unbounded) == 4 and len(unbounded[2]) > 100


def test_wrap_lines_indents_continuations():
    out = wrap_lines(["   why: " + "reason " * 30, "short"], 50)
    assert all(len(line) <= 50 for line in out) and out[1].startswith("     ") and out[-1] == "short"


def test_json_and_csv_carry_missing_values_and_numpy_scalars():
    import numpy as np

    data = [{"a": np.float64("nan"), "b": np.int64(3), "c": [1.5, None], "d": dt.date(2026, 3, 1)}]
    assert json.loads(to_json(data)) == [{"a": None, "b": 3, "c": [1.5, None], "d": "2026-03-01"}]
    assert plain(dt.datetime(2026, 3, 1, 12, 30)) == "2026-03-01T12:30:00"
    assert to_csv(data) == 'a,b,c,d\n,3,"[1.5, null]",2026-03-01\n'


# --------------------------------------------------------------------------------------------
# promo report on a tiny simulated campaign, run through the path options


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """A 3-day, 300-user demo campaign with one model, run with --landing / --warehouse /
    --dagster-home while the environment points elsewhere."""
    tmp = tmp_path_factory.mktemp("cli_report")
    paths = {"landing": tmp / "landing", "warehouse": tmp / "w.duckdb", "dagster_home": tmp / "home"}
    paths["dagster_home"].mkdir()
    shutil.copy(Path(__file__).resolve().parents[3] / "dagster_home" / "dagster.yaml", paths["dagster_home"])
    with pytest.MonkeyPatch.context() as mp:
        for var in ("PROMO_LANDING_DIR", "PROMO_WAREHOUSE", "DAGSTER_HOME"):
            mp.setenv(var, str(tmp / "not_here" / var))
        mp.setenv("PROMO_ARTIFACTS_DIR", str(tmp / "artifacts"))
        mp.setenv("PROMO_OUTBOX_DIR", str(tmp / "outbox"))
        mp.setenv("PROMO_MAX_EPOCHS", "2")
        flags = ["--landing", str(paths["landing"]), "--warehouse", str(paths["warehouse"]),
                 "--dagster-home", str(paths["dagster_home"])]
        assert main(["simulate", "--landing", str(paths["landing"]), "--users", "300", "--days", "3",
                     "--seed", "1", "--start", START.isoformat()]) == 0
        config = paths["landing"] / "demo" / "campaign.yaml"
        raw = yaml.safe_load(config.read_text())
        raw["models"] = {"include": ["lgbm_s"]}
        config.write_text(yaml.safe_dump(raw))
        assert main(["run", "--no-progress", *flags]) == 0
        yield {**paths, "flags": flags, "tmp": tmp}
        assert not (tmp / "not_here").exists()


@pytest.mark.slow
def test_report_fits_120_columns_by_default_and_wide_shows_every_column(reported, capsys):
    assert main(["report", *reported["flags"]]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 120, lines
    assert lines[1].startswith("   status: last data day ")  # the monitoring status comes first
    assert any(ln.startswith("   deploy: lgbm_s at budget") for ln in lines) and any(ln.startswith("   why: ") for ln in lines)
    deploy = next(i for i, ln in enumerate(lines) if ln.startswith("   deploy: "))
    chosen = next(i for i, ln in enumerate(lines) if ln.startswith("   chosen on: "))  # what decided, after the headline
    assert chosen > deploy and lines[chosen].startswith("   chosen on: the decision loss on ")
    assert " — " not in " ".join(lines[deploy:chosen])  # one model: no other to compare with, no verdict
    header = next(line for line in lines if line.startswith("budget"))
    assert header.split() == ["budget", "rank", "model", "%", "oracle", "DR", "value", "[95%", "CI]", "spend",
                              "ratio", "vs", "random", "note"]
    rows = [line for line in lines if line.split()[2:3] in (["lgbm_s"], ["random"])]
    assert len(rows) == 2 * 3  # two policies at the three budgets of the demo's campaign.yaml
    for row in rows:
        assert re.search(r"\d\.\d{4} \[-?\d\.\d{4}, \d\.\d{4}\]", row), row
        assert (" pt" in row) == (row.split()[2] == "lgbm_s"), row
    assert main(["report", "--wide", *reported["flags"]]) == 0
    wide = capsys.readouterr().out
    assert max(len(line) for line in wide.splitlines()) > 120
    for column in ("matched value", "DR Q", "EOM value", "true value", "oracle", "version"):
        assert column in wide


@pytest.mark.slow
def test_report_csv_and_json(reported, capsys):
    assert main(["report", "--format", "json", *reported["flags"]]) == 0
    data = json.loads(capsys.readouterr().out)
    (campaign,) = data["campaigns"]
    assert campaign["campaign"] == "demo" and campaign["champion"]["champion"]
    (run,) = campaign["runs"]
    board = run["leaderboard"]
    assert {r["model"] for r in board} == {"lgbm_s", "random"}
    for r in board:
        assert r["ranked_by"] == "pct_oracle" and isinstance(r["pct_oracle"], float)
        if r["model"] == "random":
            assert r["vs_random"] is None
        else:
            same = next(x for x in board if x["model"] == "random" and x["budget_per_capita"] == r["budget_per_capita"])
            assert r["vs_random"] == pytest.approx(r["pct_oracle"] - same["pct_oracle"])
            assert r["rank"] in (1, 2)
    assert main(["report", "--format", "csv", *reported["flags"]]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == len(board) and rows[0]["run_id"] == run["run_id"] and rows[0]["campaign"] == "demo"
    assert float(rows[0]["pct_oracle"]) == pytest.approx(board[0]["pct_oracle"])


@pytest.mark.slow
def test_report_machine_formats_say_when_a_campaign_has_no_run(reported, capsys):
    assert main(["report", "--format", "json", "--campaign", "nothing", *reported["flags"]]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"campaigns": []} and "'nothing'" in captured.err

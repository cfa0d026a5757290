"""The landing folder as a trust boundary: nothing in it hangs a run or reaches outside it, a bad
campaign.yaml stops its own campaign only, the warehouse file's faults are one clear line.

`error-*` cases are refused (skipped by name, CampaignConfigError, exit code) with a message naming the
file and the rule, within seconds; `accepted-*` cases are documented behaviour (docs/operations.md).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from promo_assets.core import files
from promo_assets.config.campaign import (
    MAX_LEVELS, YAML_MAX_ALIASES, YAML_MAX_BYTES, YAML_MAX_DEPTH, CampaignConfig, CampaignConfigError,
)
from promo_assets.cli.main import main
from promo_assets.ingestion import IngestError, discover_campaigns, ingest_events_day, load_config, scan_day_files
from tests.unit.ingestion.test_hostile_dates import DAY1, DAY2, rct_days, write_day
from tests.unit.ingestion.test_ingestion import good_frame, write_campaign

SECRET = "TOPSECRET-OUTSIDE-THE-LANDING-FOLDER"
GOOD_YAML = "treatments:\n  levels: [0, 1, 2, 5]\ncost: redeemed\nresponse: binary\nbudget_per_capita: [1.0]\n"

# The billion-laughs bomb of the issue: 9 aliases of 9 ... of 'lol' = 9^9 values once expanded.
def _bomb(indent: str) -> str:
    lines = [f'{indent}a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"{indent}{n}: &{n} [{', '.join([f'*{p}'] * 9)}]" for p, n in zip("abcdefgh", "bcdefghi")]
    return "\n".join(lines) + "\n"


BOMBS = {
    "error-alias-bomb-under-a-typed-key": "simulation:\n" + _bomb("  ") + "treatments:\n  levels: *i\n",
    "error-alias-bomb-under-an-unknown-key": GOOD_YAML + "zz:\n" + _bomb("  ") + "zzz: *i\n",
}
# (id, campaign.yaml text, words the message must contain)
HOSTILE_YAML = [
    *[(k, v, ["aliases (*name) expand to more than 100,000 values"]) for k, v in BOMBS.items()],
    ("error-10000-deep-nested-list", "treatments:\n  levels: " + "[" * 10_000 + "]" * 10_000 + "\n",
     [f"nested more than {YAML_MAX_DEPTH} deep (line 2)"]),
    ("error-10000-levels", "treatments:\n  levels: [" + ", ".join(map(str, range(10_000))) + "]\nbudget_per_capita: 1\n",
     ["'treatments.levels'", f"at most {MAX_LEVELS} items", "not 10000", "square of the number of levels"]),
    ("error-10000-arms", "treatments:\n  arms: {" + ", ".join(f"a{i}: {i}" for i in range(10_000)) + "}\n",
     ["'treatments.arms'", f"at most {MAX_LEVELS} items"]),
    ("error-alias-cycle", "treatments: &t\n  levels: [0, 1]\n  again: *t\n", ["refers to the structure that contains it"]),
    ("error-too-many-aliases", "x: &x 1\nl: [" + ", ".join(["*x"] * (YAML_MAX_ALIASES + 1)) + "]\n",
     [f"more than {YAML_MAX_ALIASES} YAML aliases"]),
    ("error-yaml-larger-than-the-limit", GOOD_YAML + "#" + "x" * YAML_MAX_BYTES + "\n",
     [f"larger than {YAML_MAX_BYTES:,} bytes"]),
    ("error-merchant-truth-outside-the-folder", GOOD_YAML + "merchants:\n  treatments:\n    levels: [0, 1]\n"
     "  truth: ../../etc/passwd\n", ["'merchants.truth'", "stay inside it"]),
    ("error-latin-1-campaign-yaml", "treatments:\n  levels: [0, 1]\n# caf\xe9\n".encode("latin-1"),
     ["cannot be read as UTF-8", "save campaign.yaml as UTF-8"]),
]


def write_yaml(folder: Path, text: str | bytes) -> Path:
    path = folder / "campaign.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.hostile
@pytest.mark.parametrize("text, words", [(t, w) for _, t, w in HOSTILE_YAML], ids=[i for i, _, _ in HOSTILE_YAML])
def test_hostile_campaign_yaml_is_refused_within_seconds(tmp_path, text, words):
    folder = tmp_path / "c1"
    folder.mkdir()
    path = write_yaml(folder, text)
    start = time.perf_counter()
    with pytest.raises(CampaignConfigError) as err:
        CampaignConfig.load(path)
    seconds = time.perf_counter() - start
    message = str(err.value)
    assert seconds < 10, f"took {seconds:.1f} s"
    assert message.startswith(str(path)) and len(message) < 2000, message[:3000]
    for w in words:
        assert w in message, message
    assert "lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol" not in message  # nothing expanded


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["accepted-a-few-aliases"])
def test_a_few_aliases_are_fine(tmp_path, case):
    folder = tmp_path / "c1"
    folder.mkdir()
    config = CampaignConfig.load(write_yaml(folder, "treatments:\n  levels: &l [0, 1, 2]\nbudget_per_capita: [1.0]\n"
                                                    "simulation: {levels: *l, again: *l}\n"))
    assert config.incentives == (0.0, 1.0, 2.0) and config.simulation["again"] == [0, 1, 2]


# ------------------------------------------------------------------------------------------------
# links and special files


@pytest.fixture
def outside(tmp_path) -> Path:
    """A CSV outside the landing folder, shaped like a day file, with a secret in its values."""
    path = tmp_path / "outside" / "secret.csv"
    path.parent.mkdir()
    frame = good_frame(seed=5)
    frame["city"] = SECRET
    frame.to_csv(path, index=False)
    return path


def stored_text(promo_env) -> str:
    if not promo_env["warehouse"].exists():
        return ""
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        return "".join(con.execute(f"SELECT * FROM {t}").df().to_csv() for t in ("rct_events", "rejected_events", "ingest_log"))


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-day-file-linked-outside", "error-day-file-linked-inside",
                                  "error-events-folder-linked-outside"])
def test_links_in_the_landing_folder_are_not_followed(promo_env, capfd, outside, case):
    folder = write_campaign(promo_env["landing"], "c1")
    write_day(folder, f"{DAY1}.parquet")
    if case == "error-day-file-linked-outside":
        link, target = folder / "events" / f"{DAY2}.csv", outside
    elif case == "error-day-file-linked-inside":  # links are refused altogether, even to a landing file
        shutil.copy(outside, folder / "copy.csv")
        link, target = folder / "events" / f"{DAY2}.csv", folder / "copy.csv"
    else:
        other = write_campaign(promo_env["landing"], "c2")
        shutil.copy(outside, outside.parent / f"{DAY2}.csv")
        (other / "events").rmdir()
        link, target = other / "events", outside.parent
    link.symlink_to(target)
    assert main(["run", "--ingest-only", "--no-progress"]) == 0
    err = capfd.readouterr().err
    assert f"skipped {link}: " in err and "symbolic link (links are not followed" in err, err
    assert SECRET not in err and SECRET not in stored_text(promo_env)
    assert ("c1", DAY1) in rct_days(promo_env) and ("c1", DAY2) not in rct_days(promo_env)


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-loaded-events-folder-replaced-by-a-link"])
def test_an_events_folder_replaced_by_a_link_forgets_nothing(promo_env, capfd, tmp_path, case):
    folder = write_campaign(promo_env["landing"], "c1")
    write_day(folder, f"{DAY1}.parquet")
    assert main(["run", "--ingest-only", "--no-progress"]) == 0
    moved = tmp_path / "elsewhere"
    (folder / "events").rename(moved)
    (folder / "events").symlink_to(moved)
    capfd.readouterr()
    assert main(["run", "--ingest-only", "--no-progress"]) == 0
    err = capfd.readouterr().err
    assert f"c1: skipped {folder / 'events'}: a symbolic link" in err and "forgot" not in err
    assert rct_days(promo_env) == [("c1", DAY1)]  # unreadable is not gone: the loaded day stays


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-campaign-yaml-linked-to-a-system-file", "error-campaign-folder-linked"])
def test_a_linked_campaign_yaml_or_folder_is_refused_without_echoing_it(promo_env, capfd, tmp_path, case, caplog):
    secret = tmp_path / "system-file"
    secret.write_text(f"root:{SECRET}:0:0\nsecond line\n")
    good = write_campaign(promo_env["landing"], "good")
    write_day(good, f"{DAY1}.parquet")
    if case == "error-campaign-yaml-linked-to-a-system-file":
        bad = write_campaign(promo_env["landing"], "zbad")
        (bad / "campaign.yaml").unlink()
        (bad / "campaign.yaml").symlink_to(secret)
        with pytest.raises(CampaignConfigError, match="campaign.yaml: a symbolic link") as err:
            load_config(promo_env["landing"], "zbad")
        assert SECRET not in str(err.value)
    else:
        elsewhere = write_campaign(tmp_path, "zbad")
        (promo_env["landing"] / "zbad").symlink_to(elsewhere)
        assert discover_campaigns(promo_env["landing"]) == ["good"]
        assert "zbad: skipped: a symbolic link" in caplog.text
    code = main(["run", "--ingest-only", "--no-progress"])
    err = capfd.readouterr().err
    assert SECRET not in err and "Traceback" not in err
    assert rct_days(promo_env) == [("good", DAY1)]  # the good campaign ran
    assert code == (2 if "yaml" in case else 0)


@pytest.mark.hostile
@pytest.mark.parametrize("kind, name", [("events", f"{DAY2}.csv"), ("events", f"{DAY2}.parquet"),
                                        ("population", f"{DAY1}.parquet"), ("events", "notes.txt")],
                         ids=["error-fifo-csv-day-file", "error-fifo-parquet-day-file", "error-fifo-population-file",
                              "error-fifo-other-name"])
def test_a_fifo_is_refused_by_name_without_opening_it(promo_env, capfd, kind, name):
    folder = write_campaign(promo_env["landing"], "c1")
    write_day(folder, f"{DAY1}.parquet")
    (folder / kind).mkdir(exist_ok=True)
    fifo = folder / kind / name
    os.mkfifo(fifo)  # nobody ever writes to it: opening it for reading would block forever
    start = time.perf_counter()
    scan = scan_day_files(promo_env["landing"], "c1", kind)
    assert time.perf_counter() - start < 10
    assert [(s.path, s.reason) for s in scan.skipped] == [
        (fifo, "a named pipe (FIFO), not a regular file; refused without opening it")]
    with pytest.raises(IngestError, match="named pipe"):  # and refused at read time too, still unopened
        with duckdb.connect() as con:
            ingest_events_day(con, load_config(promo_env["landing"], "c1"), dt.date(2026, 3, 2), fifo)
    assert main(["run", "--ingest-only", "--no-progress"]) == 0
    err = capfd.readouterr().err
    assert f"c1: skipped {fifo}: a named pipe (FIFO)" in err
    assert rct_days(promo_env) == [("c1", DAY1)]


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-campaign-yaml-is-a-directory", "error-campaign-yaml-is-a-fifo"])
def test_campaign_yaml_that_is_no_file_is_named(promo_env, case):
    folder = promo_env["landing"] / "c1"
    (folder / "events").mkdir(parents=True)
    if case == "error-campaign-yaml-is-a-directory":
        (folder / "campaign.yaml").mkdir()
        expected = "campaign.yaml: a directory, not a file"
    else:
        os.mkfifo(folder / "campaign.yaml")
        expected = "campaign.yaml: a named pipe (FIFO), not a regular file; refused without opening it"
    assert discover_campaigns(promo_env["landing"]) == ["c1"]
    start = time.perf_counter()
    with pytest.raises(CampaignConfigError) as err:
        load_config(promo_env["landing"], "c1")
    assert time.perf_counter() - start < 10
    assert str(err.value).startswith(f"{folder / 'campaign.yaml'}: ") and expected in str(err.value)
    assert "campaign.yaml/campaign.yaml" not in str(err.value)


def test_problem_names_links_above_the_file(tmp_path):
    (tmp_path / "c" / "real").mkdir(parents=True)
    (tmp_path / "c" / "real" / "f.csv").write_text("a\n1\n")
    (tmp_path / "c" / "events").symlink_to(tmp_path / "c" / "real")
    assert files.problem(tmp_path / "c" / "real" / "f.csv", tmp_path / "c") is None
    assert "events is a symbolic link" in files.problem(tmp_path / "c" / "events" / "f.csv", tmp_path / "c")
    assert "'..' in the path" in files.problem(tmp_path / "c" / ".." / "x", tmp_path / "c")


# ------------------------------------------------------------------------------------------------
# a bad campaign.yaml stops its own campaign only


@pytest.mark.hostile
@pytest.mark.parametrize("case", list(BOMBS) + ["error-10000-deep-nested-list"],
                         ids=[f"{c}-other-campaigns-run" for c in list(BOMBS) + ["error-10000-deep-nested-list"]])
def test_a_hostile_campaign_yaml_stops_its_campaign_only(promo_env, capfd, case):
    good = write_campaign(promo_env["landing"], "good")
    write_day(good, f"{DAY1}.parquet")
    bad = write_campaign(promo_env["landing"], "zbad")
    write_day(bad, f"{DAY1}.parquet")
    text = BOMBS.get(case) or dict((i, t) for i, t, _ in HOSTILE_YAML)[case]
    write_yaml(bad, text)
    start = time.perf_counter()
    assert main(["run", "--ingest-only", "--no-progress"]) == 2
    seconds = time.perf_counter() - start
    err = capfd.readouterr().err
    assert "promo run: campaign(s) zbad not run: " + str(bad / "campaign.yaml") in err
    assert "RecursionError" not in err and "Traceback" not in err and len(err) < 5000
    assert rct_days(promo_env) == [("good", DAY1)]
    assert seconds < 120  # the whole ingest-only run of the good campaign, Dagster start included


# ------------------------------------------------------------------------------------------------
# the cap on users x levels per solve


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-more-cells-than-one-solve-takes"])
def test_a_solve_larger_than_the_cap_is_refused_with_the_reason(monkeypatch, case):
    import numpy as np

    from promo_assets.allocation import SolveTooLargeError, solve
    from promo_assets.allocation.chunked import ArraySource, solve_chunked

    monkeypatch.setenv("PROMO_MAX_SOLVE_CELLS", "1000")
    v = np.random.default_rng(0).uniform(size=(500, 3))
    for run in (lambda: solve(v, v, 0.5, per_capita=True), lambda: solve_chunked(ArraySource(v, v), 0.5, per_capita=True)):
        with pytest.raises(SolveTooLargeError, match=r"500 users x 3 levels = 1,500 user-level cells is more than one "
                                                     r"solve takes \(PROMO_MAX_SOLVE_CELLS=1,000\)"):
            run()
    monkeypatch.setenv("PROMO_MAX_SOLVE_CELLS", "1500")
    assert solve(v, v, 0.5, per_capita=True).cost <= 0.5 * 500 + 1


# ------------------------------------------------------------------------------------------------
# the warehouse file


def damaged_warehouse(promo_env, case: str) -> Path:
    """A warehouse with one day loaded, then damaged as `case` says."""
    path = promo_env["warehouse"]
    if case == "directory":
        path.mkdir()
        return path
    from promo_assets.store import warehouse

    with warehouse.connect(path) as con:
        con.execute("CREATE TABLE filler AS SELECT range AS i, 'x' || range AS s FROM range(200000)")
    data = bytearray(path.read_bytes())
    if case == "truncated":
        path.write_bytes(bytes(data[:20000]))
    elif case == "checksum":
        for i in range(12288, len(data), 7):
            data[i] ^= 0x5A
        path.write_bytes(bytes(data))
    else:  # not a DuckDB file at all
        path.write_bytes(b"hello world\n" * 100)
    return path


@pytest.mark.hostile
@pytest.mark.parametrize("command", ["run", "report", "forget"])
@pytest.mark.parametrize("case", ["truncated", "checksum", "directory", "garbage"],
                         ids=["error-truncated-warehouse", "error-checksum-corrupt-warehouse",
                              "error-warehouse-is-a-directory", "error-warehouse-not-duckdb"])
def test_an_unusable_warehouse_is_one_clear_line(promo_env, capfd, case, command):
    folder = write_campaign(promo_env["landing"], "c1")
    write_day(folder, f"{DAY1}.parquet")
    path = damaged_warehouse(promo_env, case)
    argv = {"run": ["run", "--ingest-only", "--no-progress"], "report": ["report"],
            "forget": ["forget", "--campaign", "c1", "--day", DAY2]}[command]
    code = main(argv)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "_duckdb" not in err, err[-3000:]
    assert f"promo {command}: cannot use the warehouse {path}: " in err, err[-3000:]
    assert code == 1


def _can_mount_read_only(tmp_path) -> bool:
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount --bind {tmp_path} {tmp_path} && "
                            f"mount -o remount,bind,ro {tmp_path} && ! touch {tmp_path}/probe"],
                           capture_output=True, timeout=30) if shutil.which("unshare") else None
    return probe is not None and probe.returncode == 0


@pytest.mark.hostile
@pytest.mark.parametrize("command", ["run", "report"], ids=["error-read-only-mount-run", "error-read-only-mount-report"])
def test_a_warehouse_on_a_read_only_mount(promo_env, tmp_path, command):
    """On a real read-only mount (a user + mount namespace; skipped where the system forbids one)."""
    folder = write_campaign(promo_env["landing"], "c1")
    write_day(folder, f"{DAY1}.parquet")
    mount = tmp_path / "ro"
    mount.mkdir()
    if not _can_mount_read_only(mount):
        pytest.skip("unshare cannot make a read-only mount here (user namespaces not allowed)")
    env = {**os.environ, "PROMO_WAREHOUSE": str(mount / "warehouse.duckdb")}
    if command == "report":
        assert main(["run", "--ingest-only", "--no-progress"]) == 0
        shutil.copy(promo_env["warehouse"], mount / "warehouse.duckdb")
    args = "run --ingest-only --no-progress" if command == "run" else "report"
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount --bind {mount} {mount} && mount -o remount,bind,ro "
                           f"{mount} && exec {sys.executable} -m promo_assets.cli {args}"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    if command == "run":
        assert f"cannot use the warehouse {mount / 'warehouse.duckdb'}: Read-only file system" in proc.stderr, proc.stderr[-3000:]
        assert proc.returncode == 1
    else:  # reading works on a read-only mount
        assert proc.returncode == 2 and "no policy evaluation in" in proc.stderr, proc.stderr[-3000:]

"""The champion, the decisions and the outbox through the `promo` CLI: `promo run` writes them, `promo
export` writes the same from the stored decisions (and refuses clearly: a budget not configured, no
champion yet, an outbox that cannot be written, a kill during the write), and the propensities an
export writes come back through the next day's ingestion as the ones IPS and the evaluation use."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest

from promo_assets.causal.weights import ips_weights
from promo_assets.cli.main import main
from promo_assets.decisions import read_manifest, verify
from promo_assets.simulation import REFERENCE_START

START = REFERENCE_START
ROOT = Path(__file__).resolve().parents[2]


def _decide(paths):
    assert main(["simulate", "--preset", "demo", "--campaign", "demo", "--days", "3", "--users", "800", "--seed", "3",
                 "--start", START.isoformat()]) == 0
    with open(paths["landing"] / "demo" / "campaign.yaml", "a") as f:
        f.write("models:\n  include: [lgbm_s, lgbm_s_mono]\nexploration:\n  share: 0.2\n  seed: 4\n")
    assert main(["run", "--campaign", "demo", "--no-progress"]) == 0


@pytest.fixture
def decided(run_once, tmp_path, monkeypatch):
    """A small demo campaign (3 RCT days, two LightGBM models, exploration 0.2) through `promo run`:
    run once for the module, each test gets its own fresh copy of what the run left."""
    paths = run_once("decided", _decide).restore(monkeypatch)
    return {**paths, "tmp": tmp_path}


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


@pytest.mark.slow
def test_run_writes_champion_decisions_and_outbox_and_export_refuses_clearly(decided, capsys):
    day = (START + dt.timedelta(days=3)).isoformat()
    folder = decided["outbox"] / "demo" / day
    manifest = read_manifest(folder)
    assert verify(folder) == [] and manifest["campaign"] == "demo" and manifest["date"] == day
    assert [e["file"] for e in manifest["budgets"]] == [f"{b:g}.parquet" for b in sorted(e["budget_per_capita"]
                                                                                           for e in manifest["budgets"])]
    for entry in manifest["budgets"]:
        frame = pd.read_parquet(folder / entry["file"])
        assert len(frame) == 800 == entry["rows"] and frame["user_id"].is_unique
        assert frame["predicted_cost"].sum() <= entry["budget_per_capita"] * 800 + 8.0
        assert abs((frame["policy"] == "explore").mean() - 0.2) < 1e-9
        assert entry["exploration"]["share"] == pytest.approx(0.2)
        assert entry["expected_response"]["dr_low"] < entry["expected_response"]["dr_high"]
    assert main(["report", "--campaign", "demo"]) == 0
    lines = capsys.readouterr().out.splitlines()  # wrapped at 120 columns: a line may go on indented
    # the status block first (no decided day back yet), then what to deploy, the comparison it was chosen on, and why
    assert lines[1].startswith("   status: last data day 2026-03-03; decision for 2026-03-04 made ")
    assert "     outcomes: none yet (no decided day has come back)" in lines
    starts = [ln.split(":")[0].strip() for ln in lines if ln.startswith("   ") and not ln.startswith("    ")]
    assert starts[:5] == ["status", "deploy", "chosen on", "why", "truth (simulated)"]
    assert next(ln for ln in lines if ln.startswith("   deploy: ")).count("at budget") == 1

    # export: the same stored decisions, as CSV, elsewhere
    assert main(["export", "--campaign", "demo", "--format", "csv", "--out", str(decided["tmp"] / "csv")]) == 0
    out = capsys.readouterr().out
    csv_folder = decided["tmp"] / "csv" / "demo" / day
    assert verify(csv_folder) == [] and "checks: 15 of 15 passed" in out
    a = pd.read_csv(csv_folder / manifest["budgets"][0]["file"].replace(".parquet", ".csv"), dtype={"user_id": str})
    b = pd.read_parquet(folder / manifest["budgets"][0]["file"])
    assert a["level"].tolist() == b["level"].tolist() and np.allclose(a["propensity"], b["propensity"])

    # hostile 1: a budget that is not configured
    assert main(["export", "--campaign", "demo", "--budget", "9.99", "--out", str(decided["tmp"] / "x")]) == 2
    assert "budget 9.99 is not configured" in capsys.readouterr().err and _files(decided["tmp"] / "x") == []
    # hostile 2: a campaign with no champion yet (days loaded, nothing decided)
    assert main(["simulate", "--preset", "demo", "--campaign", "fresh", "--days", "2", "--users", "100",
                 "--start", START.isoformat()]) == 0
    assert main(["run", "--campaign", "fresh", "--ingest-only", "--no-progress"]) == 0
    assert main(["export", "--campaign", "fresh", "--out", str(decided["tmp"] / "x")]) == 2
    err = capsys.readouterr().err
    assert "no stored decisions yet and no champion" in err and "promo run --campaign fresh" in err
    assert _files(decided["tmp"] / "x") == []
    # hostile 3: an outbox that cannot be written (a file where the folder should be)
    blocker = decided["tmp"] / "blocker"
    blocker.write_text("a file")
    assert main(["export", "--campaign", "demo", "--out", str(blocker / "outbox")]) == 1
    assert "cannot write the outbox" in capsys.readouterr().err and blocker.read_text() == "a file"


KILLED_EXPORT = textwrap.dedent("""
    import sys, time
    import promo_assets.cli.main as cli
    from promo_assets.decisions import outbox
    real = outbox._write_frame
    def slow(frame, path, fmt):
        real(frame, path, fmt)
        print("WROTE", path.name, flush=True)
        for _ in range(600):  # short sleeps: a signal that lands on another thread is acted on within 0.1 s
            time.sleep(0.1)
    outbox._write_frame = slow
    sys.exit(cli.main(sys.argv[1:]))
""")


@pytest.mark.slow
def test_a_killed_export_leaves_nothing_half_written(decided):
    """`promo export` stopped after its first file: by SIGTERM it says 'interrupted', exits 130 and
    removes its temporary folder; by SIGKILL the date folder is simply not there (the temporary one
    is hidden and removed by the next export, which then succeeds)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = decided["tmp"] / "killed"
    day = (START + dt.timedelta(days=3)).isoformat()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc = subprocess.Popen([sys.executable, "-c", KILLED_EXPORT, "export", "--campaign", "demo", "--out", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert proc.stdout.readline().startswith("WROTE")
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
        assert not (out / "demo" / day).exists()
        hidden = [p.name for p in (out / "demo").iterdir()]
        if sig == signal.SIGTERM:
            assert code == 130 and "interrupted" in proc.stderr.read() and hidden == []
        else:
            assert code == -signal.SIGKILL and hidden and all(".tmp-" in h for h in hidden)
    assert main(["export", "--campaign", "demo", "--out", str(out)]) == 0
    assert [p.name for p in (out / "demo").iterdir()] == [day] and verify(out / "demo" / day) == []


@pytest.mark.slow
def test_exported_propensities_come_back_through_ingestion_and_are_the_ones_ips_uses(decided):
    """The simulated population answers the exported decision of one budget on the next day; after
    `promo run`, that day's events carry the exported propensities (source 'logged'), the training
    frame's IPS weights are computed from them, and the evaluation reads them (it is the holdout day)."""
    day = START + dt.timedelta(days=3)
    folder = decided["outbox"] / "demo" / day.isoformat()
    entry = read_manifest(folder)["budgets"][1]
    with open(decided["landing"] / "demo" / "campaign.yaml", "a") as f:  # the budget whose file is applied
        f.write(f"monitoring:\n  budget: {entry['budget_per_capita']:g}\n")
    exported = pd.read_parquet(folder / entry["file"]).set_index("user_id")
    assert main(["simulate", "--respond-to", str(folder / entry["file"]), "--day", day.isoformat(),
                 "--campaign", "demo"]) == 0
    assert main(["run", "--campaign", "demo", "--no-progress"]) == 0
    with duckdb.connect(str(decided["warehouse"]), read_only=True) as con:
        events = con.execute("SELECT e.user_id, e.level, e.propensity AS logged, p.propensity, p.source, t.split, "
                             "t.ips_weight FROM rct_events e JOIN propensity p USING (campaign, event_date, source_row) "
                             "JOIN training_frame t USING (campaign, event_date, source_row) "
                             "WHERE e.campaign = 'demo' AND e.event_date = ?", [day]).df()
        every = con.execute("SELECT p.propensity, t.ips_weight, e.event_date FROM rct_events e JOIN propensity p "
                            "USING (campaign, event_date, source_row) JOIN training_frame t "
                            "USING (campaign, event_date, source_row) WHERE e.campaign = 'demo' "
                            "ORDER BY e.event_date, e.source_row").df()
        evaluated = con.execute("SELECT DISTINCT n_users FROM policy_evaluation WHERE campaign = 'demo' "
                                "AND evaluated_at = (SELECT max(evaluated_at) FROM policy_evaluation)").fetchall()
    assert len(events) > 300
    want = exported.loc[events["user_id"], "propensity"].to_numpy()
    assert np.allclose(events["logged"], want) and np.allclose(events["propensity"], want)
    assert (events["source"] == "logged").all() and (events["split"] == "holdout").all()
    assert (exported.loc[events["user_id"], "level"].to_numpy() == events["level"].to_numpy()).all()
    assert np.allclose(every["ips_weight"], ips_weights(every["propensity"].to_numpy(), clip=20.0))
    assert evaluated == [(len(events),)]  # the evaluation ran on that day's events, with those propensities
    decided_again = read_manifest(decided["outbox"] / "demo" / (day + dt.timedelta(days=1)).isoformat())
    assert decided_again["date"] == (day + dt.timedelta(days=1)).isoformat()
    with duckdb.connect(str(decided["warehouse"]), read_only=True) as con:
        outcome = con.execute("SELECT * FROM outcomes WHERE campaign = 'demo' AND decision_date = ?", [day]).df()
        checks = con.execute("SELECT check_name, check_passed FROM monitoring_checks WHERE campaign = 'demo'").df()
    # the day's events were read as the outcome of the decision of the deployed budget
    assert list(outcome["status"]) == ["ok"] and outcome["joined_events"].iloc[0] == len(events)
    assert outcome["budget_per_capita"].iloc[0] == entry["budget_per_capita"]
    assert outcome["compliance_share"].iloc[0] == 1.0
    assert np.isfinite(outcome[["effect_estimate", "effect_se", "realized_response", "predicted_response"]].to_numpy()).all()
    assert set(checks["check_name"]) >= {"outcomes_joined", "realized_vs_predicted", "compliance", "freshness"}


def _answer(decided, day: dt.date, edit) -> pd.DataFrame:
    """Answer the exported decision of budget 1 for `day` after `edit` changed the file (what the coupon
    system did), then `promo run`; returns the edited decision."""
    folder = decided["outbox"] / "demo" / day.isoformat()
    entry = next(e for e in read_manifest(folder)["budgets"] if e["budget_per_capita"] == 1.0)
    frame = edit(pd.read_parquet(folder / entry["file"]))
    answered = decided["tmp"] / day.isoformat() / "1.parquet"  # a folder named by its date, as the outbox's
    answered.parent.mkdir()
    frame.to_parquet(answered)
    assert main(["simulate", "--respond-to", str(answered), "--day", day.isoformat(), "--campaign", "demo"]) == 0
    return frame


@pytest.mark.slow
def test_a_coupon_system_that_skips_decisions_fails_compliance_and_stops_the_export(decided, capsys):
    """30 % of the incentives were not given (the users got the cheapest level, the decision's propensity
    logged): the compliance check fails, its reaction stop_export keeps the next day's decision out of the
    outbox, and `promo report` opens with the status naming it."""
    with open(decided["landing"] / "demo" / "campaign.yaml", "a") as f:
        f.write("monitoring:\n  budget: 1.0\n  reactions:\n    compliance: stop_export\n")
    day = START + dt.timedelta(days=3)

    def skip(frame):
        given = frame["level"] > 0
        skipped = given & (np.arange(len(frame)) % 10 < 3)
        return frame.assign(level=np.where(skipped, 0, frame["level"]))

    _answer(decided, day, skip)
    assert main(["run", "--campaign", "demo", "--no-progress"]) == 0
    capsys.readouterr()
    with duckdb.connect(str(decided["warehouse"]), read_only=True) as con:
        outcome = con.execute("SELECT compliance_share, noncompliant_events FROM outcomes WHERE campaign = 'demo'").df()
        failed = con.execute("SELECT check_name, check_reaction FROM monitoring_checks WHERE campaign = 'demo' AND NOT "
                             "check_passed").fetchall()
    assert 0.6 < outcome["compliance_share"].iloc[0] < 0.8 and outcome["noncompliant_events"].iloc[0] > 50
    assert ("compliance", "stop_export") in failed
    assert not (decided["outbox"] / "demo" / (day + dt.timedelta(days=1)).isoformat()).exists()  # not exported
    assert (decided["outbox"] / "demo" / day.isoformat() / "manifest.json").exists()  # the last one stays
    assert main(["report", "--campaign", "demo"]) == 0
    out = capsys.readouterr().out
    assert "status: last data day" in out and "compliance (ERROR, reaction stop_export)" in out
    assert "measured: the champion brought" in out
    # the stop is one state, seen everywhere: the status block's first line, promo serve (the exported decision,
    # and /health says the export is stopped), the HTML report, the outbox asset's metadata
    flat = " ".join(out.split())  # the report wraps its lines
    status = flat[flat.index("status: last data day"):flat.index("realized vs predicted")]
    assert "EXPORT STOPPED since" in status and f"the newest for {day + dt.timedelta(days=1)}: compliance:" in status
    assert f"serving the decision for {day} made" in status
    served = _served(decided)
    assert served.decision_date == day
    assert served.freshness()["export"] == "stopped" and not served.freshness()["stale"]
    assert served.freshness()["newest_decision_date"] == (day + dt.timedelta(days=1)).isoformat()
    html = _html_report(decided)
    assert 'id="export-stopped"' in html and "EXPORT STOPPED since" in html and "Newest decisions (not exported" in html
    with dg.DagsterInstance.from_config(str(decided["dagster_home"])) as instance:
        shown = instance.get_latest_materialization_event(dg.AssetKey("outbox")).asset_materialization
    assert shown.metadata["export"].value.startswith("EXPORT STOPPED since")
    assert shown.metadata["newest_decision_date"].value == (day + dt.timedelta(days=1)).isoformat()
    # two days later, nothing run since: the exported decision has aged, judged at the time asked
    _age(decided, days=2)
    assert main(["report", "--campaign", "demo"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "freshness (as of now; WARN, reaction warn): the decision in force is 2.0 days old (maximum 2); EXPORT " \
           "STOPPED since" in out
    assert _served(decided).freshness()["stale"] and _served(decided).freshness()["export"] == "stopped"
    # promo export does not write a stopped decision unless asked to; then it is the decision in force
    assert main(["export", "--campaign", "demo"]) == 2
    assert "was stopped by monitoring (compliance:" in capsys.readouterr().err
    assert main(["export", "--campaign", "demo", "--despite-stop"]) == 0
    assert "deployed budget: 1" in capsys.readouterr().out
    assert _served(decided).freshness()["export"] == "exported"
    assert _served(decided).decision_date == day + dt.timedelta(days=1)


def _served(decided):
    """What `promo serve` serves for the demo campaign now (its registry, loaded from the warehouse)."""
    from promo_assets.serve.registry import Registry

    registry = Registry(decided["landing"], decided["warehouse"], ["demo"])
    assert registry.refresh(force=True)
    return registry.snapshot()["demo"]


def _html_report(decided) -> str:
    from promo_assets.config.campaign import CampaignConfig
    from promo_assets.report import gather, render
    from promo_assets.store import warehouse

    with warehouse.connect(decided["warehouse"], read_only=True) as con:
        return render(gather(con, decided["landing"], "demo", CampaignConfig.load(decided["landing"] / "demo")))


def _age(decided, days: int) -> None:
    """Every stored decision (and its export) made `days` days earlier than it was: time passing."""
    with duckdb.connect(str(decided["warehouse"])) as con:
        con.execute("UPDATE decision_budgets SET decided_at = decided_at - to_days(?) WHERE campaign = 'demo'", [days])
        con.execute("UPDATE decision_exports SET exported_at = exported_at - to_days(?) WHERE campaign = 'demo'", [days])


@pytest.mark.slow
@pytest.mark.hostile
@pytest.mark.parametrize("days", [3, 5], ids=["accepted-run-after-an-outage", "accepted-late-run"])
def test_freshness_judges_the_decision_the_run_makes(decided, capsys, days):
    """The last decision is `days` days old (an outage, or a late run), its day's events come back, and
    freshness stops the export: the run decides the next day at once, and freshness counts that decision
    (stored by the run, not yet exported), so the new decision is exported."""
    with open(decided["landing"] / "demo" / "campaign.yaml", "a") as f:
        f.write("monitoring:\n  budget: 1.0\n  reactions:\n    freshness: stop_export\n")
    _age(decided, days)
    day = START + dt.timedelta(days=3)
    _answer(decided, day, lambda frame: frame)
    assert main(["run", "--campaign", "demo", "--no-progress"]) == 0
    with duckdb.connect(str(decided["warehouse"]), read_only=True) as con:
        fresh = con.execute("SELECT check_passed, message FROM monitoring_checks WHERE campaign = 'demo' AND "
                            "check_name = 'freshness' ORDER BY checked_at DESC LIMIT 1").fetchone()
    assert fresh[0], fresh[1]
    assert fresh[1].startswith("the decision in force is 0.0")
    assert read_manifest(decided["outbox"] / "demo" / (day + dt.timedelta(days=1)).isoformat())["deployed_budget"] == 1.0
    assert main(["report", "--campaign", "demo"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"decision for {day + dt.timedelta(days=1)} made 0.0 h ago" in out and "EXPORT STOPPED" not in out


@pytest.mark.slow
@pytest.mark.hostile
def test_fallback_without_a_previous_champion_says_so_and_warns(decided, capsys):
    """compliance fails with reaction fallback on a campaign that has had one champion only: the check says
    there is none to fall back to and reacts as monitoring.fallback_without_previous says (default warn):
    the champion keeps deciding, the next decision is exported, and no fallback is announced."""
    with open(decided["landing"] / "demo" / "campaign.yaml", "a") as f:
        f.write("monitoring:\n  budget: 1.0\n  reactions:\n    compliance: fallback\n")
    day = START + dt.timedelta(days=3)
    _answer(decided, day, lambda frame: frame.assign(level=np.where((frame["level"] > 0)
                                                                   & (np.arange(len(frame)) % 10 < 3), 0, frame["level"])))
    assert main(["run", "--campaign", "demo", "--no-progress"]) == 0
    out = capsys.readouterr().out
    with duckdb.connect(str(decided["warehouse"]), read_only=True) as con:
        check = con.execute("SELECT check_passed, check_severity, check_reaction, message FROM monitoring_checks WHERE "
                            "campaign = 'demo' AND check_name = 'compliance' ORDER BY checked_at DESC LIMIT 1").fetchone()
    assert check[:3] == (False, "WARN", "warn")
    assert ("reaction fallback: the campaign has had no other champion to fall back to, so warn instead (campaign.yaml "
            "monitoring.fallback_without_previous); the champion keeps deciding") in check[3]
    assert "-> fallback" not in out
    assert (decided["outbox"] / "demo" / (day + dt.timedelta(days=1)).isoformat() / "manifest.json").exists()


@pytest.mark.slow
@pytest.mark.hostile
def test_events_whose_propensities_differ_from_the_decision_are_refused_with_the_reason(decided, capsys):
    """The coupon system logged other propensities than the decision's: the day is loaded for training but its
    outcome is refused, naming a user and both propensities; the outcomes_joined check fails and nothing else
    is mixed in."""
    with open(decided["landing"] / "demo" / "campaign.yaml", "a") as f:
        f.write("monitoring:\n  budget: 1.0\n")
    day = START + dt.timedelta(days=3)
    _answer(decided, day, lambda frame: frame.assign(propensity=np.where(np.arange(len(frame)) < 5, 0.5,
                                                                         frame["propensity"])))
    assert main(["run", "--campaign", "demo", "--no-progress"]) == 0
    with duckdb.connect(str(decided["warehouse"]), read_only=True) as con:
        outcome = con.execute("SELECT status, reason FROM outcomes WHERE campaign = 'demo'").df()
        failed = [r[0] for r in con.execute("SELECT check_name FROM monitoring_checks WHERE campaign = 'demo' AND "
                                            "NOT check_passed").fetchall()]
    assert list(outcome["status"]) == ["refused"]
    assert "log a propensity that differs from the decision's" in outcome["reason"].iloc[0]
    assert "logged 0.5" in outcome["reason"].iloc[0] and failed == ["outcomes_joined"]


@pytest.mark.slow
def test_deployed_days_join_the_champions_evidence_scored_by_the_versions_that_decided_them(decided):
    """Days 4 and 5 answered, each followed by `promo run`: the last champion compares on the holdout
    (day 5) and on deployed day 4, whose events carry the day-4 decision's propensities and each model's
    coefficients of the version that decided day 4 (the first run's), not the current version's."""
    from promo_assets.config.campaign import CampaignConfig
    from promo_assets.decisions.deployed import read_deployed_days
    from promo_assets.store import warehouse

    day4, day5 = START + dt.timedelta(days=3), START + dt.timedelta(days=4)
    with open(decided["landing"] / "demo" / "campaign.yaml", "a") as f:
        f.write("monitoring:\n  budget: 1.0\n")
    for day in (day4, day5):
        folder = decided["outbox"] / "demo" / day.isoformat()
        entry = next(e for e in read_manifest(folder)["budgets"] if e["budget_per_capita"] == 1.0)
        assert main(["simulate", "--respond-to", str(folder / entry["file"]), "--day", day.isoformat(),
                     "--campaign", "demo"]) == 0
        assert main(["run", "--campaign", "demo", "--no-progress"]) == 0
    config = CampaignConfig.load(decided["landing"] / "demo")
    with warehouse.connect(decided["warehouse"], read_only=True) as con:
        champ = con.execute("SELECT * FROM champion WHERE campaign = 'demo' ORDER BY decided_at DESC LIMIT 1").df().iloc[0]
        sources = con.execute("SELECT champion_candidate, value, champion_verdict FROM champion_evidence WHERE "
                              "campaign = 'demo' AND run_id = ? AND evidence_kind = 'evidence_events'",
                              [champ["run_id"]]).df()
        n4, n5 = (con.execute("SELECT count(*) FROM rct_events WHERE campaign = 'demo' AND event_date = ?",
                              [d]).fetchone()[0] for d in (day4, day5))
        users = con.execute("SELECT user_id FROM rct_events WHERE campaign = 'demo' AND event_date = ? ORDER BY source_row",
                            [day4]).df()["user_id"]
        decided4 = con.execute("SELECT user_id, propensity FROM decisions WHERE campaign = 'demo' AND decision_date = ? "
                               "AND budget_per_capita = 1.0", [day4]).df().set_index("user_id")["propensity"]
        versions = con.execute("SELECT model_version FROM response_coefficients WHERE campaign = 'demo' AND model = "
                               "'lgbm_s' AND target = 'population' GROUP BY 1 ORDER BY min(scored_at)").df()["model_version"]
        scored = {v: con.execute("SELECT user_id, level, response FROM response_coefficients WHERE campaign = 'demo' AND "
                                 "model = 'lgbm_s' AND model_version = ? AND target = 'population'", [v]).df()
                  for v in (versions.iloc[0], versions.iloc[-1])}
        days = read_deployed_days(con, "demo", config, ["lgbm_s", "lgbm_s_mono"], {day5})
    assert dict(zip(sources["champion_candidate"], sources["value"])) == {"holdout": n5, f"deployed {day4}": n4}
    assert set(sources["champion_verdict"]) == {"used"} and champ["evidence_events"] > n4 + n5  # + cross-fitted
    assert f"{n4 + n5:,} events: {n5:,} holdout, {n4:,} from 1 deployed day(s)" in champ["champion_decided_by"]
    assert [(d.day, d.used, d.reason) for d in days] == [(day4, n4, "")]
    ev = days[0].evidence
    np.testing.assert_allclose(ev.propensity, decided4.loc[users].to_numpy())
    assert ev.propensity.min() < 0.2 / 6 + 1e-9 < ev.propensity.max()   # explored users' levels: s * mix
    assert len(versions) >= 2  # retrained since day 4 was decided: the evidence uses the first version's coefficients
    for version, same in ((versions.iloc[0], True), (versions.iloc[-1], False)):
        want = scored[version].pivot(index="user_id", columns="level", values="response").loc[users].to_numpy()
        assert np.allclose(ev.coefficients["lgbm_s"][0], want) is same


def test_the_champion_is_chosen_on_cross_fitted_evidence_by_default(decided):
    """campaign.yaml says nothing of `champion.evidence`: the champion's evidence is the holdout and the
    training days' out-of-fold events of the refitted LightGBM models (day folds), and its reason says so."""
    with duckdb.connect(str(decided["warehouse"]), read_only=True) as con:
        row = con.execute("select evidence_events, champion_reason from champion").fetchall()[-1]
        holdout = con.execute("select count(*) from training_frame where split = 'holdout'").fetchone()[0]
    events, reason = row
    assert events > holdout > 0
    assert f"{holdout} evaluation events and {events - holdout} cross-fitted training-day events of lgbm_s" in reason

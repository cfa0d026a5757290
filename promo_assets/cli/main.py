"""`promo`: simulate campaigns, materialize the asset graph in-process, print the leaderboard.

Exit codes: EXIT_CODES below (every --help shows them; docs/operations.md). No command prints a
stack trace (PROMO_TRACEBACK=1 shows one for an unexpected error).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

from promo_assets.cli.format import text_table, to_csv, to_json, wrap_lines
from promo_assets.config import settings
from promo_assets.config.settings import SettingsError
from promo_assets.core.processes import process_tags

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_CODES = """\
exit codes:
  0    success (skipped day files, skipped models and WARN data checks are printed, not failures)
  1    some partitions or assets failed (each is named), a data check failed with severity ERROR,
       or the warehouse file cannot be used (named, with the reason)
  2    bad usage or configuration (unknown campaign, bad dates, a bad setting, a refused
       campaign.yaml: that campaign is not run, the others are), the warehouse stayed busy,
       or `promo serve`'s port is in use
  130  interrupted (Ctrl-C, SIGTERM)"""
HELP_COLUMNS = 100  # --help is wrapped at the terminal's width, at most this
REPORT_COLUMNS = 120  # `promo report` (without --wide) fits this width

# the path options: each overrides its environment variable (promo_assets.config.settings) for one command
PATH_OPTIONS = {
    "--landing": ("PROMO_LANDING_DIR", "landing root, one folder per campaign [$PROMO_LANDING_DIR or data/landing]"),
    "--warehouse": ("PROMO_WAREHOUSE", "the DuckDB warehouse file [$PROMO_WAREHOUSE or data/warehouse.duckdb]"),
    "--dagster-home": ("DAGSTER_HOME", "the Dagster instance folder (run history) [$DAGSTER_HOME or ./dagster_home]"),
}


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's help wrapped at the terminal's width but never wider than HELP_COLUMNS; descriptions
    and epilogs are printed as written (they are wrapped by hand to fit)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 28, width: int | None = None):
        width = min(HELP_COLUMNS, width or shutil.get_terminal_size().columns - 2)
        super().__init__(prog, indent_increment, max_help_position, width)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose epilog may be a function, called only when the help is shown (the list
    of presets imports the simulators: seconds that no other command should wait)."""

    @property
    def epilog(self) -> str | None:
        text = self.__dict__.get("_epilog")
        return text() if callable(text) else text

    @epilog.setter
    def epilog(self, text) -> None:
        self.__dict__["_epilog"] = text


def _path_options(*names: str) -> argparse.ArgumentParser:
    """A parent parser with the named PATH_OPTIONS (for `add_parser(parents=...)`)."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("paths (each overrides its environment variable)")
    for name in names:
        group.add_argument(name, metavar="PATH", default=None, help=PATH_OPTIONS[name][1])
    return parent


def _apply_path_options(args: argparse.Namespace) -> None:
    """Given path options become the environment variables they override, made absolute, so the
    settings, the warehouse and the Dagster assets run in this process all see them."""
    for name, (variable, _) in PATH_OPTIONS.items():
        value = getattr(args, name.lstrip("-").replace("-", "_"), None)
        if value:
            os.environ[variable] = str(Path(value).expanduser().resolve())


def _default_dagster_home() -> None:
    """DAGSTER_HOME must be absolute: default to ./dagster_home of the working directory."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        home = str(Path("dagster_home").resolve())
    home_path = Path(home).expanduser().resolve()
    home_path.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home_path)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


#: `promo simulate`'s options of a planted change (promo_assets.simulation.change), by argparse dest
CHANGE_OPTIONS = ("change_day", "response_shift", "population_shift", "compliance")


def cmd_simulate(args: argparse.Namespace) -> int:
    from promo_assets.simulation import PRESETS, Change, SimulationError, SimulationRequest, simulate

    if args.respond_to or args.day:
        return _respond(args)
    args.preset = args.preset or "demo"
    if args.preset not in PRESETS:
        print(f"promo simulate: unknown preset {args.preset!r}; choose one of {', '.join(PRESETS)}", file=sys.stderr)
        return EXIT_USAGE
    landing = Path(args.landing) if args.landing else settings.landing_dir()
    options = {"logging": args.logging} if args.logging else {}
    request = SimulationRequest(args.campaign, landing, args.days, args.users, args.seed, args.start)
    start = time.perf_counter()
    try:  # a planted change only when asked (without one the files stay as they were)
        change = Change.parse(*(getattr(args, name) for name in CHANGE_OPTIONS))
        summary = simulate(args.preset, request, overwrite=args.overwrite, change=change, **options)
    except SimulationError as exc:
        print(f"promo simulate: {exc} (command line: --overwrite)" if "overwrite" in str(exc) else f"promo simulate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"promo simulate: cannot write campaign {args.campaign!r} under {landing}: {exc.strerror or exc}"
              f"{f' ({exc.filename})' if exc.filename else ''}", file=sys.stderr)
        return EXIT_FAILED
    print(f"wrote {args.preset} campaign '{summary.campaign}' to {summary.campaign_dir} in {time.perf_counter() - start:.1f}s")
    print(f"  {summary}")
    return EXIT_OK


def _respond(args: argparse.Namespace) -> int:
    """`promo simulate --respond-to FILE --day D`: the simulated population answers exported decisions."""
    from promo_assets.simulation import SimulationError, respond

    if not (args.respond_to and args.day):
        print("promo simulate: --respond-to FILE and --day YYYY-MM-DD go together (the decisions to answer and the day "
              "they are for)", file=sys.stderr)
        return EXIT_USAGE
    given = [f"--{n.replace('_', '-')}" for n in CHANGE_OPTIONS if getattr(args, n) is not None]
    if given:
        print(f"promo simulate: {', '.join(given)} cannot be given with --respond-to: a change is planted when the RCT "
              "days are simulated and kept in campaign.yaml, which every --respond-to honours", file=sys.stderr)
        return EXIT_USAGE
    landing = Path(args.landing) if args.landing else settings.landing_dir()
    if not _campaign_names_ok("simulate", [args.campaign]):
        return EXIT_USAGE
    start = time.perf_counter()
    try:
        summary = respond(landing / args.campaign, Path(args.respond_to), args.day, preset=args.preset)
    except SimulationError as exc:
        print(f"promo simulate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"promo simulate: cannot write day {args.day} of campaign {args.campaign!r}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_FAILED
    d = summary.details
    print(f"wrote {summary.files[0]} in {time.perf_counter() - start:.1f}s: {d['events']} events answering "
          f"{d['decided_users']} decisions (true expected response {d['true_value_per_decided_user']:.4f}, cost "
          f"{d['true_cost_per_decided_user']:.4f} per decided user)")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    """`promo export`: the stored decisions of a campaign written to the outbox (never solved again)."""
    import duckdb

    from promo_assets.config.campaign import CampaignConfigError
    from promo_assets.decisions import ExportError, OutboxError, export_stored
    from promo_assets.decisions.outbox import outbox_target_problem
    from promo_assets.ingestion import load_config
    from promo_assets.monitoring.exported import ExportBy
    from promo_assets.store import warehouse

    if not _campaign_names_ok("export", [args.campaign]):
        return EXIT_USAGE
    try:
        config = load_config(settings.landing_dir(), args.campaign)
    except CampaignConfigError as exc:
        print(f"promo export: {exc}", file=sys.stderr)
        return EXIT_USAGE
    out = Path(args.out) if args.out else settings.outbox_dir()
    unsafe = outbox_target_problem(out, args.campaign, landing=settings.landing_dir(), artifacts=settings.artifacts_dir(),
                                   warehouse=settings.warehouse_path())
    if unsafe:
        print(f"promo export: --out {unsafe}: the outbox must lie outside the landing folder, the artefact store and "
              "the warehouse's folder; nothing was written", file=sys.stderr)
        return EXIT_USAGE
    signal.signal(signal.SIGTERM, _interrupt)  # a killed export cleans its temporary folder
    if not settings.warehouse_path().exists():
        print(f"promo export: warehouse {settings.warehouse_path()} does not exist yet: run `promo run` first",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        with warehouse.connect() as con:  # writable: the export is recorded (table decision_exports)
            folder, body, checks = export_stored(con, args.campaign, out, config=config, budgets=args.budget,
                                                 fmt=args.format, by=ExportBy(despite_stop=args.despite_stop))
    except FileNotFoundError as exc:
        print(f"promo export: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ExportError as exc:
        print(f"promo export: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OutboxError as exc:
        print(f"promo export: {exc}; nothing was written", file=sys.stderr)
        return EXIT_FAILED
    except duckdb.Error as exc:
        print(f"promo export: cannot read {settings.warehouse_path()}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{args.campaign}: decisions for {body['date']} by {body['champion']} ({body['champion_version']}) "
          f"written to {folder}")
    print(f"  users: {body['users']}")
    deployed = body.get("deployed_budget")
    print("  deployed budget: " + ("not known: set campaign.yaml monitoring.budget to the budget whose file the coupon "
                                   "system applies" if deployed is None else f"{deployed:g}"))
    for e in body["budgets"]:
        print(f"  {e['file']}: {e['rows']} rows, budget {e['budget_per_capita']:g}, λ {e['lambda_']:.4g}, "
              f"predicted response {e['expected_response']['per_capita']:.4f} and cost "
              f"{e['expected_cost']['per_capita']:.4f} per user, {e['exploration']['users']} explored "
              f"(value given up {e['exploration']['value_given_up_per_capita']:.4f} per user), sha256 {e['sha256'][:12]}…")
    passed = sum(c.passed for _, cs in checks for c in cs)
    print(f"  checks: {passed} of {sum(len(cs) for _, cs in checks)} passed "
          f"({', '.join(sorted({c.name for _, cs in checks for c in cs}))})")
    print(f"  manifest: {folder / 'manifest.json'}")
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    """`promo serve`: the HTTP decision service (docs/serve.md); runs until Ctrl-C or SIGTERM."""
    import logging

    import uvicorn

    from promo_assets.serve import Registry, create_app

    if args.campaign and not _campaign_names_ok("serve", args.campaign):
        return EXIT_USAGE
    if not 0 < args.port < 65536:
        print(f"promo serve: --port must be in 1..65535, got {args.port}", file=sys.stderr)
        return EXIT_USAGE
    if args.reload_interval < 0:
        print(f"promo serve: --reload-interval must be >= 0 seconds, got {args.reload_interval:g}", file=sys.stderr)
        return EXIT_USAGE
    if not args.read_timeout > 0:
        print(f"promo serve: --read-timeout must be > 0 seconds, got {args.read_timeout:g}", file=sys.stderr)
        return EXIT_USAGE
    if args.max_connections < 1:
        print(f"promo serve: --max-connections must be >= 1, got {args.max_connections}", file=sys.stderr)
        return EXIT_USAGE
    in_use = _port_in_use(args.host, args.port)
    if in_use:
        print(f"promo serve: cannot listen on {args.host}:{args.port}: {in_use} (another `promo serve`? choose "
              "another --port)", file=sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    registry = Registry(settings.landing_dir(), settings.warehouse_path(), args.campaign)
    app = create_app(registry, reload_interval=args.reload_interval, read_timeout=args.read_timeout)
    print(f"promo serve: http://{args.host}:{args.port} (landing {registry.landing}, warehouse {registry.warehouse}, "
          f"reload every {args.reload_interval:g}s)", flush=True)
    try:  # uvicorn's own limits: open connections (503 beyond), idle keep-alive connections closed after 5 s
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=args.access_log,
                    server_header=False, limit_concurrency=args.max_connections, timeout_keep_alive=5)
    except SystemExit as exc:  # uvicorn could not start (the port taken between the check and the start)
        if exc.code not in (None, 0):
            print(f"promo serve: the server could not start on {args.host}:{args.port} (see the log above)",
                  file=sys.stderr)
            return EXIT_USAGE
    return EXIT_OK


def _port_in_use(host: str, port: int) -> str | None:
    """Why `promo serve` cannot listen on host:port (the system's reason), or None."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"unknown host ({exc.strerror or exc})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _quiet_run_config(verbose: bool, progress: bool = False) -> dict:
    """--verbose: Dagster's own console log; otherwise compact asset lines (progress) or warnings only."""
    if verbose:
        return {"loggers": {"console": {"config": {"log_level": "DEBUG"}}}}
    return {"loggers": {"progress": {"config": {"log_level": "INFO" if progress else "WARNING"}}}}


def _error_text(err) -> str:
    """'Class: message' of a SerializableErrorInfo without the module path ('pkg.mod.Class: ...')."""
    text = (err.message or "").strip()
    head, sep, rest = text.partition(": ")
    if sep and head.split(".")[-1] == err.cls_name:
        text = rest.strip()
    return text or err.cls_name


def _is_framework_error(err) -> bool:
    """Dagster's own wrappers ('Error occurred while executing op ...'); dagster.Failure is ours."""
    return err.message.startswith("dagster.") and err.cls_name != "Failure"


def _cause_message(err) -> str:
    """The domain error's own message: skip Dagster's wrappers down the cause (else context) chain;
    a lower-level cause of the domain error is appended on one line."""
    while _is_framework_error(err) and (err.cause or err.context) is not None:
        err = err.cause or err.context
    text = _error_text(err)
    root = err
    while root.cause is not None:
        root = root.cause
    if root is not err:
        text += f" (caused by {root.cls_name}: {_error_text(root).splitlines()[0] if _error_text(root) else ''})"
    return text


def _failure_messages(result) -> list[str]:
    """'step: message' for every failed step of a run (the run's own error when no step failed);
    continuation lines of a multi-line message are indented."""
    out: list[str] = []
    for event in result.all_events:
        if event.event_type_value in ("STEP_FAILURE", "RUN_FAILURE"):
            err = getattr(event.event_specific_data, "error", None)
            if err is None or (event.event_type_value == "RUN_FAILURE" and out):
                continue
            label = (event.step_key or "run").replace("__", "/")  # '<model>/<asset>' for a model's chain
            out.append(f"{label}: " + _cause_message(err).replace("\n", "\n    "))
    return out or ["failed"]


def _campaign_names_ok(command: str, names: list[str]) -> bool:
    """--campaign values follow the one campaign-name rule; else print why (the caller exits 2)."""
    from promo_assets.config.campaign import CampaignConfigError, check_campaign_name

    try:
        for name in names:
            check_campaign_name(name)
    except CampaignConfigError as exc:
        print(f"promo {command}: --campaign: {exc}", file=sys.stderr)
        return False
    return True


def cmd_run(args: argparse.Namespace) -> int:
    _default_dagster_home()
    from promo_assets.config.campaign import CampaignConfigError
    from promo_assets.ingestion import (
        IngestError,
        cached_config,
        check_constraint_features,
        discover_campaigns,
        scan_day_files,
        skipped_side_files,
    )

    landing = settings.landing_dir()
    if not _campaign_names_ok("run", args.campaign or []):
        return EXIT_USAGE
    campaigns = discover_campaigns(landing)
    if args.campaign:
        missing = [c for c in args.campaign if c not in campaigns]
        if missing:
            print(f"promo run: no campaign {', '.join(missing)} under {landing} (found: {', '.join(campaigns) or 'none'})", file=sys.stderr)
            return EXIT_USAGE
        campaigns = args.campaign
    if not campaigns:
        print(f"promo run: no campaigns under {landing}; write one with `promo simulate`, or pass --landing",
              file=sys.stderr)
        return EXIT_USAGE
    if args.date_from and args.date_to and args.date_from > args.date_to:
        print(f"promo run: --from {args.date_from} is after --to {args.date_to}", file=sys.stderr)
        return EXIT_USAGE

    bad_configs = {}
    for campaign in campaigns:  # every campaign.yaml is checked first: a refused one stops its campaign only
        try:  # a constraints group on a column the events do not have: refused now, before anything is decided
            check_constraint_features(landing, campaign, cached_config(landing, campaign))
        except CampaignConfigError as exc:
            bad_configs[campaign] = str(exc)
    if bad_configs:
        campaigns = [c for c in campaigns if c not in bad_configs]
        head = "nothing was run" if not campaigns else f"campaign(s) {', '.join(bad_configs)} not run"
        print(f"promo run: {head}: " + "\n  ".join(bad_configs.values()), file=sys.stderr)
        if not campaigns:
            return EXIT_USAGE

    bad_settings = settings.check()  # PROMO_KEEP_RUNS etc.: refused before anything runs, not in every step
    if bad_settings:
        print("promo run: nothing was run: " + "\n  ".join(bad_settings), file=sys.stderr)
        return EXIT_USAGE
    from promo_assets.store import warehouse

    warehouse.check_writable()  # a directory, a read-only mount: one line (main), not a failed step per day

    # Dagster and the Definitions (seconds to import) only once the inputs were found usable
    import dagster as dg

    from promo_assets.definitions import build_defs
    from promo_assets.defs.common import register_partitions
    from promo_assets.defs.recovery import recover_dead_runs

    signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM stops a `promo run` waiting on the pool like Ctrl-C
    instance = dg.DagsterInstance.get()
    # The runs below are Dagster's own jobs on this instance (the UI's and the automation's), and
    # Dagster's pool caps their warehouse steps together. What Dagster cannot do: its
    # run monitoring is a daemon feature that never sees a `promo run` process killed with its
    # in-process run, which stays STARTED holding its `warehouse` pool slot; so those runs are
    # marked failed and their slots freed here first (defs/recovery.py).
    for line in recover_dead_runs(instance):
        print(f"recovered {line}")
    register_partitions(instance, campaigns=campaigns)
    tags = {"promo/trigger": "cli", **process_tags()}  # host/pid: a later run can tell this one died
    # the chains of the models trained for at least one of the campaigns, from the model registry as it
    # is now (a model registered by a test included); the others would only be left out of every run
    defs = build_defs(_trained_models(campaigns))
    day_range = {name: day.isoformat() for name, day in (("first_day", args.date_from), ("last_day", args.date_to)) if day}
    failures: list[str] = []
    t0 = time.perf_counter()
    for campaign in campaigns:
        try:
            check_constraint_features(landing, campaign, cached_config(landing, campaign))
            scan = scan_day_files(landing, campaign, "events")
        except (CampaignConfigError, IngestError) as exc:  # changed since the check: this campaign only
            print(f"promo run: {exc}", file=sys.stderr)
            bad_configs[campaign] = str(exc)
            continue
        for skipped in scan.skipped + skipped_side_files(landing, campaign):
            print(f"{campaign}: skipped {skipped}", file=sys.stderr)
        days = [d for d in sorted(scan.files)
                if (not args.date_from or d >= args.date_from) and (not args.date_to or d <= args.date_to)]
        if not days:
            print(f"{campaign}: no events day files in the chosen range; skipped")
            continue
        print(f"{campaign}: ingesting {len(days)} day file(s) {days[0]} … {days[-1]} (the new or changed ones)")
        run_config = _ingest_run_config(_quiet_run_config(args.verbose, progress=not args.ingest_only), day_range)
        start = time.perf_counter()
        if args.ingest_only:
            result = defs.resolve_job_def("ingest_job").execute_in_process(
                partition_key=campaign, instance=instance, run_config=run_config, raise_on_error=False, tags=tags)
            failures += _ingestion_lines(campaign, result, (args.date_from, args.date_to))
            failures += _failure_lines(campaign, result)
            continue
        print(f"{campaign}: materializing models, coefficients, allocations and evaluation …")
        downstream = _run_refresh(defs, campaign, instance, args.verbose, tags, run_config, (args.date_from, args.date_to))
        failures += downstream
        print(f"{campaign}: downstream {'FAILED' if downstream else 'done'} in {time.perf_counter() - start:.0f}s")
    print(f"finished in {time.perf_counter() - t0:.0f}s; warehouse: {settings.warehouse_path()}; DAGSTER_HOME: {os.environ['DAGSTER_HOME']}")
    if failures:
        print("failures:", file=sys.stderr)
        for f in failures:
            print(f"  {f}", file=sys.stderr)
        return EXIT_FAILED
    if bad_configs:
        print(f"promo run: not run (campaign.yaml refused): {', '.join(bad_configs)}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _ingest_run_config(run_config: dict, day_range: dict[str, str]) -> dict:
    """The run config with the --from / --to range for every ingestion asset (their DayRange)."""
    if not day_range:
        return run_config
    from promo_assets.defs.common import INGESTION_ASSETS

    return {**run_config, "ops": {name: {"config": dict(day_range)} for name in INGESTION_ASSETS}}


def _ingestion_lines(campaign: str, result, bounds: tuple) -> list[str]:
    """Print what the run's ingestion did (the days forgotten, loaded, unchanged) and return a
    failure line per day file (events, edges, merchants) within `bounds` (--from, --to; None: open)
    whose last load failed (the ledger's word: a file that failed before and did not change since is
    still named)."""
    from promo_assets.ingestion.days import TABLES, failed_files
    from promo_assets.store import warehouse

    for event in result.all_events:
        if event.event_type_value == "ASSET_MATERIALIZATION" and event.asset_key == _key("rct_events"):
            meta = event.event_specific_data.materialization.metadata
            for record in meta["days"].value.records if "days" in meta else []:
                day = record.data
                if day["status"] == "forgotten":
                    print(f"{campaign}: forgot {day['day']} (its events file is gone from the landing folder): "
                          f"{day['message']}")
            print(f"{campaign}: {meta['days_loaded_now'].value} day(s) loaded ({meta['rows_loaded_now'].value} rows), "
                  f"{meta['days_unchanged'].value} unchanged, {meta['days_failed'].value} failed")
    lines = []
    with warehouse.connect(read_only=True) as con:
        failed = failed_files(con, campaign)
    for kind, day, _, message in failed:
        if (bounds[0] is None or day >= bounds[0]) and (bounds[1] is None or day <= bounds[1]):
            print(f"  FAILED {campaign} {day}: {TABLES[kind]}: {message}")
            lines.append(f"{campaign} {day}: {TABLES[kind]}: {message}")
    return lines


def _key(name: str):
    import dagster as dg

    return dg.AssetKey(name)


def _forget_days(campaign: str, days: list, reason: str) -> None:
    """Remove (campaign, day) from every per-day table and the ledger (one transaction each); prints
    one line per day. The campaign's partition stays: its days are rows, not partitions."""
    from promo_assets.ingestion import forget_partition
    from promo_assets.ingestion.days import forget_ledger_day
    from promo_assets.store import warehouse

    with warehouse.connect() as con:
        for day in days:
            removed = forget_partition(con, campaign, day, reason)
            forget_ledger_day(con, campaign, day)
            print(f"{campaign}: forgot {day} ({reason}): removed " + ", ".join(f"{n} {t}" for t, n in removed.items()))


def cmd_forget(args: argparse.Namespace) -> int:
    from promo_assets.ingestion import loaded_days, scan_day_files
    from promo_assets.ingestion.days import ledger
    from promo_assets.store import warehouse

    if not _campaign_names_ok("forget", [args.campaign]):
        return EXIT_USAGE
    landing = settings.landing_dir()
    if not settings.warehouse_path().exists():
        print(f"promo forget: no warehouse at {settings.warehouse_path()}: nothing to forget", file=sys.stderr)
        return EXIT_USAGE
    with warehouse.connect() as con:
        loaded = set(loaded_days(con, args.campaign)) | set(ledger(con, args.campaign, "events"))
    days = sorted(set(args.day))
    scan = scan_day_files(landing, args.campaign, "events")
    for day in days:
        still = [str(p) for p in [scan.files.get(day)] + [s.path for s in scan.skipped if s.day == day] if p]
        if still:
            print(f"promo forget: {', '.join(still)} is still in the landing folder; delete or move it first "
                  f"(otherwise the next `promo run` loads day {day} of campaign '{args.campaign}' again)", file=sys.stderr)
            return EXIT_USAGE
    unknown = [d for d in days if d not in loaded]
    if unknown:
        print(f"promo forget: campaign '{args.campaign}' has nothing loaded for {', '.join(map(str, unknown))} "
              f"(loaded days: {', '.join(map(str, sorted(loaded))) or 'none'})", file=sys.stderr)
        return EXIT_USAGE
    _forget_days(args.campaign, days, "promo forget")
    print(f"run `promo run --campaign {args.campaign}` to refresh its models and decisions")
    return EXIT_OK


def _run_refresh(defs, campaign, instance, verbose: bool, tags: dict[str, str], run_config: dict,
                 bounds: tuple) -> list[str]:
    """One run of the campaign's ingestion and downstream assets (the chains of the models trained
    for it, then the leaderboard), as the UI materializes them; prints the ingestion, the skipped
    models and the leaderboard. Returns the failure lines.
    The chains of the models known from campaign.yaml not to be trained (`registry.skip_reason`: left
    out by its `models:` block, or not applicable) are not in the run: each would only record its
    skip (~20 Dagster events) and stop the leaderboard's step, which Dagster does not execute after a
    skipped upstream. After a failed chain the leaderboard is materialized by `leaderboard_job` in a
    second run, as the UI's automation does; then the decisions by `decision_job`."""
    import dagster as dg

    from promo_assets.defs.automation.jobs import REFRESH_ORDER
    from promo_assets.defs.common import INGESTION_ASSETS, model_of_key

    refresh_job, leaderboard_job, decision_job = (defs.resolve_job_def(name) for name in REFRESH_ORDER)
    left_out, board_key = _models_left_out(campaign), dg.AssetKey("leaderboard")
    chains = defs.resolve_job_def("campaign_job").asset_layer.executable_asset_keys
    ingestion = [dg.AssetKey(a) for a in INGESTION_ASSETS]
    keys = ingestion + [k for k in chains if model_of_key(k) not in left_out] + [board_key]
    result = _run_job(refresh_job, campaign, instance, verbose, tags, keys, run_config=run_config)
    failures = _ingestion_lines(campaign, result, bounds) + _failure_lines(campaign, result)
    if any(step in INGESTION_ASSETS for step in _failed_steps(result)):
        return failures  # nothing downstream of a failed ingestion ran: no leaderboard, no decisions
    for check in result.get_asset_check_evaluations():  # the training frame's data checks
        if not check.passed and check.asset_key not in ingestion:
            message = check.metadata["message"].value if "message" in check.metadata else check.check_name
            line = f"data check {check.check_name} failed ({check.severity.value}): {message}"
            print(f"{campaign}: {line}", file=sys.stderr)
            if check.severity.value == "ERROR":  # no model could learn: the run made no decision
                failures.append(f"{campaign}: {line}")
    for model, reason in sorted(_skipped_models(campaign, result.run_id) + list(left_out.items())):
        print(f"{campaign}: {model} skipped: {reason}")
    from promo_assets.defs.models.assets import record_left_out

    record_left_out(instance, campaign, left_out)  # each left-out chain's asset pages say why
    board_ok = _materialized(result, board_key)
    if not board_ok and "leaderboard" not in _failed_steps(result):
        # a chain failed (or skipped), so Dagster did not execute the leaderboard's step: on its own
        board = _run_job(leaderboard_job, campaign, instance, verbose, tags)
        failures += _failure_lines(campaign, board)
        board_ok = board.success
    if board_ok:  # the champion, the decisions (blocking checks), the outcomes and the outbox: a run of their own
        decided = _run_job(decision_job, campaign, instance, verbose, tags)
        failures += _failure_lines(campaign, decided)
        failures += _react(defs, campaign, instance, verbose, tags, decided, keys[len(ingestion):])
    _print_leaderboard(campaign)
    return failures


def _react(defs, campaign, instance, verbose: bool, tags: dict[str, str], decided, chain_keys) -> list[str]:
    """A monitoring reaction that acted in the decisions run (`monitoring_reaction` materialized): `retrain`
    refreshes the model chains (the training frame down-weights the days before the change) and decides
    again; `fallback` decides again with the previous champion; `stop_export` needs nothing more (the
    outbox did not write). The UI's automation requests the same (docs/monitoring.md)."""
    import dagster as dg

    from promo_assets.defs.automation.jobs import REFRESH_ORDER

    reacted = [e for e in decided.all_events if e.event_type_value == "ASSET_MATERIALIZATION"
               and e.asset_key == dg.AssetKey("monitoring_reaction")]
    if not reacted:
        return []
    acted = json.loads(reacted[-1].event_specific_data.materialization.metadata["reactions"].value)
    kinds = {a["reaction"] for a in acted}
    print(f"{campaign}: monitoring reaction: " + "; ".join(f"{a['check']} -> {a['reaction']} (from {a['change_day']})"
                                                        for a in acted))
    failures = []
    if "retrain" in kinds:
        result = _run_job(defs.resolve_job_def(REFRESH_ORDER[0]), campaign, instance, verbose, tags, chain_keys)
        failures += _failure_lines(campaign, result)
        if not result.success:
            return failures
    if kinds & {"retrain", "fallback"}:
        again = _run_job(defs.resolve_job_def(REFRESH_ORDER[-1]), campaign, instance, verbose, tags)
        failures += _failure_lines(campaign, again)
    return failures


def _failure_lines(campaign: str, result) -> list[str]:
    return [] if result.success else [f"{campaign}: {m}" for m in _failure_messages(result)]


def _failed_steps(result) -> list[str]:
    return [e.step_key for e in result.all_events if e.event_type_value == "STEP_FAILURE"]


def _materialized(result, key) -> bool:
    return any(e.event_type_value == "ASSET_MATERIALIZATION" and e.asset_key == key for e in result.all_events)


def _trained_models(campaigns: list[str]) -> list[str]:
    """The registered models that at least one of `campaigns` trains (not left out by `_models_left_out`)."""
    from promo_assets.models import registry

    left_out = [_models_left_out(c) for c in campaigns]
    return [n for n in registry.names() if any(n not in skipped for skipped in left_out)]


def _models_left_out(campaign: str) -> dict[str, str]:
    """{model: reason} for the registered models not trained for the campaign (`registry.skip_reason`)."""
    from promo_assets.ingestion import load_config
    from promo_assets.models import registry

    config = load_config(settings.landing_dir(), campaign)
    return {n: r for n in registry.names() if (r := registry.skip_reason(n, config)) is not None}


def _run_job(job, campaign, instance, verbose: bool, tags: dict[str, str], asset_selection=None, run_config=None):
    """Run a campaign-partitioned job; asset log lines (epochs, scoring chunks) are printed as they
    come. Its results rows then count (succeeded; the other models' rows when only some models'
    chains failed) or are deleted (failed): promo_assets.store.results."""
    from promo_assets.defs.common import failed_models

    result = job.execute_in_process(
        partition_key=campaign,
        instance=instance,
        raise_on_error=False,
        tags=tags,
        run_config=run_config or _quiet_run_config(verbose, progress=True),
        asset_selection=asset_selection,
    )
    failed_steps = _failed_steps(result)
    _finish_results(campaign, result.run_id, result.success, failed_models(failed_steps) if failed_steps else None)
    return result


def _finish_results(campaign: str, run_id: str, succeeded: bool, failed_models: list[str] | None = None) -> None:
    from promo_assets.store import results, warehouse

    with warehouse.connect() as con, warehouse.transaction(con):
        results.finish(con, campaign, run_id, succeeded, failed_models)


def _skipped_models(campaign: str, run_id: str) -> list[tuple[str, str]]:
    from promo_assets.store import runs as stored, warehouse

    with warehouse.connect(read_only=True) as con:
        return stored.run_skips(con, campaign, run_id)


def _print_leaderboard(campaign: str) -> None:
    from promo_assets.store import warehouse

    with warehouse.connect(read_only=True) as con:
        lines, ok = _campaign_report(con, campaign, [], history=False)
    if ok:
        print("\n".join(wrap_lines(lines[1:], REPORT_COLUMNS)))


def _finished_in_dagster(con) -> list[str]:
    """Runs marked 'started' in the warehouse that Dagster's run storage says succeeded (a UI or
    daemon run not yet marked by a later results write); [] when there are none or no instance."""
    from promo_assets.store import runs as stored

    started = stored.started_run_ids(con)
    if not started:
        return []
    try:
        _default_dagster_home()
        import dagster as dg

        instance = dg.DagsterInstance.get()
        runs = {rid: instance.get_run_by_id(rid) for rid in started}
    except Exception:  # no usable Dagster instance: those runs simply stay hidden
        return []
    return [rid for rid, run in runs.items() if run is not None and run.status == dg.DagsterRunStatus.SUCCESS]


def _current_budgets(campaign: str) -> tuple[list[float] | None, str]:
    from promo_assets.ingestion import load_config

    try:
        return list(load_config(settings.landing_dir(), campaign).budget_per_capita), ""
    except Exception as exc:  # noqa: BLE001 (any reason the campaign.yaml cannot be read is reported)
        return None, f"campaign.yaml not readable ({exc}); showing every budget of the run"


def _monitoring_settings(campaign: str):
    """campaign.yaml's `monitoring:` block (None when campaign.yaml cannot be read: its defaults then)."""
    from promo_assets.ingestion import load_config

    try:
        return load_config(settings.landing_dir(), campaign).monitoring
    except Exception:  # noqa: BLE001 (_current_budgets reports why campaign.yaml cannot be read)
        return None


def _report_runs(con, campaign: str, runs: list, history: bool):
    """(run_id, started_at, evaluation rows, infeasible budgets, budgets not in campaign.yaml now) of
    each run the report shows: the latest succeeded run at the budgets of campaign.yaml now, or
    (history) every kept run at every budget."""
    from promo_assets.store import runs as stored

    budgets, _ = _current_budgets(campaign)
    for run_id, started_at in runs if history else runs[:1]:
        board = stored.run_evaluation(con, campaign, run_id)
        infeasible = stored.run_infeasible(con, campaign, run_id)
        run_budgets = sorted(set(board["budget_per_capita"].astype(float)))
        others = [b for b in run_budgets if budgets is not None and b not in budgets]
        if not history:
            board = board[board["budget_per_capita"].isin(budgets)] if budgets is not None else board
            infeasible = [r for r in infeasible if budgets is None or r[1] in budgets]
        yield run_id, started_at, board, infeasible, others


def _board_lines(board, wide: bool) -> list[str]:
    """A run's leaderboard for the terminal: every column (wide), else the columns that fit
    REPORT_COLUMNS (rank, model, the ranking figure, the estimate with its interval, spend ratio,
    vs random, note; the note wrapped)."""
    from promo_assets.evaluation import format_leaderboard, leaderboard_compact, leaderboard_footer

    if wide:
        return format_leaderboard(board).rstrip("\n").splitlines()
    compact = leaderboard_compact(board)
    if compact.empty:
        return ["(no policy evaluations)"]
    shown = compact.drop(columns="campaign")  # one campaign per table: its name is in the title
    return (text_table(list(shown.columns), shown.values.tolist(), width=REPORT_COLUMNS, wrap=["note"],
                       right=[c for c in shown.columns if c not in ("model", "note")])
            + wrap_lines(leaderboard_footer(compact), REPORT_COLUMNS))


def _campaign_report(con, campaign: str, finished: list[str], history: bool,
                     wide: bool = False) -> tuple[list[str], bool]:
    """The report lines of one campaign and whether it had an evaluation."""
    from promo_assets.store import runs as stored

    runs = stored.succeeded_runs(con, campaign, finished)
    if not runs:
        return [f"== {campaign}", f"   no evaluation of a succeeded run for campaign '{campaign}'"], False
    _, note = _current_budgets(campaign)
    lines = []
    for i, (run_id, started_at, board, infeasible, others) in enumerate(_report_runs(con, campaign, runs, history)):
        title = "latest succeeded run" if i == 0 else "earlier run"
        lines.append(f"== {campaign}: {title} {run_id} (started {started_at:%Y-%m-%d %H:%M:%S})")
        if i == 0:
            from promo_assets.monitoring.status import outcome_line, status_lines

            lines += status_lines(con, campaign, monitoring=_monitoring_settings(campaign))
            champion = _champion_lines(con, campaign)
            measured = outcome_line(con, campaign)
            lines += champion[:1] + ([measured] if measured and champion else []) + champion[1:]
        if note:
            lines.append(f"   {note}")
        lines += (_board_lines(board, wide) if not board.empty
                  else ["   (none of its budgets is in campaign.yaml now)"])
        for model, b, minimum, message in infeasible:
            lines.append(f"   budget {b:g} per capita not allocated for {model}: {message}")
        for name, severity, message in stored.run_failed_checks(con, campaign, run_id):
            lines.append(f"   data check {name} failed ({severity}): {message}")
        for model, status, reason in stored.run_not_evaluated(con, campaign, run_id):
            if status == "stale":  # its reason starts with "stale: "
                lines.append(f"   {model} not ranked, {reason}")
            else:
                lines.append(f"   {model} {'skipped' if status == 'skipped' else 'not evaluated'}: {reason}")
        if others:
            shown = ", ".join(f"{b:g}" for b in others)
            lines.append(f"   budgets not in campaign.yaml now: {shown}"
                         + ("" if history else " (shown by `promo report --history`)"))
    if history:
        lines.append(f"   {len(runs)} succeeded run(s) kept (PROMO_KEEP_RUNS={settings.keep_runs()})")
    elif len(runs) > 1:
        lines.append(f"   {len(runs) - 1} earlier run(s) kept: `promo report --history`")
    return lines, True


def _campaign_records(con, campaign: str, finished: list[str], history: bool) -> dict | None:
    """One campaign's report as data (`promo report --format csv|json`): its champion and, per run
    shown, the leaderboard rows (`evaluation.leaderboard_records`), the budgets not allocated, the
    failed data checks and the models not evaluated; None without a succeeded run."""
    import json

    from promo_assets.evaluation import leaderboard_records
    from promo_assets.store import decisions as stored_decisions, runs as stored, warehouse

    runs = stored.succeeded_runs(con, campaign, finished)
    if not runs:
        return None
    champion = None
    if warehouse.table_columns(con, "champion"):
        rows = stored_decisions.latest_champion(con, campaign)
        if not rows.empty:
            champion = rows.iloc[0].to_dict()
            champion["champion_members"] = json.loads(champion["champion_members"])
    out = {"campaign": campaign, "champion": champion, "runs": []}
    for run_id, started_at, board, infeasible, others in _report_runs(con, campaign, runs, history):
        checks = stored.run_failed_checks(con, campaign, run_id)
        skipped = stored.run_not_evaluated(con, campaign, run_id)
        out["runs"].append({
            "run_id": run_id, "started_at": started_at,
            "leaderboard": leaderboard_records(board) if not board.empty else [],
            "not_allocated": [{"model": m, "budget_per_capita": b, "message": msg} for m, b, _, msg in infeasible],
            "data_checks_failed": [{"check": n, "severity": sv, "message": msg} for n, sv, msg in checks],
            "not_evaluated": [{"model": m, "status": st, "reason": r} for m, st, r in skipped],
            "budgets_not_in_campaign_yaml": others,
        })
    return out


def _print_records(reports: list[dict], fmt: str) -> None:
    """The reports as JSON (everything) or CSV (the leaderboard rows, with campaign and run)."""
    if fmt == "json":
        sys.stdout.write(to_json({"campaigns": reports}))
        return
    rows = [{"campaign": r["campaign"], "run_id": run["run_id"], "started_at": run["started_at"], **row}
            for r in reports for run in r["runs"] for row in run["leaderboard"]]
    sys.stdout.write(to_csv(rows))


def _champion_lines(con, campaign: str) -> list[str]:
    """The report's first lines: what to deploy and why (the latest champion of a succeeded run)."""
    import json

    import pandas as pd

    from promo_assets.evaluation.champion import headline_text, stored_headline
    from promo_assets.store import warehouse
    from promo_assets.store.decisions import latest_champion

    if not warehouse.table_columns(con, "champion"):
        return []
    rows = latest_champion(con, campaign)
    if rows.empty:
        return ["   deploy: no champion yet (the champion asset has not run for this campaign)"]
    r = rows.iloc[0]
    budgets = [float(b) for b in _current_budgets(campaign)[0] or []]
    lines = ["   " + headline_text(r["champion"], budgets, stored_headline(r), r["champion_confidence"])]
    if not pd.isna(r.get("champion_decided_by")):
        lines.append(f"   chosen on: {r['champion_decided_by']}")
    lines.append(f"   why: {r['champion_reason']}")
    if not pd.isna(r["pct_oracle"]):
        lines.append(f"   truth (simulated): champion {100 * r['pct_oracle']:.2f}% of the oracle; best candidate "
                     f"{r['best_candidate']} {100 * r['best_pct_oracle']:.2f}%")
    members = json.loads(r["champion_members"])
    if len(members["members"]) > 1:
        lines.append("   blend of: " + ", ".join(f"{m} ({w:.2f})" for m, w in zip(members["members"], members["weights"])))
    return lines


def cmd_report(args: argparse.Namespace) -> int:
    import duckdb

    from promo_assets.store import runs as stored, warehouse

    if not _campaign_names_ok("report", args.campaign or []):
        return EXIT_USAGE
    if args.html:
        return _report_html(args)
    try:
        with warehouse.connect(read_only=True) as con:
            if not warehouse.table_columns(con, "result_runs"):
                print(f"promo report: {settings.warehouse_path()} has no run bookkeeping yet (written by an older "
                      "version): run `promo run` first", file=sys.stderr)
                return EXIT_USAGE
            campaigns = args.campaign or stored.report_campaigns(con)
            finished = _finished_in_dagster(con)
            if args.format == "table":
                reports = [_campaign_report(con, c, finished, args.history, args.wide) for c in campaigns]
            else:
                records = [_campaign_records(con, c, finished, args.history) for c in campaigns]
                reports = [([f"campaign '{c}': no evaluation of a succeeded run"], r is not None)
                           for c, r in zip(campaigns, records)]
    except (FileNotFoundError, ValueError) as exc:
        print(f"promo report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except duckdb.Error as exc:
        print(f"promo report: cannot read {settings.warehouse_path()}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_FAILED
    if not reports:
        print(f"promo report: no policy evaluation in {settings.warehouse_path()} yet: run `promo run`", file=sys.stderr)
        return EXIT_USAGE
    if args.format != "table":
        _print_records([r for r in records if r is not None], args.format)
        for lines, ok in reports:
            if not ok:
                print(f"promo report: {lines[0]}", file=sys.stderr)
    else:
        for lines, _ in reports:
            print("\n".join(lines if args.wide else wrap_lines(lines, REPORT_COLUMNS)))
    return EXIT_OK if all(ok for _, ok in reports) else EXIT_USAGE


def _report_html(args: argparse.Namespace) -> int:
    """`promo report --html PATH`: one campaign's self-contained HTML report (promo_assets.report)."""
    import duckdb

    from promo_assets.config.campaign import CampaignConfigError
    from promo_assets.ingestion import load_config
    from promo_assets.report import ReportError, gather, latest_board_run, render, write_report
    from promo_assets.store import runs as stored, warehouse

    try:
        with warehouse.connect(read_only=True) as con:
            if not warehouse.table_columns(con, "result_runs"):
                print(f"promo report: {settings.warehouse_path()} has no run bookkeeping yet: run `promo run` first",
                      file=sys.stderr)
                return EXIT_USAGE
            campaigns = args.campaign or stored.report_campaigns(con)
            if len(campaigns) != 1:
                print("promo report: --html writes the report of one campaign: name it with --campaign (campaigns: "
                      f"{', '.join(campaigns) or 'none'})", file=sys.stderr)
                return EXIT_USAGE
            board_run, started = latest_board_run(con, campaigns[0], _finished_in_dagster(con))
            config = load_config(settings.landing_dir(), campaigns[0])
            data = gather(con, settings.landing_dir(), campaigns[0], config, board_run=board_run)
            data.board_started = started
    except (FileNotFoundError, ValueError, CampaignConfigError, ReportError) as exc:
        print(f"promo report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except duckdb.Error as exc:
        print(f"promo report: cannot read {settings.warehouse_path()}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_FAILED
    html = render(data)
    try:
        path = write_report(html, Path(args.html))
    except OSError as exc:
        print(f"promo report: cannot write {args.html}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{campaigns[0]}: report written to {path} ({len(html.encode()) / 1e6:.1f} MB, opens without network access)")
    return EXIT_OK


def cmd_models(args: argparse.Namespace) -> int:
    from promo_assets.models import registry

    if args.format == "markdown":
        sys.stdout.write(registry.table_markdown())
    elif args.format == "json":
        sys.stdout.write(to_json(registry.records()))
    elif args.format == "csv":
        sys.stdout.write(to_csv(registry.records()))
    else:
        rows = [(r["model"], "yes" if r["default"] else "no", r["applies_to"], r["title"]) for r in registry.records()]
        width = min(REPORT_COLUMNS, shutil.get_terminal_size((REPORT_COLUMNS, 24)).columns)
        print("\n".join(text_table(["model", "default", "applies to", "what it is"], rows, width=width,
                                   wrap=["applies to", "what it is"])))
        print("\n".join(wrap_lines(["hyper-parameters, assets and papers: `promo models --format json` or the "
                                    "docs' model reference"], width)))
    return EXIT_OK


def _version() -> str:
    """The installed package's version (pyproject.toml is the one place it is set)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("promo_assets")
    except PackageNotFoundError:
        return "unknown (not installed: pip install .)"


def _presets_text() -> str:
    """simulate's --help list of presets, from the registry of presets (promo_assets.simulation)."""
    import textwrap

    from promo_assets.simulation import PRESETS

    lines = ["presets (--preset):"]
    width = max(len(n) for n in PRESETS) + 4
    for name, preset in PRESETS.items():
        text = " ".join(preset.description.split()) + ("" if preset.respondable else " (no --respond-to)")
        lines += textwrap.wrap(text, HELP_COLUMNS - 2, initial_indent=f"  {name.ljust(width - 2)}",
                               subsequent_indent=" " * width)
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    kw = {"formatter_class": _HelpFormatter, "epilog": EXIT_CODES}
    parser = argparse.ArgumentParser(prog="promo", description=__doc__.split("\n")[0], **kw)
    parser.add_argument("--version", action="version", version=f"promo_assets {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("simulate", help="write a simulated campaign (with ground truth) into the landing folder",
                       parents=[_path_options("--landing")], formatter_class=_HelpFormatter,
                       epilog=lambda: _presets_text() + "\n\n" + EXIT_CODES)
    p.add_argument("--preset", default=None, help="a preset listed below [demo; with --respond-to: the campaign's]")
    p.add_argument("--campaign", default="demo", help="campaign id (folder name) [demo]")
    p.add_argument("--days", type=int, default=14, help="number of daily event files [14]")
    p.add_argument("--users", type=int, default=5000, help="size of the user pool [5000]")
    p.add_argument("--seed", type=int, default=0, help="random seed [0]")
    p.add_argument("--start", type=_date, default=None,
                   help="first day YYYY-MM-DD [today - days]; part of the campaign's identity with --seed: every "
                        "day is drawn from its date, so the same seed from another start is another campaign")
    p.add_argument("--logging", default=None, help="demo only: rct (default) | confounded")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing simulated campaign of the same name (its day files and truth)")
    p.add_argument("--respond-to", default=None, metavar="FILE",
                   help="an exported decision file (outbox <budget>.parquet|csv): write day --day of the existing "
                   "simulated campaign as its users answer those decisions (their propensities logged)")
    p.add_argument("--day", type=_date, default=None, help="with --respond-to: the day the decisions are for (YYYY-MM-DD)")
    change = p.add_argument_group("a planted change (kept in campaign.yaml; every later --respond-to honours it)")
    change.add_argument("--change-day", type=_date, default=None, metavar="YYYY-MM-DD",
                        help="the first day the change is in force (after --start)")
    change.add_argument("--response-shift", default=None, metavar="SPEC",
                        help="the true curves from the change day: comma-separated [FEATURE=VALUE:]uplift=F and/or "
                        ":base=F terms, e.g. city=chengdu:uplift=-1,city=beijing:uplift=3")
    change.add_argument("--population-shift", default=None, metavar="SPEC",
                        help="the users from the change day: comma-separated FEATURE=VALUE (a category, new or not) or "
                        "FEATURE:scale=F or FEATURE:add=A (a numeric feature) terms, each with an optional :share=S, "
                        "e.g. city=shenzhen:share=0.2,avg_spend:scale=8:share=0.3")
    change.add_argument("--compliance", type=float, default=None, metavar="C",
                        help="share in (0, 1] of the decisions the coupon system applies (the others get the cheapest "
                        "level), from the change day if given [1]")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("export", help="write a campaign's stored decisions to the outbox (files + manifest.json)",
                       parents=[_path_options("--landing", "--warehouse")], **kw)
    p.add_argument("--campaign", required=True, help="campaign id")
    p.add_argument("--budget", type=float, action="append", default=None,
                   help="only this per-capita budget (repeatable) [every configured budget]")
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="file format [parquet]")
    p.add_argument("--out", default=None, help="outbox folder [PROMO_OUTBOX_DIR or data/outbox]")
    p.add_argument("--despite-stop", action="store_true",
                   help="write the latest decisions even though monitoring stopped their export (stop_export)")
    p.set_defaults(func=cmd_export)

    every_path = _path_options(*PATH_OPTIONS)
    p = sub.add_parser("run", help="materialize the whole asset graph for the landing folder's campaigns",
                       parents=[every_path], **kw)
    p.add_argument("--campaign", action="append", help="only this campaign (repeatable) [all]")
    p.add_argument("--from", dest="date_from", type=_date, help="first day to ingest (YYYY-MM-DD) [first file]")
    p.add_argument("--to", dest="date_to", type=_date, help="last day to ingest (YYYY-MM-DD) [last file]")
    p.add_argument("--ingest-only", action="store_true", help="only load the day files (rct_events), skip models and decisions")
    p.add_argument("--verbose", action="store_true", help="show Dagster's own log lines")
    p.add_argument("--no-progress", action="store_true", help="accepted for scripts; progress is printed as log lines")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("forget", help="remove loaded day partitions whose landing file was deleted",
                       parents=[every_path], **kw)
    p.add_argument("--campaign", required=True, help="campaign id")
    p.add_argument("--day", type=_date, action="append", required=True, help="day YYYY-MM-DD (repeatable)")
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser("report", help="print the champion and the policy-evaluation leaderboard",
                       parents=[every_path], **kw)
    p.add_argument("--campaign", action="append", help="only this campaign (repeatable) [all]")
    p.add_argument("--history", action="store_true",
                   help="every kept run (PROMO_KEEP_RUNS) and every budget, not only the latest succeeded run's "
                   "evaluation of the budgets in campaign.yaml now")
    p.add_argument("--wide", action="store_true",
                   help=f"every column of the leaderboard (wider than {REPORT_COLUMNS} columns) [rank, model, the "
                   "ranking figure, the estimate with its interval, spend ratio, vs random, note]")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="table for people; csv (the leaderboard rows) or json (everything) for machines [table]")
    p.add_argument("--html", default=None, metavar="PATH",
                   help="write the campaign's self-contained HTML report (plots, champion, decisions) to PATH "
                   "instead of printing; needs one --campaign when the warehouse holds several")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("serve", help="the HTTP decision service: the champion's level for users sent as JSON",
                       parents=[_path_options("--landing", "--warehouse")], **kw)
    p.add_argument("--campaign", action="append", help="only this campaign (repeatable) [every campaign of the landing folder]")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on [127.0.0.1: this machine only]")
    p.add_argument("--port", type=int, default=8000, help="port [8000]")
    p.add_argument("--reload-interval", type=float, default=2.0,
                   help="seconds between checks for a new champion or λ (0: never reload) [2]")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                   help="the server's log level [info]")
    p.add_argument("--access-log", action="store_true", help="log every request line (method, path, status)")
    p.add_argument("--read-timeout", type=float, default=10.0,
                   help="seconds a request's body may take to arrive (408 after) [10]")
    p.add_argument("--max-connections", type=int, default=1000,
                   help="open connections and requests at once; beyond, 503 (uvicorn's limit_concurrency) [1000]")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("models", help="list the registered models", **kw)
    p.add_argument("--format", choices=("table", "markdown", "csv", "json"), default="table",
                   help="table for the terminal, markdown (the docs' table), csv or json (every field, with "
                   "the hyper-parameters and assets) [table]")
    p.set_defaults(func=cmd_models)
    return parser


def main(argv: list[str] | None = None) -> int:
    import duckdb

    from promo_assets.store.warehouse import WarehouseBusyError, WarehouseUnusableError, unusable

    args = build_parser().parse_args(argv)
    _apply_path_options(args)
    try:
        return args.func(args)
    except (WarehouseBusyError, SettingsError) as exc:  # e.g. `promo report` while a run writes
        print(f"promo {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except WarehouseUnusableError as exc:  # truncated, corrupt, a directory, a read-only file system
        print(f"promo {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except duckdb.Error as exc:  # the warehouse failed while being read or written outside a run's steps
        print(f"promo {args.command}: {unusable(settings.warehouse_path(), exc)}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `promo report | head`: the reader has gone, nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush cannot fail again
        return 141  # 128 + SIGPIPE, as a shell reports a command stopped by a closed pipe
    except Exception as exc:  # noqa: BLE001 (last resort: one line, never a stack, unless asked for)
        if os.environ.get("PROMO_TRACEBACK"):
            raise
        where = traceback.extract_tb(exc.__traceback__)[-1]
        print(f"promo {args.command}: unexpected error {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]} "
              f"(at {Path(where.filename).name}:{where.lineno}; set PROMO_TRACEBACK=1 to see the traceback, and "
              "please report it)", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())

"""`promo run` on the demo campaign, old code vs new code, side by side on the same machine.

Each round simulates the demo campaign (the README's demo: 14 days, 5,000 users, seed 0) into a
fresh temporary landing folder, then runs `python -m promo_assets.cli run --campaign demo` once with
the OLD checkout first on PYTHONPATH and once with the NEW one (order alternating between rounds),
each in its own temporary warehouse / artefact store / DAGSTER_HOME (with that checkout's
dagster_home/dagster.yaml, as the demo runs), and prints the wall time and the
CPU time (user + system of the run's process tree: much less sensitive than wall time to other work
on a shared machine) of each run, the load average after it and the per-code medians.

    .venv/bin/python benchmarks/run_time_ab.py --old /path/to/old/checkout [--new .] [--rounds 3]
        [--new-models s_learner dipn gnn_hazard] [--new-yaml 'champion: {evidence: cross_fitted}']
        [--new-steps outcomes] [--tag T]

(e.g. `git worktree add /tmp/old <commit>` for the old checkout). Same Python environment for both, each
checkout with its own SQL (benchmarks/_checkout.py: the editable install would give the old code this one's).
`--new-steps outcomes` names the steps only the NEW code has (new assets): their own time, from the runs'
step timings (Dagster's step stats), is subtracted from the NEW runs' wall time for the net comparison.
`--new-models` restricts the NEW runs to the models the old code trains (campaign.yaml
`models.include`, in a copy of the landing folder: the old code would refuse the key), so that both
sides do the same work; without it the new code trains its default model set.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _checkout import cli_command  # noqa: E402
from _results import Recorder  # noqa: E402

from promo_assets.simulation import REFERENCE_START  # noqa: E402


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def step_seconds(home: Path) -> dict[str, float]:
    """Seconds of every step (summed per step key) of the runs stored under the Dagster home `home`."""
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(home))
    out: dict[str, float] = {}
    for run_ in instance.get_runs():
        for s in instance.get_run_step_stats(run_.run_id):
            if s.start_time and s.end_time:
                out[s.step_key] = out.get(s.step_key, 0.0) + s.end_time - s.start_time
    return out


def run(code: Path, landing: Path, work: Path, max_epochs: str | None) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds of the run's process tree, exit code, output tail)."""
    env = dict(os.environ, PYTHONPATH=str(code), PROMO_LANDING_DIR=str(landing),
               PROMO_WAREHOUSE=str(work / "warehouse.duckdb"), PROMO_ARTIFACTS_DIR=str(work / "artifacts"),
               DAGSTER_HOME=str(work / "dagster_home"))
    if max_epochs:
        env["PROMO_MAX_EPOCHS"] = max_epochs
    (work / "dagster_home").mkdir(parents=True, exist_ok=True)
    # the instance settings the demo runs with (the `warehouse` pool at limit 1, telemetry off)
    shutil.copy(code / "dagster_home" / "dagster.yaml", work / "dagster_home" / "dagster.yaml")
    t0, cpu0 = time.perf_counter(), _children_cpu()
    proc = subprocess.run(cli_command(code, "run", "--campaign", "demo", "--no-progress"),
                          env=env, capture_output=True, text=True, cwd=code)
    seconds, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    return seconds, cpu, proc.returncode, proc.stdout[-600:] + proc.stderr[-600:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, default=Path("."))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-epochs", default=None, help="PROMO_MAX_EPOCHS for both (default: unset, as in the demo)")
    ap.add_argument("--new-models", nargs="+", default=None,
                    help="models.include for the NEW runs (the old code's models, for the same work on both sides)")
    ap.add_argument("--new-yaml", default=None,
                    help="campaign.yaml text appended for the NEW runs (e.g. 'champion: {evidence: cross_fitted}')")
    ap.add_argument("--new-steps", nargs="+", default=[],
                    help="step keys of the new assets (their time is subtracted from the NEW runs' wall time)")
    ap.add_argument("--tag", default=None, help="record benchmarks/results/run_time_ab--TAG.json (keeps other comparisons)")
    args = ap.parse_args()
    rec = Recorder("run_time_ab")
    codes = {"old": args.old.resolve(), "new": args.new.resolve()}
    times: dict[str, list[float]] = {"old": [], "new": []}
    cpus: dict[str, list[float]] = {"old": [], "new": []}
    steps: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    own: dict[str, list[float]] = {"old": [], "new": []}  # seconds of the --new-steps in each run
    with tempfile.TemporaryDirectory() as tmp:
        landing = Path(tmp) / "landing"
        env = dict(os.environ, PYTHONPATH=str(codes["new"]), PROMO_LANDING_DIR=str(landing),
                   DAGSTER_HOME=str(Path(tmp) / "sim_home"))
        (Path(tmp) / "sim_home").mkdir()
        subprocess.run([sys.executable, "-m", "promo_assets.cli", "simulate", "--preset", "demo", "--campaign", "demo",
                        "--days", "14", "--users", "5000", "--seed", "0", "--start", REFERENCE_START.isoformat()],
                       env=env, check=True, capture_output=True,
                       cwd=codes["new"])
        landings = {"old": landing, "new": landing}
        if args.new_models or args.new_yaml:
            landings["new"] = Path(tmp) / "landing_new"
            shutil.copytree(landing, landings["new"])
            with open(landings["new"] / "demo" / "campaign.yaml", "a") as f:
                if args.new_models:
                    f.write(f"models:\n  include: [{', '.join(args.new_models)}]\n")
                if args.new_yaml:
                    f.write(args.new_yaml.rstrip("\n") + "\n")
            print(f"new runs: models.include = {args.new_models}, campaign.yaml + {args.new_yaml!r}", flush=True)
        for r in range(args.rounds):
            order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
            for which in order:
                work = Path(tmp) / f"{which}{r}"
                seconds, cpu, rc, tail = run(codes[which], landings[which], work, args.max_epochs)
                times[which].append(seconds)
                cpus[which].append(cpu)
                steps[which].append(step_seconds(work / "dagster_home"))
                own[which].append(sum(t for k, t in steps[which][-1].items() if k in args.new_steps))
                print(f"round {r} {which}: {seconds:.1f} s wall, {cpu:.1f} s CPU, exit {rc}, load {os.getloadavg()[0]:.1f}"
                      + (f", new steps {own[which][-1]:.2f} s" if args.new_steps else ""), flush=True)
                if rc != 0:
                    print(tail)
    for which in ("old", "new"):
        print(f"{which}: median {statistics.median(times[which]):.1f} s wall ({', '.join(f'{t:.1f}' for t in times[which])}), "
              f"{statistics.median(cpus[which]):.1f} s CPU ({', '.join(f'{t:.1f}' for t in cpus[which])}) code {codes[which]}")
    for label, xs in (("wall time", times), ("CPU time", cpus)):
        print(f"new / old median {label}: {statistics.median(xs['new']) / statistics.median(xs['old']):.2f}")
    net = [t - o for t, o in zip(times["new"], own["new"])]
    old_med = statistics.median(times["old"])
    if args.new_steps:
        print(f"new steps {args.new_steps}: median {statistics.median(own['new']):.2f} s; new wall net of them: median "
              f"{statistics.median(net):.1f} s, net new / old median wall {statistics.median(net) / old_med:.3f}")
    git = lambda code: subprocess.run(["git", "rev-parse", "HEAD"], cwd=code, capture_output=True, text=True).stdout.strip()  # noqa: E731
    rec.write({"old_commit": git(codes["old"]), "new_commit": git(codes["new"]), "rounds": args.rounds,
               "max_epochs": args.max_epochs, "new_models": args.new_models, "new_yaml": args.new_yaml, "wall_s": times, "cpu_s": cpus,
               "step_s": steps, "new_steps": args.new_steps, "new_steps_s": own["new"], "new_wall_net_of_new_steps_s": net,
               "old_first": [r % 2 == 0 for r in range(args.rounds)]},
              headline={"old median wall s": round(statistics.median(times["old"]), 1),
                        "new median wall s": round(statistics.median(times["new"]), 1),
                        "new / old median wall": round(statistics.median(times["new"]) / statistics.median(times["old"]), 2),
                        "new / old median CPU": round(statistics.median(cpus["new"]) / statistics.median(cpus["old"]), 2),
                        **({"new steps median s": round(statistics.median(own["new"]), 2),
                            "new net of new steps / old median wall": round(statistics.median(net) / old_med, 3)}
                           if args.new_steps else {})},
              tag=args.tag)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

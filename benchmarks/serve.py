"""`promo serve` against `OnlinePolicy` called in process: latency for one user, throughput for batches.

A demo campaign (--days RCT days, --users users; the champion pinned to one model, so that the
in-process baseline is exactly `OnlinePolicy(model, λ)`) goes through `promo run` in a temporary
landing folder / warehouse / artefact store; then `promo serve` is started in its own process group
on 127.0.0.1 (a free port) and called over HTTP/1.1 with one keep-alive connection:

- latency for one user: --requests sequential requests of one user each (a population user's
  features as JSON, a fixed budget), p50 / p99 / mean of the wall time per request as the client
  sees it (JSON encoding of the body done beforehand; the answer read and parsed); each request
  alternates with the in-process call for the same user, so both see the same machine load;
- throughput for batches of --batch users: sequential requests; users per second of wall time and
  users per second per core = users / the server process's CPU seconds (utime + stime from
  /proc/<pid>/stat: what the service costs, whatever else runs on the machine);
- the same in process: `OnlinePolicy(model, λ).decide` on a one-user dict (p50 / p99) and on a
  frame of --batch users (users per CPU second, time.process_time), same model, same λ;
- the overhead as a ratio: service / in process (latency), in process / service (users per core).

The levels of the service's champion users are checked against OnlinePolicy's on the same users.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/serve.py [--users 3000] [--days 3] [--requests 2000]
        [--batches 40] [--batch 1000] [--model lgbm_s_mono]

Prints a table and records benchmarks/results/serve.json (benchmarks/_results.py).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _results import Recorder  # noqa: E402

BUDGET = 1.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process (and its waited-for children), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12))
    return ticks / os.sysconf("SC_CLK_TCK")


def _promo(env: dict, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "promo_assets.cli", *args], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"promo {' '.join(args)} failed: {done.stderr[-3000:]}")


def _post(conn: http.client.HTTPConnection, path: str, body: bytes) -> dict:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    if resp.status != 200:
        raise SystemExit(f"the service answered {resp.status}: {data[:500]!r}")
    return json.loads(data)


def _user_json(frame: pd.DataFrame, features: list[str]) -> list[dict]:
    out = []
    for row in frame.to_dict("records"):
        feats = {}
        for f in features:
            v = row[f]
            feats[f] = None if v is None or (isinstance(v, float) and np.isnan(v)) else (v.item() if hasattr(v, "item") else v)
        out.append({"user_id": str(row["user_id"]), "features": feats})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", type=int, default=3000)
    ap.add_argument("--days", type=int, default=3)
    ap.add_argument("--requests", type=int, default=2000, help="one-user requests timed [2000]")
    ap.add_argument("--batches", type=int, default=40, help="batch requests timed [40]")
    ap.add_argument("--batch", type=int, default=1000, help="users per batch [1000]")
    ap.add_argument("--model", default="lgbm_s_mono", help="the champion (campaign.yaml champion.pin) [lgbm_s_mono]")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    rec = Recorder("serve")

    tmp = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    (tmp / "dagster_home").mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", tmp / "dagster_home")
    env = {**os.environ, "PROMO_LANDING_DIR": str(tmp / "landing"), "PROMO_WAREHOUSE": str(tmp / "wh.duckdb"),
           "PROMO_ARTIFACTS_DIR": str(tmp / "artifacts"), "DAGSTER_HOME": str(tmp / "dagster_home"),
           "PROMO_OUTBOX_DIR": str(tmp / "outbox"), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    os.environ.update({k: env[k] for k in ("PROMO_LANDING_DIR", "PROMO_WAREHOUSE", "PROMO_ARTIFACTS_DIR")})
    server = None
    try:
        t0 = time.perf_counter()
        _promo(env, "simulate", "--preset", "demo", "--campaign", "demo", "--days", str(args.days), "--users",
               str(args.users), "--seed", "0")
        with open(tmp / "landing" / "demo" / "campaign.yaml", "a") as f:
            f.write(f"models:\n  include: [{args.model}]\nchampion:\n  pin: {args.model}\n")
        _promo(env, "run", "--campaign", "demo", "--no-progress")
        setup_s = time.perf_counter() - t0
        print(f"campaign decided by promo run in {setup_s:.0f}s", flush=True)

        # the in-process baseline: the same model and λ
        from promo_assets import warehouse
        from promo_assets.allocation import OnlinePolicy
        from promo_assets.serve import read_campaign

        with warehouse.connect(tmp / "wh.duckdb", read_only=True) as con:
            state = read_campaign(con, tmp / "landing", "demo")
        assert state.members == (args.model,), state
        model, lam = state.models[0], state.lambdas[BUDGET]
        policy = OnlinePolicy(model, lam)
        features = list(state.features)
        pop = pd.read_parquet(sorted((tmp / "landing" / "demo" / "population").glob("*.parquet"))[-1])
        users = _user_json(pop, features)
        n_pop = len(users)

        frames = [pd.DataFrame([{f: (np.nan if v is None else v) for f, v in u["features"].items()}
                                for u in (users * (1 + args.batch // n_pop))[j * 7 % n_pop:][:args.batch]])
                  for j in range(args.batches)]

        # the service
        port = _free_port()
        log = open(tmp / "serve.log", "w")  # noqa: SIM115 (the server's output, closed with the folder)
        server = subprocess.Popen([sys.executable, "-m", "promo_assets.cli", "serve", "--port", str(port)], env=env,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("GET", "/health")
                conn.getresponse().read()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"promo serve did not start: {(tmp / 'serve.log').read_text()[-2000:]}") from None
                time.sleep(0.2)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        path = "/v1/campaigns/demo/decide"
        bodies = [json.dumps({"user": users[i % n_pop], "budget": BUDGET}).encode() for i in range(args.requests)]
        for b in bodies[:50]:  # warm-up
            _post(conn, path, b)

        # one user: in process and over HTTP alternately, so that both see the same machine load
        one, lat = [], []
        for i, b in enumerate(bodies):
            u = users[i % n_pop]
            s = time.perf_counter()
            policy.decide({f: (np.nan if v is None else v) for f, v in u["features"].items()})
            one.append(time.perf_counter() - s)
            s = time.perf_counter()
            _post(conn, path, b)
            lat.append(time.perf_counter() - s)

        # batches: alternately too; CPU seconds of this process (in process) and of the server (service)
        batch_bodies = []
        for j in range(len(frames)):
            start = j * 7 % n_pop
            chosen = (users * (1 + args.batch // n_pop))[start:][:args.batch]
            batch_bodies.append(json.dumps({"users": chosen, "budget": BUDGET}).encode())
        _post(conn, path, batch_bodies[0])  # warm-up
        inproc_levels, answers = [], []
        inproc_cpu = inproc_wall = serve_cpu = serve_wall = 0.0
        for f, b in zip(frames, batch_bodies):
            c0, w0 = time.process_time(), time.perf_counter()
            inproc_levels.append(policy.decide(f))
            inproc_cpu += time.process_time() - c0
            inproc_wall += time.perf_counter() - w0
            c0, w0 = _cpu_seconds(server.pid), time.perf_counter()
            answers.append(_post(conn, path, b))
            serve_wall += time.perf_counter() - w0
            serve_cpu += _cpu_seconds(server.pid) - c0

        # the service's champion users get OnlinePolicy's levels
        agree = total = 0
        for got, want in zip(answers, inproc_levels):
            d = pd.DataFrame(got["decisions"])
            on = (d["policy"] == "champion").to_numpy()
            agree += int((d["level"].to_numpy()[on] == want[on]).sum())
            total += int(on.sum())
        explored = 1 - total / (len(answers) * args.batch)
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    ms = lambda xs, q: float(np.percentile(np.asarray(xs) * 1e3, q))  # noqa: E731
    n_batch_users = args.batches * args.batch
    fig = {
        "model": args.model, "lambda_": lam, "budget_per_capita": BUDGET, "features": len(features),
        "campaign": {"preset": "demo", "days": args.days, "users": args.users, "setup_seconds": round(setup_s, 1)},
        "one_user": {
            "requests": args.requests,
            "service_ms": {"p50": ms(lat, 50), "p99": ms(lat, 99), "mean": float(np.mean(lat) * 1e3)},
            "in_process_ms": {"p50": ms(one, 50), "p99": ms(one, 99), "mean": float(np.mean(one) * 1e3)},
        },
        "batch": {
            "batch_size": args.batch, "requests": args.batches,
            "service_users_per_s": n_batch_users / serve_wall,
            "service_users_per_s_per_core": n_batch_users / serve_cpu if serve_cpu > 0 else None,
            "service_cpu_seconds": serve_cpu,
            "in_process_users_per_s": n_batch_users / inproc_wall,
            "in_process_users_per_s_per_core": n_batch_users / inproc_cpu if inproc_cpu > 0 else None,
            "explored_share": explored, "champion_levels_equal_online_policy": agree / total,
        },
    }
    fig["overhead"] = {
        "latency_p50_ratio": fig["one_user"]["service_ms"]["p50"] / fig["one_user"]["in_process_ms"]["p50"],
        "latency_p99_ratio": fig["one_user"]["service_ms"]["p99"] / fig["one_user"]["in_process_ms"]["p99"],
        "throughput_per_core_ratio": (fig["batch"]["in_process_users_per_s_per_core"]
                                      / fig["batch"]["service_users_per_s_per_core"]),
    }
    print(f"{'':34}{'service':>12}{'in process':>12}{'ratio':>8}")
    print(f"{'one user p50 (ms)':34}{fig['one_user']['service_ms']['p50']:12.2f}{fig['one_user']['in_process_ms']['p50']:12.2f}"
          f"{fig['overhead']['latency_p50_ratio']:8.2f}")
    print(f"{'one user p99 (ms)':34}{fig['one_user']['service_ms']['p99']:12.2f}{fig['one_user']['in_process_ms']['p99']:12.2f}"
          f"{fig['overhead']['latency_p99_ratio']:8.2f}")
    print(f"{f'batches of {args.batch}: users/s/core':34}{fig['batch']['service_users_per_s_per_core']:12.0f}"
          f"{fig['batch']['in_process_users_per_s_per_core']:12.0f}{fig['overhead']['throughput_per_core_ratio']:8.2f}")
    print(f"champion levels equal to OnlinePolicy's: {agree / total:.4f}; explored {explored:.3f}")
    headline = {"one_user_p50_ms": fig["one_user"]["service_ms"]["p50"], "one_user_p99_ms": fig["one_user"]["service_ms"]["p99"],
                "batch_users_per_s_per_core": fig["batch"]["service_users_per_s_per_core"],
                "latency_overhead_p50": fig["overhead"]["latency_p50_ratio"],
                "throughput_overhead": fig["overhead"]["throughput_per_core_ratio"]}
    rec.write(fig, headline=headline)
    return 0


if __name__ == "__main__":
    sys.exit(main())

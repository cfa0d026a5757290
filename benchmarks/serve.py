"""`promo serve` and in-process decisions: the compiled scoring plan against the path before it and
against a bare floor, side by side in one run.

Setup: a demo campaign (`promo simulate --preset demo --days D --users U --seed 0`, the default models;
the champion is whatever `promo run` picks, on the demo a blend; `--model M` pins M) decided by
`promo run` in a temporary landing folder / warehouse / artefact store. A second warehouse with another
champion (`champion: pin:` --switch-to, one more `promo run`) is prepared for the champion change of
the concurrent part.

Parts (`--parts`, comma-separated; default all):

- `inproc`: one user in process, --requests calls each, alternating call by call (same machine load):
  * old: the path before the plan, rebuilt here: a one-row pandas frame from the user's dict, each
    member's `FeatureEncoder.transform`, LightGBM's `Booster.predict` (num_threads=1) / the torch
    network's eager pass under `no_grad`, the blend, `decide`;
  * new: `OnlinePolicy(state.plan, λ).decide(user dict)` (the compiled plan) and the service's own work
    in process (`CampaignState.parse` + `decide` of the JSON body, parsed by orjson);
  * floor: the members' raw predict calls on a prepared NumPy row (LightGBM's single-row C call /
    the traced or eager torch pass), no encoding, no blend, no decision;
  * new alone: `OnlinePolicy.decide(user dict)` again, --requests calls one after another with nothing
    in between (the loop above runs the old pandas path between two calls of the new one, which
    leaves its caches cold: both figures are recorded).
- `http`: one user over HTTP/1.1 (one keep-alive connection), p50 / p99 / mean over --requests requests
  to the new service, over --old-requests to the service of --old-ref (by default da2c1d0, the
  compiled plan before the compiled LightGBM forests and the one-pass checks; extracted with `git
  archive`, same warehouse; `--old-ref none` skips it), and over --requests to an
  empty Starlette endpoint on uvicorn (the floor of the HTTP part; the floor of one user over HTTP is
  that plus the members' raw calls).
- `batch`: --batches requests of --batch users to each service: users per second and users per second
  per core (users / the server's CPU seconds from /proc/<pid>/stat).
- `stream`: `OnlinePolicy(model, λ).decide_stream` for every model of the campaign that serves, on
  --stream-users users (the population resampled) in frames of 1,000: users per CPU-second
  (time.process_time); the old path's, through the same `decide_stream` (its gathering of batches
  included), on the first --old-stream-users of them.
- `concurrent`: --clients client threads (each a lean keep-alive socket client: a prepared request, the
  answer read by its Content-Length) send one-user requests for --duration seconds; half way the
  warehouse file is replaced by the one with the other champion (the service reloads, compiles the new
  plan and swaps it in): requests per second, p50 / p99, failed requests (any non-200 or error), the
  champion versions answered.
- `chunked`: one request with a chunked body of --big-mib MiB (no Content-Length) sent in 64 KiB
  chunks: whether the 413 arrived before the body ended, MiB sent by then, and the server's resident
  memory before and after (VmRSS, VmHWM from /proc).

Every level the new service gives its champion users equals the old path's (checked on the batches).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/serve.py [--users 2000] [--days 4] [--requests 5000]
        [--old-requests 1000] [--batches 40] [--batch 1000] [--stream-users 100000]
        [--old-stream-users 20000] [--clients 50] [--duration 30] [--big-mib 200] [--model M]
        [--switch-to lgbm_s] [--old-ref da2c1d0] [--parts inproc,http,batch,stream,concurrent,chunked]
        [--keep] [--workdir DIR] [--quick] [--tag TAG]

`--quick`: a short run (1,000 one-user requests, 10 batches, 20,000 decide_stream users, 10 s of
concurrent clients, a 50 MiB chunked body). The full run takes about 8-12 minutes on 2 cores (the
campaign's setup, two `promo run`s, included).

Prints a table and records benchmarks/results/serve.json (benchmarks/_results.py), with the load.
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
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _checkout import cli_command  # noqa: E402
from _results import Recorder  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

BUDGET = 1.0
PATH = "/v1/campaigns/demo/decide"
EMPTY_APP = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
async def empty(request):
    await request.body()
    return Response(b'{}', media_type='application/json')
app = Starlette(routes=[Route('/{p:path}', empty, methods=['GET', 'POST'])])
uvicorn.run(app, host='127.0.0.1', port=int(sys.argv[1]), log_level='warning', server_header=False)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(fields[i]) for i in (11, 12)) / os.sysconf("SC_CLK_TCK")


def _memory(pid: int) -> dict:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            out[line.split(":")[0]] = int(line.split()[1]) / 1024  # MiB
    return out


def _promo(env: dict, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "promo_assets.cli", *args], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"promo {' '.join(args)} failed: {done.stderr[-3000:]}")


class Server:
    """A server process in its own process group, answering GET /health (or anything) when started."""

    def __init__(self, cmd: list[str], env: dict, log: Path, port: int):
        self.port, self.log = port, log
        self.proc = subprocess.Popen(cmd, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT,  # noqa: SIM115
                                     start_new_session=True)
        deadline = time.monotonic() + 180
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("GET", "/health")
                conn.getresponse().read()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit(f"server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Client:
    """One keep-alive HTTP/1.1 connection to a server; a connection the server closed (its keep-alive
    timeout) is opened again once and counted."""

    def __init__(self, port: int, timeout: float = 120):
        self.port, self.timeout, self.reconnects = port, timeout, 0
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def post(self, body: bytes, check: bool = True):
        for attempt in (0, 1):
            try:
                self.conn.request("POST", PATH, body=body, headers={"Content-Type": "application/json"})
                resp = self.conn.getresponse()
                data = resp.read()
                break
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                if attempt:
                    raise
                self.reconnects += 1
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        if not check:
            return data
        if resp.status != 200:
            raise SystemExit(f"the service answered {resp.status}: {data[:500]!r}")
        return json.loads(data)


class RawClient:
    """A lean keep-alive HTTP/1.1 client for the concurrent part (a load generator: a prepared request
    sent on a socket, the answer read by its Content-Length), so that the clients' own Python work
    takes as little of the shared cores as it can."""

    def __init__(self, port: int, timeout: float = 60):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, request: bytes) -> tuple[int, bytes]:
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buf:
            part = self.sock.recv(65536)
            if not part:
                raise ConnectionResetError("the server closed the connection")
            self.buf += part
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        size = next(int(v) for k, _, v in (line.partition(b":") for line in lines[1:])
                    if k.strip().lower() == b"content-length")
        while len(rest) < size:
            part = self.sock.recv(65536)
            if not part:
                raise ConnectionResetError("the server closed the connection")
            rest += part
        self.buf = rest[size:]
        return status, rest[:size]

    def close(self) -> None:
        self.sock.close()


def _user_json(frame: pd.DataFrame, features: list[str]) -> list[dict]:
    out = []
    for row in frame.to_dict("records"):
        feats = {f: (None if row[f] is None or (isinstance(row[f], float) and np.isnan(row[f])) else
                     (row[f].item() if hasattr(row[f], "item") else row[f])) for f in features}
        out.append({"user_id": str(row["user_id"]), "features": feats})
    return out


def _ms(xs, q) -> float:
    return float(np.percentile(np.asarray(xs) * 1e3, q))


def _lat(xs) -> dict:
    return {"p50": _ms(xs, 50), "p99": _ms(xs, 99), "mean": float(np.mean(xs) * 1e3), "n": len(xs)}


# ------------------------------------------------------------------------------------ the old path
class OldPath:
    """The scoring path before the plan (module docstring), for one champion's members."""

    def __init__(self, state):
        import lightgbm as lgb

        from promo_assets.models.lgbm import LGBMFitted

        self.state = state
        self.boosters = {}
        for m in state.models:
            f = getattr(m, "model_", m)
            if isinstance(f, LGBMFitted):
                self.boosters[id(f)] = {r: lgb.Booster(model_str=t) for r, t in f.boosters.items()}

    def member(self, model, frame: pd.DataFrame):
        import torch

        from promo_assets.core.coefficients import Coefficients
        from promo_assets.models.base import TrainedModel, response_mean, rule_costs
        from promo_assets.models.lgbm import LGBMFitted, _level_feature

        f = getattr(model, "model_", model)
        if isinstance(f, LGBMFitted):
            x_num, x_cat = f.encoder.transform(frame)
            x = np.hstack([x_num.astype(np.float64), x_cat.astype(np.float64)])
            k, b = f.config.n_levels, self.boosters[id(f)]

            def score(part):
                if f.variant == "t":
                    return np.column_stack([b[f"{part}/{j}"].predict(x, num_threads=1) for j in range(k)])
                grid = np.column_stack([np.repeat(x, k, axis=0), np.tile(_level_feature(f.config, np.arange(k)), len(x))])
                return b[part].predict(grid, num_threads=1).reshape(len(x), k)

            response = score("response")
            return Coefficients(response, rule_costs(f.config, response, lambda: np.clip(score("cost"), 0.0, None)))
        if isinstance(f, TrainedModel):
            import torch.nn.functional as F

            with torch.no_grad():
                f.module.eval()
                x_num, x_cat = f.encoder.transform(frame)
                r, c = f.module.curves(torch.from_numpy(x_num), torch.from_numpy(x_cat))
                response = response_mean(r, f.config.response).numpy().astype(np.float64)
                response = response * f.targets["response_scale"] + f.targets["response_mean"]
                return Coefficients(response, rule_costs(f.config, response, lambda: F.softplus(c).numpy()
                                                         .astype(np.float64) * f.targets["cost_scale"]))
        return model.predict(frame)

    def coefficients(self, frame: pd.DataFrame):
        response = cost = None
        for model, w in zip(self.state.models, self.state.weights):
            v, c = self.member(model, frame)
            v, c = w * np.asarray(v, dtype=np.float64), w * np.asarray(c, dtype=np.float64)
            response, cost = (v, c) if response is None else (response + v, cost + c)
        return response, cost


# ------------------------------------------------------------------------------------ parts
def part_inproc(state, users, lam, n) -> dict:
    import orjson

    from promo_assets.allocation import decide
    from promo_assets.decisions import OnlinePolicy
    from promo_assets.models.lgbm import LGBMFitted

    old = OldPath(state)
    policy = OnlinePolicy(state.plan, lam)
    dicts = [{f: (np.nan if v is None else v) for f, v in u["features"].items()} for u in users]
    bodies = [orjson.dumps({"user": u, "budget": BUDGET}) for u in users]
    # the floor: each member's raw prediction on a prepared row (encoded once, outside the timing)
    rows = state.plan.rows_of([dicts[0]])
    raw = []
    for m in state.plan.members:
        if not m.compiled:
            continue
        x_num, x_cat = m.encode(*rows)
        if isinstance(m.fitted, LGBMFitted):
            x = np.hstack([x_num.astype(np.float64), x_cat.astype(np.float64)])
            k = m.fitted.config.n_levels
            trees = m.fitted._forest("response")
            if trees is not None:  # the compiled forest (models.forest): one call for every level
                from promo_assets.models.lgbm import _level_feature

                levels = _level_feature(m.fitted.config, np.arange(k)) if m.fitted.variant != "t" else None
                raw.append(lambda f=trees, x=x, lv=levels: f.predict(x, lv))
            elif m.fitted.variant == "t":
                raw += [(lambda b=m.fitted._booster(f"response/{j}"): b.predict(x)) for j in range(k)]
            else:
                from promo_assets.models.lgbm import _level_feature

                grid = np.column_stack([np.repeat(x, k, axis=0), np.tile(_level_feature(m.fitted.config, np.arange(k)), 1)])
                raw.append(lambda b=m.fitted._booster("response"), g=grid: b.predict(g))
        else:
            import torch

            tn, tc = torch.from_numpy(x_num), torch.from_numpy(x_cat)
            fn = m.fitted._one_row or (lambda a, b, mod=m.fitted.module: mod.curves(a, b))

            def call(fn=fn, tn=tn, tc=tc):
                with torch.inference_mode():
                    return fn(tn, tc)

            raw.append(call)
    t_old, t_new, t_service, t_floor = [], [], [], []
    for i in range(n + 50):
        d, b = dicts[i % len(dicts)], bodies[i % len(bodies)]
        s = time.perf_counter()
        frame = pd.DataFrame([d])
        want = decide(*old.coefficients(frame), lam)
        e1 = time.perf_counter()
        got = policy.decide(d)
        e2 = time.perf_counter()
        budget, ids, r = state.parse(orjson.loads(b))
        state.decide(budget, ids, r)
        e3 = time.perf_counter()
        for fn in raw:
            fn()
        e4 = time.perf_counter()
        if want[0] != got[0]:
            raise SystemExit(f"user {i}: the plan decided level {got[0]}, the old path {want[0]}")
        if i >= 50:  # warm-up left out
            t_old.append(e1 - s)
            t_new.append(e2 - e1)
            t_service.append(e3 - e2)
            t_floor.append(e4 - e3)
    # the new path alone, call after call (as a process serving one user after another runs it): the
    # loop above runs the old pandas path between two calls, which leaves the caches cold for the new one
    t_alone = []
    for i in range(n + 50):
        d = dicts[i % len(dicts)]
        s = time.perf_counter()
        policy.decide(d)
        if i >= 50:
            t_alone.append(time.perf_counter() - s)
    return {"old_path_ms": _lat(t_old), "online_policy_ms": _lat(t_new), "online_policy_alone_ms": _lat(t_alone),
            "service_work_ms": _lat(t_service), "floor_raw_member_calls_ms": _lat(t_floor),
            "raw_calls_per_user": len(raw)}


def part_http(servers: dict, users, n_new, n_old) -> dict:
    out = {}
    bodies = [json.dumps({"user": users[i % len(users)], "budget": BUDGET}).encode() for i in range(max(n_new, n_old))]
    clients = {k: Client(s.port) for k, s in servers.items()}
    for k, c in clients.items():  # warm-up
        for b in bodies[:50]:
            c.post(b, check=k != "empty")
    times = {k: [] for k in servers}
    for i in range(max(n_new, n_old)):  # alternately, so that each sees the same machine load
        for k, c in clients.items():
            if k == "old" and i >= n_old:
                continue
            s = time.perf_counter()
            c.post(bodies[i], check=k != "empty")
            times[k].append(time.perf_counter() - s)
    for k, t in times.items():
        out[k] = {**_lat(t), "reconnects": clients[k].reconnects}
    return out


def part_batch(servers: dict, users, n_batches, size, state, lam) -> dict:
    from promo_assets.allocation import decide

    old = OldPath(state)
    out = {}
    n_pop = len(users)
    bodies, chosen = [], []
    for j in range(n_batches):
        pick = (users * (1 + size // n_pop))[j * 7 % n_pop:][:size]
        chosen.append(pick)
        bodies.append(json.dumps({"users": pick, "budget": BUDGET}).encode())
    agree = total = 0
    for k, server in servers.items():
        if k == "empty":
            continue
        client = Client(server.port)
        client.post(bodies[0])
        cpu = wall = 0.0
        answers = []
        for b in bodies:
            c0, w0 = _cpu_seconds(server.proc.pid), time.perf_counter()
            answers.append(client.post(b))
            wall += time.perf_counter() - w0
            cpu += _cpu_seconds(server.proc.pid) - c0
        n = n_batches * size
        out[k] = {"users_per_s": n / wall, "users_per_s_per_core": n / cpu if cpu > 0 else None, "cpu_s": cpu}
        if k == "new":
            for got, pick in zip(answers[:10], chosen[:10]):
                frame = pd.DataFrame([{f: (np.nan if v is None else v) for f, v in u["features"].items()} for u in pick])
                want = decide(*old.coefficients(frame), lam)
                d = pd.DataFrame(got["decisions"])
                on = (d["policy"] == "champion").to_numpy()
                agree += int((d["level"].to_numpy()[on] == want[on]).sum())
                total += int(on.sum())
    out["champion_levels_equal_old_path"] = agree / total if total else None
    return out


def part_stream(models: dict, lambdas: dict, pop: pd.DataFrame, n_users: int, n_old: int) -> dict:
    from promo_assets.decisions import OnlinePolicy

    rng = np.random.default_rng(0)
    big = pop.iloc[rng.integers(0, len(pop), n_users)].reset_index(drop=True)
    out = {}
    for name, model in models.items():
        policy = OnlinePolicy(model, lambdas[name])
        p0 = time.process_time()
        n = sum(len(b) for b in policy.decide_stream((big.iloc[s:s + 1000] for s in range(0, n_users, 1000))))
        cpu = time.process_time() - p0

        class _One:
            weights, models = (1.0,), (model,)

        class _OldModel:  # the old path as a model: decide_stream gathers its batches as for the new one
            def __init__(self, old):
                self.old = old

            def predict(self, frame):
                return self.old.coefficients(frame)

        old_policy = OnlinePolicy(_OldModel(OldPath(_One)), lambdas[name])
        assert old_policy.plan is None
        p0 = time.process_time()
        sum(len(b) for b in old_policy.decide_stream((big.iloc[s:s + 1000] for s in range(0, n_old, 1000))))
        old_cpu = time.process_time() - p0
        out[name] = {"users": n, "cpu_s": cpu, "users_per_cpu_s": n / cpu,
                     "old_path_users_per_cpu_s": n_old / old_cpu if old_cpu > 0 else None}
        print(f"  decide_stream {name}: {n / cpu:,.0f} users per CPU-second (old path {n_old / old_cpu:,.0f})",
              flush=True)
    return out


def part_concurrent(server, users, clients: int, duration: float, switch) -> dict:
    import orjson

    bodies = [json.dumps({"user": u, "budget": BUDGET}).encode() for u in users[:500]]
    stop = threading.Event()
    results = [[] for _ in range(clients)]

    requests = [b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(b)).encode() + b"\r\n\r\n" + b for b in bodies]

    def client(i):
        conn = RawClient(server.port)
        j = i
        while not stop.is_set():
            s = time.perf_counter()
            try:
                status, data = conn.send(requests[j % len(requests)])
                ok = status == 200
                version = orjson.loads(data).get("champion_version") if ok else f"HTTP {status}: {data[:200]!r}"
            except (OSError, ValueError) as exc:
                ok, version = False, repr(exc)
                conn.close()
                conn = RawClient(server.port)
            results[i].append((time.perf_counter() - s, ok, version, time.monotonic()))
            j += clients

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    c0, t0 = _cpu_seconds(server.proc.pid), time.monotonic()
    for t in threads:
        t.start()
    time.sleep(duration / 2)
    switched_at = time.monotonic()
    switch()
    time.sleep(duration / 2)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    wall, cpu = time.monotonic() - t0, _cpu_seconds(server.proc.pid) - c0
    flat = sorted((r for rs in results for r in rs), key=lambda r: r[3])
    lat = [r[0] for r in flat]
    versions = [r[2] for r in flat if r[1]]
    changed = [r[3] - switched_at for r in flat if r[1] and r[2] != versions[0]]
    return {"clients": clients, "seconds": wall, "requests": len(flat), "failed": sum(not r[1] for r in flat),
            "requests_per_s": len(flat) / wall, "server_cpu_s": cpu, "latency_ms": _lat(lat),
            "champion_versions": sorted(set(versions)), "first_answer_of_new_champion_after_switch_s":
                (min(changed) if changed else None),
            "failures_sample": [r[2] for r in flat if not r[1]][:5]}


def part_chunked(server, mib: int) -> dict:
    total, chunk = mib * 1024 * 1024, 64 * 1024
    before = _memory(server.proc.pid)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    sock.sendall(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b"%x\r\n" % chunk + b" " * chunk + b"\r\n"
    import select

    sent, answered_first = 0, False
    try:
        while sent < total:
            if select.select([sock], [], [], 0)[0]:
                answered_first = True
                break
            sock.sendall(piece)
            sent += chunk
        else:
            sock.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        answered_first = True
    sock.settimeout(30)
    answer = b""
    try:
        while b"\r\n\r\n" not in answer:
            part = sock.recv(65536)
            if not part:
                break
            answer += part
    except (OSError, socket.timeout):
        pass
    sock.close()
    time.sleep(0.5)
    after = _memory(server.proc.pid)
    return {"body_mib": mib, "status_line": answer.split(b"\r\n", 1)[0].decode(errors="replace"),
            "answered_before_the_body_ended": answered_first and sent < total, "mib_sent_before_the_answer": sent / 2 ** 20,
            "rss_mib_before": before.get("VmRSS"), "rss_mib_after": after.get("VmRSS"),
            "peak_rss_mib_before": before.get("VmHWM"), "peak_rss_mib_after": after.get("VmHWM"),
            "peak_rss_growth_mib": after.get("VmHWM", 0) - before.get("VmHWM", 0)}


def setup(args, env: dict, tmp: Path) -> None:
    """The demo campaign decided by `promo run` (wh-first.duckdb, served first) and the same campaign with
    the champion pinned to --switch-to (wh-second.duckdb, for the change mid-way)."""
    _promo(env, "simulate", "--preset", "demo", "--campaign", "demo", "--days", str(args.days), "--users",
           str(args.users), "--seed", "0", "--start", REFERENCE_START.isoformat())
    yaml_path = tmp / "landing" / "demo" / "campaign.yaml"
    original = yaml_path.read_text()
    if args.model:
        original += f"champion:\n  pin: {args.model}\n"
        yaml_path.write_text(original)
    _promo(env, "run", "--campaign", "demo", "--no-progress")
    shutil.copy(tmp / "wh.duckdb", tmp / "wh-first.duckdb")
    yaml_path.write_text(original.replace(f"pin: {args.model}", f"pin: {args.switch_to}") if args.model
                         else original + f"champion:\n  pin: {args.switch_to}\n")
    _promo(env, "run", "--campaign", "demo", "--no-progress")
    shutil.copy(tmp / "wh.duckdb", tmp / "wh-second.duckdb")
    shutil.copy(tmp / "wh-first.duckdb", tmp / "wh.duckdb")
    yaml_path.write_text(original)


# ------------------------------------------------------------------------------------ main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", type=int, default=2000, help="users of the demo campaign [2000]")
    ap.add_argument("--days", type=int, default=4, help="RCT days of the demo campaign [4]")
    ap.add_argument("--requests", type=int, default=5000, help="one-user requests / calls timed (new, floor) [5000]")
    ap.add_argument("--old-requests", type=int, default=1000, help="one-user requests to the old service [1000]")
    ap.add_argument("--batches", type=int, default=40, help="batch requests timed per service [40]")
    ap.add_argument("--batch", type=int, default=1000, help="users per batch [1000]")
    ap.add_argument("--stream-users", type=int, default=100_000, help="users per model for decide_stream [100000]")
    ap.add_argument("--old-stream-users", type=int, default=20_000, help="users per model for the old path [20000]")
    ap.add_argument("--clients", type=int, default=50, help="concurrent clients [50]")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of the concurrent part [30]")
    ap.add_argument("--big-mib", type=int, default=200, help="MiB of the chunked body [200]")
    ap.add_argument("--model", default=None, help="pin the champion to this model [the champion promo run picks]")
    ap.add_argument("--switch-to", default="lgbm_s", help="the champion pinned for the change mid-way [lgbm_s]")
    ap.add_argument("--old-ref", default="da2c1d0",
                    help="git ref of the service to compare with ('none': skip) [da2c1d0: the plan before the compiled "
                    "forests; the code before the plan, d637776, cannot read today's model artefacts]")
    ap.add_argument("--parts", default="inproc,http,batch,stream,concurrent,chunked")
    ap.add_argument("--quick", action="store_true",
                    help="a short run: 1,000 one-user requests (200 to the old service), 10 batches, 20,000 "
                    "decide_stream users (5,000 old), 10 s of concurrent clients, a 50 MiB chunked body "
                    "(options given explicitly still win)")
    ap.add_argument("--tag", default=None, help="write benchmarks/results/serve--TAG.json (e.g. loaded, quick)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--workdir", default=None,
                    help="work in this folder and keep it; a campaign already decided there is reused (no setup) "
                    "[a new temporary folder]")
    args = ap.parse_args()
    if args.quick:
        given = {a.split("=")[0] for a in sys.argv[1:] if a.startswith("--")}
        for name, value in {"requests": 1000, "old_requests": 200, "batches": 10, "stream_users": 20_000,
                            "old_stream_users": 5000, "duration": 10.0, "big_mib": 50}.items():
            if "--" + name.replace("_", "-") not in given:
                setattr(args, name, value)
    parts = set(args.parts.split(","))
    rec = Recorder("serve")

    if args.workdir:
        tmp = Path(args.workdir).resolve()
        tmp.mkdir(parents=True, exist_ok=True)
        args.keep = True
    else:
        tmp = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    reuse = (tmp / "wh.duckdb").exists() and (tmp / "wh-second.duckdb").exists()
    (tmp / "dagster_home").mkdir(exist_ok=True)
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", tmp / "dagster_home")
    env = {**os.environ, "PROMO_LANDING_DIR": str(tmp / "landing"), "PROMO_WAREHOUSE": str(tmp / "wh.duckdb"),
           "PROMO_ARTIFACTS_DIR": str(tmp / "artifacts"), "DAGSTER_HOME": str(tmp / "dagster_home"),
           "PROMO_OUTBOX_DIR": str(tmp / "outbox"), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    os.environ.update({k: env[k] for k in ("PROMO_LANDING_DIR", "PROMO_WAREHOUSE", "PROMO_ARTIFACTS_DIR",
                                           "OMP_NUM_THREADS")})
    servers: dict[str, Server] = {}
    fig: dict = {}
    try:
        t0 = time.perf_counter()
        if reuse:
            shutil.copy(tmp / "wh-first.duckdb", tmp / "wh.duckdb")
        else:
            setup(args, env, tmp)
        setup_s = time.perf_counter() - t0
        print(f"campaign decided by promo run in {setup_s:.0f}s", flush=True)

        import torch

        torch.set_num_threads(1)
        from promo_assets.store import warehouse
        from promo_assets.serve import read_campaign

        with warehouse.connect(tmp / "wh.duckdb", read_only=True) as con:
            state = read_campaign(con, tmp / "landing", "demo")
            duals = con.execute("SELECT model, model_version, lambda_ FROM budget_dual WHERE budget_per_capita = ?",
                                [BUDGET]).fetchall()
        lam = state.lambdas[BUDGET]
        features = list(state.features)
        pop = pd.read_parquet(sorted((tmp / "landing" / "demo" / "population").glob("*.parquet"))[-1])
        users = _user_json(pop, features)
        fig.update({"champion": state.champion, "members": list(state.members), "weights": list(state.weights),
                    "lambda_": lam, "budget_per_capita": BUDGET, "features": len(features),
                    "levels": len(state.labels),
                    "campaign": {"preset": "demo", "days": args.days, "users": args.users,
                                 "setup_seconds": round(setup_s, 1), "setup_reused": reuse}})
        print(f"champion {state.champion}", flush=True)

        if "inproc" in parts:
            fig["one_user_in_process"] = part_inproc(state, users, lam, args.requests)
            print("in process:", {k: (round(v["p50"], 3) if isinstance(v, dict) else v)
                                  for k, v in fig["one_user_in_process"].items()}, flush=True)

        if parts & {"http", "batch", "concurrent", "chunked"}:
            port = _free_port()
            servers["new"] = Server([sys.executable, "-m", "promo_assets.cli", "serve", "--port", str(port),
                                     "--reload-interval", "0.5", "--log-level", "warning"], env, tmp / "serve.log", port)
            port = _free_port()
            servers["empty"] = Server([sys.executable, "-c", EMPTY_APP, str(port)], env, tmp / "empty.log", port)
            if args.old_ref != "none" and parts & {"http", "batch"}:
                old_dir = tmp / "old-code"
                shutil.rmtree(old_dir, ignore_errors=True)
                old_dir.mkdir()
                archive = subprocess.run(["git", "archive", args.old_ref, "promo_assets", "sql"], cwd=ROOT,
                                         capture_output=True, check=True).stdout
                subprocess.run(["tar", "-x", "-C", str(old_dir)], input=archive, check=True)
                port = _free_port()
                servers["old"] = Server(cli_command(old_dir, "serve", "--port", str(port), "--reload-interval", "0",
                                                    "--log-level", "warning"), env, tmp / "old.log", port)
        if "http" in parts:
            fig["one_user_http"] = part_http(servers, users, args.requests, args.old_requests)
            print("over HTTP:", {k: round(v["p50"], 3) for k, v in fig["one_user_http"].items()}, flush=True)
        if "batch" in parts:
            fig["batch_http"] = {"batch_size": args.batch, "requests": args.batches,
                                 **part_batch(servers, users, args.batches, args.batch, state, lam)}
            print("batches:", fig["batch_http"], flush=True)
        if "old" in servers:
            servers.pop("old").stop()
        if "stream" in parts:
            from promo_assets.models import registry

            models, lambdas = {}, {}
            for name, version, model_lam in duals:
                if registry.get(name).needs_graph or model_lam is None:
                    continue
                models[name] = registry.get(name).load(version)
                lambdas[name] = float(model_lam)
            fig["decide_stream"] = part_stream(models, lambdas, pop[features], args.stream_users,
                                               args.old_stream_users)
        if "concurrent" in parts:
            def switch():
                shutil.copy(tmp / "wh-second.duckdb", tmp / "wh-switch.duckdb")
                os.replace(tmp / "wh-switch.duckdb", tmp / "wh.duckdb")

            fig["concurrent"] = part_concurrent(servers["new"], users, args.clients, args.duration, switch)
            print("concurrent:", fig["concurrent"], flush=True)
        if "chunked" in parts:
            fig["chunked_body"] = part_chunked(servers["new"], args.big_mib)
            print("chunked:", fig["chunked_body"], flush=True)
    finally:
        for s in servers.values():
            s.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    head = {}
    inp, web = fig.get("one_user_in_process"), fig.get("one_user_http")
    if inp:
        head["in_process_one_user_p50_ms"] = inp["online_policy_ms"]["p50"]
        head["in_process_one_user_alone_p50_ms"] = inp["online_policy_alone_ms"]["p50"]
        head["in_process_old_path_p50_ms"] = inp["old_path_ms"]["p50"]
    if web:
        head["http_one_user_p50_ms"], head["http_one_user_p99_ms"] = web["new"]["p50"], web["new"]["p99"]
        if "old" in web:
            head["http_old_one_user_p50_ms"] = web["old"]["p50"]
        if inp:
            floor = web["empty"]["p50"] + inp["floor_raw_member_calls_ms"]["p50"]
            head["http_floor_p50_ms"] = floor
            head["http_p50_over_floor"] = web["new"]["p50"] / floor
            fig["http_floor_p50_ms"] = floor
    if fig.get("batch_http"):
        head["batch_users_per_s_per_core"] = fig["batch_http"]["new"]["users_per_s_per_core"]
    for name, r in (fig.get("decide_stream") or {}).items():
        head[f"decide_stream_{name}_users_per_cpu_s"] = r["users_per_cpu_s"]
    if fig.get("concurrent"):
        c = fig["concurrent"]
        head.update({"concurrent_requests_per_s": c["requests_per_s"], "concurrent_failed": c["failed"],
                     "concurrent_p99_ms": c["latency_ms"]["p99"]})
    if fig.get("chunked_body"):
        head["chunked_peak_rss_growth_mib"] = fig["chunked_body"]["peak_rss_growth_mib"]
        head["chunked_413_before_the_end"] = fig["chunked_body"]["answered_before_the_body_ended"]
    print(json.dumps(head, indent=1))
    rec.write(fig, headline=head, tag=args.tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`promo serve` over HTTP: a real server process (its own process group, 127.0.0.1, a free port) on a
campaign decided by `promo run`: one user, a batch, every kind of bad input (status and message), a
campaign without a champion, and a new champion picked up while requests run, none of them failing."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import promo_here
from promo_assets.simulation import REFERENCE_START


START = REFERENCE_START


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _call(port: int, path: str, body=None, raw: bytes | None = None) -> tuple[int, dict]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method="POST" if data is not None else "GET",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class Server:
    """`promo serve` in its own process group; `stop()` ends the group by its id."""

    def __init__(self, env: dict, log: Path, *args: str):
        self.port = _free_port()
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "promo_assets.cli", "serve", "--port", str(self.port), "--reload-interval", "0.5",
             *args], env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, log.read_text()
            try:
                if _call(self.port, "/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"promo serve did not answer: {log.read_text()}")

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A demo campaign decided by `promo run` (3 RCT days, two LightGBM models) and a campaign that only
    has events, served by `promo serve`."""
    root = tmp_path_factory.mktemp("serve")
    env = {**os.environ, "PROMO_LANDING_DIR": str(root / "landing"), "PROMO_WAREHOUSE": str(root / "wh.duckdb"),
           "PROMO_ARTIFACTS_DIR": str(root / "artifacts"), "DAGSTER_HOME": str(root / "dagster_home"),
           "PROMO_OUTBOX_DIR": str(root / "outbox"), "PROMO_MAX_EPOCHS": "2", "OMP_NUM_THREADS": "1"}
    (root / "dagster_home").mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "dagster_home" / "dagster.yaml", root / "dagster_home")

    # the setup in this process (a `promo` process per step would import the definitions each time)
    promo_here(env, "simulate", "--preset", "demo", "--campaign", "demo", "--days", "3", "--users", "600", "--seed", "5",
               "--start", START.isoformat())
    with open(root / "landing" / "demo" / "campaign.yaml", "a") as f:
        f.write("models:\n  include: [lgbm_s, lgbm_s_mono]\nexploration:\n  share: 0.1\n  seed: 2\n")
    promo_here(env, "run", "--campaign", "demo", "--no-progress")
    promo_here(env, "simulate", "--preset", "demo", "--campaign", "fresh", "--days", "1", "--users", "50", "--start",
               START.isoformat())
    promo_here(env, "run", "--campaign", "fresh", "--ingest-only", "--no-progress")
    server = Server(env, root / "serve.log")
    try:
        yield {"server": server, "port": server.port, "root": root, "env": env}
    finally:
        server.stop()


def _users(root: Path, n: int, offset: int = 0) -> list[dict]:
    """n users of the population file with their features as JSON."""
    pop = pd.read_parquet(sorted((root / "landing" / "demo" / "population").glob("*.parquet"))[-1])
    rows = pop.iloc[offset:offset + n]
    feats = [c for c in pop.columns if c != "user_id"]
    return [{"user_id": str(r["user_id"]), "features": {c: (None if pd.isna(r[c]) else
                                                            (r[c].item() if hasattr(r[c], "item") else r[c]))
                                                        for c in feats}} for _, r in rows.iterrows()]


@pytest.mark.slow
def test_serve_one_user_a_batch_and_bad_input(served):
    port, root = served["port"], served["root"]
    status, health = _call(port, "/health")
    assert status == 200 and health["campaigns"]["demo"]["ready"] and not health["campaigns"]["fresh"]["ready"]
    demo = health["campaigns"]["demo"]  # the decision served and its age (decided minutes ago: not stale)
    assert 0 <= demo["decision_age_days"] < 0.5 and demo["stale"] is False and demo["decision_date"] and demo["decided_at"]

    status, info = _call(port, "/v1/campaigns/demo")
    assert status == 200 and info["champion"] and len(info["champion_version"]) == 16
    assert [b["budget_per_capita"] for b in info["budgets"]] == [0.5, 1.0, 1.5]
    assert all(b["lambda_"] is not None and b["lambda_"] >= 0 for b in info["budgets"])
    features = info["features"]
    assert features and set(features.values()) <= {"numeric", "categorical"}

    # one user
    user = _users(root, 1)[0]
    status, out = _call(port, "/v1/campaigns/demo/decide", {"user": user, "budget": 1.0})
    assert status == 200, out
    (d,) = out["decisions"]
    assert d["user_id"] == user["user_id"] and d["policy"] in ("champion", "explore")
    assert 0 <= d["level"] < len(info["levels"]) and d["label"] == info["levels"][d["level"]]["label"]
    assert 0 < d["propensity"] <= 1 and out["lambda_"] == info["budgets"][1]["lambda_"]
    assert out["champion_version"] == info["champion_version"]

    # a batch: the champion's levels are the stored decisions' for the same users at the same λ
    users = _users(root, 300)
    status, out = _call(port, "/v1/campaigns/demo/decide", {"users": users, "budget": 1.0})
    assert status == 200 and len(out["decisions"]) == 300
    got = pd.DataFrame(out["decisions"])
    assert got["user_id"].tolist() == [u["user_id"] for u in users]
    explored = got["policy"] == "explore"
    assert 0 < explored.mean() < 0.3  # share 0.1: a per-user draw
    champ = got[~explored]
    share = info["exploration"]["share"]
    mix = 1 / len(info["levels"])
    assert np.allclose(champ["propensity"], 1 - share + share * mix)
    stored = pd.read_parquet(root / "outbox" / "demo" / out["decision_date"] / "1.parquet").set_index("user_id")
    same = stored.loc[champ["user_id"]]
    on_policy = (same["policy"] == "champion").to_numpy()
    agree = (same["level"].to_numpy()[on_policy] == champ["level"].to_numpy()[on_policy]).mean()
    assert agree > 0.98  # every user but a fractional one at λ
    # the same request again: the same answer (the draws are per user and day, not per request)
    assert _call(port, "/v1/campaigns/demo/decide", {"users": users, "budget": 1.0})[1]["decisions"] == out["decisions"]

    # bad input: 422 naming the field, 404, 409 - never a 500
    name = sorted(features)[0]
    numeric = next(f for f, k in features.items() if k == "numeric")
    bad = [
        ({"user": {**user, "features": {**user["features"], "nope": 1}}, "budget": 1}, 422, "user.features.nope",
         "unknown feature"),
        ({"user": {**user, "features": {**user["features"], numeric: "high"}}, "budget": 1}, 422,
         f"user.features.{numeric}", "must be a finite number"),
        ({"user": {**user, "features": {k: v for k, v in user["features"].items() if k != name}}, "budget": 1}, 422,
         f"user.features.{name}", "missing required feature"),
        ({"users": [user, {"features": user["features"]}], "budget": 1}, 422, "users[1].user_id", "missing"),
        ({"user": user}, 422, "budget", "several budgets"),
        ({"user": user, "budget": 9.5}, 422, "budget", "not one campaign 'demo' decides at"),
        ({"user": user, "budget": "1"}, 422, "budget", "must be a number"),
        ({"users": [], "budget": 1}, 422, "users", "non-empty list"),
        ({"user": user, "users": [user], "budget": 1}, 422, "body", "exactly one of"),
        ({"user": user, "budget": 1, "extra": True}, 422, "extra", "unknown key"),
        ([1, 2], 422, "body", "JSON object"),
    ]
    for body, code, field, text in bad:
        status, err = _call(port, "/v1/campaigns/demo/decide", body)
        assert (status, err.get("field")) == (code, field) and text in err["detail"], (body, status, err)
    status, err = _call(port, "/v1/campaigns/demo/decide", raw=b"{not json")
    assert status == 422 and err["field"] == "body" and "not valid JSON" in err["detail"]
    status, err = _call(port, "/v1/campaigns/nowhere/decide", {"user": user})
    assert status == 404 and "unknown campaign 'nowhere'" in err["detail"]
    status, err = _call(port, "/v1/campaigns/fresh/decide", {"user": user})
    assert status == 409 and "has no champion yet" in err["detail"]
    assert _call(port, "/v1/campaigns/fresh")[0] == 409
    assert _call(port, "/nothing/here")[0] == 404
    log = (root / "serve.log").read_text()
    assert "Traceback" not in log and "http://127.0.0.1:" in log

    # no server path and no exploration seed in what the service shows
    shown = json.dumps([_call(port, p)[1] for p in ("/health", "/v1/campaigns", "/v1/campaigns/demo",
                                                    "/v1/campaigns/fresh")])
    assert str(root) not in shown and "seed" not in shown

    # an edit of campaign.yaml's exploration does not change the online answers: they follow the stored
    # decisions' exploration until the next decisions run
    yaml_path = root / "landing" / "demo" / "campaign.yaml"
    original = yaml_path.read_text()
    try:
        yaml_path.write_text(original.replace("share: 0.1\n  seed: 2", "share: 0.9\n  seed: 7"))
        deadline = time.monotonic() + 30
        reloads = _call(port, "/health")[1]["reloads"]
        while _call(port, "/health")[1]["reloads"] == reloads and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _call(port, "/v1/campaigns/demo")[1]["exploration"]["share"] == 0.1
        assert _call(port, "/v1/campaigns/demo/decide", {"users": users, "budget": 1.0})[1]["decisions"] == out["decisions"]
    finally:
        yaml_path.write_text(original)


@pytest.mark.slow
def test_serve_picks_up_a_new_champion_while_requests_run(served):
    """Day 4 answered from the outbox, `promo run` again (it holds the warehouse's write lock for a
    while): the service keeps answering with the old champion, then switches, with no failed request."""
    port, root = served["port"], served["root"]
    before = _call(port, "/v1/campaigns/demo")[1]
    users = _users(root, 50, offset=100)
    results, stop = [], threading.Event()

    def hammer():
        # a request, then a short pause (stop.wait), all along the run: requests keep arriving before,
        # during and after the switch without two clients spinning a core each against the run
        while not stop.is_set():
            try:
                status, out = _call(port, "/v1/campaigns/demo/decide", {"users": users, "budget": 1.0})
                results.append((status, out.get("champion_version"), out.get("decision_date"), out.get("lambda_")))
            except OSError as exc:
                results.append((None, repr(exc), None, None))
            stop.wait(0.05)

    threads = [threading.Thread(target=hammer) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        day = (START + dt.timedelta(days=3)).isoformat()
        # in this process, as the setup (a `promo` process would first import the definitions); the
        # server is its own process either way
        promo_here(served["env"], "simulate", "--respond-to", str(root / "outbox" / "demo" / day / "1.parquet"),
                   "--day", day, "--campaign", "demo")
        promo_here(served["env"], "run", "--campaign", "demo", "--no-progress")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _call(port, "/v1/campaigns/demo")[1]["decision_date"] == before["decision_date"]:
            time.sleep(0.2)
        time.sleep(1.0)
    finally:
        stop.set()
        for t in threads:
            t.join()
    after = _call(port, "/v1/campaigns/demo")[1]
    assert after["decision_date"] > before["decision_date"] and after["decisions_run_id"] != before["decisions_run_id"]
    assert results and all(r[0] == 200 for r in results), [r for r in results if r[0] != 200][:3]
    seen = [(r[2], r[3]) for r in results]
    old = (before["decision_date"], before["budgets"][1]["lambda_"])
    new = (after["decision_date"], after["budgets"][1]["lambda_"])
    assert set(seen) <= {old, new} and old in seen and new in seen  # each answer wholly old or wholly new
    assert seen.index(new) > max(i for i, s in enumerate(seen) if s == old) - len(threads)  # no flip-flopping


class _Model:
    """A stand-in model: response and cost rise with the level, scaled by feature x."""

    class encoder:  # noqa: N801
        numeric = ["x"]
        categorical = ["city"]

    def predict(self, frame):
        x = frame["x"].fillna(1.0).to_numpy()[:, None]
        k = np.arange(4)[None, :]
        return 0.1 + 0.05 * k * x, 0.5 * k * np.ones_like(x)


def _state(share=0.2):
    from promo_assets.serve import CampaignState
    from promo_assets.serve.registry import model_features

    models = (_Model(),)
    return CampaignState(campaign="c", champion="m", champion_version="v" * 16, members=("m",), weights=(1.0,),
                         versions=("0" * 16,), models=models, lambdas={0.5: 0.05, 1.0: 0.01},
                         features=model_features(models), labels=("0", "1", "2", "3"), incentives=(0.0, 1.0, 2.0, 3.0),
                         share=share, seed=1, mix=np.full(4, 0.25), decision_date=START, decided_at="t",
                         decisions_run_id="r", champion_run_id="c")


def test_state_parses_and_decides_with_the_exports_propensity():
    state = _state()
    users = [{"user_id": i, "features": {"x": float(i % 3), "city": None if i % 5 else 7}} for i in range(2000)]
    budget, ids, rows = state.parse({"users": users, "budget": 1})
    frame = state.frame(rows)
    assert budget == 1.0 and ids[:2] == ["0", "1"] and frame["city"].iloc[0] == "7" and pd.isna(frame["city"].iloc[1])
    out = state.decide(budget, ids, rows)
    d = pd.DataFrame(out["decisions"])
    explore = d["policy"] == "explore"
    assert abs(explore.mean() - 0.2) < 0.04  # a per-user draw with probability share
    v, c = _Model().predict(frame)
    policy = np.argmax(v - 0.01 * c, axis=1)
    assert (d.loc[~explore, "level"].to_numpy() == policy[~explore.to_numpy()]).all()
    follows = d["level"].to_numpy() == policy
    assert np.allclose(d["propensity"], np.where(follows, 0.8 + 0.2 * 0.25, 0.2 * 0.25))
    assert state.decide(budget, ids, rows) == out  # the draws are per user and day
    assert _state(share=0.0).decide(budget, ids, rows)["decisions"][0]["propensity"] == 1.0


@pytest.mark.parametrize("body, field, text", [
    ({"user": {"user_id": "a", "features": {"x": True, "city": "c"}}, "budget": 1}, "user.features.x", "finite number"),
    ({"user": {"user_id": "a", "features": {"x": float("nan"), "city": "c"}}, "budget": 1}, "user.features.x", "finite"),
    ({"user": {"user_id": "a", "features": {"x": 1, "city": [1]}}, "budget": 1}, "user.features.city", "string"),
    ({"user": {"user_id": "", "features": {"x": 1, "city": "c"}}, "budget": 1}, "user.user_id", "1 to 200"),
    ({"user": {"user_id": "a", "features": {"x": 1, "city": "c"}, "age": 3}, "budget": 1}, "user.age", "unknown key"),
    ({"user": {"user_id": "a", "features": [1]}, "budget": 1}, "user.features", "must be an object"),
    ({"users": [{"user_id": "a", "features": {}}] * 10_001, "budget": 1}, "users", "at most 10000"),
    ({"user": 3, "budget": 1}, "user", "must be an object"),
])
def test_state_refuses_bad_input_naming_the_field(body, field, text):
    from promo_assets.serve import RequestError

    with pytest.raises(RequestError) as err:
        _state().parse(body)
    assert err.value.field == field and text in err.value.message


def test_a_batch_checked_column_by_column_reads_as_user_by_user():
    """The batch's bulk check (C-level loops over the columns) gives the rows the per-user checks give,
    and a batch with one bad user falls back to them: the error names that user."""
    state = _state()
    rng = np.random.default_rng(3)
    users = [{"user_id": f"u{i}", "features": {"x": (None if i % 7 == 0 else int(i) if i % 3 == 0 else
                                                     float(rng.normal())),
                                               "city": None if i % 5 == 0 else f"c{i % 4}"}} for i in range(300)]
    budget, ids, (num, cat) = state.parse({"users": users, "budget": 1})
    assert ids == [u["user_id"] for u in users]
    for i, user in enumerate(users):
        _, one_id, (one_num, one_cat) = state.parse({"user": user, "budget": 1})
        assert one_id == [ids[i]] and one_cat.tolist() == [cat[i].tolist()]
        np.testing.assert_array_equal(one_num[0], num[i])
    assert [d["level"] for d in state.decide(budget, ids, (num, cat))["decisions"]] == \
        [state.decide(budget, [ids[i]], (num[i:i + 1], cat[i:i + 1]))["decisions"][0]["level"] for i in range(300)]
    from promo_assets.serve import RequestError

    for bad, field in [({"x": True, "city": "c"}, "users[150].features.x"),
                       ({"x": 1, "city": "c\u0000"}, "users[150].features.city"),
                       ({"x": 1e16, "city": "c"}, "users[150].features.x")]:
        with pytest.raises(RequestError) as err:
            state.parse({"users": users[:150] + [{"user_id": "b", "features": bad}] + users[150:], "budget": 1})
        assert err.value.field == field
    with pytest.raises(RequestError) as err:
        state.parse({"users": users[:10] + [{"user_id": " b\u0007", "features": users[0]["features"]}], "budget": 1})
    assert err.value.field == "users[10].user_id" and "control character" in err.value.message

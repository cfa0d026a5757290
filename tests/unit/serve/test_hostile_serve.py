"""The decision service's input edge (marker `hostile`, counted by benchmarks/hostile_inputs.py): every
malformed or hostile body gets a JSON 4xx naming the field, never a 500; the body's size is enforced
while it is read (chunked or not); a stalled body times out; Content-Type is checked; answers name no
server path and not the exploration seed; a port in use is refused with exit code 2.

The app runs in uvicorn in a thread of this process (127.0.0.1, a free port) over a campaign whose
champion is a small stand-in model: no warehouse, no `promo run`."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import select
import socket
import threading
import time

import numpy as np
import pytest

from promo_assets.serve import CampaignState, Unavailable, create_app
from promo_assets.serve.registry import model_features, public

pytestmark = pytest.mark.hostile

USER = {"user_id": "u1", "features": {"x": 1.5, "city": "c2"}}


class _Model:
    """A stand-in champion: response and cost rise with the level, scaled by feature x."""

    class encoder:  # noqa: N801
        numeric = ["x"]
        categorical = ["city"]

    def predict(self, frame):
        x = frame["x"].fillna(1.0).to_numpy()[:, None]
        k = np.arange(4)[None, :]
        return 0.1 + 0.05 * k * x, 0.5 * k * np.ones_like(x)


def _state() -> CampaignState:
    models = (_Model(),)
    return CampaignState(campaign="c", champion="m", champion_version="v" * 16, members=("m",), weights=(1.0,),
                         versions=("0" * 16,), models=models, lambdas={1.0: 0.01}, features=model_features(models),
                         labels=("0", "1", "2", "3"), incentives=(0.0, 1.0, 2.0, 3.0), share=0.2, seed=1234,
                         mix=np.full(4, 0.25), decision_date=dt.date(2026, 3, 1), decided_at="t",
                         decisions_run_id="r", champion_run_id="c")


class _Registry:
    """What the app reads of a Registry: one ready campaign and one that cannot be served."""

    def __init__(self):
        self.loaded_at, self.reloads, self.last_error = "t", 1, None
        self._snap = {"c": _state(), "broken": Unavailable("broken", public(
            "campaign.yaml is refused: /srv/promo/landing/broken/campaign.yaml: 'budget.start': no such date",
            "/srv/promo/landing"))}

    def snapshot(self):
        return self._snap

    def refresh(self, force=False):
        return False


@pytest.fixture(scope="module")
def server():
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(create_app(_Registry(), reload_interval=0, read_timeout=1.0), host="127.0.0.1", port=port,
                            log_level="warning", limit_concurrency=20, timeout_keep_alive=5)
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield port
    srv.should_exit = True
    thread.join(timeout=10)


def _post(port: int, raw: bytes, content_type: str | None = "application/json", path="/v1/campaigns/c/decide"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {} if content_type is None else {"Content-Type": content_type}
    conn.request("POST", path, body=raw, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, json.loads(data)


def _body(user=None, budget=1.0, **extra) -> bytes:
    return json.dumps({"user": USER if user is None else user, "budget": budget, **extra}).encode()


def _with_feature(name, raw_value: str) -> bytes:
    """A one-user body whose feature `name` is the JSON text `raw_value` as written (not re-encoded)."""
    feats = {**USER["features"]}
    feats[name] = "__V__"
    return json.dumps({"user": {**USER, "features": feats}, "budget": 1.0}).encode().replace(b'"__V__"',
                                                                                            raw_value.encode())


DEEP = 10_000
CASES = [
    # (id, body bytes, Content-Type, status, field, text in detail)
    ("error-json-nested-10000-deep", b"[" * DEEP + b"]" * DEEP, "application/json", 422, "body", "recursion depth"),
    ("error-json-nested-10000-deep-in-a-feature", _with_feature("city", "[" * DEEP + "]" * DEEP), "application/json",
     422, "body", "not valid JSON"),
    ("error-feature-nested-900-deep", _with_feature("city", "[" * 900 + "]" * 900), "application/json", 422,
     "user.features.city", "must be a string"),
    ("error-budget-400-digit-integer", b'{"user": ' + json.dumps(USER).encode() + b', "budget": 1' + b"0" * 400 + b"}",
     "application/json", 422, "body", "not valid JSON"),
    ("error-feature-400-digit-integer", _with_feature("x", "1" + "0" * 400), "application/json", 422, "body",
     "not valid JSON"),
    ("error-feature-1e300", _with_feature("x", "1e300"), "application/json", 422, "user.features.x",
     "between -1e+15 and 1e+15"),
    ("error-budget-1e300", _body(budget=1e300), "application/json", 422, "budget", "not one campaign 'c' decides at"),
    ("error-feature-nan-literal", _with_feature("x", "NaN"), "application/json", 422, "body", "not valid JSON"),
    ("error-feature-infinity", _with_feature("x", "1e999"), "application/json", 422, "body", "not valid JSON"),
    ("error-user-id-lone-surrogate", json.dumps({"user": {**USER, "user_id": "a\ud800b"}, "budget": 1}).encode(),
     "application/json", 422, "body", "surrogate"),
    ("error-category-lone-surrogate", _with_feature("city", '"\\udc00"'), "application/json", 422, "body",
     "surrogate"),
    ("error-user-id-nul", _body(user={**USER, "user_id": "u\u0000x"}), "application/json", 422, "user.user_id",
     "control character"),
    ("error-user-id-newline", _body(user={**USER, "user_id": "u\nx"}), "application/json", 422, "user.user_id",
     "control character"),
    ("error-user-id-escape-sequence", _body(user={**USER, "user_id": "\u001b[31mred"}), "application/json", 422,
     "user.user_id", "control character"),
    ("error-user-id-only-spaces", _body(user={**USER, "user_id": " \t "}), "application/json", 422, "user.user_id",
     "1 to 200 characters"),
    ("error-user-id-300-digit-integer", _body(user={**USER, "user_id": 10 ** 300}), "application/json", 422,
     "user.user_id", "must be a string or an integer"),  # (orjson reads an integer beyond 64 bits as a float)
    ("error-category-nul", _with_feature("city", '"c\\u0000"'), "application/json", 422, "user.features.city",
     "control character"),
    ("error-category-carriage-return", _with_feature("city", '"c\\r"'), "application/json", 422,
     "user.features.city", "control character"),
    ("error-category-10000-characters", _with_feature("city", json.dumps("c" * 10_000)), "application/json", 422,
     "user.features.city", "at most 200 characters"),
    ("error-unknown-key-10000-characters", _body(**{"k" * 10_000: 1}), "application/json", 422, "k" * 37 + "...",
     "unknown key"),
    ("error-content-type-text-plain", _body(), "text/plain", 415, "body", "Content-Type: application/json"),
    ("error-content-type-form", _body(), "application/x-www-form-urlencoded", 415, "body", "got 'application/x-www"),
    ("error-content-type-missing", _body(), None, 415, "body", "got none"),
]


@pytest.mark.parametrize("raw, ctype, status, field, text", [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_a_malformed_body_gets_a_4xx_naming_the_field(server, raw, ctype, status, field, text):
    got, err = _post(server, raw, ctype)
    assert (got, err.get("field")) == (status, field) and text in err["detail"], (got, err)
    assert len(json.dumps(err)) < 600  # nothing of the body echoed at length


@pytest.mark.parametrize("case", [pytest.param(None, id="accepted-spaces-around-an-id-trimmed")])
def test_spaces_around_an_id_are_trimmed_as_ingestion_does(server, case):
    """' u1 ' is user 'u1' (the same level, draw and propensity), as ingestion reads ids."""
    status, spaced = _post(server, _body(user={**USER, "user_id": "  u1\t"}))
    assert status == 200 and spaced["decisions"][0]["user_id"] == "u1"
    assert spaced["decisions"] == _post(server, _body())[1]["decisions"]


def _send_chunked(port: int, total: int, chunk: int = 64 * 1024) -> tuple[int, bytes]:
    """POST a chunked JSON body of `total` bytes (no Content-Length); returns (bytes sent before an
    answer arrived or the server closed, the answer)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(b"POST /v1/campaigns/c/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b"%x\r\n" % chunk + b" " * chunk + b"\r\n"
    sent = 0
    try:
        while sent < total:
            if select.select([sock], [], [], 0)[0]:
                break
            sock.sendall(piece)
            sent += chunk
        else:
            sock.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    sock.settimeout(10)
    answer = b""
    try:
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            part = sock.recv(65536)
            if not part:
                break
            answer += part
    except (ConnectionResetError, socket.timeout):
        pass
    sock.close()
    return sent, answer


@pytest.mark.parametrize("case", [pytest.param(None, id="error-chunked-body-over-8-mib")])
def test_a_chunked_body_over_the_limit_is_refused_before_it_ends(server, case):
    total = 64 * 1024 * 1024
    sent, answer = _send_chunked(server, total)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), answer[:300]
    assert json.loads(body)["field"] == "body" and "larger than 8388608 bytes" in json.loads(body)["detail"]
    assert sent < total // 2  # answered while the client was still sending


@pytest.mark.parametrize("case", [pytest.param(None, id="error-content-length-over-8-mib")])
def test_a_declared_length_over_the_limit_is_refused_before_reading(server, case):
    sock = socket.create_connection(("127.0.0.1", server), timeout=10)
    sock.sendall(b"POST /v1/campaigns/c/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 999999999\r\n\r\n{")
    answer = sock.recv(65536)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 413") and b"larger than" in answer


@pytest.mark.parametrize("case", [pytest.param(None, id="error-stalled-body-read-timeout")])
def test_a_stalled_body_times_out(server, case):
    sock = socket.create_connection(("127.0.0.1", server), timeout=10)
    sock.sendall(b"POST /v1/campaigns/c/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{\"user\":")
    t0 = time.monotonic()
    answer = sock.recv(65536)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive within 1 seconds" in answer
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("case", [pytest.param(None, id="error-client-leaves-mid-body")])
def test_a_client_leaving_mid_body_is_not_an_error_of_the_server(server, case, caplog):
    for _ in range(3):
        sock = socket.create_connection(("127.0.0.1", server), timeout=10)
        sock.sendall(b"POST /v1/campaigns/c/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"user\":")
        time.sleep(0.05)
        sock.close()
    time.sleep(0.3)
    assert _post(server, _body())[0] == 200  # still serving
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text


@pytest.mark.parametrize("case", [pytest.param(None, id="error-open-connections-over-the-limit")])
def test_open_connections_beyond_the_limit_get_503(server, case):
    idle = [socket.create_connection(("127.0.0.1", server), timeout=10) for _ in range(25)]
    try:
        time.sleep(0.2)
        conn = http.client.HTTPConnection("127.0.0.1", server, timeout=10)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 503
        conn.close()
    finally:
        for s in idle:
            s.close()
    time.sleep(0.3)
    conn = http.client.HTTPConnection("127.0.0.1", server, timeout=10)
    conn.request("GET", "/health")
    assert conn.getresponse().status == 200  # served again once they closed


@pytest.mark.parametrize("case", [pytest.param(None, id="error-campaign-description-hides-seed-and-paths")])
def test_no_seed_and_no_server_path_in_what_the_service_shows(server, case):
    conn = http.client.HTTPConnection("127.0.0.1", server, timeout=10)
    conn.request("GET", "/v1/campaigns")
    listing = json.loads(conn.getresponse().read())
    (ready,) = [c for c in listing["campaigns"] if c["ready"]]
    assert ready["exploration"] == {"share": 0.2, "mix": [0.25] * 4} and "1234" not in json.dumps(listing)
    status, err = _post(server, _body(), path="/v1/campaigns/broken/decide")
    assert status == 409 and err["detail"] == ("campaign.yaml is refused: broken/campaign.yaml: 'budget.start': no "
                                               "such date")
    assert "/srv" not in json.dumps(listing)


def test_public_removes_server_paths():
    text = ("model s 0123 cannot be loaded from the artefact store: /var/lib/promo/artifacts/model/01/0123.json "
            "is missing; warehouse /data/wh.duckdb busy; /data/landing/demo/campaign.yaml: bad")
    got = public(text, "/data/landing", "/var/lib/promo/artifacts")
    assert "/" not in got.replace("demo/campaign.yaml", "").replace("model/01/0123.json", "")
    assert "demo/campaign.yaml: bad" in got and "wh.duckdb" in got


@pytest.mark.parametrize("case", [pytest.param(None, id="error-port-in-use")])
def test_a_port_in_use_exits_2_naming_it(case, capsys, tmp_path, monkeypatch):
    from promo_assets.cli.main import main

    monkeypatch.setenv("PROMO_LANDING_DIR", str(tmp_path / "landing"))
    monkeypatch.setenv("PROMO_WAREHOUSE", str(tmp_path / "wh.duckdb"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"promo serve: cannot listen on 127.0.0.1:{port}: Address already in use" in err

"""`dagster dev` as a child process for the UI test and the UI benchmark: started in its own process
group on a free port, queried through its GraphQL API, stopped by killing the whole group (the
webserver, the daemon, the code server and any run processes they started).

Plain subprocess + urllib: no dagster import here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from promo_assets.core.errors import DomainError

LOCATION = "promo_assets"          # workspace.yaml's location_name
REPOSITORY = "__repository__"      # the repository name Dagster gives a Definitions object


def demo_env(tmp: Path, repo_root: Path, max_epochs: int = 3) -> dict[str, str]:
    """Environment of a throw-away instance under `tmp`: its own landing folder, warehouse, artefact
    store and DAGSTER_HOME (with the repository's dagster.yaml), and `repo_root` first on the path."""
    home = Path(tmp) / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(repo_root) / "dagster_home" / "dagster.yaml", home)
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(repo_root), os.environ.get("PYTHONPATH")])),
        "PROMO_LANDING_DIR": str(Path(tmp) / "landing"), "PROMO_WAREHOUSE": str(Path(tmp) / "warehouse.duckdb"),
        "PROMO_ARTIFACTS_DIR": str(Path(tmp) / "artifacts"), "DAGSTER_HOME": str(home),
        "PROMO_OUTBOX_DIR": str(Path(tmp) / "outbox"), "PROMO_REPORT_DIR": str(Path(tmp) / "reports"),
        "PROMO_MAX_EPOCHS": str(max_epochs),
    }


def promo(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`promo ARGS` (python -m promo_assets.cli) in `env`; a failure raises with the command's output."""
    done = subprocess.run([sys.executable, "-m", "promo_assets.cli", *args], env=env, cwd=Path(env["DAGSTER_HOME"]).parent,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise DevServerError(f"promo {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DevServerError(DomainError, RuntimeError):
    """`dagster dev` did not come up, or a GraphQL call failed; the message says which and why."""


class DagsterDev:
    """`with DagsterDev(repo_root, env, log_path) as ui:` runs `dagster dev -w workspace.yaml` until
    the block ends. `env` must carry an absolute DAGSTER_HOME; PROMO_* settings pass through to the
    code location and its runs."""

    def __init__(self, repo_root: Path, env: dict[str, str], log_path: Path, port: int | None = None):
        if not os.path.isabs(env.get("DAGSTER_HOME", "")):
            raise DevServerError(f"DAGSTER_HOME must be an absolute path, got {env.get('DAGSTER_HOME')!r}")
        self.repo_root = Path(repo_root)
        self.env = env
        self.log_path = Path(log_path)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "DagsterDev":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout: float = 240.0) -> None:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dagster", "dev", "-w", str(self.repo_root / "workspace.yaml"),
             "-h", "127.0.0.1", "-p", str(self.port)],
            cwd=self.repo_root, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() kills everything it started
        )
        log.close()
        try:
            self.wait_until_loaded(timeout)
        except BaseException:
            self.stop()
            raise

    def wait_until_loaded(self, timeout: float) -> None:
        """Until the webserver answers and the code location is loaded (or failed to load)."""
        deadline = time.monotonic() + timeout
        query = "{ workspaceOrError { __typename ... on Workspace { locationEntries { name loadStatus " \
                "locationOrLoadError { __typename ... on PythonError { message } } } } } }"
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise DevServerError(f"dagster dev exited with code {self.proc.returncode}; log: {self.log_path}")
            try:
                entries = self.graphql(query)["workspaceOrError"]["locationEntries"]
                entry = next((e for e in entries if e["name"] == LOCATION), None)
                if entry and entry["loadStatus"] == "LOADED":
                    error = entry["locationOrLoadError"]
                    if error["__typename"] == "PythonError":
                        raise DevServerError(f"code location {LOCATION} failed to load: {error['message']}")
                    return
                last = f"location {LOCATION}: {entry and entry['loadStatus']}"
            except (OSError, DevServerError) as exc:
                if isinstance(exc, DevServerError) and "failed to load" in str(exc):
                    raise
                last = str(exc)
            time.sleep(1.0)
        raise DevServerError(f"dagster dev on {self.url} not ready after {timeout:.0f} s ({last}); log: {self.log_path}")

    def graphql(self, query: str, variables: dict | None = None, timeout: float = 60.0) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as exc:
            raise DevServerError(f"GraphQL HTTP {exc.code}: {exc.read()[:500]!r}") from None
        if answer.get("errors"):
            raise DevServerError(f"GraphQL errors: {answer['errors']}")
        return answer["data"]

    def launch_partition_run(self, job: str, partition: str, tags: dict[str, str] | None = None) -> str:
        """Queue one run of `job` for `partition` (as the UI's launchpad does), with extra `tags`;
        returns its run id."""
        run_tags = [{"key": "dagster/partition", "value": partition}] + [{"key": k, "value": v} for k, v in (tags or {}).items()]
        data = self.graphql(
            """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
                 ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
                 ... on RunConfigValidationInvalid { errors { message } } ... on InvalidSubsetError { message } } }""",
            {"p": {"selector": {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "jobName": job},
                   "runConfigData": {}, "executionMetadata": {"tags": run_tags}}},
        )["launchRun"]
        if data["__typename"] != "LaunchRunSuccess":
            raise DevServerError(f"launching {job} for partition {partition!r} failed: {data}")
        return data["run"]["runId"]

    def stop_sensor(self, name: str) -> None:
        """Turn a sensor off (the UI's toggle on the Automation page)."""
        state = self.graphql(
            """query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { __typename
                 ... on Sensor { sensorState { id status } } ... on PythonError { message } } }""",
            {"s": {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "sensorName": name}},
        )["sensorOrError"]
        if state["__typename"] != "Sensor":
            raise DevServerError(f"sensor {name!r}: {state}")
        if state["sensorState"]["status"] == "RUNNING":
            answer = self.graphql("mutation($id: String) { stopSensor(id: $id) { __typename } }",
                                  {"id": state["sensorState"]["id"]})["stopSensor"]
            if answer["__typename"] != "StopSensorMutationResult":
                raise DevServerError(f"stopping sensor {name!r}: {answer}")

    def unfinished_runs(self) -> list[dict]:
        """Runs queued, starting or started (run id, job, tags)."""
        return self.graphql(
            """{ runsOrError(filter: {statuses: [QUEUED, NOT_STARTED, STARTING, STARTED]}) { __typename
                 ... on Runs { results { runId jobName tags { key value } } } } }""")["runsOrError"]["results"]

    def run_status(self, run_id: str) -> dict:
        return self.graphql(
            "query($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status creationTime startTime endTime } } }",
            {"id": run_id},
        )["runOrError"]

    def wait_for_run(self, run_id: str, timeout: float) -> dict:
        """Poll until the run has finished; returns its last status record."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.run_status(run_id)
            if run.get("status") in ("SUCCESS", "FAILURE", "CANCELED"):
                return run
            time.sleep(0.5)
        raise DevServerError(f"run {run_id} not finished after {timeout:.0f} s (status {run.get('status')})")

    def stop(self) -> None:
        """SIGTERM to the whole process group, SIGKILL to what is left after 20 s."""
        if self.proc is None:
            return
        _stop_group(self.proc)
        self.proc = None


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group `proc` leads, SIGKILL to what is left after 20 s."""
    pgid = proc.pid  # start_new_session: the group id is the leader's pid
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        if not _group_alive(pgid):
            break
        time.sleep(1.0)


GRPC_WORKSPACE = """load_from:
  - grpc_server:
      host: 127.0.0.1
      port: {port}
      location_name: {location}
"""


class Deployment(DagsterDev):
    """A team's deployment (docs/deploy.md) instead of `dagster dev`: three processes, each in its own
    process group, started with the commands the page gives: the code location server
    (`dagster code-server start -m promo_assets.definitions`), the webserver and the daemon, both
    reading a workspace that points at the code server (written beside the log as
    `workspace-grpc.yaml`). Same GraphQL helpers as DagsterDev; stop() ends all three."""

    def __init__(self, repo_root: Path, env: dict[str, str], log_path: Path, port: int | None = None):
        super().__init__(repo_root, env, log_path, port)
        self.code_port = free_port()
        self.procs: list[subprocess.Popen] = []

    def commands(self) -> dict[str, list[str]]:
        workspace = self.log_path.parent / "workspace-grpc.yaml"
        workspace.write_text(GRPC_WORKSPACE.format(port=self.code_port, location=LOCATION))
        bin_dir = Path(sys.executable).parent
        return {
            "code-server": [str(bin_dir / "dagster"), "code-server", "start", "-m", "promo_assets.definitions",
                            "--location-name", LOCATION, "-h", "127.0.0.1", "-p", str(self.code_port)],
            "webserver": [str(bin_dir / "dagster-webserver"), "-w", str(workspace), "-h", "127.0.0.1",
                          "-p", str(self.port)],
            "daemon": [str(bin_dir / "dagster-daemon"), "run", "-w", str(workspace)],
        }

    def _log(self, name: str) -> Path:
        return self.log_path.with_name(f"{self.log_path.stem}-{name}.log")

    def _code_server_loaded(self, timeout: float) -> None:
        """Until the code server says it serves the definitions: a webserver started before that would
        show the location as unreachable until reloaded."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[0].poll() is not None:
                raise DevServerError(f"the code server exited with code {self.procs[0].returncode}; log: "
                                     f"{self._log('code-server')}")
            if "Started Dagster code server" in self._log("code-server").read_text(errors="replace"):
                return
            time.sleep(0.5)
        raise DevServerError(f"the code server did not load in {timeout:.0f} s; log: {self._log('code-server')}")

    def start(self, timeout: float = 240.0) -> None:
        try:
            for name, argv in self.commands().items():
                with open(self._log(name), "ab") as log:
                    self.procs.append(subprocess.Popen(argv, cwd=self.repo_root, env=self.env, stdout=log,
                                                       stderr=subprocess.STDOUT, start_new_session=True))
                if name == "code-server":
                    self._code_server_loaded(timeout)
            self.proc = self.procs[1]  # the webserver: wait_until_loaded watches it
            self.wait_until_loaded(timeout)
            for proc, name in zip(self.procs, ("code-server", "webserver", "daemon")):
                if proc.poll() is not None:
                    raise DevServerError(f"{name} exited with code {proc.returncode}; log: {self.log_path.parent}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for proc in reversed(self.procs):  # the daemon first, the code server last
            _stop_group(proc)
        self.procs = []
        self.proc = None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False

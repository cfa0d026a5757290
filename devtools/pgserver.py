"""A throw-away PostgreSQL server for the tests and benchmarks of the Postgres instance profile.

`PgServer` runs Debian's `postgresql` binaries (`initdb`, `pg_ctl`): a new cluster in a temporary
folder, password authentication, listening on 127.0.0.1 on a free port only (no Unix socket), started
in its own process group and stopped (fast shutdown, then SIGKILL to the group) at the end, its folder
removed. `initdb` refuses to run as root: as root (CI containers) the cluster belongs to the `postgres`
user the Debian package creates, and the binaries run through `runuser`.

Plain subprocess: no dagster import here. The environment it gives (`env()`) is what
`dagster_home/postgres/dagster.yaml` reads (docs/deploy.md).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from devtools.devserver import free_port
from promo_assets.core.errors import DomainError

SERVER_USER = "postgres"   # the cluster's owner when this process is root (Debian's package creates it)
ROLE = "promo"             # the cluster's superuser, who owns the database
DATABASE = "dagster"


class PgServerError(DomainError, RuntimeError):
    """The Postgres binaries are missing, or the server did not start; the message says which and why."""


def find_bin_dir() -> Path | None:
    """The folder of `initdb` and `pg_ctl`: on the PATH, else Debian's /usr/lib/postgresql/<version>/bin
    (the newest); None when Postgres is not installed."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(os.path.realpath(on_path)).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def missing() -> str | None:
    """Why a Postgres server cannot be started here (None when it can)."""
    if find_bin_dir() is None:
        return "the PostgreSQL server binaries (initdb, pg_ctl) are not installed"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and there is no {SERVER_USER!r} user to own the cluster (initdb refuses root)"
        if shutil.which("runuser") is None:
            return "running as root without `runuser` to start the server as the postgres user"
    return None


class PgServer:
    """`with PgServer() as pg:` a running server; `pg.url` is its SQLAlchemy URL (psycopg2 driver),
    `pg.env()` the DAGSTER_PG_* settings of dagster_home/postgres/dagster.yaml, `pg.version` the
    server's version line."""

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.password = secrets.token_hex(12)
        self.root: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.version = ""

    # -- commands as the cluster's owner -------------------------------------------------------
    def _as_owner(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", SERVER_USER, "--", *argv] if os.geteuid() == 0 else argv

    def _run(self, argv: list[str], what: str) -> str:
        done = subprocess.run(self._as_owner(argv), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise PgServerError(f"{what} failed (exit {done.returncode}): {(done.stdout + done.stderr)[-2000:]}")
        return done.stdout

    @property
    def data_dir(self) -> Path:
        assert self.root is not None
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        assert self.root is not None
        return self.root / "server.log"

    def __enter__(self) -> "PgServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout: float = 60.0) -> None:
        why = missing()
        if why:
            raise PgServerError(why)
        bin_dir = find_bin_dir()
        # a folder of its own in the system's temporary folder (traversable by the postgres user; a
        # pytest temporary folder is private to its owner)
        self.root = Path(tempfile.mkdtemp(prefix="promo-pg-"))
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        if os.geteuid() == 0:
            owner = pwd.getpwnam(SERVER_USER)
            for path in (self.root, pwfile):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        try:
            self._run([str(bin_dir / "initdb"), "-D", str(self.data_dir), "-U", ROLE, "--pwfile", str(pwfile),
                       "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"], "initdb")
            pwfile.unlink()
            options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories='' "
                       "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
            # its own session: the postmaster keeps the group, so stop() can always kill what is left
            self.proc = subprocess.Popen(
                self._as_owner([str(bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_path),
                                "-o", options, "-w", "-t", str(int(timeout)), "start"]),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
            out, _ = self.proc.communicate(timeout=timeout + 10)
            if self.proc.returncode != 0:
                log = self.log_path.read_text()[-2000:] if self.log_path.exists() else ""
                raise PgServerError(f"pg_ctl start failed (exit {self.proc.returncode}): {out[-1000:]}\n{log}")
            self._create_database()
        except BaseException:
            self.stop()
            raise

    def connect(self, database: str = DATABASE):
        """A psycopg2 connection to `database` on this server (the tests look at what Dagster stored)."""
        import psycopg2

        return psycopg2.connect(host="127.0.0.1", port=self.port, user=ROLE, password=self.password,
                                dbname=database, connect_timeout=10)

    def _create_database(self) -> None:
        self.create_database(DATABASE)
        con = self.connect()
        try:
            with con.cursor() as cur:
                cur.execute("SELECT version()")
                self.version = cur.fetchone()[0]
        finally:
            con.close()

    def create_database(self, name: str) -> None:
        """A new, empty database `name`, owned by the server's role (Postgres's `createdb`)."""
        env = {**os.environ, "PGPASSWORD": self.password}
        done = subprocess.run([str(find_bin_dir() / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", ROLE,
                               "--", name], capture_output=True, text=True, timeout=60, env=env)
        if done.returncode != 0:
            raise PgServerError(f"createdb {name!r} failed (exit {done.returncode}): {done.stderr[-1000:]}")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://{ROLE}:{self.password}@127.0.0.1:{self.port}/{DATABASE}"

    def env(self) -> dict[str, str]:
        """The settings dagster_home/postgres/dagster.yaml reads."""
        return {"DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(self.port), "DAGSTER_PG_USER": ROLE,
                "DAGSTER_PG_PASSWORD": self.password, "DAGSTER_PG_DB": DATABASE}

    def _postmaster_pid(self) -> int | None:
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        """Fast shutdown (pg_ctl stop -m fast); SIGKILL to the server's process group if it is still
        there; the folder removed."""
        if self.root is None:
            return
        bin_dir = find_bin_dir()
        pid = self._postmaster_pid()
        if pid is not None and bin_dir is not None:
            subprocess.run(self._as_owner([str(bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast",
                                           "-w", "-t", "30", "stop"]), capture_output=True, timeout=60)
        for group in filter(None, {self.proc.pid if self.proc else None, pid}):
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + 10
        while pid is not None and time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = self.proc = None

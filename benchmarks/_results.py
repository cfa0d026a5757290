"""The one way a benchmark script records what it measured.

Every script in `benchmarks/` creates a `Recorder` when it starts and calls `write()` with its
figures when it ends; the result lands in `benchmarks/results/<script>.json` (or
`<script>--<tag>.json` for a script with parts, e.g. `e2e_paper --section fig2`), next to what is
needed to judge it: the command line, the git commit (and whether the code was modified), the date,
the machine's load average at the start and the end (`os.getloadavg()`), its core count, the wall
time, the environment variables that change what is measured, the start date of the campaigns it
simulates (`simulation_start`: a simulated campaign is its preset, seed and start date; the project's
`REFERENCE_START` unless the script sets `Recorder.simulation_start`) and the version of every
installed package (`packages`) with the sha256 of `requirements.lock`. The files are committed; the docs
page "Benchmark results" is generated from them (docs/gen_pages.py), so a figure in the
documentation is one a script wrote.

`PROMO_BENCH_RESULTS=DIR` writes into another folder. A script run by a test (pytest sets
`PYTEST_CURRENT_TEST`, which its subprocesses inherit) writes nothing unless that variable is set,
so a test never replaces a committed result with its tiny run.

    rec = Recorder("mckp")                         # at the start of main()
    ...
    rec.write(figures, headline={"gap": 2e-14})    # at the end: figures = everything measured,
                                                   # headline = the few a reader looks for first
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
RESULTS = BENCHMARKS / "results"

# environment variables that change what a benchmark measures (recorded when set)
RELEVANT_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PROMO_MAX_EPOCHS", "PROMO_DASK_SCHEDULER", "CI")


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def packages() -> dict[str, str]:
    """{distribution name: version} of every installed package, sorted by name."""
    found = {d.metadata["Name"]: d.version for d in importlib.metadata.distributions() if d.metadata["Name"]}
    return dict(sorted(found.items(), key=lambda kv: kv[0].lower()))


def _lock_sha256() -> str | None:
    lock = ROOT / "requirements.lock"
    return hashlib.sha256(lock.read_bytes()).hexdigest() if lock.exists() else None


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def plain(value: Any) -> Any:
    """`value` as plain JSON: numpy scalars and arrays as numbers and lists, NaN / inf as None,
    paths and other objects as text, mappings with text keys."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist"):  # numpy scalar or array, torch tensor
        return plain(value.tolist())
    if hasattr(value, "item"):
        return plain(value.item())
    return str(value)


class Recorder:
    """Remembers the command, the start time and the load when a benchmark starts; `write()` stores
    the result with them."""

    def __init__(self, name: str | None = None, argv: list[str] | None = None):
        script = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else BENCHMARKS / f"{name}.py"
        self.name = name or script.stem
        try:
            shown = str(script.relative_to(ROOT))
        except ValueError:
            shown = str(script)
        self.command = shlex.join(["python", shown, *(sys.argv[1:] if argv is None else argv)])
        self.started = dt.datetime.now(dt.timezone.utc)
        self.load_start = _load()
        self._t0 = time.perf_counter()
        # the code measured is the code at the start (a commit made while a long benchmark runs is not)
        self.git_commit = _git("rev-parse", "HEAD")
        dirty = _git("status", "--porcelain", "--", "promo_assets", "sql", "benchmarks", ":(exclude)benchmarks/results",
                     "pyproject.toml", "setup.py")
        self.modified_code = bool(dirty) if dirty is not None else None
        from promo_assets.simulation import REFERENCE_START

        self.simulation_start = REFERENCE_START.isoformat()

    def document(self, figures: Any, headline: dict[str, Any] | None = None, tag: str | None = None) -> dict:
        """The result as stored: provenance first, then the headline and every figure."""
        return plain({
            "benchmark": self.name,
            "tag": tag,
            "command": self.command,
            "git_commit": self.git_commit,
            "modified_code": self.modified_code,
            "date": self.started.isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - self._t0, 1),
            "load_start": self.load_start,
            "load_end": _load(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "env": {k: os.environ[k] for k in RELEVANT_ENV if k in os.environ},
            "simulation_start": self.simulation_start,
            "lock_sha256": _lock_sha256(),
            "packages": packages(),
            "headline": headline or {},
            "figures": figures,
        })

    def path(self, tag: str | None = None) -> Path:
        folder = Path(os.environ.get("PROMO_BENCH_RESULTS") or RESULTS)
        return folder / (f"{self.name}--{tag}.json" if tag else f"{self.name}.json")

    def write(self, figures: Any, headline: dict[str, Any] | None = None, tag: str | None = None) -> Path | None:
        """Store the result (atomically: a killed write leaves the previous file) and say where;
        under a test without PROMO_BENCH_RESULTS, nothing (returns None)."""
        doc = self.document(figures, headline, tag)
        if os.environ.get("PYTEST_CURRENT_TEST") and not os.environ.get("PROMO_BENCH_RESULTS"):
            print("[results] not written (run by a test; set PROMO_BENCH_RESULTS to keep it)", file=sys.stderr)
            return None
        path = self.path(tag)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
        os.replace(tmp, path)
        print(f"[results] {path}", file=sys.stderr)
        return path


def load_results(folder: Path = RESULTS) -> list[dict]:
    """Every stored result, sorted by benchmark and tag (for the docs page and tests)."""
    out = []
    for path in sorted(folder.glob("*.json")):
        doc = json.loads(path.read_text())
        doc["_file"] = path.name
        out.append(doc)
    return out

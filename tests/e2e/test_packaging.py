"""The package as it is deployed: a wheel built from the checkout, installed into a fresh virtual
environment outside the checkout, runs `promo simulate` and `promo run` from a temporary working
directory (no source tree in reach: the SQL and everything else must come from the wheel)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from promo_assets.simulation import REFERENCE_START

ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path):
    # built from a copy of what the package is made of, so that the build leaves nothing in the checkout
    src = tmp_path / "src"
    src.mkdir()
    for part in ("pyproject.toml", "setup.py", "README.md", "promo_assets", "sql"):
        copy = shutil.copytree if (ROOT / part).is_dir() else shutil.copy
        copy(ROOT / part, src / part, **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree else {}))
    wheels = tmp_path / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                  str(src)], cwd=tmp_path, env=dict(os.environ))
    assert built.returncode == 0, built.stderr
    [wheel] = list(wheels.glob("promo_assets-*.whl"))

    # A fresh environment with the wheel alone; its dependencies (torch, dagster, ... exactly the locked
    # versions) are reached through a path entry to this environment's site-packages, whose own .pth
    # files (the editable install of the checkout) are not processed.
    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path, env=dict(os.environ)).returncode == 0
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path,
                     env=dict(os.environ)).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                     cwd=tmp_path, env=dict(os.environ))
    assert installed.returncode == 0, installed.stderr

    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROMO_", "DAGSTER_", "PYTHON"))}
    env.update(PROMO_MAX_EPOCHS="1", OMP_NUM_THREADS="1")
    if os.environ.get("FAKETIME"):  # scripts/test_at_date.sh: its time.sleep (no package of the checkout)
        env["PYTHONPATH"] = str(ROOT / "scripts" / "faketime")
    where = _run([str(py), "-c", "import promo_assets, promo_assets.sql as s; print(promo_assets.__file__, s.__file__)"],
                 cwd=work, env=env)
    assert where.returncode == 0, where.stderr
    assert str(ROOT) not in where.stdout and str(site) in where.stdout, where.stdout

    promo = [str(py), "-m", "promo_assets.cli"]
    version = _run(promo + ["--version"], cwd=work, env=env)
    assert version.returncode == 0 and version.stdout.startswith("promo_assets "), version.stdout + version.stderr
    sim = _run(promo + ["simulate", "--preset", "demo", "--campaign", "tiny", "--days", "4", "--users", "300",
                        "--start", REFERENCE_START.isoformat()],
               cwd=work, env=env)
    assert sim.returncode == 0, sim.stdout + sim.stderr
    config = work / "data" / "landing" / "tiny" / "campaign.yaml"
    config.write_text(config.read_text() + "\nmodels:\n  include: [lgbm_s]\n")
    run = _run(promo + ["run", "--campaign", "tiny", "--no-progress"], cwd=work, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (work / "data" / "warehouse.duckdb").is_file()
    assert "lgbm_s" in run.stdout, run.stdout

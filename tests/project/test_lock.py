"""The locked environment: requirements.lock (made by scripts/regenerate_lock.sh, installed as constraints by
scripts/setup.sh) pins every package at one version; the environment the tests run in is the one it
describes, and it satisfies pyproject.toml's ranges."""

from __future__ import annotations

import importlib.metadata
import platform
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
PROJECT = canonicalize_name("promo_assets")
# installed without being locked: the installers, and the project itself (an editable install of the checkout)
NOT_LOCKED = {"pip", "setuptools", "wheel", "uv", PROJECT}
REGENERATE = "bash scripts/setup.sh (after a change to pyproject.toml, bash scripts/regenerate_lock.sh first)"

needs_locked_platform = pytest.mark.skipif(
    sys.version_info[:2] != (3, 11) or sys.platform != "linux" or platform.machine() != "x86_64",
    reason="requirements.lock is for Python 3.11 on Linux x86_64")


def read_lock() -> tuple[dict[str, Version], dict[str, set[str]]]:
    """The lock's pins {name: version} and, from its `# via` annotations, what needs each package
    {name: {names of the packages that require it, PROJECT for pyproject.toml}}; names canonical."""
    pins: dict[str, Version] = {}
    via: dict[str, set[str]] = {}
    current = None
    for number, line in enumerate(LOCK.read_text().splitlines(), 1):
        if pin := re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line):
            current = canonicalize_name(pin[1])
            assert current not in pins, f"requirements.lock:{number}: {current} is pinned twice"
            pins[current] = Version(pin[2])
            via[current] = set()
        elif parent := re.fullmatch(r"\s+# via (.+)|\s+#   (.+)", line):
            source = (parent[1] or parent[2]).strip()
            assert current is not None, f"requirements.lock:{number}: an annotation before any pin: {line!r}"
            if source.startswith(("-c ", "-r ")):      # a constraints or requirements file, not a package
                continue
            via[current].add(PROJECT if source.endswith("(pyproject.toml)") else canonicalize_name(source))
        else:
            assert line.startswith("#") or not line.strip() or line.strip() == "# via", \
                f"requirements.lock:{number}: not a pin, an annotation or a comment: {line!r}"
    return pins, via


def installed() -> dict[str, str]:
    """Every distribution this interpreter sees {canonical name: version}; the first one on sys.path wins."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonicalize_name(name), dist.version)
    return found


def project_requirements() -> list[tuple[str | None, Requirement]]:
    """pyproject.toml's requirements, each with its extra (None for [project] dependencies)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = [(None, Requirement(r)) for r in project["dependencies"]]
    for extra, requirements in project.get("optional-dependencies", {}).items():
        found += [(extra, Requirement(r)) for r in requirements]
    return found


def same_version(installed_version: str, locked: Version) -> bool:
    """The installed version is the locked one; a local label (torch's `+cpu`) counts as the public version
    when the lock names the public version alone."""
    try:
        version = Version(installed_version)
    except InvalidVersion:
        return False
    return version == locked or (locked.local is None and Version(version.public) == locked)


def closure(roots: set[str], via: dict[str, set[str]]) -> set[str]:
    """The locked packages that `roots` need, themselves included, following the `# via` annotations."""
    children: dict[str, set[str]] = {}
    for child, parents in via.items():
        for parent in parents:
            children.setdefault(parent, set()).add(child)
    needed, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo += children.get(name, ())
    return needed


def test_the_lock_reads_whole_and_has_torchs_cpu_build_without_cuda():
    pins, via = read_lock()
    assert len(pins) > 100, f"requirements.lock pins only {len(pins)} packages"
    unknown = {parent: child for child, parents in via.items() for parent in parents
               if parent != PROJECT and parent not in pins}
    assert not unknown, f"requirements.lock's annotations name packages it does not pin (package: one it needs): {unknown}"
    requirements = {canonicalize_name(r.name) for _, r in project_requirements()}
    orphans = sorted(set(pins) - closure(requirements, via))
    assert not orphans, f"requirements.lock pins packages that nothing in pyproject.toml needs: {orphans}"
    cuda = sorted(name for name in pins if name.startswith(("nvidia-", "triton")))
    assert not cuda, f"requirements.lock has CUDA packages {cuda}: torch must be the CPU build (scripts/regenerate_lock.sh)"
    assert pins["torch"].public == "2.13.0", f"requirements.lock pins torch=={pins['torch']}, scripts/setup.sh installs 2.13.0"


def test_every_pyproject_requirement_is_satisfied_by_the_locked_version():
    pins, _ = read_lock()
    wrong = []
    for extra, requirement in project_requirements():
        where = f"the {extra} extra" if extra else "[project] dependencies"
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra or ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name not in pins:
            wrong.append(f"{requirement.name}: pyproject.toml ({where}) requires {requirement}, requirements.lock has no pin")
        elif not requirement.specifier.contains(pins[name], prereleases=True):
            wrong.append(f"{requirement.name}: pyproject.toml ({where}) requires {requirement.specifier}, "
                         f"requirements.lock pins {pins[name]}")
    assert not wrong, "regenerate the lock (bash scripts/regenerate_lock.sh):\n" + "\n".join(wrong)


@needs_locked_platform
def test_every_installed_distribution_is_locked_at_its_installed_version():
    pins, _ = read_lock()
    wrong = []
    for name, version in sorted(installed().items()):
        if name in NOT_LOCKED:
            continue
        if name not in pins:
            wrong.append(f"{name}: installed {version}, not in requirements.lock")
        elif not same_version(version, pins[name]):
            wrong.append(f"{name}: installed {version}, requirements.lock pins {pins[name]}")
    assert not wrong, f"the environment ({sys.prefix}) is not the locked one; run {REGENERATE}:\n" + "\n".join(wrong)


@needs_locked_platform
def test_every_locked_package_is_installed_unless_only_an_extra_left_out_needs_it():
    pins, via = read_lock()
    present = installed()
    requirements = project_requirements()
    needed = closure({canonicalize_name(r.name) for extra, r in requirements if extra is None}, via)
    left_out = []
    for extra in sorted({extra for extra, _ in requirements if extra}):
        own = {canonicalize_name(r.name) for e, r in requirements if e == extra} - needed
        # an extra counts as installed when any package of its own is: a half-installed one then fails below
        if any(name in present for name in own):
            needed |= closure(own, via)
        else:
            left_out.append(extra)
    assert needed <= set(pins) | {PROJECT}, f"needed but not locked: {sorted(needed - set(pins) - {PROJECT})}"
    missing = [f"{name}: requirements.lock pins {pins[name]}, not installed "
               f"(needed by {', '.join(sorted(via[name])) or 'pyproject.toml'})"
               for name in sorted(needed - {PROJECT}) if name not in present]
    assert not missing, (f"the environment ({sys.prefix}) lacks locked packages (extras not installed: "
                         f"{left_out or 'none'}); run {REGENERATE}:\n" + "\n".join(missing))

"""The outbox: where decisions are written for the systems that send the incentives.

    <outbox>/<campaign>/<date>/<budget>.parquet   (or .csv)   one file per configured budget
    <outbox>/<campaign>/<date>/manifest.json                  what the files are, with checksums

`<date>` is the day the decisions are for (YYYY-MM-DD); `<budget>` the per-capita budget as text
(`1.5.parquet`). Every file has the columns of `DECISION_COLUMNS`. The manifest holds the campaign,
the date, the champion and its version, one entry per budget (file name, rows, λ, expected response
and cost with intervals, the exploration share, its expected cost and the value given up for it) and
the SHA-256 of every file.

Nothing is ever half-written: a date's files and manifest are first written into a hidden sibling
folder `.<date>.tmp-<pid>-<n>`, flushed, then moved into place with one rename (an earlier folder of
the same date is first renamed aside and removed afterwards). A process killed at any point leaves
either the previous complete folder or the new complete folder (at worst both hidden folders, which
the next write removes), never a partial one under `<date>`. Readers trust a folder only through its
manifest: `verify` recomputes every checksum.

No dagster here (domain code).
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import itertools
import json
import os
import shutil
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from promo_assets.core.errors import DomainError
from promo_assets.core.text import csv_cell, csv_uncell

DECISION_COLUMNS = ("user_id", "level", "label", "incentive", "predicted_response", "predicted_cost", "policy",
                    "propensity", "model", "model_version")
TEXT_COLUMNS = ("user_id", "label", "policy", "model", "model_version")  # written through csv_cell in a CSV
FORMATS = ("parquet", "csv")
MANIFEST = "manifest.json"
_counter = itertools.count()


class OutboxError(DomainError, OSError):
    """The outbox cannot be written or read back (not writable, a checksum that does not match)."""


def budget_file_name(budget: float, fmt: str) -> str:
    """'1.5.parquet' for budget 1.5 (the shortest text of the number)."""
    return f"{float(budget):g}.{fmt}"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_frame(frame: pd.DataFrame, path: Path, fmt: str) -> None:
    missing = [c for c in DECISION_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"a decision file needs the columns {list(DECISION_COLUMNS)}; missing {missing}")
    out = frame[list(DECISION_COLUMNS)]
    if fmt == "parquet":
        out.to_parquet(path, index=False)
    else:  # a text cell that a spreadsheet would run as a formula gets a leading ' (promo_assets.core.text.csv_cell);
        # every text cell is quoted, so a carriage return inside one never starts a new row
        text = [c for c in out.columns if out[c].dtype == object or pd.api.types.is_string_dtype(out[c].dtype)]
        out.assign(**{c: out[c].map(csv_cell) for c in text}).to_csv(path, index=False, quoting=csv.QUOTE_NONNUMERIC)
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def _writer_alive(name: str) -> bool:
    """Whether the process that named a hidden folder `.<date>.tmp-<pid>-<n>` is still running."""
    try:
        pid = int(name.rsplit("-", 2)[-2])
    except (ValueError, IndexError):
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def clean_stale(campaign_dir: Path) -> list[Path]:
    """Remove hidden folders left by a killed write (`.<date>.tmp-*`, `.<date>.old-*`) whose writer is
    no longer running (another export writing at the same moment keeps its own); returns them."""
    removed = []
    if campaign_dir.is_dir():
        for p in campaign_dir.iterdir():
            if (p.name.startswith(".") and (".tmp-" in p.name or ".old-" in p.name) and p.is_dir()
                    and not p.is_symlink() and not _writer_alive(p.name)):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
    return removed


def write_outbox(outbox: Path, campaign: str, date: str, files: Mapping[float, pd.DataFrame], manifest: dict,
                 fmt: str = "parquet") -> Path:
    """Write one date's decision files and manifest atomically (module docstring); returns the folder.

    files: budget -> rows with DECISION_COLUMNS; manifest: the manifest without the per-file entries'
    `file` / `sha256` / `rows` (added here) — its `budgets` list has one dict per budget with the key
    `budget_per_capita`. Raises OutboxError naming the folder when it cannot be written."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    outbox = Path(outbox)
    campaign_dir = outbox / campaign
    final = campaign_dir / date
    try:
        campaign_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(campaign_dir, os.W_OK):
            raise PermissionError(13, "Permission denied", str(campaign_dir))
        clean_stale(campaign_dir)
        tmp = campaign_dir / f".{date}.tmp-{os.getpid()}-{next(_counter)}"
        tmp.mkdir()
    except OSError as exc:
        raise OutboxError(f"cannot write the outbox {campaign_dir}: {exc.strerror or exc}") from None
    try:
        entries = {float(e["budget_per_capita"]): dict(e) for e in manifest.get("budgets", [])}
        for budget, frame in files.items():
            name = budget_file_name(budget, fmt)
            _write_frame(frame, tmp / name, fmt)
            entry = entries.setdefault(float(budget), {"budget_per_capita": float(budget)})
            entry.update(file=name, rows=int(len(frame)), sha256=sha256(tmp / name))
        body = {**manifest, "format": fmt, "budgets": [entries[b] for b in sorted(entries)]}
        with open(tmp / MANIFEST, "w") as f:
            json.dump(body, f, indent=2, sort_keys=False, default=_jsonable)
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(tmp)
        old = None
        if final.exists():
            old = campaign_dir / f".{date}.old-{os.getpid()}-{next(_counter)}"
            os.rename(final, old)
        os.rename(tmp, final)
        _fsync_dir(campaign_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OutboxError(f"cannot write the outbox {final}: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _jsonable(obj):
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    return str(obj)


def read_manifest(folder: Path) -> dict:
    path = Path(folder) / MANIFEST
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise OutboxError(f"{path}: no manifest (not an outbox folder, or its write never finished)") from None
    except (OSError, ValueError) as exc:
        raise OutboxError(f"{path}: cannot be read: {exc}") from None


def verify(folder: Path) -> list[str]:
    """Problems of an outbox folder ([] when every file its manifest lists is there with its checksum)."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    problems = []
    for entry in manifest.get("budgets", []):
        path = folder / str(entry.get("file", ""))
        if not path.is_file() or path.is_symlink() or path.parent != folder:
            problems.append(f"{path}: listed in the manifest but missing")
        elif sha256(path) != entry.get("sha256"):
            problems.append(f"{path}: checksum does not match the manifest")
    return problems


def read_decision_file(path: Path, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """A decision file (.parquet or .csv) as a DataFrame (user_id as text; a CSV's text cells with
    the leading `'` of `csv_cell` taken off, so both formats read back the same values)."""
    path = Path(path)
    cols = list(columns) if columns is not None else None
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path, columns=cols)
    elif path.suffix == ".csv":
        # every cell as written (a user id 'NA' stays 'NA'); text columns unescaped, the others numbers
        frame = pd.read_csv(path, usecols=cols, dtype=str, keep_default_na=False)
        for c in frame.columns:
            frame[c] = (frame[c].map(csv_uncell) if c in TEXT_COLUMNS
                        else pd.to_numeric(frame[c].replace("", None), errors="coerce"))
    else:
        raise OutboxError(f"{path}: a decision file is .parquet or .csv")
    if "user_id" in frame.columns:
        frame["user_id"] = frame["user_id"].astype(str)
    return frame


def decision_file_date(path: Path) -> tuple[dt.date, str] | None:
    """The day a decision file is for, with where that was read: the `date` of the manifest beside it
    (an outbox folder), else its folder's name when that is a date (YYYY-MM-DD); None for a file that
    carries no date. OutboxError when the manifest's date is not a date."""
    folder = Path(path).parent
    if (folder / MANIFEST).is_file():
        text = str(read_manifest(folder).get("date"))
        try:
            return dt.date.fromisoformat(text), f"the date of {folder / MANIFEST}"
        except ValueError:
            raise OutboxError(f"{folder / MANIFEST}: 'date' is not a date (YYYY-MM-DD): {text!r}") from None
    try:
        return dt.date.fromisoformat(folder.name), f"the name of its folder {folder}"
    except ValueError:
        return None


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def outbox_target_problem(outbox: Path, campaign: str, *, landing: Path, artifacts: Path, warehouse: Path) -> str | None:
    """Why decisions must not be written under `outbox` (None when they may): every path resolved,
    symbolic links followed, the outbox (and the campaign's folder in it) must not lie inside the
    landing folder or the artefact store, must not be the warehouse's folder itself (the DuckDB file's
    siblings) nor the warehouse file, and must not hold any of them inside the campaign's folder it
    writes."""
    out = Path(outbox).expanduser().resolve()
    target = (out / campaign).resolve()
    places = {"the landing folder": Path(landing).expanduser().resolve(),
              "the artefact store": Path(artifacts).expanduser().resolve()}
    db = Path(warehouse).expanduser().resolve()
    for what, folder in places.items():
        for path in (out, target):
            if _within(path, folder):
                return f"{outbox} resolves to {path}, inside {what} {folder}"
        if _within(folder, target):
            return f"{outbox}: its folder {target} for campaign '{campaign}' would hold {what} {folder}"
    if out == db.parent or target == db.parent:
        return f"{outbox} resolves to {out}, the warehouse's folder (beside {db.name})"
    if _within(db, target) or _within(out, db):
        return f"{outbox}: resolves to {out}, where the warehouse {db} is"
    return None

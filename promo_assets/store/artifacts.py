"""Content-addressed artefact store: trained models are written once, under the hash of their bytes.

An artefact's version is the first 16 hex digits of the SHA-256 of its bytes, so the same trained
weights always get the same version. The store is a trust boundary (docs/operations.md): whatever is
in it may have been written or altered by someone else, so

- nothing read from it is executed or unpickled: an artefact is data only. `save_object` writes a
  torch zip whose pickle holds nothing but plain containers, strings, numbers and tensors, read back
  with `torch.load(weights_only=True)`; everything that is not a tensor (configs, encoders, metrics,
  numpy text arrays) travels as one JSON document inside it. LightGBM baselines store JSON with the
  boosters in LightGBM's own text format (`save_bytes`);
- every load checks the file's bytes against the version in its name *before* parsing them: a file
  whose hash differs (tampered, truncated, half-copied) is reported by name and treated as missing
  (`ArtifactMissingError`), so the asset that trains the model re-trains it;
- a save writes a temporary file in the same folder and renames it over the target, so a killed save
  leaves nothing half-written; a file already at the target is kept only when its bytes match its
  name, otherwise (tampered or truncated) it is replaced, with a warning naming it;
- links and special files are never followed or opened: a symlink, FIFO or device under the store's
  name counts as missing.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

from promo_assets.config import settings
from promo_assets.core.errors import DomainError

log = logging.getLogger(__name__)

VERSION_PATTERN = re.compile(r"[0-9a-f]{16}")
KIND_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,31}")
OBJECT_FORMAT = "promo_assets.artefact"
OBJECT_FORMAT_VERSION = 2  # 1: a pickle of the object itself (no longer read: it could run code)


class ArtifactMissingError(DomainError, FileNotFoundError):
    """No usable artefact under this version: absent, not a regular file, or bytes that do not match
    the version (tampered or truncated). The asset that trains the model re-creates it."""


class ArtifactFormatError(DomainError, ValueError):
    """The artefact's bytes match its version but are not an artefact this code reads, or a stored
    kind or version is not one an artefact can have (it could name another path)."""


def content_version(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def version_of(*parts) -> str:
    """A data version from the upstream versions and values it is derived from."""
    return content_version("|".join(str(p) for p in parts).encode())


def artifact_path(kind: str, version: str, root: Path | None = None) -> Path:
    """`<root>/<kind>/<version>.bin`; ArtifactFormatError for a kind or version (read from stored
    metadata) that could name another path."""
    if not isinstance(kind, str) or not KIND_PATTERN.fullmatch(kind):
        raise ArtifactFormatError(f"artefact kind must match {KIND_PATTERN.pattern}, got {kind!r}")
    if not isinstance(version, str) or not VERSION_PATTERN.fullmatch(version):
        raise ArtifactFormatError(f"artefact version must be 16 lower-case hex digits, got {version!r}")
    return (root or settings.artifacts_dir()) / kind / f"{version}.bin"


def _read_regular(path: Path) -> bytes | None:
    """The bytes of `path` when it is a regular file (never following a symlink, never opening a FIFO
    or device); None when it is absent or something else."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:  # replaced by a link in between: not ours to follow
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        return fh.read()


def _matches(data: bytes, version: str) -> bool:
    return hashlib.sha256(data).hexdigest().startswith(version)


def save_bytes(data: bytes, kind: str, root: Path | None = None) -> tuple[str, Path]:
    """Store `data` under `<root>/<kind>/<version>.bin` (temporary file + rename); return (version,
    path). A file already there is kept when its bytes match the version, else replaced (warning)."""
    version = content_version(data)
    path = artifact_path(kind, version, root)
    if path.exists() or path.is_symlink():
        existing = _read_regular(path)
        if existing is not None and _matches(existing, version):
            return version, path
        log.warning("artefact store: %s did not match its content hash (%s); replaced by the artefact just "
                    "written", path, "not a regular file" if existing is None else f"{len(existing)} bytes, "
                    f"sha256 {hashlib.sha256(existing).hexdigest()[:16]}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)  # replaces a link or a tampered file itself, never what a link points to
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return version, path


def load_bytes(kind: str, version: str, root: Path | None = None) -> bytes:
    """The verified bytes of artefact `kind/version`; ArtifactMissingError (naming the file) when it is
    absent, not a regular file, or its bytes do not hash to `version` (tampered or truncated)."""
    path = artifact_path(kind, version, root)
    data = _read_regular(path)
    if data is None:
        what = "not found" if not (path.exists() or path.is_symlink()) else "not a regular file (links are not followed)"
        raise ArtifactMissingError(f"artefact {path} {what}: re-materialize the asset that trains it")
    if not _matches(data, version):
        log.warning("artefact store: %s does not match its content hash (%d bytes, sha256 %s): tampered or "
                    "truncated; treated as missing", path, len(data), hashlib.sha256(data).hexdigest()[:16])
        raise ArtifactMissingError(
            f"artefact {path} does not match its content hash (tampered or truncated); treated as missing: "
            "re-materialize the asset that trains it (it re-trains and overwrites the file)")
    return data


# ------------------------------------------------------------------------------------ objects as data
def _encode(obj: Any, tensors: dict[str, Any]) -> Any:
    """JSON tree of `obj`; tensors and numeric numpy arrays go to `tensors` (referenced by name)."""
    import numpy as np
    import torch

    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"__float__": repr(obj)}
    if isinstance(obj, np.generic):
        return _encode(obj.item(), tensors)
    if isinstance(obj, torch.Tensor):
        name = str(len(tensors))
        tensors[name] = obj.detach().cpu().contiguous()
        return {"__tensor__": name}
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "biuf":
            name = str(len(tensors))
            tensors[name] = torch.from_numpy(np.ascontiguousarray(obj).copy())
            return {"__ndarray__": name}
        if obj.dtype.kind in "UO":
            return {"__ndarray_text__": [_encode(v, tensors) for v in obj.tolist()], "dtype": obj.dtype.str,
                    "shape": list(obj.shape)}
        raise TypeError(f"cannot store a numpy array of dtype {obj.dtype} as data")
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: _encode(v, tensors) for k, v in obj.items()}
        return {"__items__": [[_encode(k, tensors), _encode(v, tensors)] for k, v in obj.items()]}
    raise TypeError(f"cannot store a {type(obj).__name__} in an artefact (plain data, numpy arrays and tensors only)")


def _decode(tree: Any, tensors: dict[str, Any]) -> Any:
    import numpy as np

    if isinstance(tree, list):
        return [_decode(v, tensors) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if "__tensor__" in tree:
        return tensors[tree["__tensor__"]]
    if "__ndarray__" in tree:
        return tensors[tree["__ndarray__"]].numpy()
    if "__ndarray_text__" in tree:
        dtype = np.dtype(tree["dtype"])
        if dtype.kind not in "UO":
            raise ArtifactFormatError(f"unexpected text array dtype {tree['dtype']!r}")
        values = [_decode(v, tensors) for v in tree["__ndarray_text__"]]
        arr = np.empty(len(values), dtype=dtype) if dtype.kind == "O" else np.asarray(values, dtype=dtype)
        if dtype.kind == "O":
            arr[:] = values
        return arr.reshape(tree["shape"])
    if "__tuple__" in tree:
        return tuple(_decode(v, tensors) for v in tree["__tuple__"])
    if "__items__" in tree:
        return {_freeze(_decode(k, tensors)): _decode(v, tensors) for k, v in tree["__items__"]}
    if "__float__" in tree:
        return float(tree["__float__"])
    return {k: _decode(v, tensors) for k, v in tree.items()}


def _freeze(key: Any) -> Any:
    return tuple(_freeze(k) for k in key) if isinstance(key, (list, tuple)) else key


def to_bytes(obj: Any) -> bytes:
    """The artefact bytes of `obj` (plain data, numpy arrays, tensors): a torch zip holding the
    tensors and one JSON document; deterministic, so equal objects get equal versions."""
    import torch

    tensors: dict[str, Any] = {}
    tree = _encode(obj, tensors)
    buf = io.BytesIO()
    torch.save({"format": OBJECT_FORMAT, "format_version": OBJECT_FORMAT_VERSION,
                "json": json.dumps(tree, separators=(",", ":"), allow_nan=False), "tensors": tensors}, buf)
    return buf.getvalue()


def from_bytes(data: bytes, where: str = "artefact") -> Any:
    """The object `to_bytes` stored: tensors through torch.load(weights_only=True), the rest from
    JSON. ArtifactFormatError when the bytes are something else (an artefact of an older version
    included: those were pickles, which are never loaded)."""
    import torch

    try:
        outer = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 (whatever the bytes are, they are not our data)
        raise ArtifactFormatError(f"{where} is not a promo_assets artefact of this version (re-materialize the "
                                  f"asset that trains it): {str(exc).splitlines()[0][:200]}") from None
    if not isinstance(outer, dict) or outer.get("format") != OBJECT_FORMAT:
        raise ArtifactFormatError(f"{where} is not a promo_assets artefact (re-materialize the asset that trains it)")
    if outer.get("format_version") != OBJECT_FORMAT_VERSION:
        raise ArtifactFormatError(f"{where} was written in artefact format {outer.get('format_version')!r}; this "
                                  f"version reads {OBJECT_FORMAT_VERSION}: re-materialize the asset that trains it")
    tensors = outer.get("tensors")
    if not isinstance(tensors, dict) or not isinstance(outer.get("json"), str):
        raise ArtifactFormatError(f"{where} is damaged (no tensors or JSON part)")
    try:
        return _decode(json.loads(outer["json"]), tensors)
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactFormatError(f"{where} is damaged: {exc}") from None


def save_object(obj: Any, kind: str, root: Path | None = None) -> tuple[str, Path]:
    """Store plain data with numpy arrays and tensors (state dicts, configs, metrics) as data."""
    return save_bytes(to_bytes(obj), kind, root)


def load_object(kind: str, version: str, root: Path | None = None) -> Any:
    """The object stored by `save_object`, after its bytes were checked against `version`."""
    data = load_bytes(kind, version, root)
    return from_bytes(data, f"artefact {artifact_path(kind, version, root)}")

"""Content-addressed artefact store: trained models and encoders are written once, by their hash.

An artefact's version is the first 16 hex digits of the SHA-256 of its bytes, so the same trained
weights always get the same version and nothing is ever overwritten.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from promo_assets import settings


def content_version(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def save_bytes(data: bytes, kind: str, root: Path | None = None) -> tuple[str, Path]:
    """Store `data` under `<root>/<kind>/<version>.bin` (atomically); return (version, path)."""
    root = root or settings.artifacts_dir()
    version = content_version(data)
    path = root / kind / f"{version}.bin"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    return version, path


def load_bytes(kind: str, version: str, root: Path | None = None) -> bytes:
    root = root or settings.artifacts_dir()
    path = root / kind / f"{version}.bin"
    if not path.exists():
        raise FileNotFoundError(f"artefact {kind}/{version} not found under {root}")
    return path.read_bytes()


def save_object(obj: Any, kind: str, root: Path | None = None) -> tuple[str, Path]:
    """Serialize a picklable object (state dicts, configs) with torch.save and store it."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return save_bytes(buf.getvalue(), kind, root)


def load_object(kind: str, version: str, root: Path | None = None) -> Any:
    return torch.load(io.BytesIO(load_bytes(kind, version, root)), weights_only=False)

"""Reading what other systems wrote into the landing folder (a trust boundary, docs/operations.md).

Rule: only regular files are read, and never through a symbolic link. Everything below a campaign's
folder (the folder itself, `events/`, `population/`, ..., the day file, `campaign.yaml`, `truth/`)
is checked with `lstat` before it is opened:

- a symbolic link is refused, wherever it points (inside the landing folder too): links are not
  followed, so whoever can write into the landing folder cannot make the pipeline read a file
  outside it;
- a named pipe (FIFO), socket or device is refused by its name *without opening it* (opening a FIFO
  blocks until someone writes to it; a device can be endless);
- a directory where a file is expected is refused naming it.

The landing root itself (PROMO_LANDING_DIR) is the operator's setting and may be a link.
`check_file` runs again right before a file is handed to DuckDB / pyarrow, so a file swapped for a
link after the scan is refused too; `read_text` opens with O_NOFOLLOW | O_NONBLOCK and checks the
opened file descriptor, so the file read is the file checked.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from promo_assets.core.errors import DomainError


class UnsafeFileError(DomainError, ValueError):
    """A landing path that is not read: a link, a FIFO / socket / device, a folder, or a file larger
    than its kind may be. The message names the path and the rule."""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link (links are not followed: copy the file itself into the landing folder)"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO), not a regular file; refused without opening it"
    if stat.S_ISSOCK(mode):
        return "a socket, not a regular file; refused without opening it"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a regular file; refused without opening it"
    if stat.S_ISDIR(mode):
        return "a directory, not a file"
    return "not a regular file"


def problem(path: Path, below: Path | None = None, want: str = "file") -> str | None:
    """Why `path` may not be read (None when it may): a component from `below` (default: the path's
    own folder) down to `path` that is a symbolic link, or `path` not a regular file (`want='file'`)
    / not a directory (`want='dir'`). A path that does not exist is no problem here (callers say
    'not found' in their own terms)."""
    path = Path(path)
    below = Path(below) if below is not None else path.parent
    try:
        rel = path.relative_to(below)
    except ValueError:
        return f"outside {below}"
    if ".." in rel.parts:
        return f"outside {below} ('..' in the path)"
    parts = [below] + [below.joinpath(*rel.parts[: i + 1]) for i in range(len(rel.parts))]
    for i, part in enumerate(parts):
        try:
            mode = os.lstat(part).st_mode
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(mode):
            return _kind(mode) if part == path else f"{part} is {_kind(mode)}"
        last = i == len(parts) - 1
        if not last and not stat.S_ISDIR(mode):
            return f"{part} is not a directory"
        if last:
            if want == "dir" and not stat.S_ISDIR(mode):
                return _kind(mode) if not stat.S_ISREG(mode) else "a file, not a directory"
            if want == "file" and not stat.S_ISREG(mode):
                return _kind(mode)
    return None


def check_file(path: Path, below: Path | None = None) -> Path:
    """`path` when it is a regular file reached without a link from `below` (default: two folders up,
    the campaign folder of `<campaign>/<kind>/<file>`); UnsafeFileError naming it otherwise."""
    path = Path(path)
    below = below if below is not None else (path.parents[1] if len(path.parents) > 1 else path.parent)
    why = problem(path, below)
    if why:
        raise UnsafeFileError(f"{path}: {why}")
    return path


def read_text(path: Path, max_bytes: int, below: Path | None = None, what: str = "file") -> str:
    """The UTF-8 text of a landing file of at most `max_bytes` bytes, read without following a link
    or opening anything but a regular file. UnsafeFileError for a link / FIFO / folder,
    FileNotFoundError when absent, ValueError (naming the size and the limit) when larger,
    UnicodeDecodeError when not UTF-8."""
    path = Path(path)
    why = problem(path, below)
    if why:
        raise UnsafeFileError(f"{path}: {why}")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise UnsafeFileError(f"{path}: cannot be opened as a regular file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFileError(f"{path}: {_kind(st.st_mode)}")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafeFileError(f"{path}: the {what} is larger than {max_bytes:,} bytes ({st.st_size:,} bytes); "
                              f"a {what} this large is refused")
    return data.decode("utf-8")

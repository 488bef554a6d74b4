"""Writing output files: checked before the work, written atomically, never left half-written.

Every file a command writes (``measure collective --out``, ``calibrate --out``, ``validate --html``,
``validate --fit-out``, ``simulate --emit-cluster``) goes through here:

* :func:`check_writable` runs *before* the work (a benchmark, a fit, a simulation): the parent directory
  exists and is a directory, the target is not a directory, and a file can be created in the parent (a
  temporary file is made and removed, which catches read-only mounts that permission bits do not show).
  A failure is one :class:`~tierwise.errors.OutputError` line naming the path and the fix.
* :func:`write_atomic` writes a uniquely named temporary file beside the target
  (``tempfile.NamedTemporaryFile(dir=parent, delete=False)``), flushes and fsyncs it, and ``os.replace``-s
  it over the target; on any failure (``ENOSPC``, ``EIO``, an exception while rendering) the temporary file
  is removed and the target is left as it was. Two writers never share a temporary name.
* :func:`merge_rows_locked` is ``measure collective --out``'s policy for concurrent runs writing the same
  file: under an exclusive ``flock`` on the parent directory, read the rows already there, keep every row of
  the *other* runs (each row names its run in ``run``), replace this run's own rows, and write atomically.
  Two runs of the same ``--out`` both land; nothing is lost.

A target that is a symbolic link is written *through* the link (:func:`through_links`): the file the link
points at is replaced, and the link stays a link, as a shell's ``>`` would leave it. Replacing the link itself
with a regular file would silently undo what the user (or the system, e.g. a link under ``/etc``) set up. A
loop of links is refused with one line.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from tierwise.errors import OutputError

__all__ = ["check_writable", "write_atomic", "merge_rows_locked", "locked_dir", "read_rows", "through_links"]

_TMP_PREFIX = ".tierwise-"


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "no space left on the device; free some space or write elsewhere"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "not writable (permission denied or a read-only file system); choose a writable directory"
    if exc.errno == errno.ENOENT:
        return "this file system does not take new files (e.g. /proc or /sys); choose another directory"
    return f"{exc.strerror or exc}; choose another path"


def through_links(path: str | os.PathLike, what: str = "--out") -> Path:
    """The path a write to ``path`` lands on: ``path`` itself, or, when it is a symbolic link (a chain of
    them, or a directory link on the way), the file at the end of the links (which need not exist yet).

    A loop of links is an :class:`OutputError`.
    """
    p = Path(path)
    if not p.is_symlink():
        return p
    target = Path(os.path.realpath(p))
    if target.is_symlink():  # realpath stops inside a loop of links
        raise OutputError(f"{what} {_short(str(p))!r} is a loop of symbolic links; fix the link or name a file")
    return target


def _short(full: str) -> str:
    return full if len(full) <= 80 else full[:60] + "..." + full[-17:]


def check_writable(path: str | os.PathLike, what: str = "--out") -> Path:
    """Check that ``path`` can be written (see the module docstring); return it as a :class:`Path`.

    Raises :class:`OutputError` naming ``what`` (the option) and the path (shortened past 80 characters);
    a path the file system refuses outright (a name too long, a loop of links) is such an error too.
    """
    full = str(path)
    text = _short(full)
    try:
        target = through_links(path, what) if full else Path(path)
        if str(target) != str(Path(path)):  # a link: check the file it points at, and say so
            text = f"{_short(full)} -> {_short(str(target))}"
            full = str(target)
        _check_writable(target, full, text, what)
        return Path(path)
    except OSError as exc:
        raise OutputError(f"{what} {text!r}: {_reason(exc)}") from None


def _check_writable(p: Path, full: str, text: str, what: str) -> Path:
    if not full or full.endswith(os.sep):
        raise OutputError(f"{what} {text!r}: name a file, not a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise OutputError(f"{what} {text!r} is a directory; name a file inside it, e.g. {str(p / 'out')!r}")
    if _is_char_device(p) and _is_devnull(p):
        return p  # --out /dev/null: measure, keep nothing
    if p.exists() and not p.is_file():
        raise OutputError(f"{what} {text!r} is not a regular file (a device, pipe or socket); name a regular file")
    if not parent.exists():
        ancestor = parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if ancestor.exists() and not ancestor.is_dir():
            raise OutputError(f"{what} {text!r}: {str(ancestor)!r} is a file, not a directory; choose another path")
        raise OutputError(f"{what} {text!r}: the directory {str(parent)!r} does not exist; create it first "
                          f"(mkdir -p {parent}) or choose another path")
    if not parent.is_dir():
        raise OutputError(f"{what} {text!r}: {str(parent)!r} is a file, not a directory; choose another path")
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=_TMP_PREFIX, suffix=".check")
    except OSError as exc:
        raise OutputError(f"{what} {text!r}: cannot create a file in {str(parent)!r}: {_reason(exc)}") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputError(f"{what} {text!r}: the file is read-only; choose another path or make it writable")
    return p


def _is_devnull(p: Path) -> bool:
    try:
        return os.path.samefile(p, os.devnull)
    except OSError:
        return False


def _is_char_device(p: Path) -> bool:
    import stat

    try:
        return stat.S_ISCHR(p.stat().st_mode)
    except OSError:
        return False


def write_atomic(path: str | os.PathLike, text: str | bytes | Callable[[], str | bytes],
                 what: str = "--out") -> str:
    """Write ``text`` (or what the callable returns) to ``path`` atomically; return the path written.

    A failure leaves no temporary file and the target as it was, and raises :class:`OutputError`.
    ``/dev/null`` is written directly (it cannot be replaced); another device is refused.
    """
    p = through_links(path, what)
    data = text() if callable(text) else text
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if _is_char_device(p) and not _is_devnull(p):
        raise OutputError(f"{what} {str(p)!r} is a device, not a regular file; name a regular file")
    if _is_char_device(p):
        try:
            with open(p, "wb") as fh:
                fh.write(payload)
                fh.flush()
        except OSError as exc:
            raise OutputError(f"{what} {str(p)!r}: the write failed: {_reason(exc)}") from None
        return str(p)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise OutputError(f"{what} {str(p)!r} is a directory; name a file inside it")
    try:
        tmp = tempfile.NamedTemporaryFile(dir=parent, prefix=_TMP_PREFIX + p.name + ".", suffix=".tmp",  # noqa: SIM115
                                          delete=False)
    except OSError as exc:
        raise OutputError(f"{what} {str(p)!r}: cannot create a file in {str(parent)!r}: {_reason(exc)}") from None
    try:
        with tmp:
            tmp.write(payload)
            tmp.flush()
            os.fsync(tmp.fileno())
        if p.exists():
            with contextlib.suppress(OSError):
                os.chmod(tmp.name, p.stat().st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp.name, 0o666 & ~umask)
        os.replace(tmp.name, p)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp.name)
        raise OutputError(f"{what} {str(p)!r}: the write failed: {_reason(exc)}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp.name)
        raise
    return str(p)


@contextlib.contextmanager
def locked_dir(directory: str | os.PathLike) -> Iterator[None]:
    """An exclusive advisory lock (``flock``) on a directory, held for the ``with`` block.

    Locking the directory (not a lock file) leaves nothing behind. Where ``flock`` is unavailable (not
    POSIX) the block runs unlocked.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # a directory that can be written but not read: no lock to take, write unlocked
        yield
        return
    try:
        with contextlib.suppress(OSError):  # a file system without flock (some network mounts): unlocked
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def merge_rows_locked(path: str | os.PathLike, run: str, rows: list[dict], what: str = "--out") -> list[dict]:
    """Write ``rows`` (each tagged ``run``) into the JSON list at ``path``, keeping other runs' rows.

    Under :func:`locked_dir` on the parent: read the list there (:func:`read_rows`: a missing or empty file
    is no rows), drop the rows tagged with this ``run``, append ``rows``, write atomically. Returns the
    merged list. A file there that is not a JSON list of objects raises :class:`OutputError` rather than
    being destroyed; callers check it with :func:`read_rows` before the work.
    """
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    tagged = [{**row, "run": run} for row in rows]
    with locked_dir(parent):
        existing = read_rows(p, what)
        kept = [row for row in existing if row.get("run") != run]
        merged = kept + tagged
        write_atomic(p, json.dumps(merged, indent=2) + "\n", what)
    return merged


def read_rows(path: str | os.PathLike, what: str = "--out") -> list[dict]:
    """The JSON list of row objects at ``path``; ``[]`` for a missing or empty file.

    Anything else there (not JSON, not a list of objects) is an :class:`OutputError`: writing would destroy it.
    """
    p = Path(path)
    if p.exists() and not p.is_file():
        return []  # /dev/null (check_writable refuses every other non-regular target)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise OutputError(f"{what} {str(p)!r}: cannot read the existing file: {_reason(exc)}") from None
    if not text.strip():
        return []
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # malformed, a 5000-digit integer, nested too deeply
        data = None
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise OutputError(f"{what} {str(p)!r} exists and is not a tierwise result (a JSON list of rows); "
                          "rows are merged into it, so move it away or choose another path")
    return data

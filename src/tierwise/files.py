"""Reading the files a user points tierwise at: one guarded reader, one strict YAML loader, one JSON loader.

Every spec, scenario, price, topology, log and dataset file goes through :func:`read_user_text`, which

* refuses what is not a regular file (a directory, a named pipe, a device such as ``/dev/zero``, a socket)
  before opening it, so a FIFO cannot block and an endless device cannot fill memory;
* names a dangling symbolic link as such;
* reads at most a size limit (:data:`MAX_SPEC_BYTES` for specs, :data:`MAX_LOG_BYTES` for logs) and says
  which limit a larger file passed;
* decodes UTF-8 strictly (a leading byte-order mark is accepted), naming the byte offset of the first
  byte that is not UTF-8, and refuses NUL bytes (a binary file);
* never puts the file's contents into a message (a system file such as ``/proc/self/environ`` must not be
  echoed): messages name the path, a size, an offset, a key or a line.

:func:`load_yaml` parses with libyaml's safe loader (the pure-Python one where libyaml is missing) and
additionally refuses duplicate keys (YAML's "last one wins" silently drops a value) and anchors/aliases
(an alias bomb expands exponentially in whoever walks the result), naming the key or the line.
:func:`load_json` refuses duplicate keys and ``NaN``/``Infinity`` the same way.

:func:`short_repr` is the one way a message shows a user's value: at most about 60 characters.
"""

from __future__ import annotations

import json
import os
import reprlib
import stat
from pathlib import Path
from typing import Any

from tierwise.errors import SpecError, TierwiseError

__all__ = ["MAX_SPEC_BYTES", "MAX_LOG_BYTES", "read_user_text", "load_yaml", "load_json", "short_repr",
           "describe_type", "path_exists", "require_document"]

MAX_SPEC_BYTES = 16 * 2**20
"""Largest spec file (scenario, model, cluster, price, topology YAML/JSON, dataset CSV) read: 16 MiB."""
MAX_LOG_BYTES = 256 * 2**20
"""Largest log or measurement file read (nccl-tests logs, result JSON): 256 MiB."""

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = 40
_REPR.maxother = 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4
_REPR.maxlong = 30


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to about ``limit`` characters (deep or huge values never expand in full)."""
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still shown by type
        text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _cut(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (for our own and libraries' messages, never file contents)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_type(value: Any) -> str:
    """A YAML/JSON-ish name for a value's type (``a list``, ``a string``, ``a number``...)."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def require_document(data: Any, where: str, needs: str, error: type[TierwiseError] = SpecError) -> dict:
    """A spec file's parsed document, which must be a mapping: an empty file or one holding a list, a string
    or a number is one line, ``"<where> is empty; <needs>"`` or ``"<where> holds a list, not a mapping;
    <needs>"``, ``needs`` saying what the file should hold."""
    if data is None:
        raise error(f"{where} is empty; {needs}")
    if not isinstance(data, dict):
        raise error(f"{where} holds {describe_type(data)}, not a mapping; {needs}")
    return data


def path_exists(path: str | Path) -> bool:
    """``os.path.exists`` (never raises: a name too long or a path through a file is simply not there), for
    deciding whether a string names a file before :func:`read_user_text` reports what is wrong with it."""
    return os.path.exists(path)


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_user_text(path: str | Path, *, what: str = "file", max_bytes: int = MAX_SPEC_BYTES,
                   error: type[TierwiseError] = SpecError, strict_utf8: bool = True) -> str:
    """The text of the regular file ``path``; anything else is one line of ``error`` naming the path and the fix.

    ``what`` names the file's role in messages ("scenario file", "price file", ...). With ``strict_utf8``
    false (logs), bytes that are not UTF-8 become U+FFFD instead of an error; NUL bytes are refused either way.
    """
    p = Path(path)
    name = repr(short_repr(str(p), 120)[1:-1]) if len(str(p)) > 120 else repr(str(p))
    if not str(p):
        raise error(f"the {what} path is empty; give the path of a file")
    if "\x00" in str(p):
        raise error(f"the {what} path {name} holds a NUL character; no file can have that name, check the path")
    _check_regular_file(p, name, what=what, max_bytes=max_bytes, error=error)
    data = _read_capped(p, name, what=what, max_bytes=max_bytes, error=error)
    return _decode_text(data, name, what=what, error=error, strict_utf8=strict_utf8)


def _check_regular_file(p: Path, name: str, *, what: str, max_bytes: int, error: type[TierwiseError]) -> None:
    """Stat ``p``: one line of ``error`` unless it is a regular file of at most ``max_bytes``."""
    try:
        st = os.stat(p)
    except FileNotFoundError:
        if os.path.islink(p):
            raise error(f"{what} {name} is a symbolic link to a missing file; fix the link or pass the file "
                        "itself") from None
        raise error(f"{what} {name} does not exist; check the path") from None
    except NotADirectoryError:
        raise error(f"{what} {name} does not exist (a part of the path is not a directory); check the path") from None
    except PermissionError:
        raise error(f"cannot read {what} {name}: permission denied; check the file's permissions") from None
    except OSError as exc:  # ELOOP, ENAMETOOLONG, EIO ...
        raise error(f"cannot read {what} {name}: {exc.strerror}; check the path") from None
    if not stat.S_ISREG(st.st_mode):
        hint = "pass the file inside it" if stat.S_ISDIR(st.st_mode) else "pass a regular file"
        raise error(f"{what} {name} is {_kind(st.st_mode)}, not a regular file; {hint}")
    if st.st_size > max_bytes:
        raise error(f"{what} {name} is {_size(st.st_size)}, over the {_size(max_bytes)} limit for a {what}; "
                    "is this the right file?")


def _read_capped(p: Path, name: str, *, what: str, max_bytes: int, error: type[TierwiseError]) -> bytes:
    """The bytes of regular file ``p``, refusing more than ``max_bytes`` however the file reports its size."""
    try:
        # O_NONBLOCK: if the path was swapped for a FIFO after the stat, opening it still cannot block
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except PermissionError:
        raise error(f"cannot read {what} {name}: permission denied; check the file's permissions") from None
    except OSError as exc:
        raise error(f"cannot read {what} {name}: {exc.strerror}; check the path") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error(f"{what} {name} is not a regular file; pass a regular file")
        chunks: list[bytes] = []
        total = 0
        while True:  # a file the stat called small may still grow, and /proc files report size 0
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise error(f"{what} {name} is over the {_size(max_bytes)} limit for a {what}; is this the "
                            "right file?")
    except OSError as exc:
        raise error(f"cannot read {what} {name}: {exc.strerror}") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def _decode_text(data: bytes, name: str, *, what: str, error: type[TierwiseError], strict_utf8: bool) -> str:
    """``data`` as UTF-8 text (a UTF-8 BOM dropped); UTF-16, NUL bytes and (when strict) bad UTF-8 are one line."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise error(f"{what} {name} is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise error(f"{what} {name} holds a NUL byte at offset {nul}: a binary file, not text; pass the text "
                    f"{what}")
    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    data = data[bom:]
    if not strict_utf8:
        return data.decode("utf-8", errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = exc.start + bom
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{what} {name} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {offset} (line {line}) "
                    "is not UTF-8; save the file as UTF-8") from None


# --------------------------------------------------------------------------------------------------
# YAML


_LOADER: Any = None


def _strict_loader() -> Any:
    """libyaml's safe loader with duplicate keys and anchors/aliases refused (built once, on first use)."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster start-up

    class StrictLoader(base):  # type: ignore[misc, valid-type]
        def construct_document(self, node):
            _refuse_aliases(node)
            return super().construct_document(node)

        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, int] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        hash(key)
                    except TypeError:
                        raise yaml.constructor.ConstructorError(
                            None, None, "a key that is a list or a mapping; keys must be plain names",
                            key_node.start_mark) from None
                    if key in seen:
                        raise _DuplicateKey(key, seen[key], key_node.start_mark.line + 1)
                    seen[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    _LOADER = StrictLoader
    return _LOADER


class _DuplicateKey(Exception):
    def __init__(self, key: Any, first_line: int, line: int) -> None:
        super().__init__(key)
        self.key, self.first_line, self.line = key, first_line, line


class _Alias(Exception):
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


def _refuse_aliases(root: Any) -> None:
    """Raise :class:`_Alias` if a node is reached twice (an alias ``*name`` of an anchor ``&name``).

    The composed graph shares one node per anchor, so an alias bomb is a small graph: this walk is
    linear in its distinct nodes and stops at the first repeat, before anything is expanded.
    """
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            raise _Alias(node.start_mark.line + 1)
        seen.add(id(node))
        value = node.value
        if isinstance(value, list):
            for item in value:
                if isinstance(item, tuple):
                    stack.extend(item)
                else:
                    stack.append(item)


def load_yaml(text: str, origin: str, error: type[TierwiseError] = SpecError) -> Any:
    """Parse YAML (JSON is YAML too); every problem is one line of ``error`` naming ``origin`` and the line."""
    import yaml

    try:
        return yaml.load(text, Loader=_strict_loader())
    except _DuplicateKey as exc:
        raise error(f"duplicate key {short_repr(exc.key)} in {origin}, line {exc.line} (first at line "
                    f"{exc.first_line}); YAML would silently keep the last one: remove one of them") from None
    except _Alias as exc:
        raise error(f"YAML anchors and aliases (&name, *name) are not supported in {origin} (an alias of the "
                    f"value at line {exc.line}); write the values out in full") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{origin}, line {mark.line + 1}, column {mark.column + 1}" if mark else origin
        problem = _cut(", ".join(str(x) for x in (exc.context, exc.problem) if x) or "error", 140)
        raise error(f"malformed YAML in {where}: {problem}; fix the syntax there") from None
    except yaml.YAMLError as exc:
        raise error(f"malformed YAML in {origin}: {_cut(str(exc), 100)}; fix the syntax there") from None
    except RecursionError:
        raise error(f"{origin} nests too deeply to read; flatten it") from None
    except (ValueError, OverflowError) as exc:  # a 5000-digit number, a timestamp such as 2024-13-45
        raise error(f"a value in {origin} cannot be read ({_cut(str(exc), 100)}); quote it if it is "
                    "text, or fix the number or date") from None


# --------------------------------------------------------------------------------------------------
# JSON


def _no_duplicates(origin: str, error: type[TierwiseError]):
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise error(f"duplicate key {short_repr(key)} in {origin}; JSON readers would silently keep the "
                            "last one: remove one of them")
            out[key] = value
        return out
    return hook


def _no_constant(origin: str, error: type[TierwiseError]):
    def hook(name: str) -> Any:
        raise error(f"{name} in {origin} is not a number JSON allows; give a finite number")
    return hook


def load_json(text: str, origin: str, error: type[TierwiseError] = SpecError) -> Any:
    """Parse JSON; a syntax error names the line and column, duplicate keys and NaN/Infinity are refused."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates(origin, error),
                          parse_constant=_no_constant(origin, error))
    except json.JSONDecodeError as exc:
        raise error(f"malformed JSON in {origin}, line {exc.lineno}, column {exc.colno}: {exc.msg}; fix the "
                    "syntax there") from None
    except RecursionError:
        raise error(f"{origin} nests too deeply to read; flatten it") from None
    except ValueError as exc:  # a number of more than 4300 digits
        raise error(f"a value in {origin} cannot be read ({_cut(str(exc), 100)}); fix the number") from None

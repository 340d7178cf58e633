"""Crash-safe JSON config files (topics.json, consumerOffset.json, ...).

Mirrors RocketMQ's ``MixAll.string2File`` / ``ConfigManager.load``: write a temporary file, fsync,
keep the previous good copy as ``<name>.bak``, rename into place, fsync the directory. Loading falls
back to the ``.bak`` copy when the main file is corrupt, and accepts fastjson's unquoted integer
map keys (``{"offsetTable":{"T@G":{0:123}}}``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import orjson

from tidemq.errors import StoreError

log = logging.getLogger(__name__)


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


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def quote_integer_keys(text: str) -> str:
    """Quote bare integer object keys (fastjson ``{0:123}`` -> ``{"0":123}``), leaving strings alone."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    expect_key = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
            continue
        if c == '"':
            in_string, expect_key = True, False
        elif c in "{,":
            expect_key = True
        elif expect_key and (c == "-" or c.isdigit()):
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            if k < n and text[k] == ":":
                out.append(f'"{text[i:j]}"')
                i = j
                expect_key = False
                continue
            expect_key = False
        elif not c.isspace():
            expect_key = False
        out.append(c)
        i += 1
    return "".join(out)


def parse_json(data: bytes) -> Any:
    """Parse JSON, accepting fastjson's unquoted integer keys.

    Raises:
        ValueError: not JSON even after quoting integer keys (also for empty input).
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return orjson.loads(quote_integer_keys(data.decode("utf-8")))


def _try_load(path: Path) -> tuple[bool, Any]:
    """``(ok, value)``; ``ok`` False when the file is unreadable or not JSON (logged)."""
    try:
        return True, parse_json(path.read_bytes())
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        log.warning("config file %s is unreadable or corrupt: %s", path, exc)
        return False, None


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` crash-safely, keeping the previous good copy as ``.bak``.

    Steps: ``<path>.tmp`` written and fsynced; the current file, if it parses, copied to
    ``<path>.bak`` (fsynced); ``.tmp`` renamed over ``path``; directory fsynced.

    Raises:
        StoreError: the file cannot be written (message names it).
        TypeError: ``obj`` is not JSON-serialisable.
    """
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    bak = target.with_name(target.name + ".bak")
    data = orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_synced(tmp, data)
        if target.exists():
            try:
                current = target.read_bytes()
                parse_json(current)
            except (OSError, ValueError, UnicodeDecodeError):
                log.warning("not backing up corrupt %s; keeping the older %s", target, bak)
            else:
                bak_tmp = bak.with_name(bak.name + ".tmp")
                _write_synced(bak_tmp, current)
                os.replace(bak_tmp, bak)
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    except OSError as exc:
        raise StoreError(f"cannot write config file {target}: {exc}") from exc


def load_json(path: str | os.PathLike[str]) -> Any | None:
    """Load a config file written by :func:`atomic_write_json` (or by a Java broker).

    Returns:
        The parsed JSON; the ``.bak`` copy's content (with a warning) when the main file is missing
        or corrupt; None when neither file exists.

    Raises:
        StoreError: no usable copy although a file exists (the message names the file(s)).
    """
    target = Path(path)
    bak = target.with_name(target.name + ".bak")
    main_exists, bak_exists = target.exists(), bak.exists()
    if not main_exists and not bak_exists:
        return None
    if main_exists:
        ok, value = _try_load(target)
        if ok:
            return value
    if bak_exists:
        ok, value = _try_load(bak)
        if ok:
            log.warning("loaded %s from its backup %s", target, bak)
            return value
        raise StoreError(f"config file {target} and its backup {bak} are both corrupt or unreadable")
    raise StoreError(f"config file {target} is corrupt or unreadable and has no backup {bak}")

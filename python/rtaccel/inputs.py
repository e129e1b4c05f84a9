"""Files rtaccel reads (a summary, a calibration, the interposer's reports,
a trace): regular files only, and those read whole up to a bound, as
src/core/text_file.h does for the workload: a device or a pipe given for
one (/dev/zero) would be read for ever."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

MAX_BYTES = 16 << 20


class NotAFile(OSError):
    """PATH is not a file rtaccel reads: a device, a pipe, or too large."""


def open_file(path: str | os.PathLike) -> BinaryIO:
    """PATH opened to read its bytes; NotAFile (an OSError) for a device or
    a pipe."""
    f = open(path, "rb")
    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
        f.close()
        raise NotAFile("not a file (a device or a pipe?)")
    return f


def read_text(path: str | os.PathLike) -> str:
    """The text of PATH; NotAFile (an OSError) for a device, a pipe or a
    file larger than MAX_BYTES, UnicodeDecodeError (a ValueError) for one
    that is not UTF-8."""
    with open_file(path) as f:
        return _read_bounded(f).decode("utf-8")


def _read_bounded(f: BinaryIO, hint: str = "") -> bytes:
    """F's bytes to its end; NotAFile where they pass MAX_BYTES (HINT: what
    such an input may be)."""
    data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise NotAFile(f"larger than {MAX_BYTES >> 20} MB, which no file rtaccel reads is{hint}")
    return data


def read_once(path: str | os.PathLike) -> bytes | None:
    """The bytes of PATH where it can be read only once, a pipe (a shell's
    `<(cmd)`, /dev/stdin under `cmd |`) or a terminal, read up to
    MAX_BYTES; None for a file (or what cannot be opened, which its reader
    then says). NotAFile (an OSError) for one larger than that."""
    try:
        with open(path, "rb") as f:
            if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            return _read_bounded(f, " (a device?)")
    except NotAFile:
        raise
    except OSError:
        return None


def last_line(path: str | os.PathLike, within: int = 4096) -> str:
    """The last line of PATH that is not empty, from its last WITHIN bytes
    (a program's log can be large); '' where there is none."""
    with open(path, "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - within))
        lines = f.read(within).decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else ""

"""Output paths and atomic writes: results are written whole or not at all.

Every command that writes checks its output paths before the work starts (`check_out_file`,
`check_out_dir`: the format is one matplotlib can draw, the folder can be created, a file is not
a folder and a folder is not a file), then writes:

* a single file through a temporary file beside it and `os.replace` (`atomic_file`), so a
  reader never sees half a file and an interrupted run leaves the old file;
* a result folder (``optimize --out``) into a temporary folder beside it, renamed into place
  (`atomic_dir`). An existing result folder is replaced whole, so files of an earlier run (an
  old ``pareto.csv`` beside a new single-objective run) never survive; a folder that holds
  files no fusion-dse run writes is refused unless ``force``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from simulator import limits
from simulator.errors import InputError

__all__ = ["FIGURE_SUFFIXES", "PLOT_FORMATS", "atomic_dir", "atomic_file", "check_figure_file",
           "check_out_dir", "check_out_file", "plot_formats"]

PLOT_FORMATS = ("avif", "eps", "gif", "jpeg", "jpg", "pdf", "pgf", "png", "ps", "raw", "rgba",
                "svg", "svgz", "tif", "tiff", "webp")
"""File suffixes matplotlib can write (those of matplotlib 3.11), named here so that a path is
checked before matplotlib is imported (a test holds each one to matplotlib's
``get_supported_filetypes``)."""
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
"""The figure files ``fusion-dse plot`` and ``compare`` write (`check_figure_file`)."""


def plot_formats() -> tuple[str, ...]:
    """File suffixes matplotlib can write (png, pdf, svg, ...): `PLOT_FORMATS`."""
    return PLOT_FORMATS


def check_figure_file(path: str | os.PathLike[str]) -> Path:
    """`path` if it names a figure file of `FIGURE_SUFFIXES` (``--out`` of plot and compare).

    Raises:
        InputError: another suffix.
    """
    out = Path(path)
    if out.suffix.lower() not in FIGURE_SUFFIXES:
        raise InputError(f"--out {str(out)!r}: use a .png, .svg or .pdf file")
    return out


def _check_name(path: Path, flag: str) -> None:
    if any(len(part) > limits.MAX_NAME_CHARS for part in path.parts):
        raise InputError(f"{flag} {str(path)[:40]!r}...: a path component is longer than "
                         f"{limits.MAX_NAME_CHARS} characters")


def _writable_parent(path: Path, flag: str) -> None:
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"{flag} {str(path)!r}: {str(parent)!r} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {str(path)!r}: cannot write in {str(parent)!r}")


def check_out_file(path: str | os.PathLike[str], flag: str,
                   formats: Iterable[str] | None = None, create_parent: bool = False) -> Path:
    """`path` if a file can be written there: not a folder, its folder existing (or creatable
    with `create_parent`) and writable, and (if `formats` is given) its suffix one of them.

    Raises:
        InputError: One line naming `flag` and the path.
    """
    out = Path(path)
    _check_name(out, flag)
    if formats is not None:
        allowed = tuple(formats)
        suffix = out.suffix.lower().lstrip(".")
        if suffix not in allowed:
            raise InputError(f"{flag} {str(out)!r}: unsupported format {suffix or '(none)'!r}; "
                             f"use one of {', '.join(allowed)}")
    if out.is_dir():
        raise InputError(f"{flag} {str(out)!r} is a folder, expected a file")
    if out.exists() and not out.is_file():
        raise InputError(f"{flag} {str(out)!r} is not a regular file")
    if out.parent.exists() and not out.parent.is_dir():
        raise InputError(f"{flag} {str(out)!r}: {str(out.parent)!r} is not a folder")
    if not create_parent and not out.parent.is_dir():
        raise InputError(f"{flag} {str(out)!r}: cannot write there, folder "
                         f"{str(out.parent)!r} does not exist")
    _writable_parent(out, flag)
    return out


def check_out_dir(path: str | os.PathLike[str], flag: str) -> Path:
    """`path` if a result folder can be written there (it is not a file; it or its nearest
    existing parent is a writable folder).

    Raises:
        InputError: One line naming `flag` and the path.
    """
    out = Path(path)
    _check_name(out, flag)
    if out.exists() and not out.is_dir():
        raise InputError(f"{flag} {str(out)!r} is a file, expected a folder")
    _writable_parent(out, flag)
    return out


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside `path` (same suffix) to write; moved onto `path` on success,
    removed on failure."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=f".tmp{out.suffix}",
                               dir=out.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, _mode(0o666))  # mkstemp's 0600 would hide a result from its readers
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str], owned: Iterable[str],
               force: bool = False) -> Iterator[Path]:
    """A temporary folder beside `path` to write a result into; on success it replaces
    `path` whole, on failure it is removed and `path` is left as it was.

    Args:
        path: The result folder.
        owned: Names of the files a run writes; an existing folder holding anything else is
            refused unless `force` (it is not an earlier result).
        force: Replace an existing folder whatever it holds.

    Raises:
        InputError: The folder holds other files and `force` is False.
    """
    out = Path(path)
    if out.is_dir() and not force:
        foreign = sorted(p.name for p in out.iterdir() if p.name not in set(owned))
        if foreign:
            raise InputError(f"--out {str(out)!r} holds files a fusion-dse run does not write "
                             f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); "
                             "choose another folder or pass --force to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        yield tmp
        os.chmod(tmp, _mode(0o777))  # mkdtemp's 0700, as mkdir would make it
        _swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _mode(full: int) -> int:
    """`full` (0o666 for a file, 0o777 for a folder) less the process's umask: the mode
    ``open`` or ``mkdir`` would give a result written directly."""
    mask = os.umask(0o022)  # read it: the only portable way sets it, so set it straight back
    os.umask(mask)
    return full & ~mask


def _swap_in(tmp: Path, out: Path) -> None:
    if not out.exists():
        os.replace(tmp, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    os.replace(out, old / out.name)
    try:
        os.replace(tmp, out)
    except OSError:
        os.replace(old / out.name, out)  # put the earlier result back
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)

"""Atomic file writes: a temporary file in the target directory, then a rename.

The temporary file is ``.NAME.XXXXXXXX.tmp`` next to the target. It is created with mode
``0o666`` so the kernel applies the umask, as for a file ``open()`` creates (tempfile's
``mkstemp`` would make it ``0o600`` whatever the umask); when the target exists its mode
is kept. Errors name the target, never the temporary file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Any, Callable, Iterator, TypeVar

_ATTEMPTS = 100
T = TypeVar("T")


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary sibling of ``path`` for writing; rename it onto ``path`` on success.

    On any exception, including ``KeyboardInterrupt``, the temporary file is removed and
    ``path`` is left as it was, so a reader never sees a half-written file.
    """
    target = Path(path)
    fd, tmp = _create_sibling(target)
    try:
        with os.fdopen(fd, mode, encoding=encoding if "b" not in mode else None) as handle:
            _keep_mode(handle.fileno(), target)
            yield handle
            _naming(target, handle.flush)
            _naming(target, os.fsync, handle.fileno())
        _naming(target, os.replace, tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def probe_directory(path: str | os.PathLike[str]) -> None:
    """Check now that :func:`atomic_write` can write ``path``; ``OSError`` naming its directory if not.

    Creates and removes a temporary sibling, the one reliable test (permissions, read-only
    file systems, and the superuser, whom ``os.access`` does not describe). An existing
    ``path`` must be a regular file: renaming onto a device or a directory would replace it.
    """
    target = Path(path)
    directory = target.parent
    if not directory.is_dir():
        problem = "is not a directory" if directory.exists() else "does not exist"
        raise OSError(errno.ENOENT, f"directory {directory} {problem}", str(target))
    if target.exists() and not target.is_file():
        raise OSError(errno.EEXIST, "exists and is not a regular file", str(target))
    fd, tmp = _create_sibling(target)
    os.close(fd)
    os.unlink(tmp)


def _create_sibling(target: Path) -> tuple[int, str]:
    """Create ``.NAME.XXXXXXXX.tmp`` next to ``target`` (mode 0o666 less the umask); its fd and path."""
    directory = target.parent
    for _ in range(_ATTEMPTS):
        tmp = str(directory / f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise OSError(exc.errno, f"cannot write in directory {directory}: {exc.strerror}", str(target)) from None
    raise OSError(errno.EEXIST, f"cannot create a temporary file in {directory}", str(target))


def _keep_mode(fd: int, target: Path) -> None:
    """Give the new file the mode of the file it replaces, if there is one."""
    try:
        existing = os.stat(target).st_mode
    except OSError:  # no target yet (or unreadable): the umask-derived mode stands
        return
    os.fchmod(fd, stat.S_IMODE(existing))


def _naming(target: Path, operation: Callable[..., T], *args: Any) -> T:
    """``operation(*args)``, its ``OSError`` re-raised about ``target`` rather than the temporary file."""
    try:
        return operation(*args)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(target)) from None

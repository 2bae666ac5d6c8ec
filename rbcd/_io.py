"""Atomic file output: every file rbcd writes appears whole or not at all.

:func:`atomic_write` opens a temporary file in the target's folder (same file system, so
the final rename is atomic), lets the caller write it, then flushes it, ``fsync``\\ s it,
renames it over the target with ``os.replace`` and ``fsync``\\ s the folder. If anything
fails on the way (a full disk, a quota, an exception or Ctrl-C in the writer), the
temporary file is removed and the target is untouched: the previous file stays, or there
is none. Readers never see a truncated model or a cut-off predictions file.

A target that exists and is not a regular file (``/dev/stdout``, a pipe, a device node)
is written in place, without a temporary file or a rename: renaming over it would replace
the device node itself.

Temporary files are named ``.<name>.<pid>-<random>.tmp``. A writer killed by SIGKILL (or
power loss) cannot remove its own; the next :func:`atomic_write` to the same target
removes those whose process is gone (:func:`sweep_stale`), and only those: a live
writer's file, or anything not of this naming, is left alone.

The command line's model and predictions files and the benchmark scripts' outputs
(``benchmarks/_common.py``) are written this way.
"""
import contextlib
import os
import re
import stat
import tempfile

__all__ = ["atomic_write", "is_special_file", "sweep_stale", "temp_pattern"]


def is_special_file(path):
    """True when ``path`` exists (following links) and is neither a regular file nor a
    folder: a character or block device, a pipe, a socket (``/dev/stdout``, ``/dev/null``)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def temp_pattern(name):
    """The regular expression of this module's temporary files for a target ``name``."""
    return re.compile(rf"^\.{re.escape(name)}\.(\d+)-[a-z0-9_]{{8}}\.tmp$")


def _pid_alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists (owned by someone else), or cannot tell: keep its file
    return True


def sweep_stale(directory, name):
    """Remove the temporary files of earlier writes to ``directory/name`` whose writing
    process no longer exists (killed before it could clean up); returns their paths."""
    pattern = temp_pattern(name)
    removed = []
    try:
        entries = os.listdir(directory)
    except OSError:
        return removed
    for entry in entries:
        m = pattern.match(entry)
        if m is None or _pid_alive(int(m.group(1))):
            continue
        full = os.path.join(directory, entry)
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(full).st_mode):
                os.unlink(full)
                removed.append(full)
    return removed


def _new_file_mode(path):
    """Permission bits for the new file: the existing target's, else 0o666 minus the
    umask (what ``open(path, "w")`` would have given; mkstemp's files are 0o600)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_dir(directory):
    """Make the rename durable (POSIX: the directory entry is data of the folder)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open folders; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_write(path, mode="w", encoding=None, newline=None):
    """Context manager: a file object to write ``path`` through, atomically.

    ``mode`` is "w" (text, ``encoding`` default UTF-8) or "wb" (binary). The file is a
    hidden temporary file ``.<name>.<random>.tmp`` beside ``path`` (beside the file a
    symbolic link ``path`` points to, which is replaced and the link kept); it replaces ``path``
    only when the ``with`` block ends without an exception and the data reached the disk
    (flush + fsync). Otherwise the temporary file is deleted and the exception propagates;
    ``path`` keeps its previous content (or does not exist).
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    path = os.fspath(path)
    if is_special_file(path):  # a device, pipe or terminal: write it in place, no rename
        kwargs = {"encoding": encoding or "utf-8", "newline": newline} if mode == "w" else {}
        with open(path, mode, **kwargs) as fh:
            yield fh
            fh.flush()
        return
    if os.path.islink(path):  # write through a link, as open(path, "w") would
        path = os.path.realpath(path)
    directory = os.path.dirname(os.path.abspath(path))
    name = os.path.basename(path)
    perms = _new_file_mode(path)
    sweep_stale(directory, name)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.{os.getpid()}-", suffix=".tmp", dir=directory)
    try:
        if mode == "w":
            fh = os.fdopen(fd, "w", encoding=encoding or "utf-8", newline=newline)
        else:
            fh = os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    try:
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, perms)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)

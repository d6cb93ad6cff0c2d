"""The on-disk compile cache.

Takes: a content key (a hash of everything that determines the built file) and
a function that builds it. Gives: the path of a verified file; and pickled
objects by key (``save_object``, ``load_object``: the graph and trace caches). Entries live in a
per-user directory created with mode 0700; each entry is written to a temporary
name and renamed into place with a checksum beside it, so readers never see a
half-written file, and an entry whose checksum does not match (corrupt,
truncated) is rebuilt, never used.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import stat
import tempfile

from braze import config


def key_of(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def cache_dir() -> str:
    """The cache directory, created 0700; another user's or a shared one is refused."""
    path = config.cache_dir
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.stat(path)
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError:
            pass
        info = os.stat(path)
        if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
            path = tempfile.mkdtemp(prefix="braze-")
    return path


def _digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def lookup(key: str, suffix: str) -> str | None:
    """A verified cached file for ``key``, or None."""
    if not config.cache:
        return None
    base = os.path.join(cache_dir(), key)
    path, check = base + suffix, base + suffix + ".sha256"
    try:
        with open(check) as f:
            expected = f.read().strip()
        if expected and _digest(path) == expected:
            return path
    except OSError:
        pass
    return None


def store(key: str, suffix: str, build) -> str:
    """Build into a temporary file (``build(path)``), then publish it atomically."""
    directory = cache_dir() if config.cache else tempfile.mkdtemp(prefix="braze-")
    fd, tmp = tempfile.mkstemp(suffix=suffix, dir=directory)
    os.close(fd)
    try:
        build(tmp)
        digest = _digest(tmp)
        final = os.path.join(directory, key + suffix)
        os.replace(tmp, final)
        fd, tmp_check = tempfile.mkstemp(dir=directory)
        with os.fdopen(fd, "w") as f:
            f.write(digest)
        os.replace(tmp_check, final + ".sha256")
        return final
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def save_object(key: str, suffix: str, obj) -> None:
    """Pickle ``obj`` under ``key``; a failure (unpicklable, a full disk) only loses the entry."""
    try:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        store(key, suffix, lambda path: _write_bytes(path, data))
    except Exception:
        pass


def load_object(key: str, suffix: str, kind: type):
    """The ``kind`` object pickled under ``key``, or None (absent, damaged, or written by an
    incompatible braze)."""
    path = lookup(key, suffix) if key else None
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            obj = pickle.load(f)
    except Exception:
        return None
    return obj if isinstance(obj, kind) else None


def _write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)

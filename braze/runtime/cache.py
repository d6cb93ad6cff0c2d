"""The on-disk compile cache.

Takes: a content key (a hash of everything that determines the built file) and
a function that builds it. Gives: ``lookup`` (the path of an authenticated
file, or None), ``store`` (build it, publish it atomically), ``read`` (an
authenticated entry's bytes), pickled objects by key (``save_object``,
``load_object``: the graph and trace caches) and ``cache_dir`` (the directory
in use).

What it trusts: a private directory (``config.cache_dir``) and the secret key
kept in it. The directory must be a directory owned by the user, with no group
or other permissions; a directory braze creates is made so (mode 0700). One
that nobody else can write but that others can read or search (0755, say) is
tightened to 0700: nobody else could have put anything in it. Every parent must
be owned by root or the user and not writable by group or others, unless it has
the sticky bit (``/tmp``): there others cannot rename or remove what is ours.
The key is 32 random bytes in ``hmac.key``, created with O_CREAT|O_EXCL and mode
0600; an existing key file must be a regular file owned by the user with no
group or other permissions.

A directory that fails any of this is not used and not repaired (chmod would
not remove what someone else already planted there): braze warns once for it
and caches, for the rest of the process, in one private temporary directory
(``tempfile.mkdtemp``) that is removed when the interpreter exits. The same
directory serves as scratch when the cache is off.

What is checked on every load: the entry and its ``.mac`` are regular files (not
followed through a symbolic link) owned by the user and not writable by group or
others, and the entry's bytes carry an HMAC-SHA256, under the key, of its name
(key and suffix: an entry copied under another name is rejected) and its
contents. The bytes are read once and the MAC is checked on those bytes: a
pickle is unpickled from them, never read again. A shared library must be
loaded by path; ``lookup`` checks the file at that path and the caller loads it
at once. Nobody else can replace it in between because nobody else can write in
the private directory. An entry that fails a check is ignored and rebuilt.

Several processes (the ranks of a distributed job) share one directory. An entry is
built and published under a lock of its own (``fcntl.flock`` on ``locks/<name>.lock``,
released by the kernel if its holder dies): a process that waited for another's build
finds the entry when it gets the lock and uses it, so each entry is built once, and an
entry and its MAC always come from one build (two builds of one C++ source differ in
their bytes: the library keeps the name of the temporary file it was compiled from).
Readers take no lock: an entry is replaced (``os.replace``, so a reader sees a whole
file or none) only when it failed its check or its caller knows it stale (``replace``);
a reader that meets a new entry beside its old MAC takes it as a miss and waits for the
lock. ``counts`` says what this process found, waited for and built.
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import hmac
import os
import pickle
import secrets
import shutil
import stat
import tempfile
import threading
import warnings

from braze import config

KEY_FILE = "hmac.key"
MAC = ".mac"
_KEY_BYTES = 32
_DOMAIN = b"braze-cache-1\0"
_UID = os.getuid()

_lock = threading.RLock()
_dirs: dict = {}  # configured path -> (directory in use, its identity when checked)
_keys: dict = {}  # directory in use -> its secret key
_warned: set = set()  # configured paths refused (one warning each)
_fallback: dict = {}  # "path": this process's private temporary directory
LOCKS = "locks"
# hit: an entry found on lookup; miss: none found; waited: found after another process (or
# thread) built it while this one waited for its lock; built: built and published by this one
counts = {"hit": 0, "miss": 0, "waited": 0, "built": 0}


class CacheWarning(UserWarning):
    """The configured cache directory is not private; a temporary one is used."""


class NotPrivate(Exception):
    """Why a directory or key file cannot be trusted."""


def key_of(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


# ----------------------------------------------------------------------------- the directory

def cache_dir() -> str:
    """The directory in use: ``config.cache_dir`` if it is private (created if absent),
    else this process's private temporary directory."""
    configured = config.cache_dir
    known = _dirs.get(configured)
    if known is not None and _identity(known[0]) == known[1]:
        return known[0]
    with _lock:
        try:
            path = _private(configured)
        except (NotPrivate, OSError) as exc:
            _warn(configured, exc)
            path = _fallback_dir()
        _dirs[configured] = (path, _identity(path))
        return path


def _identity(path: str):
    """What changes if the directory is removed, replaced or has its owner or mode changed."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_uid, info.st_mode


def _private(configured: str) -> str:
    """The real path of ``configured``, created if absent, with its key loaded; raises
    NotPrivate (or OSError) if it cannot be trusted."""
    path = os.path.abspath(configured)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    real = os.path.realpath(path)
    for name in (path, real):
        check_parents(name)
    check_directory(real)
    _keys[real] = load_key(real)
    return real


def check_parents(path: str) -> None:
    """Every directory above ``path`` is owned by root or the user, and not writable by
    group or others unless sticky (others cannot rename or remove our entry there)."""
    parent = os.path.dirname(path)
    while True:
        info = os.stat(parent)
        if info.st_uid not in (0, _UID):
            raise NotPrivate(f"has a parent {parent} owned by uid {info.st_uid}")
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            raise NotPrivate(f"has a parent {parent} writable by others "
                             f"(mode {stat.S_IMODE(info.st_mode):o}, no sticky bit)")
        if os.path.dirname(parent) == parent:
            return
        parent = os.path.dirname(parent)


def check_directory(path: str) -> None:
    """``path`` is a directory of the user's that nobody else can write; read or search
    permission for others is taken away (mode 0700)."""
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise NotPrivate("is not a directory")
    if info.st_uid != _UID:
        raise NotPrivate(f"is owned by uid {info.st_uid}")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        raise NotPrivate(f"is writable by others (mode {mode:o})")
    if mode != 0o700:
        os.chmod(path, 0o700)


def _warn(configured: str, reason: Exception) -> None:
    if configured in _warned:
        return
    _warned.add(configured)
    warnings.warn(f"braze: the cache directory {configured} is not private: it {reason}. braze does not "
                  f"use it; this process caches in a temporary directory (docs/security.md)",
                  CacheWarning, stacklevel=4)


def _fallback_dir() -> str:
    """This process's private temporary directory (made once, removed at exit)."""
    with _lock:
        path = _fallback.get("path")
        if path is None or _identity(path) is None:
            path = tempfile.mkdtemp(prefix="braze-")
            _fallback["path"] = path
            atexit.register(_remove, path, os.getpid())
        if path not in _keys:
            _keys[path] = load_key(path)
        return path


def _remove(path: str, pid: int) -> None:
    if os.getpid() == pid:  # not a forked child's exit
        shutil.rmtree(path, ignore_errors=True)


# ----------------------------------------------------------------------------- the key

def load_key(directory: str) -> bytes:
    """The directory's secret key, created if absent; NotPrivate if the key file is not
    the user's alone."""
    path = os.path.join(directory, KEY_FILE)
    try:
        return _read_key(path)
    except FileNotFoundError:
        _create_key(path)
        return _read_key(path)


def _create_key(path: str) -> None:
    """Write a fresh key under a temporary name, then link it into place: a reader never
    sees a partial key, and the first of two racing processes wins."""
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(8)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(_KEY_BYTES))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


def _read_key(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:  # a symbolic link (ELOOP), or unreadable
        raise NotPrivate(f"has a key file {path} that cannot be opened ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != _UID or stat.S_IMODE(info.st_mode) & ~0o600:
            raise NotPrivate(f"has a key file {path} that is not the user's alone "
                             f"(uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):o})")
        data = os.read(fd, _KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != _KEY_BYTES:
        raise NotPrivate(f"has a damaged key file {path}")
    return data


def _key_for(directory: str) -> bytes:
    key = _keys.get(directory)
    if key is None:
        with _lock:
            key = _keys.setdefault(directory, load_key(directory))
    return key


def mac(key: bytes, name: str, data: bytes) -> str:
    """HMAC-SHA256 under ``key`` of an entry's file name and its bytes."""
    h = hmac.new(key, _DOMAIN, hashlib.sha256)
    h.update(name.encode())
    h.update(b"\0")
    h.update(data)
    return h.hexdigest()


# ----------------------------------------------------------------------------- entries

def _read_owned(path: str) -> bytes | None:
    """The bytes of a regular file (not through a link) of the user's that nobody else
    can write, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != _UID or info.st_mode & 0o022:
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def _verified(directory: str, name: str) -> bytes | None:
    """The bytes of entry ``name`` if its MAC is right, else None."""
    path = os.path.join(directory, name)
    data = _read_owned(path)
    tag = _read_owned(path + MAC) if data is not None else None
    if tag is None:
        return None
    expected = mac(_key_for(directory), name, data).encode()
    return data if hmac.compare_digest(tag.strip(), expected) else None


def read(key: str, suffix: str) -> bytes | None:
    """The authenticated bytes of the entry for ``key``, or None (absent, damaged, forged)."""
    if not config.cache or not key:
        return None
    data = _verified(cache_dir(), key + suffix)
    _count("hit" if data is not None else "miss")
    return data


def lookup(key: str, suffix: str) -> str | None:
    """The path of the authenticated entry for ``key``, or None. Load it at once: the
    private directory keeps it as checked."""
    if not config.cache:
        return None
    directory = cache_dir()
    found = _verified(directory, key + suffix) is not None
    _count("hit" if found else "miss")
    return os.path.join(directory, key + suffix) if found else None


def store(key: str, suffix: str, build, replace: bool = False) -> str:
    """Build into a temporary file (``build(path)``), then publish it atomically with its MAC,
    holding the entry's lock; an entry another process (or thread) published meanwhile is
    used instead, unless ``replace`` (the caller knows the entry there is stale)."""
    directory = cache_dir() if config.cache else _fallback_dir()
    name = key + suffix
    final = os.path.join(directory, name)
    with entry_lock(directory, name):
        if config.cache and not replace and _verified(directory, name) is not None:
            _count("waited")
            return final
        fd, tmp = tempfile.mkstemp(suffix=suffix, dir=directory)
        os.close(fd)
        try:
            build(tmp)
            os.chmod(tmp, 0o600)  # a compiler may have made it anew, with the umask's mode
            with open(tmp, "rb") as f:
                data = f.read()
            os.replace(tmp, final)
            _publish(directory, final + MAC, mac(_key_for(directory), name, data).encode())
            _count("built")
            return final
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


@contextlib.contextmanager
def entry_lock(directory: str, name: str):
    """Hold the exclusive lock of entry ``name`` (other processes, and other threads of this
    one, wait). The lock files stay: removing one could let two holders lock two files."""
    locks = os.path.join(directory, LOCKS)
    try:
        os.mkdir(locks, 0o700)
    except FileExistsError:
        pass
    fd = os.open(os.path.join(locks, name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (releases the lock)


def _count(what: str) -> None:
    with _lock:
        counts[what] += 1


def _publish(directory: str, path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def save_object(key: str, suffix: str, obj, replace: bool = False) -> None:
    """Pickle ``obj`` under ``key`` (``replace``: over an entry there, as ``store``); a
    failure (unpicklable, a full disk) only loses the entry."""
    try:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        store(key, suffix, lambda path: _write_bytes(path, data), replace=replace)
    except Exception:
        pass


def load_object(key: str, suffix: str, kind: type):
    """The ``kind`` object pickled under ``key``, or None (absent, damaged, forged, or
    written by an incompatible braze). Unpickled from the bytes whose MAC was checked."""
    data = read(key, suffix)
    if data is None:
        return None
    try:
        obj = pickle.loads(data)
    except Exception:
        return None
    return obj if isinstance(obj, kind) else None


def _write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)

"""The disk cache against another user who could write where it lives: a directory that
is not private is refused, never repaired, and replaced by one temporary directory per
process; every entry (pickles and shared libraries) carries an HMAC under a key only the
user can read, checked before it is unpickled or loaded. Planted pickles never run, and a
library swapped for another graph's is rebuilt; results stay eager's."""
import hashlib
import json
import os
import pathlib
import pickle
import stat
import subprocess
import sys
import textwrap

import pytest
import torch

import braze
from braze.backend import Recording
from braze.runtime import cache

ROOT = os.getuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="making a file another user's needs root")


class Planted:
    """A pickle that creates ``marker`` when it is unpickled (code run as the victim)."""

    def __init__(self, marker):
        self.marker = pathlib.Path(marker)

    def __reduce__(self):
        return pathlib.Path.touch, (self.marker,)


def fn(x):
    return torch.sin(x) * 3 + x.cos()


def compile_and_run(path, **knobs):
    """braze's graphs for a fresh Dynamo compile of ``fn`` with the cache in ``path``;
    the result is checked against eager on fresh inputs."""
    torch._dynamo.reset()
    x = torch.randn(6, 10)
    with braze.config.patch(graph_cache=True, trace_cache=True, cache_dir=str(path), **knobs), \
            Recording() as rec:
        out = torch.compile(fn, backend="braze")(x)
    torch.testing.assert_close(out, fn(x))
    return rec.graphs


def pickled_entries(path) -> list:
    return sorted(p.name for p in pathlib.Path(path).iterdir() if p.suffix in (".graph", ".trace"))


def plant(directory, names, payload, key):
    """Put ``payload`` under each of ``names`` with every sidecar a forger could write."""
    for name in names:
        (directory / name).write_bytes(payload)
        (directory / (name + ".sha256")).write_text(hashlib.sha256(payload).hexdigest())
        (directory / (name + cache.MAC)).write_text(cache.mac(key, name, payload))


def test_the_planted_pickle_runs_code_when_unpickled(tmp_path):
    """The attack the other tests stop is real."""
    pickle.loads(pickle.dumps(Planted(tmp_path / "ran")))
    assert (tmp_path / "ran").exists()


def test_a_shared_directory_is_refused_and_nothing_in_it_is_loaded(tmp_path):
    names = pickled_entries(_warm(tmp_path / "private"))
    assert {pathlib.Path(n).suffix for n in names} == {".graph", ".trace"}
    shared, marker = tmp_path / "shared", tmp_path / "marker"
    shared.mkdir()
    attacker_key = os.urandom(32)  # the attacker's own key file, with valid MACs under it
    (shared / cache.KEY_FILE).write_bytes(attacker_key)
    (shared / cache.KEY_FILE).chmod(0o600)
    plant(shared, names, pickle.dumps(Planted(marker)), attacker_key)
    shared.chmod(0o777)
    with pytest.warns(cache.CacheWarning, match="not private"):
        graphs = compile_and_run(shared)
    assert graphs and not any(g.from_graph_cache for g in graphs)
    assert not marker.exists()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o777  # not chmodded into trust
    with braze.config.patch(cache_dir=str(shared)):
        used = cache.cache_dir()
    assert used == cache._fallback_dir() and not used.startswith(str(shared))
    assert pickled_entries(used)  # this process's entries went to the temporary directory


def _warm(path):
    compile_and_run(path)
    return path


def test_a_forged_mac_in_a_private_directory_is_not_unpickled(tmp_path):
    private, marker = _warm(tmp_path / "cache"), tmp_path / "marker"
    names = pickled_entries(private)
    plant(private, names, pickle.dumps(Planted(marker)), os.urandom(32))
    graphs = compile_and_run(private)
    assert graphs and not any(g.from_graph_cache for g in graphs)
    assert not marker.exists()
    with braze.config.patch(cache_dir=str(private)):
        for name in names:  # rebuilt: authentic again, and braze's own
            key, suffix = os.path.splitext(name)
            assert cache.load_object(key, suffix, object) is not None
    assert all(g.from_graph_cache for g in compile_and_run(private))


def test_an_entry_is_checked_for_owner_mode_links_and_name(tmp_path):
    with braze.config.patch(cache_dir=str(tmp_path / "cache")):
        cache.save_object("a" * 40, ".graph", {"value": 1})
        entry = pathlib.Path(cache.cache_dir()) / ("a" * 40 + ".graph")
        assert cache.load_object("a" * 40, ".graph", dict) == {"value": 1}
        entry.chmod(0o666)  # writable by others
        assert cache.load_object("a" * 40, ".graph", dict) is None
        entry.chmod(0o600)
        assert cache.load_object("a" * 40, ".graph", dict) == {"value": 1}
        for suffix in ("", cache.MAC):  # a valid entry copied under another key
            (entry.parent / ("b" * 40 + ".graph" + suffix)).write_bytes(
                (entry.parent / (entry.name + suffix)).read_bytes())
        assert cache.load_object("b" * 40, ".graph", dict) is None
        copy = entry.parent / "copy"
        copy.write_bytes(entry.read_bytes())
        entry.unlink()
        entry.symlink_to(copy)  # the right bytes, through a link
        assert cache.load_object("a" * 40, ".graph", dict) is None


@needs_root
def test_an_entry_owned_by_another_user_is_not_loaded(tmp_path):
    with braze.config.patch(cache_dir=str(tmp_path / "cache")):
        cache.save_object("c" * 40, ".trace", [1, 2])
        entry = pathlib.Path(cache.cache_dir()) / ("c" * 40 + ".trace")
        os.chown(entry, 65534, 65534)
        assert cache.load_object("c" * 40, ".trace", list) is None
        os.chown(entry, 0, 0)
        assert cache.load_object("c" * 40, ".trace", list) == [1, 2]
        os.chown(str(entry) + cache.MAC, 65534, 65534)
        assert cache.load_object("c" * 40, ".trace", list) is None


SWAP = textwrap.dedent("""
    import json, os, torch, braze
    from braze.runtime import cache
    libraries = lambda: {p for p in os.listdir(cache.cache_dir()) if p.endswith(".so")}
    built = {}
    for name, fn in (("add", lambda x: x + 1), ("mul", lambda x: x * 2)):
        before = libraries()
        x = torch.randn(7, 9)
        torch.testing.assert_close(braze.compile(fn)(x), fn(x))
        built[name] = sorted(libraries() - before)
    print(json.dumps(built))
""")


def run_swap(path):
    env = dict(os.environ, BRAZE_CACHE_DIR=str(path), BRAZE_STRICT="1", BRAZE_GRAPH_CACHE="1",
               BRAZE_CPU_BACKEND="cpp")
    proc = subprocess.run([sys.executable, "-c", SWAP], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_library_swapped_for_another_graphs_is_rebuilt(tmp_path):
    path = tmp_path / "cache"
    built = run_swap(path)
    assert len(built["add"]) == 1 and len(built["mul"]) == 1
    add, mul = path / built["add"][0], path / built["mul"][0]
    wrong = mul.read_bytes()
    add.write_bytes(wrong)  # x * 2 where x + 1 should be, with the MAC of a valid library
    (path / (add.name + cache.MAC)).write_bytes((path / (mul.name + cache.MAC)).read_bytes())
    (path / (add.name + ".sha256")).write_text(hashlib.sha256(wrong).hexdigest())
    assert run_swap(path) == {"add": [], "mul": []}  # eager's results (checked in the script)
    assert add.read_bytes() != wrong
    key = (path / cache.KEY_FILE).read_bytes()
    assert (path / (add.name + cache.MAC)).read_text() == cache.mac(key, add.name, add.read_bytes())


FALLBACK = textwrap.dedent("""
    import json, os, warnings, braze
    from braze.runtime import cache
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        used = {cache.cache_dir() for _ in range(3)}
        used.add(os.path.dirname(cache.store("k" * 40, ".txt", lambda p: open(p, "w").write("x"))))
        with braze.config.patch(cache=False):
            used.add(os.path.dirname(cache.store("j" * 40, ".txt", lambda p: open(p, "w").write("y"))))
        found = cache.lookup("k" * 40, ".txt")
    print(json.dumps({"used": sorted(used), "found": found,
                      "warnings": sum(issubclass(w.category, cache.CacheWarning) for w in caught)}))
""")


@pytest.mark.slow
def test_the_fallback_is_one_directory_per_process_removed_at_exit(tmp_path):
    shared, scratch = tmp_path / "shared", tmp_path / "tmp"
    shared.mkdir()
    scratch.mkdir()
    shared.chmod(0o777)
    env = dict(os.environ, BRAZE_CACHE_DIR=str(shared), TMPDIR=str(scratch))
    proc = subprocess.run([sys.executable, "-c", FALLBACK], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(result["used"]) == 1 and result["used"][0].startswith(str(scratch))
    assert result["found"] and result["warnings"] == 1
    assert not os.path.exists(result["used"][0]) and not list(scratch.iterdir())
    assert not list(shared.iterdir()) and stat.S_IMODE(shared.stat().st_mode) == 0o777


def used_dir(path) -> str:
    with braze.config.patch(cache_dir=str(path)):
        return cache.cache_dir()


def test_a_new_directory_gets_a_private_key(tmp_path):
    path = tmp_path / "cache"
    assert used_dir(path) == str(path)
    key_file = path / cache.KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and len(key_file.read_bytes()) == 32
    assert cache.load_key(str(path)) == key_file.read_bytes()  # the same key on every read
    assert not [p for p in path.iterdir() if p.name != cache.KEY_FILE]  # no temporary file left


def _with_key_file(path, make):
    path.mkdir(mode=0o700)
    make(path / cache.KEY_FILE)
    return path


@pytest.mark.parametrize("make", [
    pytest.param(lambda f: (f.write_bytes(os.urandom(32)), f.chmod(0o644)), id="readable by others"),
    pytest.param(lambda f: (f.write_bytes(os.urandom(32)), f.chmod(0o620)), id="group-writable"),
    pytest.param(lambda f: (f.write_bytes(os.urandom(5)), f.chmod(0o600)), id="damaged"),
    pytest.param(lambda f: f.symlink_to(f.parent.parent / "elsewhere"), id="a link"),
    pytest.param(lambda f: f.mkdir(), id="a directory"),
    pytest.param(lambda f: (f.write_bytes(os.urandom(32)), f.chmod(0o600), os.chown(f, 65534, 65534)),
                 id="another user's", marks=needs_root),
])
def test_a_key_file_that_is_not_the_users_alone_makes_the_directory_untrusted(tmp_path, make):
    (tmp_path / "elsewhere").write_bytes(os.urandom(32))
    path = _with_key_file(tmp_path / "cache", make)
    with pytest.warns(cache.CacheWarning, match="key file"):
        assert used_dir(path) == cache._fallback_dir()


def test_parents_others_can_write_are_refused_unless_sticky(tmp_path):
    open_parent, sticky = tmp_path / "open", tmp_path / "sticky"
    open_parent.mkdir()
    sticky.mkdir()
    open_parent.chmod(0o777)
    sticky.chmod(0o1777)
    with pytest.warns(cache.CacheWarning, match="parent"):
        assert used_dir(open_parent / "cache") == cache._fallback_dir()
    assert used_dir(sticky / "cache") == str(sticky / "cache")


def test_a_directory_only_readable_by_others_is_tightened(tmp_path):
    path = tmp_path / "cache"
    path.mkdir()
    path.chmod(0o755)
    assert used_dir(path) == str(path) and stat.S_IMODE(path.stat().st_mode) == 0o700


@needs_root
def test_a_directory_owned_by_another_user_is_refused(tmp_path):
    path = tmp_path / "cache"
    path.mkdir(mode=0o700)
    os.chown(path, 65534, 65534)
    with pytest.warns(cache.CacheWarning, match="owned by uid 65534"):
        assert used_dir(path) == cache._fallback_dir()

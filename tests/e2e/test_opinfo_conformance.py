"""Tier 3 in CI: a fixed subset of the OpInfo sweep (``conformance/subset.py``, every
lowering family), each op's outcome per dtype at least as good as the one the full
sweep recorded in ``conformance/results/<backend>.json``: pass stays pass."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the repository root

from conformance import opinfo, pool  # noqa: E402
from conformance.runner import RANK  # noqa: E402
from conformance.subset import CI_SUBSET  # noqa: E402


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ops():
    pool.setup_worker("cpp")
    return pool.ops_by_key()


def _at_least(found: dict, recorded: dict) -> list:
    """(dtype, recorded, found) for each dtype whose outcome got worse."""
    worse = []
    for dtype, before in recorded.items():
        now = found.get(dtype)
        if now is None:
            worse.append((dtype, before["outcome"], "not run"))
        elif before["outcome"] == "skip":
            if now["outcome"] == "error":
                worse.append((dtype, "skip", f"error: {now['detail']}"))
        elif now["outcome"] == "skip" or RANK[now["outcome"]] < RANK[before["outcome"]]:
            worse.append((dtype, before["outcome"], f"{now['outcome']}: {now.get('sample', '')} {now['detail']}"))
    return worse


@pytest.mark.parametrize("key", CI_SUBSET)
def test_opinfo_subset(key, backend, ops):
    recorded = (opinfo.load_results(backend) or {}).get("ops", {}).get(key)
    if recorded is None:
        pytest.skip(f"no recorded {backend} result for {key}: run python -m conformance.opinfo --backend {backend}")
    found = pool.run_op(ops[key], list(recorded), backend)
    assert not _at_least(found, recorded), _at_least(found, recorded)

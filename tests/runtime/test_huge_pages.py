"""Large fresh CPU outputs ask for transparent huge pages (runtime/pages.py).

Where the kernel's THP mode is ``madvise``, the mapping under a large output of a compiled
graph carries the ``hg`` flag (``MADV_HUGEPAGE``) in ``/proc/self/smaps``, and with the knob
off braze asks nothing for it (the flag itself cannot show that: the allocator may hand out
memory an earlier buffer had advised). The values are eager's either way.
"""
import pytest
import torch

import braze
from braze.runtime import pages


def _mode() -> str:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read()
    except OSError:
        return ""


pytestmark = pytest.mark.skipif("[madvise]" not in _mode(), reason="transparent huge pages are not on request")


def _flags_at(address: int) -> list:
    """The VmFlags of the mapping that holds ``address``."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(part, 16) for part in head.split("-"))
                inside = lo <= address < hi
            elif inside and head == "VmFlags:":
                return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


def _double(x):
    return x * 2 + 1


@pytest.mark.parametrize("advised", [True, False])
def test_a_large_output_is_advised_unless_the_knob_is_off(advised, monkeypatch):
    real, asked = pages._madvise(), []

    def spy(start, length, advice):
        asked.append((start, length))
        return real(start, length, advice)

    monkeypatch.setattr(pages, "_madvise", lambda: spy)
    x = torch.randn(4 << 20)  # 16 MB
    with braze.config.patch(huge_pages=advised):
        torch._dynamo.reset()
        out = torch.compile(_double, backend="braze")(x)
    torch.testing.assert_close(out, x * 2 + 1)
    inside = -(-out.data_ptr() // pages.HUGE_PAGE) * pages.HUGE_PAGE
    covered = any(start <= inside < start + length for start, length in asked)
    assert covered == advised
    if advised:
        assert "hg" in _flags_at(inside)

"""The op-family numerics again, every size symbolic (``dynamic=True``): the same functions
and inputs as their own files, compiled through braze's symbolic sizes
(``runtime/symbolic.py``), values and gradients against eager. Kernel counts are not
asserted here (``helpers.check``): a size class may split a kernel differently."""
import pytest

import helpers
from e2e.test_pointwise import *  # noqa: F401,F403
from e2e.test_reductions import *  # noqa: F401,F403
from e2e.test_scans import *  # noqa: F401,F403
from e2e.test_views import *  # noqa: F401,F403


@pytest.fixture(autouse=True)
def every_size_symbolic(monkeypatch):
    monkeypatch.setattr(helpers, "DYNAMIC", True)


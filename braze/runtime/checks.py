"""The error record of a compiled graph's run-time checks, and the exceptions it raises.

Takes: the graph's check sites (``braze.ir.graph.CheckSite``, recorded by lowering) and its
device. Gives: ``Checks``, whose ``names()`` are the wrapper's globals: ``b_errors``, the
int64 record [site + 1, offending value] kernels report to (``ERROR_RECORD``), ``_error_flag``,
a ctypes view of its first word that the wrapper reads after each checking kernel on the
CPU (a Python index, no tensor op), and ``_checks``, whose ``fail()`` clears the record and
raises eager's exception for the site reported (a ``CheckFailed``, which the first-call
guard lets through: the program's error, not braze's).

On CUDA the kernels assert on the device (``tl.device_assert``), as eager's CUDA kernels
do: the error surfaces at the next synchronization and the record is never read (no added
host synchronization). A graph called from two threads at once shares one record.
"""
from __future__ import annotations

import ctypes

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from braze.ir.graph import ERROR_RECORD, ERROR_RECORD_SIZE, CheckSite


class CheckFailed(Exception):
    """An error in the user's program found by a run-time check (an index out of range, an
    integer division by zero): raised as eager raises it, never taken for braze's failure."""


class CheckIndexError(CheckFailed, IndexError):
    pass


class CheckRuntimeError(CheckFailed, RuntimeError):
    pass


class Checks:
    def __init__(self, sites: list, device: torch.device):
        self.sites = list(sites)
        self.words = (ctypes.c_int64 * ERROR_RECORD_SIZE)()
        with unset_fake_temporarily():  # (built while AOTAutograd traces: a real tensor all the same)
            if device.type == "cpu":
                self.buffer = torch.frombuffer(self.words, dtype=torch.int64)
            else:
                self.buffer = torch.zeros(ERROR_RECORD_SIZE, dtype=torch.int64, device=device)

    def names(self) -> dict:
        return {ERROR_RECORD: self.buffer, "_error_flag": self.words, "_checks": self}

    def fail(self):
        site, value = self.words[0] - 1, self.words[1]
        for k in range(ERROR_RECORD_SIZE):
            self.words[k] = 0
        raise error_for(self.sites[site], value)


def error_for(site: CheckSite, value: int) -> Exception:
    """Eager's exception for a failed check: its type and wording, then what braze knows."""
    if site.kind == "divisor":
        return CheckRuntimeError(f"ZeroDivisionError: integer division by zero in {site.op}")
    detail = f"index {value} is out of bounds for dimension {site.dim} with size {site.size}"
    where = f"{site.op} on a tensor of shape {list(site.shape)}"
    text = f"{site.message}: {detail} ({where})" if site.message else f"{detail} ({where})"
    return (CheckIndexError if site.exception == "IndexError" else CheckRuntimeError)(text)

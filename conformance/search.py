"""Finding the sample behind a problem, and where the problem comes from.

Takes: a ``runner.Case`` whose samples, run together, showed a problem. Gives: the
(op, dtype) result: the signature groups are bisected (a half with a problem is
split again, about 2 log2(n) compiled runs) down to the first failing sample --
or, when the whole set raised, the first sample that raises. When Dynamo gave
braze no graph at all, only the first and last groups are tried alone. That sample then runs through
braze's AOTAutograd wiring with ATen executing the graphs (``torch_only``): an
exception that happens there too is not braze's (``skip``), and a mismatch that
happens there too comes from the decompositions braze asks for (noted).
"""
from __future__ import annotations

import time

from conformance.pipeline import Group, compiled_run, torch_only
from conformance.runner import PROBLEM_RANK, batch_problem, result, sample_problem
from conformance.samples import describe

BUDGET_S = 120.0  # time to search for the failing sample of one (op, dtype)


class Search:
    def __init__(self, case, backend):
        self.case, self.backend = case, backend
        self.fallbacks, self.uncaptured, self.judged = set(), [], 0
        self.deadline = time.perf_counter() + BUDGET_S
        self.out_of_time = False

    def probe(self, groups):
        run = compiled_run(self.case.fn, groups, self.backend)
        problem = batch_problem(self.case, run, groups)
        if problem is None:
            self.fallbacks.update(run.fallbacks)
            self.judged += sum(len(g.members) for g in groups)
        return problem

    def search(self, groups, problem):
        """The worst one-sample problem within ``groups`` (a set that has ``problem``)."""
        if len(groups) == 1:
            if problem[0] == "nograph":
                self.uncaptured += groups[0].members
                return None
            return problem
        if time.perf_counter() > self.deadline:
            self.out_of_time = True
            return None
        if problem[0] == "nograph" and self._nothing_captured(groups):
            return None
        mid = len(groups) // 2
        found = None
        for half in (groups[:mid], groups[mid:]):
            half_problem = self.probe(half)
            found = worse(found, self.search(half, half_problem) if half_problem else None)
            if found is not None and (problem[0] != "error" or found[0] == "error"):
                break
        return found

    def _nothing_captured(self, groups) -> bool:
        """Dynamo gave no graph for the whole set: if it gives none for the first and
        the last sample alone either, the rest is not tried (noted)."""
        ends = [groups[0], groups[-1]]
        if any(self.probe([g]) != ("nograph", None, "Dynamo gave braze no graph") for g in ends):
            return False
        self.uncaptured += ends[0].members + ends[1].members
        self.untried = sum(len(g.members) for g in groups[1:-1])
        return True


def worse(found, problem):
    if problem is None:
        return found
    return problem if found is None or PROBLEM_RANK[problem[0]] < PROBLEM_RANK[found[0]] else found


def find_problem(case, backend, whole) -> dict:
    """The (op, dtype) result once all samples together showed problem ``whole``."""
    search = Search(case, backend)
    search.untried = 0
    found = search.search(list(case.groups), whole)
    result_notes = list(case.notes)
    n = case.count
    if search.uncaptured:
        result_notes.append(f"{len(search.uncaptured)} of {n} samples gave braze no graph (Dynamo ran them "
                            f"eagerly), first #{min(search.uncaptured)}"
                            + (f"; {search.untried} samples between the first and last such were not tried alone"
                               if search.untried else ""))
    if search.out_of_time:
        result_notes.append("the search for the failing sample stopped at its time budget")
        if found is None and whole[0] != "nograph":
            found = whole
    if found is None:
        return _no_problem(whole, search, case, result_notes)
    kind, i, detail = found
    if i is None:
        return result(kind, case.grad, n, "(not isolated)", detail, search.fallbacks, result_notes)
    cause = attribute(case, kind, i)
    if cause:
        kind, detail = cause[0], f"{cause[1]}: {detail}"
    return result(kind, case.grad, n, f"#{i}: {describe(case.samples[i])}", detail, search.fallbacks,
                  result_notes)


def _no_problem(whole, search, case, result_notes) -> dict:
    """Every part of the set is fine on its own (or gave no graph)."""
    kind, i, detail = whole
    n = case.count
    if not search.judged:
        return result("skip", case.grad, n, detail="Dynamo gave braze no graph (ran eagerly by Dynamo)",
                      result_notes=result_notes)
    if kind != "nograph":
        where = f" at sample #{i}" if i is not None else ""
        result_notes.append(f"all samples in one graph: {kind}{where} ({detail}); gone when the samples "
                            "are split (a fusion/codegen problem)")
    return result("pass-through" if search.fallbacks else "pass", case.grad, n, fallbacks=search.fallbacks,
                  result_notes=result_notes)


def attribute(case, kind, i):
    """(outcome, cause) when sample ``i``'s problem also happens without braze, else None."""
    if kind not in ("error", "mismatch"):
        return None
    run = compiled_run(case.fn, [Group(case, [i])], torch_only)
    if run.error:
        if kind == "error":
            return ("skip", "fails the same way without braze (braze's AOTAutograd wiring, ATen kernels)")
        return None
    if kind == "mismatch" and sample_problem(case, i, run.outputs[0][0], run.grads[0][0]):
        return ("mismatch", "also without braze (decompositions in braze's table)")
    return None

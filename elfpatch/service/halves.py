"""A list of independent jobs done in two halves of about equal cost, on two cores.

Inflating, patching and re-reading a wheel's members are independent jobs
of very unequal size (torch: two members of 450-500 MB, a few of tens of
MB, many small).  Threads would share one interpreter lock between steps;
instead the jobs are dealt, the costliest first, to whichever half has less
so far, and one half runs in a forked child (``parallel.run_alongside``)
that works on the same open files.  Results come back in the jobs' order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from elfpatch.service.parallel import run_alongside

T = TypeVar("T")
R = TypeVar("R")


def in_two_halves(jobs: Sequence[T], cost: Callable[[T], int],
                  work: Callable[[T], R]) -> list[R]:
    """``work`` of every job; two halves at once when there is more than one job."""
    halves: tuple[list[int], list[int]] = ([], [])
    loads = [0, 0]
    for index in sorted(range(len(jobs)), key=lambda i: -cost(jobs[i])):
        lighter = 0 if loads[0] <= loads[1] else 1
        halves[lighter].append(index)
        loads[lighter] += cost(jobs[index])
    if not halves[1]:
        return [work(job) for job in jobs]
    here, there = run_alongside(lambda: [work(jobs[i]) for i in halves[0]],
                                lambda: [work(jobs[i]) for i in halves[1]])
    results: dict[int, R] = dict(zip(halves[0], here, strict=True))
    results.update(zip(halves[1], there, strict=True))
    return [results[index] for index in range(len(jobs))]

"""Sweeping ahead, one call depth at a time in two processes, follows what ``effects`` would."""

from __future__ import annotations

import os

import pytest
from elfpatch.fixtures import build

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.analysis.effects import analyzer as analyzer_module
from elfpatch.analysis.initializers import list_initializers
from elfpatch.base.alongside import in_turn
from elfpatch.elf.file import ElfFile
from elfpatch.service.parallel import run_alongside

# (call depth, functions) budgets: generous, and tight enough to cut the walks short.
BUDGETS = [(4, 64), (1, 3), (2, 2), (1, 1), (0, 1)]
# (scenario, program): registrations, and initializers that pass constants selecting
# their callees' paths (walks knowing them, ``EffectsAnalyzer.specialised``).
PROGRAMS = [("registration", "tests_first"), ("constant_switch", "config_last")]


def _roots(elf: ElfFile, path: str) -> list[int]:
    return [e.address for e in list_initializers(elf, path).followed if e.address is not None]


@pytest.mark.parametrize(("scenario", "name"), PROGRAMS)
@pytest.mark.parametrize(("depth", "budget"), BUDGETS)
def test_the_functions_swept_ahead_are_those_effects_follows(
        cxx: object, scenario: str, name: str, depth: int, budget: int) -> None:
    program = build.build_scenario(scenario).path(name)
    with ElfFile.open(program) as elf:
        roots = _roots(elf, str(program))
        plain = EffectsAnalyzer(elf)
        expected = [plain.effects(r, max_depth=depth, max_functions=budget, settle=False)
                    for r in roots]
        ahead = EffectsAnalyzer(elf)
        ahead.prefetch(roots, in_turn, max_depth=depth, max_functions=budget)
        swept = set(ahead.functions_followed)
        special = set(ahead.specialised_followed)
        found = [ahead.effects(r, max_depth=depth, max_functions=budget, settle=False)
                 for r in roots]
        assert swept == set(plain.functions_followed), "no more and no fewer functions"
        assert special == set(plain.specialised_followed), "the same walks knowing constants"
        assert set(ahead.functions_followed) == swept, "effects swept nothing new"
        assert set(ahead.specialised_followed) == special, "nor walked anything new"
    assert found == expected
    # The call the budget stops at is still resolved, as _reach resolves it.
    assert special or scenario != "constant_switch" or depth == 0
    if scenario == "constant_switch" and depth > 0 and budget > 1:
        # by_case(1), by_branch(3): walked knowing the constant, a branch decided.
        assert sum(e.branches[0] for e in found) > 0
    # The budgets cut the walks short: the replay has to stop where _reach stops.
    if scenario == "registration":
        assert any(e.stopped for e in expected) == (budget < 64)
    assert depth == 0 or budget == 1 or len(swept) > len(roots), \
        "the initializers call functions of their own"


@pytest.mark.parametrize(("scenario", "name"), PROGRAMS)
def test_a_depth_shared_out_between_two_processes_gives_the_same_summaries(
        cxx: object, monkeypatch: pytest.MonkeyPatch, scenario: str, name: str) -> None:
    program = build.build_scenario(scenario).path(name)
    with ElfFile.open(program) as elf:
        roots = _roots(elf, str(program))
        alone = EffectsAnalyzer(elf)
        alone.prefetch(roots, in_turn)
        monkeypatch.setattr(analyzer_module, "_SHARED_SWEEP_MINIMUM", 2)
        forks: list[int] = []
        real_fork = os.fork
        monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
        shared = EffectsAnalyzer(elf)
        shared.prefetch(roots, run_alongside)
        assert forks, "each depth's functions were shared out"
        assert set(shared.functions_followed) == set(alone.functions_followed)
        for function in alone.functions_followed:
            assert shared.summary(function) == alone.summary(function)
        # The walks knowing constants were shared out too, and came back the same.
        assert set(shared.specialised_followed) == set(alone.specialised_followed)
        for key in alone.specialised_followed:
            assert shared.summary(key) == alone.summary(key)
        assert [shared.effects(r) for r in roots] == [alone.effects(r) for r in roots]

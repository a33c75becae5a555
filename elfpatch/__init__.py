"""elfpatch: find and fix STB_GNU_UNIQUE symbols and static-initializer hazards.

The Python API (see ``elfpatch.api``)::

    import elfpatch
    report = elfpatch.scan("dist/pkg-1.0-cp311-cp311-manylinux_2_28_x86_64.whl")
    result = elfpatch.fix(["build/liba.so", "build/libb.so"], output="fixed/")

The functions are imported on first use, so that ``import elfpatch`` (and
the command line's start-up) stays cheap.
"""

from __future__ import annotations

# Not ``typing.TYPE_CHECKING``: importing typing (and the re, functools and
# collections it pulls in) would widen the start-up window in which Ctrl-C
# can only be answered by Python's own traceback.
TYPE_CHECKING = False

__version__ = "0.1.0"

# Every public name, and the module it lives in: imported on first use, so that
# ``import elfpatch`` imports nothing (the console script's first statement, which
# answers Ctrl-C, runs as soon as possible).
_PUBLIC = {
    # The commands.
    "scan": "elfpatch.api", "fix": "elfpatch.api", "repair_wheels": "elfpatch.api",
    "inits": "elfpatch.api", "check": "elfpatch.api",
    # Errors and exit codes.
    "ElfpatchError": "elfpatch.errors", "ExitCode": "elfpatch.errors",
    # The check policy.
    "Policy": "elfpatch.analysis.policy", "Level": "elfpatch.analysis.policy",
    "DestructorScope": "elfpatch.analysis.policy",
    # What the commands return, and what those results hold.
    "ScanReport": "elfpatch.api", "FileScan": "elfpatch.analysis.unique",
    "UniqueSymbol": "elfpatch.analysis.unique",
    "FixResult": "elfpatch.service.fix", "LibraryOutcome": "elfpatch.service.fix",
    "FixPlan": "elfpatch.plan.bindings", "LibraryPlan": "elfpatch.plan.bindings",
    "SymbolChange": "elfpatch.plan.bindings", "Refusal": "elfpatch.plan.bindings",
    "WheelsResult": "elfpatch.service.wheel_fix", "WheelFixResult": "elfpatch.service.wheel_fix",
    "MemberFix": "elfpatch.service.wheel_fix",
    "InitsResult": "elfpatch.analysis.init_order", "ObjectReport": "elfpatch.analysis.init_order",
    "ClosureEntry": "elfpatch.analysis.init_order", "Coverage": "elfpatch.analysis.init_order",
    "InitializerEntry": "elfpatch.analysis.initializers", "Risk": "elfpatch.analysis.risks",
    "CheckResult": "elfpatch.analysis.check", "LibraryCheck": "elfpatch.analysis.check",
    "LibraryFacts": "elfpatch.analysis.check", "Finding": "elfpatch.analysis.check",
    "Clash": "elfpatch.analysis.check",
    "HostProfile": "elfpatch.loader.host",
    # The string enums results hold (each equal to its JSON value).
    "UniqueKind": "elfpatch.analysis.unique", "CheckRule": "elfpatch.analysis.check",
    "Severity": "elfpatch.analysis.risks", "RiskKind": "elfpatch.analysis.risks",
    "FixMode": "elfpatch.plan.bindings", "BindingTarget": "elfpatch.plan.bindings",
    "WheelStatus": "elfpatch.service.wheel_fix",
    "InitializerKind": "elfpatch.elf.arrays", "UnitSource": "elfpatch.analysis.initializers",
    "ClosurePhase": "elfpatch.analysis.init_order", "BlockerKind": "elfpatch.loader.dlopen",
    "HostKind": "elfpatch.loader.dlopen", "DlopenMode": "elfpatch.loader.dlopen",
    "StopReason": "elfpatch.analysis.effects.summary",
}

# Literal, for linters and type checkers; a test checks it lists _PUBLIC.
__all__ = ["BindingTarget", "BlockerKind", "CheckResult", "CheckRule", "Clash", "ClosureEntry",
           "ClosurePhase", "Coverage", "DestructorScope", "DlopenMode", "ElfpatchError",
           "ExitCode", "FileScan", "Finding", "FixMode", "FixPlan", "FixResult", "HostKind",
           "HostProfile", "InitializerEntry", "InitializerKind", "InitsResult", "Level",
           "LibraryCheck", "LibraryFacts", "LibraryOutcome", "LibraryPlan", "MemberFix",
           "ObjectReport", "Policy", "Refusal", "Risk", "RiskKind", "ScanReport", "Severity",
           "StopReason", "SymbolChange", "UniqueKind", "UniqueSymbol", "UnitSource",
           "WheelFixResult", "WheelStatus", "WheelsResult", "__version__", "check", "fix", "inits",
           "repair_wheels", "scan"]

if TYPE_CHECKING:
    from typing import Any

    from elfpatch.analysis.check import (
        CheckResult,
        CheckRule,
        Clash,
        Finding,
        LibraryCheck,
        LibraryFacts,
    )
    from elfpatch.analysis.effects.summary import StopReason
    from elfpatch.analysis.init_order import (
        ClosureEntry,
        ClosurePhase,
        Coverage,
        InitsResult,
        ObjectReport,
    )
    from elfpatch.analysis.initializers import InitializerEntry, UnitSource
    from elfpatch.analysis.policy import DestructorScope, Level, Policy
    from elfpatch.analysis.risks import Risk, RiskKind, Severity
    from elfpatch.analysis.unique import FileScan, UniqueKind, UniqueSymbol
    from elfpatch.api import ScanReport, check, fix, inits, repair_wheels, scan
    from elfpatch.elf.arrays import InitializerKind
    from elfpatch.errors import ElfpatchError, ExitCode
    from elfpatch.loader.dlopen import BlockerKind, DlopenMode, HostKind
    from elfpatch.loader.host import HostProfile
    from elfpatch.plan.bindings import (
        BindingTarget,
        FixMode,
        FixPlan,
        LibraryPlan,
        Refusal,
        SymbolChange,
    )
    from elfpatch.service.fix import FixResult, LibraryOutcome
    from elfpatch.service.wheel_fix import MemberFix, WheelFixResult, WheelsResult, WheelStatus


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'elfpatch' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)

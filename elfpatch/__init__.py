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

__all__ = ["ElfpatchError", "ScanReport", "__version__", "check", "fix", "inits",
           "repair_wheels", "scan"]

if TYPE_CHECKING:
    from typing import Any

    from elfpatch.api import ScanReport, check, fix, inits, repair_wheels, scan
    from elfpatch.errors import ElfpatchError

_LAZY = {"scan", "fix", "repair_wheels", "inits", "check", "ScanReport"}


def __getattr__(name: str) -> Any:
    # Nothing is imported with the package itself: the console script's first
    # statement (which answers Ctrl-C) runs as soon as possible.
    if name == "ElfpatchError":
        from elfpatch.errors import ElfpatchError

        return ElfpatchError
    if name in _LAZY:
        from elfpatch import api

        return getattr(api, name)
    raise AttributeError(f"module 'elfpatch' has no attribute {name!r}")

"""Whether a library's initializers register a thread_local destructor while it loads.

glibc keeps an object mapped while destructors of its thread_local objects
are registered (``__cxa_thread_atexit_impl`` counts them per object): an
initializer that builds such an object in the thread calling dlopen keeps
the library loaded after dlclose, for as long as that thread lives.  The
initializers are followed through the calls they make, including calls
through the PLT to this library's own exported functions (which the
machine-code walk leaves as external calls), up to a budget.
"""

from __future__ import annotations

from collections import deque

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.analysis.initializers import list_initializers
from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import read_dynsym

THREAD_ATEXIT = frozenset({"__cxa_thread_atexit", "__cxa_thread_atexit_impl"})
FUNCTION_BUDGET = 400  # functions entered through the PLT before giving up


def thread_destructor_at_load(elf: ElfFile, path: str) -> tuple[str, ...] | None:
    """The calls from an initializer to a thread_local destructor's registration
    (initializer first), or None when none is found within the budget."""
    analyzer = EffectsAnalyzer(elf)
    if not analyzer.supported:
        return None
    own = _own_functions(elf)
    queue: deque[tuple[int, tuple[str, ...]]] = deque(
        (entry.address, (entry.symbol or hex(entry.address),))
        for entry in list_initializers(elf, path).followed if entry.address)
    seen: set[int] = set()
    while queue and len(seen) < FUNCTION_BUDGET:
        address, chain = queue.popleft()
        if address in seen:
            continue
        seen.add(address)
        calls = analyzer.effects(address, settle=False).external_calls
        registration = THREAD_ATEXIT.intersection(calls)
        if registration:
            return (*chain, min(registration))
        queue.extend((own[name], (*chain, name)) for name in calls if name in own)
    return None


def _own_functions(elf: ElfFile) -> dict[str, int]:
    """This library's exported functions by name: where a call through its PLT lands."""
    table = read_dynsym(elf)
    if table is None:
        return {}
    kinds, values = table.symbol_types, table.values
    return {table.name(i): values[i] for i in table.exported_indices()
            if kinds[i] == C.STT_FUNC and values[i]}

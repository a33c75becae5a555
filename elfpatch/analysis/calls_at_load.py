"""Which functions one object calls through its PLT while libraries load.

With RTLD_LAZY a function slot is bound on its first call, by the same
lookup a relocation makes (the global scope, then the dlopen's local
scope).  The initializers of every object a dlopen maps run before dlopen
returns, and the calls they make bind slots: a pinned libstdc++ whose slot
for ``std::string::reserve`` is bound, while some initializer appends to a
string, to the copy the extension exports keeps that extension mapped.

``PltCalls`` follows one object's code from its initializers and from the
exported functions other objects call, through every function it calls
directly, and collects the names it calls through the PLT or GOT.  The walk
is path-insensitive (an error path counts like any other) and bounded by a
budget of functions per object.
"""

from __future__ import annotations

from collections import deque

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.analysis.initializers import list_initializers
from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import read_dynsym

# The entry that stands for the object's initializers (DT_INIT, init_array, .ctors).
INITIALIZERS = ""
FUNCTION_BUDGET = 1500  # functions read per object before giving up


class PltCalls:
    """The names one object's code calls through its PLT or GOT, from the entries
    asked for so far (the walk goes on where the previous one stopped)."""

    def __init__(self, elf: ElfFile, path: str) -> None:
        self.elf = elf
        self.path = path
        self.analyzer = EffectsAnalyzer(elf)
        self._own: dict[str, int] | None = None
        self._seen: set[int] = set()
        self._entered: set[str] = set()
        self.called: dict[str, None] = {}
        self.exhausted = False  # the budget ran out: some calls may be missing

    def calls_from(self, entries: tuple[str, ...]) -> tuple[str, ...]:
        """Every name called through the PLT or GOT from ``entries`` (exported function
        names, or ``INITIALIZERS``) and from the entries of earlier calls."""
        fresh = [e for e in entries if e not in self._entered]
        self._entered.update(fresh)
        if fresh and self.analyzer.supported:
            self._walk(self._addresses(fresh))
        return tuple(self.called)

    def _addresses(self, entries: list[str]) -> list[int]:
        addresses = []
        for entry in entries:
            if entry == INITIALIZERS:
                addresses += [e.address for e in list_initializers(self.elf, self.path).followed
                              if e.address]
            elif (address := self._exported_functions().get(entry)) is not None:
                addresses.append(address)
        return addresses

    def _walk(self, roots: list[int]) -> None:
        queue = deque(a for a in roots if a not in self._seen)
        while queue:
            address = queue.popleft()
            if address in self._seen:
                continue
            if len(self._seen) >= FUNCTION_BUDGET:
                self.exhausted = True
                return
            self._seen.add(address)
            summary = self.analyzer.summary(address)
            self.called.update(summary.external_calls)
            queue.extend(c for c in summary.callees if c not in self._seen)

    def _exported_functions(self) -> dict[str, int]:
        if self._own is None:
            table = read_dynsym(self.elf)
            self._own = {} if table is None else {
                table.name(i): table.values[i] for i in table.exported_indices()
                if table.symbol_types[i] in (C.STT_FUNC, C.STT_GNU_IFUNC) and table.values[i]}
        return self._own

"""Which functions one object calls through its PLT while libraries load.

With RTLD_LAZY a function slot is bound on its first call, by the same
lookup a relocation makes (the global scope, then the dlopen's local
scope).  The initializers of every object a dlopen maps run before dlopen
returns, and the calls they make bind slots: a pinned libstdc++ whose slot
for ``std::string::reserve`` is bound, while some initializer appends to a
string, to the copy the extension exports keeps that extension mapped.

``PltCalls`` follows one object's code from its initializers and from the
exported functions other objects call, through every function it calls or
jumps to directly, and collects the names it calls through the PLT.  Only
branch instructions are read (no data flow: the effects walk costs ten times
more, and a call is all that binds a slot).  The walk is path-insensitive (an
error path counts like any other), does not see calls through pointers, and
is bounded by a budget of functions per object.  A call of a function that
never returns (a throw helper such as ``__cxa_throw_bad_array_new_length``)
is left out: made while the library loads, it would make the load fail.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.analysis.effects.analyzer import MAX_FUNCTION_BYTES, MAX_UNSIZED_BYTES
from elfpatch.analysis.effects.names import never_returns
from elfpatch.analysis.initializers import list_initializers
from elfpatch.elf import constants as C
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import exported_functions
from elfpatch.loader.dlopen import INITIALIZERS  # the loader model's name for the initializers

FUNCTION_BUDGET = 4000  # functions read per object before giving up
_X86_64_BRANCH = re.compile(rb"[\xe8\xe9]")
_BRANCHES = frozenset({"call", "jmp", "bl", "b"})
_ENDS = frozenset({"ret", "jmp", "ud2", "hlt", "b"})


def _x86_64_targets(code: memoryview, start: int) -> Iterator[int]:
    """Where each ``call rel32`` (E8) and ``jmp rel32`` (E9) of a function's bytes goes.

    The bytes are not decoded: an E8 or E9 byte inside another instruction
    gives a target too, but only a target that is a function's first byte or a
    PLT stub is taken, and a random one lands on such an address about once in
    a hundred thousand (decoding every instruction costs fifty times more).
    """
    raw = bytes(code)
    for found in _X86_64_BRANCH.finditer(raw):
        at = found.start()
        if at + 5 > len(raw):
            return
        yield start + at + 5 + int.from_bytes(raw[at + 1:at + 5], "little", signed=True)


def _branch_target(mnemonic: str, operand: str) -> int | None:
    """The address a direct call or jump (x86-64 ``call``/``jmp``/``jcc``, aarch64
    ``bl``/``b``/``b.cond``) goes to, or None."""
    if mnemonic not in _BRANCHES and not mnemonic.startswith(("j", "b.")):
        return None
    text = operand.lstrip("#")
    if not text.startswith("0x"):
        return None  # through a register or memory
    try:
        return int(text, 16)
    except ValueError:
        return None


class PltCalls:
    """The names one object's code calls through its PLT or GOT, from the entries
    asked for so far (the walk goes on where the previous one stopped)."""

    def __init__(self, elf: ElfFile, path: str) -> None:
        self.elf = elf
        self.path = path
        self.analyzer = EffectsAnalyzer(elf)
        self.x86_64 = elf.header.machine == C.EM_X86_64
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
            queue.extend(c for c in self._branches(address) if c not in self._seen)

    def _branches(self, start: int) -> list[int]:
        """This object's functions the function at ``start`` calls or jumps to; the names
        it calls through the PLT go to ``called``."""
        found = self.analyzer.index.function_at(start)
        size = found[1] if found else 0
        code = self.analyzer.index.code_at(start, min(size, MAX_FUNCTION_BYTES) if size
                                           else MAX_UNSIZED_BYTES)
        if code is None:
            return []
        end = start + len(code)
        targets = _x86_64_targets(code, start) if size and self.x86_64 else \
            self._decoded_targets(code, start, bool(size))
        callees = []
        for target in targets:
            if start <= target < end:
                continue
            reached = self.analyzer.code_target(target)
            if reached.external and reached.name:
                if not never_returns(reached.name):  # called only where the load would fail
                    self.called[reached.name] = None
            elif self.analyzer.index.function_at(target) is not None:
                callees.append(target)
        return callees

    def _decoded_targets(self, code: memoryview, start: int, sized: bool) -> Iterator[int]:
        for _address, _size, mnemonic, operand in self.analyzer.disassembler.disasm_lite(
                bytes(code), start):
            target = _branch_target(mnemonic, operand)
            if target is not None:
                yield target
            if not sized and mnemonic in _ENDS:
                return  # no size known: the function ends at its first return or jump

    def _exported_functions(self) -> dict[str, int]:
        if self._own is None:
            self._own = exported_functions(self.elf, (C.STT_FUNC, C.STT_GNU_IFUNC))
        return self._own

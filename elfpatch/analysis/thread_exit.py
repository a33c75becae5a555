"""Whether a library's initializers register a thread_local destructor while it loads.

glibc keeps an object mapped while destructors of its thread_local objects
are registered (``__cxa_thread_atexit_impl`` counts them per object): an
initializer that builds such an object in the thread calling dlopen keeps
the library loaded after dlclose, for as long as that thread lives.  The
initializers are followed through the calls and jumps they make, including
calls through the PLT to this library's own exported functions, up to a
budget.

A call from which the code cannot go on normally does not count: one whose
fall-through reaches, without a branch, a call that never returns (a throw,
``abort``, or a function of this library with neither a return nor a jump
out, such as a fatal logger's destructor that throws) or the function's end.
That is how an error path looks (``CHECK(x)`` building a fatal log message
whose stream is a thread_local, then throwing): if it ran while the library
loads, the load would fail, so a library that loads never took it.  (A
``try`` in the same function that catches the throw is not seen.)
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.analysis.effects.analyzer import MAX_FUNCTION_BYTES, MAX_UNSIZED_BYTES
from elfpatch.analysis.effects.names import never_returns
from elfpatch.analysis.effects.walk import got_target
from elfpatch.analysis.initializers import list_initializers
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import exported_functions

THREAD_ATEXIT = frozenset({"__cxa_thread_atexit", "__cxa_thread_atexit_impl"})
FUNCTION_BUDGET = 2000  # functions read before giving up
_STRAIGHT_LINE = 64  # instructions looked at after a call
_GOT_OPERAND = re.compile(r"qword ptr \[rip ([+-]) 0x([0-9a-f]+)\]$")


def thread_destructor_at_load(elf: ElfFile, path: str) -> tuple[str, ...] | None:
    """The calls from an initializer to a thread_local destructor's registration
    (initializer first), or None when none is found within the budget."""
    analyzer = EffectsAnalyzer(elf)
    if not analyzer.supported:
        return None
    calls = _Calls(analyzer, exported_functions(elf))
    queue: deque[tuple[int, tuple[str, ...]]] = deque(
        (entry.address, (entry.symbol or hex(entry.address),))
        for entry in list_initializers(elf, path).followed if entry.address)
    seen: set[int] = set()
    while queue and len(seen) < FUNCTION_BUDGET:
        address, chain = queue.popleft()
        if address in seen:
            continue
        seen.add(address)
        for name, follow in calls.made_by(address):
            if name in THREAD_ATEXIT:
                return (*chain, name)
            if follow is not None and follow not in seen:
                queue.append((follow, (*chain, name)))
    return None


class _Calls:
    """The calls and jumps out of one function that can return to it normally."""

    def __init__(self, analyzer: EffectsAnalyzer, own: dict[str, int]) -> None:
        self.analyzer = analyzer
        self.own = own
        self._never_return: dict[int, bool] = {}

    def _instructions(self, start: int) -> tuple[list[tuple[int, int, str, str]], int, bool]:
        """The function at ``start`` decoded, where it ends, and whether its size is known."""
        index = self.analyzer.index
        found = index.function_at(start)
        size = found[1] if found else 0
        code = index.code_at(start, min(size, MAX_FUNCTION_BYTES) if size else MAX_UNSIZED_BYTES)
        if code is None:
            return [], start, False
        instructions = []
        for instruction in self.analyzer.disassembler.disasm_lite(bytes(code), start):
            instructions.append(instruction)
            if not size and instruction[2] in ("ret", "jmp"):
                break  # no size known: the function ends at its first return or jump
        return instructions, start + len(code), bool(size)

    def made_by(self, start: int) -> Iterator[tuple[str, int | None]]:
        """(name, address to follow or None) of each call or jump that leaves the
        function at ``start``, error paths left out."""
        instructions, end, _sized = self._instructions(start)
        for k, (address, length, mnemonic, operand) in enumerate(instructions):
            if mnemonic != "call" and not mnemonic.startswith("j"):
                continue  # calls, and jumps out: tail calls, a function's .cold part
            target = self._target(address + length, operand)
            if target is None or (start <= (target[1] or 0) < end and target[0] is None):
                continue
            if mnemonic == "call" and self._cannot_go_on(instructions, k):
                continue
            yield target[0] or hex(target[1] or 0), target[1]

    def _target(self, after: int, operand: str) -> tuple[str | None, int | None] | None:
        """(name, address to follow) of a direct call or jump, or of one through a GOT
        slot; None through a register."""
        if operand.startswith("0x"):
            reached = self.analyzer.code_target(int(operand, 16))
            if reached.external and reached.name:
                return reached.name, self.own.get(reached.name)
            if self.analyzer.index.function_at(int(operand, 16)) is None:
                return None
            return reached.name, int(operand, 16)
        slot = _GOT_OPERAND.match(operand)
        if slot is None:
            return None
        offset = int(slot.group(2), 16)
        entry = self.analyzer.index.got_entry(after + (offset if slot.group(1) == "+"
                                                       else -offset))
        if entry is None:
            return None
        reached = got_target(self.analyzer.index, entry)
        if reached.name is None:
            return None
        return reached.name, self.own.get(reached.name)

    def _cannot_go_on(self, instructions: list[tuple[int, int, str, str]], k: int) -> bool:
        """Whether every way on from the call at ``k`` ends in a call that never returns
        or falls off the function before a return or a conditional branch (jumps inside
        the function are followed: error paths often share one tail)."""
        positions: dict[int, int] | None = None
        j = k
        for _step in range(_STRAIGHT_LINE):
            if j >= len(instructions):
                return True  # a call the compiler knew never returns ended the function
            address, length, mnemonic, operand = instructions[j]
            if mnemonic == "jmp" and operand.startswith("0x"):
                if positions is None:
                    positions = {entry[0]: n for n, entry in enumerate(instructions)}
                landing = positions.get(int(operand, 16))
                if landing is None:
                    return False  # a jump out of the function: a tail call
                j = landing
                continue
            if mnemonic == "ret" or mnemonic.startswith("j"):
                return False
            if mnemonic == "call":
                target = self._target(address + length, operand)
                if target is not None and (never_returns(target[0]) or (
                        target[1] is not None and self._never_returns_here(target[1]))):
                    return True
            j += 1
        return False

    def _never_returns_here(self, start: int) -> bool:
        """Whether this library's function at ``start`` has no way back to its caller:
        no return and no jump out of it (read whole, its size known)."""
        known = self._never_return.get(start)
        if known is None:
            instructions, end, sized = self._instructions(start)
            known = sized and bool(instructions) and not any(
                mnemonic == "ret" or (mnemonic == "jmp" and not _inside(operand, start, end))
                for _address, _length, mnemonic, operand in instructions)
            self._never_return[start] = known
        return known


def _inside(operand: str, start: int, end: int) -> bool:
    """Whether a jump's operand is an address inside [start, end) (not a register)."""
    return operand.startswith("0x") and start <= int(operand, 16) < end


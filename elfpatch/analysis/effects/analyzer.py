"""Following an initializer (or a destructor) and the functions it calls, for one object.

``EffectsAnalyzer`` sweeps each function once (cached), follows direct
calls into this object a few levels deep within a budget, and composes
what it found (``summary.Collector``).  What a function does with a
pointer it is passed is worked out on demand by a second sweep in which
its argument registers hold its parameters.  A merged initializer (gcc's
link-time optimisation) is split into the per-TU initializers it calls.

The instruction sets are one module each; adding one is adding a module
with ``MACHINE`` and ``WALK`` and naming it in ``ARCHITECTURES``.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from elfpatch.analysis.effects.addresses import AddressIndex
from elfpatch.analysis.effects.quiet import QuietBytes, quiet_bytes, tested_globals
from elfpatch.analysis.effects.summary import (
    ATEXIT,
    CALL,
    GLOBAL,
    GUARD,
    HOOK,
    PASS,
    PASS_FOREIGN,
    QUIET_AT_LOAD,
    READ,
    UNKNOWN_EFFECTS,
    UNKNOWN_PASS,
    USE_ASSUMED,
    USE_READ,
    USE_READ_FIRST,
    USE_UNKNOWN,
    USE_WRITE,
    WRITE,
    Collector,
    Constants,
    Effects,
    Event,
    FunctionKey,
    FunctionSummary,
    GuardsHeld,
    Part,
    StopReason,
    bare_keys_of,
    decisive,
    effects_keys,
    function_key,
    handed_to_unknown_code,
    incomplete,
    may_decide,
    read_seen,
    rekeyed,
    unfollowed_use,
    unseen_use,
)
from elfpatch.analysis.effects.walk import FunctionWalk, Target, decode_in_chunks, got_target
from elfpatch.base.alongside import Alongside
from elfpatch.elf.constants import EM_X86_64, ET_EXEC, PT_LOAD
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfpatchError, UnsupportedElfError

if TYPE_CHECKING:
    from capstone import Cs

ARCHITECTURES = ("x86_64", "aarch64")  # modules of this package

# How far the code an initializer (or a destructor) runs is followed: calls this
# deep, and at most this many functions, breadth first.  A function that calls none
# to follow (a string's or a container's helper, an accessor) is not counted: it
# takes the walk no further, and counted it made how deep the walk went depend on
# how many helpers one depth calls (CoolProp's factory spent the budget on them,
# four calls short of the plugin's read of the backend lists).
CALL_DEPTH = 4
FUNCTION_BUDGET = 64

# Bytes disassembled at most per function: a known size is cut there, an
# unknown one (no symbol) is swept until it returns or jumps away.
MAX_FUNCTION_BYTES = 1 << 20
MAX_UNSIZED_BYTES = 1 << 16
# Which registers a callee may change is worked out for functions up to this
# size, following their own calls this deep; beyond, every caller-saved one.
MAX_WRITES_BYTES = 1 << 14
MAX_WRITES_DEPTH = 3
# What a function does with a pointer parameter is followed this deep, through at
# most this many functions not seen before per question (beyond: unknown).
MAX_PARAMETER_DEPTH = 4
MAX_PARAMETER_SWEEPS = 24
# Accessors that return a global's address (``T& get() { static T t; return t; }``)
# are small: larger functions are not read for what they return.  One that builds
# its static inlines the construction, after a test of the guard byte: a registry's
# map, vector and lock take 210 bytes (dmlc's ``Registry<T>::Get``).  Reading every
# function of up to 256 bytes instead costs libtorch_cpu.so's ``inits`` 17 % more.
MAX_ACCESSOR_BYTES = 192
# libc_nonshared.a's atexit: 17 bytes on x86-64 (with endbr64), 16 on aarch64.
MAX_ATEXIT_COPY_BYTES = 48
# LLVM's getNonFoldableAlwaysTrue (``return getenv("bar") != (char *)-1;``): 28 bytes on
# x86-64 with a frame pointer.
MAX_CONSTANT_FUNCTION_BYTES = 64
MAX_BUILDING_ACCESSOR_BYTES = 1024
# A function passed constants is walked again knowing them (its other paths left
# out) up to this size.
MAX_SPECIALISED_BYTES = 1 << 16

# The per-TU initializers gcc calls from a merged one: _GLOBAL__sub_I_x (-O0)
# or __static_initialization_and_destruction_0 and its clones (-O1 and up).
_UNIT_INITIALIZER = re.compile(r"^_GLOBAL__sub_I_|__static_initialization_and_destruction_0")
# Events that make a stretch of the merged function's own code an initializer.
_SUBSTANTIAL = frozenset({READ, WRITE, PASS, PASS_FOREIGN, UNKNOWN_PASS, CALL, HOOK})


def _walks() -> dict[int, type[FunctionWalk]]:
    walks = {}
    for name in ARCHITECTURES:
        module = importlib.import_module(f"elfpatch.analysis.effects.{name}")
        walks[module.MACHINE] = module.WALK
    return walks


def initializer_effects(elf: ElfFile, address: int, *, max_depth: int = CALL_DEPTH,
                        max_functions: int = FUNCTION_BUDGET) -> Effects:
    """The effects of the initializer at ``address`` (see ``EffectsAnalyzer`` for many)."""
    analyzer = EffectsAnalyzer(elf)
    return analyzer.labelled(analyzer.effects(address, max_depth=max_depth,
                                              max_functions=max_functions))


class EffectsAnalyzer:
    """Effects of any number of initializers of one object; indexes are built once."""

    def __init__(self, elf: ElfFile, index: AddressIndex | None = None) -> None:
        """``index``: the object's address index, when an earlier analysis built it."""
        self.elf = elf
        self.index = index if index is not None else AddressIndex(elf)
        machine = elf.header.machine
        supported = elf.header.elf_class == 64 and elf.header.little_endian
        self._walk = _walks().get(machine) if supported else None
        self._summaries: dict[int, FunctionSummary] = {}
        # Functions walked knowing constant arguments; None where they decide nothing.
        self._specialised: dict[tuple[int, Constants], FunctionSummary | None] = {}
        self._uses: dict[tuple[int, int], int | None] = {}
        self._parameter_sweeps: dict[int, tuple[list[Event], bool] | None] = {}
        self._sweep_budget = MAX_PARAMETER_SWEEPS
        self._targets: dict[int, Target] = {}
        self._written: dict[int, frozenset[str] | None] = {}
        # (function, constants passed) -> the global it returns
        self._returns: dict[tuple[int, Constants], int | str | None] = {}
        self._atexit_copies: dict[int, bool] = {}  # ``registers_at_exit``
        self._constants: dict[int, int | None] = {}  # ``returned_constant``
        self._reading_constant = False
        # Split-off parts (.cold) -> whether they run straight into a throw (``fails_at``):
        # one error path's tail is shared by many of a function's jumps, and functions.
        self.failing_tails: dict[int, bool] = {}
        self._decode_errors = _decode_errors()
        # The globals no code run at load writes, while initializers are composed
        # again knowing them (``know_quiet``); None otherwise.
        self.quiet: QuietBytes | None = None
        self._tests_quiet: dict[int, bool] = {}  # function -> whether it tests them
        # The functions whose effects a composition took so far (``_reach``, and
        # ``prefetch`` replaying it): only their tests may be of quiet bytes, since
        # only their writes are known.
        self.followed: set[int] = set()
        # ET_EXEC: code may hold data addresses as immediates (mov esi, OFFSET obj).
        self.fixed_addresses = elf.header.type == ET_EXEC
        loads = [s for s in elf.segments if s.type == PT_LOAD]
        self._image = (min((s.vaddr for s in loads), default=0),
                       max((s.vaddr + s.memsz for s in loads), default=0))

    def in_image(self, address: int) -> bool:
        """Whether ``address`` falls inside the object's loaded image."""
        return self._image[0] <= address < self._image[1]

    @property
    def supported(self) -> bool:
        return self._walk is not None

    @cached_property
    def disassembler(self) -> Cs:
        """The engine every sweep uses: mnemonic and operand text only (``disasm_lite``),
        several times faster than detail mode."""
        return self._capstone(detail=False)

    @cached_property
    def detailed(self) -> Cs:
        """Structured operands, for the few instructions whose text does not say enough
        (whether an x86 memory operand is read or written)."""
        return self._capstone(detail=True)

    def _capstone(self, detail: bool) -> Cs:
        try:
            import capstone
        except ImportError:
            raise UnsupportedElfError(self.elf.name, "capstone is not installed",
                                      hint="pip install capstone") from None
        if self.elf.header.machine == EM_X86_64:
            engine = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        else:
            engine = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
        engine.detail = detail
        return engine

    # -- composing -----------------------------------------------------------------
    def effects(self, address: int, *, max_depth: int = CALL_DEPTH,
                max_functions: int = FUNCTION_BUDGET, settle: bool = True) -> Effects:
        """What the function at ``address`` and the functions it calls do.

        ``settle=False`` leaves the pointers it passes to this object's
        functions pending (``Effects.pending``), to be worked out only where
        they matter (``summary.settle``).
        """
        if self._walk is None:
            return UNKNOWN_EFFECTS
        self.index.prepare()  # a corrupt table is reported, not mistaken for odd code
        reached, stopped = self._reach([address], max_depth, max_functions)
        collector = Collector(reached, self.parameter_use if settle else None)
        collector.function(address)
        return collector.effects(not stopped, stopped)

    def path_to(self, root: int, subjects: Collection[str], *, max_depth: int = CALL_DEPTH,
                max_functions: int = FUNCTION_BUDGET) -> list[FunctionKey] | None:
        """The calls from the function at ``root`` down to the first function (breadth
        first, within the budget ``effects`` follows) whose own code touches one of
        ``subjects`` (reads, writes or passes it on), both ends included; None when
        no function followed does.  Asked only for the few globals a risk names."""
        if self._walk is None:
            return None
        parents: dict[FunctionKey, FunctionKey | None] = {root: None}
        frontier: list[FunctionKey] = [root]
        expanded = 0  # functions whose calls were taken, counted as ``_reach`` counts
        for _depth in range(max_depth + 1):
            following: list[FunctionKey] = []
            for key in frontier:
                summary = self.summary(key)
                events = summary.events
                if any(event[0] in _TOUCHES and event[1] in subjects for event in events):
                    return _path(parents, key)
                if expanded == max_functions:
                    continue
                expanded += bool(summary.callees)
                for event in events:
                    if event[0] != CALL:
                        continue
                    callee = function_key(event[1], event[2])
                    if callee not in parents:
                        parents[callee] = key
                        following.append(callee)
            frontier = following
        return None

    def labelled(self, effects: Effects) -> Effects:
        """``effects`` with the globals known by address shown by their labels (their
        .symtab names, where the file has them): for people, not for comparing."""
        keys = {key: self.index.data_label(key) for key in effects_keys(effects)
                if key.startswith("0x")}
        return rekeyed(effects, keys)

    def parts(self, address: int, *, max_depth: int = CALL_DEPTH,
              max_functions: int = FUNCTION_BUDGET, by_code: bool = False) -> list[Part]:
        """A merged initializer split into the initializers it runs, in call order.

        Each call to a per-TU initializer is a part; the merged function's own
        code between those calls (TUs whose initializers were inlined) is a
        part too, in which program order is all there is to go by.  Per-TU
        initializers are known by name, or, ``by_code`` (a file without
        symbols), by what they do (``_builds_like_a_unit``).
        """
        if self._walk is None:
            return [Part(address, None, UNKNOWN_EFFECTS, True)]
        self.index.prepare()
        merged = self.summary(self._resolved(address))
        parts: list[Part] = []
        stretch: list[Event] = []
        for event in merged.events:
            name = self._unit_initializer(event)
            if name is None and not (by_code and self._builds_like_a_unit(event)):
                stretch.append(event)
                continue
            self._add_stretch(parts, stretch, merged, max_depth, max_functions)
            stretch = []
            parts.append(Part(event[1], name, self.effects(
                event[1], max_depth=max_depth, max_functions=max_functions), False))
        self._add_stretch(parts, stretch, merged, max_depth, max_functions)
        return parts

    def _unit_initializer(self, event: Event) -> str | None:
        if event[0] != CALL:
            return None
        found = self.index.function_at(event[1])
        name = found[0] if found else None
        return name if name and _UNIT_INITIALIZER.search(name) else None

    def _builds_like_a_unit(self, event: Event) -> bool:
        """A call, passing no constants, to a function of this object whose code (or
        that of a function it calls) registers an exit-time destructor outside a
        function-local static's guard: what gcc's per-TU initializers
        (``__static_initialization_and_destruction_0``, its clones, and at -O0 the
        ``_GLOBAL__sub_I_`` that calls it) do, and a helper computing a value does not."""
        if event[0] != CALL or event[2] is not None:
            return False
        own = self.summary(event[1]).events
        return _registers_unguarded(own) or any(
            _registers_unguarded(self.summary(e[1]).events) for e in own if e[0] == CALL)

    def _add_stretch(self, parts: list[Part], events: list[Event], merged: FunctionSummary,
                     max_depth: int, max_functions: int) -> None:
        """The merged function's own code between two calls, as a part (when it does any)."""
        if not any(event[0] in _SUBSTANTIAL for event in events):
            return
        roots = [function_key(event[1], event[2]) for event in events if event[0] == CALL]
        reached, stopped = self._reach(roots, max_depth - 1, max_functions - 1)
        stopped.update(merged.stopped)
        collector = Collector(reached, self.parameter_use)
        collector.events(events)
        effects = collector.effects(not stopped, stopped)
        # Its own code places objects as the code of the functions it calls does.
        own = bare_keys_of(events)
        if own:
            effects = dataclasses.replace(effects, groups=(own, *effects.groups))
        parts.append(Part(None, None, effects, True))

    def _reach(self, roots: list[FunctionKey], max_depth: int, max_functions: int,
               ) -> tuple[dict[FunctionKey, FunctionSummary], dict[StopReason, None]]:
        """The functions followed from ``roots`` (breadth first, within the budget), and
        why the code could not be followed to its end."""
        reached: dict[FunctionKey, FunctionSummary] = {}
        stopped: dict[StopReason, None] = {}
        # A call passing constants is resolved (``specialised``) only when its turn
        # comes within the budget: resolving costs a walk.
        frontier: list[FunctionKey] = list(dict.fromkeys(roots))
        seen, analysed = set(frontier), 0
        for depth in range(max_depth + 1):
            following: list[FunctionKey] = []
            for key in frontier:
                walked = self._resolved(key)
                function = _unquieted(walked)  # the key callers' events name
                if function in reached:
                    continue
                if analysed == max_functions:
                    stopped[StopReason.FUNCTION_BUDGET] = None
                    return reached, stopped
                summary = reached[function] = self.summary(walked)
                self.followed.add(_address(walked))
                analysed += bool(summary.callees)
                stopped.update(summary.stopped)
                following += [c for c in summary.callees if c not in seen]
                seen.update(summary.callees)
            frontier = following
            if depth == max_depth:
                # Left out: callees whose code no walk read (by address; a call passing
                # constants to a function read is that function).
                read = {_address(k) for k in reached}
                frontier = [k for k in frontier if _address(k) not in read]
            if not frontier:
                break
        else:
            stopped[StopReason.DEPTH] = None  # callees deeper than max_depth were left out
        return reached, stopped

    def prefetch(self, roots: Sequence[int], alongside: Alongside, *, max_depth: int = CALL_DEPTH,
                 max_functions: int = FUNCTION_BUDGET) -> None:
        """Sweep now every function that ``effects`` of each of ``roots`` will follow,
        one call depth at a time, each depth's new functions shared out between two
        halves (``alongside``); later ``effects`` calls then only compose.

        The same functions ``_reach`` takes, no more: each root's breadth-first
        walk within its budget is replayed on the summaries as they come in.
        Splitting the functions rather than the roots sweeps each function once:
        a big library's initializers share most of their callees (nvjitlink: 723
        initializers, 1,834 functions; two halves of its initializers swept
        2,289 between them).  A call passing constants is followed into the walk
        they select (``specialised``), chosen, like ``_reach`` chooses it, when
        its turn comes: those walks are swept ahead and shared out too.
        """
        if self._walk is None:
            return
        self.index.prepare()
        walks = [_RootWalk(root) for root in dict.fromkeys(roots)]
        for _depth in range(max_depth + 1):
            done: set[_Wanted] = set()
            while True:  # again when a chosen walk turns out to be one followed already
                wanted = dict.fromkeys(item for walk in walks
                                       for item in walk.wanted(self, max_functions))
                if not wanted or done.issuperset(wanted):
                    break
                done.update(wanted)
                self._sweep_shared(list(wanted), alongside)
            walks = [walk for walk in walks if walk.advance(self, max_functions)]
            if not walks:
                break

    def chosen(self, key: FunctionKey) -> FunctionKey | None:
        """What ``_resolved`` gives for ``key``, if that is known without a walk."""
        if not isinstance(key, tuple):
            return key
        if key not in self._specialised:
            return None
        return key if self._specialised[key] is not None else key[0]

    def swept(self, key: FunctionKey) -> bool:
        """Whether the summary of a function to follow (``chosen``) is known."""
        return isinstance(key, tuple) or key in self._summaries

    def _sweep_one(self, item: _Wanted) -> None:
        key, take = item
        function = self._resolved(key)
        if take:
            self.summary(function)

    def _sweep_shared(self, functions: list[_Wanted], alongside: Alongside) -> None:
        """Each of ``functions`` chosen and swept, two halves of about equal code at once."""
        if len(functions) < _SHARED_SWEEP_MINIMUM:
            for function in functions:
                self._sweep_one(function)
            return
        halves: tuple[list[_Wanted], list[_Wanted]] = ([], [])
        loads = [0, 0]
        for function in sorted(functions, key=self._sweep_cost, reverse=True):
            lighter = 0 if loads[0] <= loads[1] else 1
            halves[lighter].append(function)
            loads[lighter] += self._sweep_cost(function)

        def sweep(half: list[_Wanted]) -> Callable[[], _Swept]:
            def run() -> _Swept:
                known, special = set(self._summaries), set(self._specialised)
                for function in half:
                    self._sweep_one(function)
                # Everything swept here, the plain walks that choosing the walk of a
                # call passing constants needed too: the other process need not sweep
                # them again.
                return ({a: s for a, s in self._summaries.items() if a not in known},
                        {k: s for k, s in self._specialised.items() if k not in special},
                        self._written, self._returns)
            return run

        _mine, (summaries, specialised, written, returns) = alongside(sweep(halves[0]),
                                                                      sweep(halves[1]))
        for address, summary in summaries.items():
            self._summaries.setdefault(address, summary)
        for key, special in specialised.items():
            self._specialised.setdefault(key, special)
        for address, registers in written.items():
            self._written.setdefault(address, registers)
        for asked, returned in returns.items():
            self._returns.setdefault(asked, returned)

    def _sweep_cost(self, item: _Wanted) -> int:
        found = self.index.function_at(_address(item[0]))
        return min(found[1], MAX_FUNCTION_BYTES) if found and found[1] else MAX_UNSIZED_BYTES

    @property
    def functions_followed(self) -> tuple[int, ...]:
        """Entry addresses of the functions whose machine code has been read so far."""
        return tuple(self._summaries)

    @property
    def specialised_followed(self) -> tuple[tuple[int, Constants], ...]:
        """The (function, constants) of the calls passing constants whose walk has been
        chosen so far (``specialised``): walked knowing them, or found to select no
        path of their own."""
        return tuple(self._specialised)

    # -- pointer parameters -----------------------------------------------------------
    def parameter_use(self, function: int, position: int) -> int:
        """What the function at ``function`` does with the pointer passed as argument
        ``position``: ``USE_*`` bits, what code not seen may do when not known."""
        self._sweep_budget = MAX_PARAMETER_SWEEPS
        found = self._use(function, position, 0)
        return found if found is not None else unfollowed_use(position)

    def _use(self, function: int, position: int, depth: int) -> int | None:
        """Followed along the one parameter's path only, and no further than needed:
        once it is known to be read and built, nothing more can change."""
        key = (function, position)
        if key in self._uses:
            return self._uses[key]  # None while in progress: a recursive call
        found = self._parameter_events(function) if depth <= MAX_PARAMETER_DEPTH else None
        if found is None:
            return None
        events, whole = found
        mine: list[tuple[int, int, int]] = [(kind, callee, at)
                                            for kind, subject, callee, at in events
                                            if subject == position]
        if not whole and any(kind not in (PASS, PASS_FOREIGN) for kind, _c, _a in mine):
            # Its own code uses the parameter, and calls code not followed: what it
            # does with it is only assumed, as of code not seen.
            return None
        self._uses[key] = None
        use = 0
        passes = []
        for kind, callee, at in mine:
            if kind == READ:
                use |= USE_READ
            elif kind == WRITE:
                use |= USE_WRITE
            elif kind == UNKNOWN_PASS:
                use |= unseen_use(at) if callee is None else callee
            elif kind in (PASS, PASS_FOREIGN) and (callee, at) != key:
                # A call to itself with the same parameter does with it what this one
                # does (a search that calls itself on a name's other spelling).
                passes.append((callee, at))
        # The read stays seen once code seen makes it; one assumed of a callee not
        # followed to the end (``unfollowed_use``) is only assumed.
        seen = bool(use & USE_READ)
        for callee, at in passes:
            if seen and use & (USE_WRITE | USE_UNKNOWN):
                break  # read, and built: the verdict cannot change
            inner = self._inner_use(callee, at, depth)
            seen = seen or read_seen(inner)
            use |= inner & ~USE_READ_FIRST
        use = use & ~USE_ASSUMED | (USE_ASSUMED if use & USE_READ and not seen else 0)
        if use & USE_READ:
            use |= self._first_access(mine, depth)
        self._uses[key] = use
        return use

    def _inner_use(self, callee: int, position: int, depth: int) -> int:
        inner = self._use(callee, position, depth + 1)
        return inner if inner is not None else unfollowed_use(position)

    def _first_access(self, mine: list[tuple[int, int, int]], depth: int) -> int:
        """USE_READ_FIRST when the first access through the parameter reads it (a pass
        to a function that does nothing with it is no access)."""
        for kind, callee, at in mine:
            if kind == READ:
                return USE_READ_FIRST
            if kind == WRITE or (kind == UNKNOWN_PASS and callee is None):
                return 0
            if kind == UNKNOWN_PASS and callee & (USE_READ | USE_WRITE):
                return callee & USE_READ_FIRST
            if kind in (PASS, PASS_FOREIGN):
                inner = self._inner_use(callee, at, depth)
                if inner & (USE_READ | USE_WRITE | USE_UNKNOWN):
                    return inner & USE_READ_FIRST
        return 0

    def _parameter_events(self, function: int) -> tuple[list[Event], bool] | None:
        """The events of a sweep that starts with the argument registers holding the
        parameters, about those parameters, and whether its code was seen whole; None
        when too much of it was not.  Calls through a register leave what is known
        of the parameters they are not passed (``parameters_to_unknown_code``): one
        the function only passes on to code it names, or not at all, is known."""
        if function not in self._parameter_sweeps:
            if self._sweep_budget <= 0:
                return None
            self._sweep_budget -= 1
            summary = self._analyse(function, parameters=True)
            self._parameter_sweeps[function] = (_received_events(summary), summary.complete) \
                if summary.stopped.keys() <= _PARAMETERS_TRACKED_PAST else None
        return self._parameter_sweeps[function]

    # -- calls --------------------------------------------------------------------------
    def code_target(self, address: int) -> Target:
        """The function a direct call to ``address`` reaches (cached)."""
        known = self._targets.get(address)
        if known is None:
            found = self.index.function_at(address)
            stub = self.index.plt_entry(address) if found is None else None
            if found is not None:
                known = Target(found[0], address, False)
            elif stub is not None:
                known = got_target(self.index, stub)
            else:
                known = Target(None, address, False)
            self._targets[address] = known
        return known

    def returned_global(self, function: int, constants: Constants = ()) -> int | str | None:
        """The global whose address the function at ``function`` always returns (an
        accessor of a function-local static), or (a str) the key of the global whose
        pointer it always returns (``static T* t = new T; return t;``), or None
        (cached).  Only small functions whose code loads a global's address into a
        register are read for it: accessors are small, and most functions are not read
        (nor their callees) for what they return.  A call passing ``constants``
        returns what the walk they select returns (``specialised``): ``get(1)``
        may return one global where ``get`` returns one of several."""
        key = (function, constants)
        if key in self._returns:
            return self._returns[key]
        self._returns[key] = None  # a recursive call meets "unknown"
        found = self.index.function_at(function)
        if found is None or not 0 < found[1] <= MAX_BUILDING_ACCESSOR_BYTES or self._walk is None:
            return None
        code = self.index.code_at(function, found[1])
        if code is None or not self._walk.may_return_address(bytes(code)):
            return None
        if found[1] > MAX_ACCESSOR_BYTES and not self._walk.tests_guard_byte(bytes(code)):
            return None
        walked = self.specialised(function, constants) if constants else function
        returned = self._returns[key] = self.summary(walked).returned
        return returned

    def returned_constant(self, function: int) -> int | None:
        """The number the small function at ``function`` always returns, when every
        return of it is seen to hand back the same one (None: not known).  Only
        functions of up to ``MAX_CONSTANT_FUNCTION_BYTES`` are read for it, and only
        for this, their calls not followed (cached)."""
        if function in self._constants:
            return self._constants[function]
        if self._reading_constant:  # what its own calls return is not looked for
            return None
        self._constants[function] = None
        found = self.index.function_at(function)
        if found is None or not 0 < found[1] <= MAX_CONSTANT_FUNCTION_BYTES \
                or self._walk is None:
            return None
        self._reading_constant = True
        try:
            summary = self._analyse(function)
        finally:
            self._reading_constant = False
        number = summary.returned_constant if summary.complete and summary.may_return \
            else None
        self._constants[function] = number
        return number

    def registers_at_exit(self, function: int) -> bool:
        """Whether the function at ``function`` is a copy of libc's ``atexit``: a few
        instructions that hand their first argument to ``__cxa_atexit`` with no
        object (``FunctionSummary.registers_argument``).  A stripped object keeps no
        name for it; read only when small (cached)."""
        known = self._atexit_copies.get(function)
        if known is None:
            self._atexit_copies[function] = False  # a recursive call meets "no"
            known = self._atexit_copies[function] = self._jumps_to_cxa_atexit(function) \
                and self._analyse(function, parameters=True).registers_argument
        return known

    def _jumps_to_cxa_atexit(self, function: int) -> bool:
        """Whether the small function at ``function`` ends in a jump to
        ``__cxa_atexit`` and calls nothing on the way (a quick look, before a sweep
        that would otherwise follow the calls of every small function it meets)."""
        found = self.index.function_at(function)
        if found is None or not 0 < found[1] <= MAX_ATEXIT_COPY_BYTES or self._walk is None:
            return False
        code = self.index.code_at(function, found[1])
        if code is None:
            return False
        walk = self._walk
        try:
            for _at, _length, mnemonic, operands in decode_in_chunks(
                    self.disassembler, bytes(code), function):
                transfer = walk.control_transfer(mnemonic, operands)
                if transfer is not None:
                    is_call, target = transfer
                    return not is_call and target is not None \
                        and self.code_target(target).name == "__cxa_atexit"
        except self._decode_errors:
            return False
        return False

    def registers_written(self, callee: Target) -> frozenset[str] | None:
        """The caller-saved registers a call to ``callee`` may change; None when unknown.

        Known only for this object's own code, read whole: a call through the
        PLT or GOT may reach another object (and the lazy-binding resolver).
        """
        return self._written_by(callee, 0)

    def _written_by(self, callee: Target, depth: int) -> frozenset[str] | None:
        address = callee.follow
        if callee.external or address is None:
            return None
        if address in self._written:
            return self._written[address]
        if depth > MAX_WRITES_DEPTH:
            return None
        self._written[address] = None  # a recursive call meets "unknown"
        written = self._written[address] = self._sweep_writes(address, depth)
        return written

    def _sweep_writes(self, address: int, depth: int) -> frozenset[str] | None:
        """Every register one function (and what it calls) may write, or None."""
        assert self._walk is not None
        walk, engine = self._walk, self.disassembler
        found = self.index.function_at(address)
        size = found[1] if found else 0
        code = self.index.code_at(address, size) if 0 < size <= MAX_WRITES_BYTES else None
        if code is None or len(code) < size:
            return None
        written: set[str] = set()
        reached = address
        try:
            # Most sweeps stop early, at a call through the PLT: decode a little at a time.
            for at, length, mnemonic, operands in decode_in_chunks(engine, bytes(code), address):
                reached = at + length
                transfer = walk.control_transfer(mnemonic, operands)
                if transfer is None:
                    registers = walk.registers_set(mnemonic, operands)
                    if registers is None:
                        return None
                    written.update(registers)
                    continue
                is_call, target = transfer
                if not is_call and target is not None and address <= target < address + size:
                    continue  # a branch inside the function
                inner = self._written_by(self.code_target(target), depth + 1) \
                    if target is not None else None
                if inner is None:
                    return None
                written |= inner | (walk.CALL_WRITES if is_call else frozenset())
        except self._decode_errors:
            return None
        if reached < address + size:  # bytes that do not decode
            return None
        return frozenset(written) & walk.CALLER_SAVED

    # -- one function ---------------------------------------------------------------------
    def summary(self, address: FunctionKey) -> FunctionSummary:
        """The effects of the one function at ``address`` (cached), or of the function
        walked knowing constant arguments (``specialised``)."""
        if type(address) is tuple:
            special = self._specialised.get(address)
            return special if special is not None else self.summary(address[0])
        assert type(address) is int
        known = self._summaries.get(address)
        if known is None:
            known = self._summaries[address] = self._analyse(address)
        return known

    def _resolved(self, key: FunctionKey) -> FunctionKey:
        if self.quiet is not None:
            key = self._quieted(key)
        return self.specialised(*key) if type(key) is tuple else key

    def _quieted(self, key: FunctionKey) -> FunctionKey:
        """``key``, knowing the globals quiet at load when the function tests one."""
        function, constants = key if isinstance(key, tuple) else (key, ())
        tests = self._tests_quiet.get(function)
        if tests is None:
            assert self.quiet is not None
            tests = self._tests_quiet[function] = any(
                tested == GLOBAL and self.quiet.holds(at, width)
                for tested, at, width in self.summary(function).tests_through)
        return (function, (*constants, QUIET_AT_LOAD)) if tests else key

    # -- globals quiet at load ----------------------------------------------------------
    def know_quiet(self, found: Iterable[Effects]) -> frozenset[int]:
        """Learn which globals no code followed from the initializers (``found``, their
        effects) writes, of those the functions they followed test (``quiet``), and
        compose from now on knowing them; the functions whose paths they select."""
        tested = tested_globals(self._summaries[address] for address in self.followed
                                if address in self._summaries)
        return self._knowing(quiet_bytes(self.index, tested, found))

    def narrow_quiet(self, found: Iterable[Effects]) -> frozenset[int] | None:
        """Check the globals taken to be quiet against the code followed knowing them
        (``found``): None when it writes none of them either; else know only those it
        leaves quiet, and return the functions whose paths they select.  (Paths left
        out free the budget for code the first pass did not follow, which may.)"""
        assert self.quiet is not None
        kept = quiet_bytes(self.index, self.quiet.ranges(), found)
        return None if kept.ranges() == self.quiet.ranges() else self._knowing(kept)

    def _knowing(self, quiet: QuietBytes) -> frozenset[int]:
        # Walks that knew other globals quiet are no walks of these.
        for key in [key for key in self._specialised if QUIET_AT_LOAD in key[1]]:
            del self._specialised[key]
        self.quiet, self._tests_quiet = (quiet or None), {}
        if self.quiet is None:
            return frozenset()
        return frozenset(address for address in list(self._summaries)
                         if type(self._resolved(address)) is tuple)

    def forget_quiet(self) -> None:
        """Compose without them again: code run at exit, once ``main`` may have set them."""
        self.quiet = None

    def callers(self, functions: frozenset[int]) -> set[int]:
        """``functions`` and every function read so far that calls one of them, directly
        or through others, at any depth: those whose effects may differ once they are
        known to select paths (more than ``effects`` follows, never fewer)."""
        calling: dict[int, list[int]] = {}
        walks = [*self._summaries.items(),
                 *((key[0], summary) for key, summary in self._specialised.items()
                   if summary is not None)]
        for address, summary in walks:
            for callee in summary.callees:
                calling.setdefault(_address(callee), []).append(address)
        found, waiting = set(functions), list(functions)
        while waiting:
            for caller in calling.get(waiting.pop(), ()):
                if caller not in found:
                    found.add(caller)
                    waiting.append(caller)
        return found

    def specialised(self, function: int, constants: Constants) -> FunctionKey:
        """The function at ``function`` as a call passing ``constants`` runs it: walked
        knowing them, with the paths they rule out left out; just ``function`` when
        they decide nothing (or it is too big, or has no known size)."""
        key = (function, constants)
        if key not in self._specialised:
            self._specialised[key] = self._walk_knowing(function, constants)
        return key if self._specialised[key] is not None else function

    def _walk_knowing(self, function: int, constants: Constants) -> FunctionSummary | None:
        """The walk of ``specialised``, when it selects paths of its own.  Constants
        that can decide nothing there are left out first (``decisive``): calls that
        differ only in those share one walk."""
        found = self.index.function_at(function)
        if not found or not 0 < found[1] <= MAX_SPECIALISED_BYTES:
            return None
        plain = self.summary(function)
        kept = decisive(plain, constants)
        if kept != constants:
            chosen = self.specialised(function, kept) if kept else function
            return self._specialised.get(chosen) if type(chosen) is tuple else None
        if not may_decide(plain, constants):
            return None
        summary = self._analyse(function, constants=constants)
        # It selects paths when it decides a branch, or hands a constant on to a
        # callee (``f(k)`` calling ``g(k)``), which the plain walk does not know.
        selects = summary.decided or summary.undecided \
            or (any(type(callee) is tuple for callee in summary.callees)
                and summary.callees.keys() != plain.callees.keys())
        return summary if selects else None

    def _analyse(self, address: int, parameters: bool = False,
                 constants: Constants = ()) -> FunctionSummary:
        assert self._walk is not None
        found = self.index.function_at(address)
        size = found[1] if found else 0
        limit = min(size, MAX_FUNCTION_BYTES) if size else self._unsized_limit(address)
        code = self.index.code_at(address, limit)
        if code is None or (size and len(code) < min(size, MAX_FUNCTION_BYTES)):
            return incomplete(StopReason.UNREADABLE)
        try:
            walk = self._walk(self, address, code, bool(size), parameters, constants)
            summary = walk.run()
            pruned = walk.paths.unreachable(address) if walk.paths is not None else None
            if pruned:  # again, without the code the constants rule out
                summary = self._walk(self, address, code, bool(size), parameters, constants,
                                     pruned).run()
        except self._decode_errors:  # code that does not decode
            return incomplete(StopReason.UNKNOWN_INSTRUCTION)
        if size > MAX_FUNCTION_BYTES:
            summary.stop_here(StopReason.SIZE_CAP)
        return summary

    def _unsized_limit(self, address: int) -> int:
        """How far a function of unknown size is swept: up to the next function known to
        start (warp's ``warp.so`` has unwind entries for a few functions only: an
        initializer's sweep ran on, after its last jump, into the next initializer
        and charged it with that one's construction)."""
        following = self.index.next_function_start(address)
        return min(MAX_UNSIZED_BYTES, following - address) if following is not None \
            else MAX_UNSIZED_BYTES


# Why a parameter sweep may stop and still say what a function does with the parameters
# its own code does not use (``_use``).
_PARAMETERS_TRACKED_PAST = frozenset({StopReason.INDIRECT_CALL})


def _received_events(summary: FunctionSummary) -> list[Event]:
    """The events of a parameter sweep about the parameters; those that hand a call
    through a register what is in an argument register past the last one the
    function handles itself are left out.  A caller whose callee has no name
    passes all eight argument registers, and whatever it left in the last ones (an
    address gcc kept there for its own use) reaches, untouched, every call
    through a register further down: a parameter the function never reads,
    copies, compares nor passes on by name is not one it was given.  Those below
    the last it handles are (``cb(a, b)`` handing on ``a`` and ``b`` where it
    was given them)."""
    events = [event for event in summary.events
              if type(event[1]) is int and event[0] not in (CALL, HOOK)]
    handled = summary.parameters_handled | summary.tests_arguments
    if handled < 0:  # a jump table indexed by any of them
        return events
    for event in events:
        subject = event[1]
        if subject >= 0 and (event[0] in (READ, WRITE) or (
                event[0] == UNKNOWN_PASS and not handed_to_unknown_code(event))):
            handled |= 1 << subject
    last = handled.bit_length() - 1
    return [event for event in events
            if not (handed_to_unknown_code(event) and event[3] > last)]


# What a function's own code does to a global that ``path_to`` looks for.
_TOUCHES = frozenset({READ, WRITE, PASS, PASS_FOREIGN, UNKNOWN_PASS})


def _path(parents: dict[FunctionKey, FunctionKey | None],
          last: FunctionKey) -> list[FunctionKey]:
    path: list[FunctionKey] = []
    key: FunctionKey | None = last
    while key is not None:
        path.append(key)
        key = parents[key]
    return path[::-1]


# Fewer new functions than this at one call depth are swept here: a second
# process costs more than it saves.
_SHARED_SWEEP_MINIMUM = 32
# What one half of a shared sweep sends back: its summaries, its walks knowing
# constants (``specialised``), which registers the functions it looked into
# write (``registers_written``) and what the accessors it met return
# (``returned_global``), so none is worked out twice.
_Swept = tuple[dict[int, FunctionSummary],
               dict[tuple[int, Constants], FunctionSummary | None],
               dict[int, frozenset[str] | None],
               dict[tuple[int, Constants], int | str | None]]
# One piece of a shared sweep: a function to follow, and whether its summary is
# wanted too, or only which walk a call passing constants selects (``_reach``
# works that out for the call the budget stops at as well).
_Wanted = tuple[FunctionKey, bool]


class _RootWalk:
    """``EffectsAnalyzer._reach`` of one root, replayed one call depth at a time."""

    def __init__(self, root: int) -> None:
        self.seen: set[FunctionKey] = {root}
        self.frontier: list[FunctionKey] = [root]
        self.reached: set[FunctionKey] = set()
        self.analysed = 0

    def wanted(self, analyzer: EffectsAnalyzer, max_functions: int) -> list[_Wanted]:
        """What ``_reach`` would sweep at the current depth and is not known yet.

        A call passing constants whose walk is not chosen yet counts as a
        function of its own (it may turn out to be one already followed): the
        budget is then met no later than in ``_reach``, and once those are
        chosen the depth is looked at again (``prefetch``), so no more is swept
        than ``_reach`` sweeps.
        """
        wanted: list[_Wanted] = []
        reached, analysed = set(self.reached), self.analysed
        for key in self.frontier:
            function = analyzer.chosen(key)
            if function is None:  # the walk the constants select is still to be chosen
                wanted.append((key, analysed < max_functions))
                if analysed == max_functions:
                    return wanted
                analysed += 1
                continue
            if function in reached:
                continue
            if analysed == max_functions:
                return wanted
            if not analyzer.swept(function):
                wanted.append((function, True))
                analysed += 1  # a leaf or not: not known yet
            else:
                analysed += bool(analyzer.summary(function).callees)
            reached.add(function)
        return wanted

    def advance(self, analyzer: EffectsAnalyzer, max_functions: int) -> bool:
        """Take the current depth (everything ``wanted`` is known): whether a deeper one
        follows.  A call passing constants is followed into the walk they select, as
        ``_reach`` follows it (nothing is swept here)."""
        following: list[FunctionKey] = []
        for key in self.frontier:
            function = analyzer._resolved(key)
            if function in self.reached:
                continue
            if self.analysed == max_functions:
                return False
            self.reached.add(function)
            analyzer.followed.add(_address(function))
            callees = analyzer.summary(function).callees
            self.analysed += bool(callees)
            following += [c for c in callees if c not in self.seen]
            self.seen.update(callees)
        self.frontier = following
        return bool(following)


def _address(key: FunctionKey) -> int:
    return key[0] if isinstance(key, tuple) else key


def _unquieted(key: FunctionKey) -> FunctionKey:
    """``key`` as a caller's event names it: without ``QUIET_AT_LOAD``, which only the
    analyzer adds."""
    if type(key) is not tuple or QUIET_AT_LOAD not in key[1]:
        return key
    constants = tuple(entry for entry in key[1] if entry != QUIET_AT_LOAD)
    return function_key(key[0], constants)


def _registers_unguarded(events: list[Event]) -> bool:
    """Whether one function's own code registers an exit-time destructor outside
    ``__cxa_guard_acquire``/``release``."""
    guards = GuardsHeld()
    for kind, subject, callee, _position in events:
        if kind == GUARD:
            guards.event(subject, callee)
        elif kind == ATEXIT and not guards:
            return True
    return False


def _decode_errors() -> tuple[type[Exception], ...]:
    """What reading code may raise: our errors, and capstone's where it is installed
    (without it nothing is decoded, and the engine's absence is reported on first use)."""
    try:
        from capstone import CsError
    except ImportError:
        return (ElfpatchError,)
    return (ElfpatchError, CsError)

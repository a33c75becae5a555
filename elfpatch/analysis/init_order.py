"""``inits``: initializers in run order, what they do, and their risks, per object and closure."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, zip_longest
from typing import TypeVar

from elfpatch.analysis.effects import Effects, EffectsAnalyzer, Part
from elfpatch.analysis.effects.addresses import AddressIndex
from elfpatch.analysis.effects.summary import (
    ANCHOR,
    BARE,
    StopReason,
    effects_keys,
    object_keys,
    rekeyed,
    settle,
    with_pointees,
)
from elfpatch.analysis.initializers import (
    DEFAULT_PRIORITY,
    InitializerEntry,
    ObjectInits,
    UnitFinder,
    is_merged_initializer,
    list_initializers,
    name_part,
    run_priority,
)
from elfpatch.analysis.linkage import has_internal_linkage
from elfpatch.analysis.members import UnwrittenBytes
from elfpatch.analysis.registries import early_lookups, inlined_early_lookups, registry_members
from elfpatch.analysis.risks import (
    AnalysedInitializer,
    Objects,
    Risk,
    constructed_by,
    destruction_order_risks,
    destructor_risks,
    guard_bytes,
    lazy_objects,
    order_risks,
    raised_flags,
    read_at_exit,
    registered_destructors,
    registrations,
    set_on_first_use,
)
from elfpatch.base.alongside import Alongside, in_turn
from elfpatch.base.text_enum import TextEnum
from elfpatch.cxx.demangle import demangle
from elfpatch.elf import constants as C
from elfpatch.elf.arrays import InitializerKind
from elfpatch.elf.file import ElfFile
from elfpatch.elf.symbols import local_source_files, read_dynsym, read_symtab
from elfpatch.errors import ElfpatchError

T = TypeVar("T")


class ClosurePhase(TextEnum):
    """What of an object's load-time code one step of a closure's run order runs."""

    PREINIT_ARRAY = "preinit_array"  # an executable's DT_PREINIT_ARRAY alone
    INITIALIZERS = "initializers"  # everything else the object runs at load


@dataclass(frozen=True)
class Coverage:
    """How much of an object's initializer and destructor code was followed to its end."""

    initializers: int  # initializers followed (each part of a merged one counts)
    initializers_complete: int
    destructors: int  # registered destructors and atexit functions of this object followed
    destructors_complete: int
    # Why the others stopped: (reason, how many initializers and destructors it stopped).
    stopped: tuple[tuple[StopReason, int], ...] = ()
    # Branches on constants the code passes to the functions it calls: decided (only
    # the selected path followed) and not decided (every path kept).
    constant_branches: tuple[int, int] = (0, 0)
    # Globals no initializer writes, read as the loader leaves them (zero) where the
    # code tests them: (address, width, label) of each.
    quiet_at_load: tuple[tuple[int, int, str], ...] = ()


@dataclass(frozen=True)
class ObjectReport:
    path: str
    member: str | None
    machine: str
    elf_type: str
    soname: str | None
    initializers: tuple[InitializerEntry, ...]
    finalizers: tuple[InitializerEntry, ...]
    risks: tuple[Risk, ...]
    effects_complete: bool  # False when some machine code could not be followed
    coverage: Coverage | None = None  # None when the machine code was not read


@dataclass(frozen=True)
class ClosureEntry:
    """One step of a closure's run order: an object's initializers, or (first of all)
    the program's DT_PREINIT_ARRAY, which ld.so runs before any library's."""

    path: str
    soname: str | None
    phase: ClosurePhase = ClosurePhase.INITIALIZERS


@dataclass(frozen=True)
class InitsResult:
    objects: tuple[ObjectReport, ...]
    closure: tuple[ClosureEntry, ...] | None
    missing: tuple[tuple[str, str], ...]  # (needed name, requested by) not found
    errors: tuple[ElfpatchError, ...]


@dataclass(frozen=True)
class ObjectAnalysis:
    """One object's report, and what the closure's cross-object risks need."""

    report: ObjectReport
    analysed: list[AnalysedInitializer]
    exit_code: dict[int, Effects]  # registered destructors' and atexit functions' effects
    # The object's address index, built already: what reads its code again (the
    # registry functions it defines) need not build it a second time.
    index: AddressIndex | None = None


def analyse_object(elf: ElfFile, path: str, member: str | None = None,
                   listing: ObjectInits | None = None, alongside: Alongside = in_turn,
                   ) -> tuple[ObjectReport, list[AnalysedInitializer]]:
    """``listing``: the object's initializers, when the caller has listed them already."""
    analysis = analyse_object_fully(elf, path, member, listing, alongside=alongside)
    return analysis.report, analysis.analysed


def analyse_object_fully(elf: ElfFile, path: str, member: str | None = None,
                         listing: ObjectInits | None = None,
                         follow_code: bool = True, in_closure: bool = False,
                         alongside: Alongside = in_turn) -> ObjectAnalysis:
    """The object's initializers, what they and its exit-time code do, and the risks.

    ``follow_code=False`` lists the initializers without reading machine code;
    ``in_closure``: other objects may read what this one exports; ``alongside``
    runs the two halves of a big object's work (the service forks one).
    """
    listing = listing or list_initializers(elf, path, member)
    soname = elf.soname if elf.dynamic else None
    if not follow_code:
        report = ObjectReport(path, member, listing.machine, listing.elf_type, soname,
                              listing.initializers, listing.finalizers, (), True)
        return ObjectAnalysis(report, [], {})
    analyzer = EffectsAnalyzer(elf)
    entries = listing.followed
    analyzer.index.note_entries(entry.address for entry in (*listing.initializers,
                                                            *listing.finalizers)
                                if entry.address is not None)
    if analyzer.supported and len(entries) >= _PARALLEL_MINIMUM:
        analyzer.prefetch([entry.address for entry in entries if entry.address is not None
                           and not is_merged_initializer(entry.symbol)], alongside)
    found = _shared_out(entries, lambda entry: _initializer_effects(analyzer, entry), alongside)
    sorted_below = _sorted_below(listing.initializers, entries, found)
    # What runs at load, the C runtime's entries too (OpenSSL's cpuid setup is called
    # from _init): what may write a flag.
    at_load = _every_effects(found)
    entries, found = _without_runtime(entries, found)
    found = _split_lone(analyzer, entries, found)
    found, every_path = _knowing_quiet_globals(analyzer, entries, found, at_load, alongside)
    quiet = _quiet_labelled(analyzer) if every_path else ()
    analyzer.forget_quiet()  # exit-time code runs once main may have set them
    analysed, named = _analysed(elf, entries, found, analyzer.index.data_label, sorted_below)
    exit_code = _exit_code(analyzer, analysed, alongside)
    hooks = _hook_code(elf, analyzer, analysed)
    analysed, exit_code, hooks, keys = _placed(analysed, exit_code, hooks, every_path)
    labels = _AddressLabels(analyzer.index.data_label)
    sources = _SourceFiles(elf)
    objects = _objects(labels, analysed, exit_code, hooks, sources)
    analysed, exit_code, hooks = _settled(analyzer, analysed, exit_code, hooks,
                                          exported_definitions(elf) if in_closure
                                          else frozenset(), objects)
    objects = _objects(labels, analysed, exit_code, hooks, sources)
    read = read_at_exit(analysed, exit_code, hooks)
    initializers = tuple(named.get(e, e) for e in listing.initializers)
    calls = _Calls(analyzer, keys)
    unwritten = UnwrittenBytes(elf, analyzer.index)
    risks = order_risks(analysed, objects, calls, unwritten) \
        + destruction_order_risks(analysed, exit_code, objects, calls,
                                  lambda code: not analyzer.parameter_use(code, 0)) \
        + destructor_risks(analysed, read, objects) + early_lookups(analysed, objects, calls) \
        + inlined_early_lookups(analysed, objects, calls)
    report = ObjectReport(path, member, listing.machine, listing.elf_type, soname,
                          initializers, listing.finalizers, tuple(risks),
                          all(item.effects.complete for item in analysed),
                          _coverage(analysed, exit_code, quiet))
    return ObjectAnalysis(report, analysed, exit_code, analyzer.index)


# What only the C runtime's own entries call (crtstuff's frame_dummy and
# register_tm_clones, crti's _init, libgcc's init_have_lse_atomics): they know no
# user global.
_RUNTIME_CALLS = frozenset({"_ITM_registerTMCloneTable", "_ITM_deregisterTMCloneTable",
                            "__gmon_start__", "__getauxval"})
# What crtbegin's frame_dummy calls (through register_tm_clones) and no other does;
# libgcc's init_have_lse_atomics (its __getauxval) runs at init_priority 90.
_FRAME_DUMMY_CALLS = frozenset({"_ITM_registerTMCloneTable"})


def _sorted_below(listed: Sequence[InitializerEntry], followed: Sequence[InitializerEntry],
                  found: Sequence[Effects | list[Part]]) -> int | None:
    """The ``.init_array`` slot of crtbegin's ``frame_dummy``, below which the linker
    puts the initializers it sorts by init_priority (None: no such entry).

    GNU ld's and lld's scripts lay out every ``.init_array.NNNNN`` input section
    first, sorted by priority, then the plain ``.init_array`` sections in link
    order, crtbegin's first: every slot below ``frame_dummy``'s runs at some
    priority, every slot above it at the default.  A stripped file's
    ``frame_dummy`` is known by what it calls (``_ITM_registerTMCloneTable``)."""
    for entry in listed:
        if entry.kind == InitializerKind.INIT_ARRAY and entry.symbol == "frame_dummy":
            return entry.index
    for entry, result in zip(followed, found, strict=True):
        if entry.kind == InitializerKind.INIT_ARRAY and entry.symbol is None \
                and isinstance(result, Effects) \
                and _FRAME_DUMMY_CALLS.intersection(result.external_calls):
            return entry.index
    return None


def _without_runtime(entries: list[InitializerEntry], found: list[Effects | list[Part]],
                     ) -> tuple[list[InitializerEntry], list[Effects | list[Part]]]:
    """The C runtime's entries of a stripped file left out, as names leave them out of
    an unstripped one (``ObjectInits.followed``): known by what they call."""
    kept = [(entry, result) for entry, result in zip(entries, found, strict=True)
            if entry.symbol is not None or not isinstance(result, Effects)
            or not _RUNTIME_CALLS.intersection(result.external_calls)]
    return [entry for entry, _ in kept], [result for _, result in kept]


def _knowing_quiet_globals(analyzer: EffectsAnalyzer, entries: list[InitializerEntry],
                           found: list[Effects | list[Part]], at_load: list[Effects],
                           alongside: Alongside,
                           ) -> tuple[list[Effects | list[Part]], list[Effects]]:
    """The initializers whose code tests a global that none of them writes (a tracing
    switch, zero until ``main`` sets it: ``EffectsAnalyzer.know_quiet``) composed
    again knowing it, the paths it rules out left out; and what they did before,
    every path followed.  In a file without symbols that still places objects
    (``_placed``): the code left out is there, and the addresses it uses still part
    the objects (without them, a flag only read, next to a counter only the path
    left out writes, joined the object below).  ``at_load``: the effects of all the
    code that runs at load, the C runtime's entries too (what may write a flag)."""
    if not analyzer.supported:
        return found, []
    testing: frozenset[int] | None = analyzer.know_quiet([*at_load, *_every_effects(found)])
    for _round in range(_QUIET_ROUNDS):
        if not testing:
            break
        callers = analyzer.callers(testing)
        chosen = [position for position, entry in enumerate(entries)
                  if entry.address in callers]
        composed = _shared_out(
            [(entries[position], found[position]) for position in chosen],
            lambda pair: _composed_again(analyzer, *pair), alongside)
        again = list(found)
        for position, result in zip(chosen, composed, strict=True):
            again[position] = result
        testing = analyzer.narrow_quiet(
            [*at_load, *_every_effects(again)])
        if testing is None:
            return again, _every_effects(found[position] for position in chosen)
    analyzer.forget_quiet()
    return found, []


# How many times the globals taken to be quiet are narrowed before they are given up.
_QUIET_ROUNDS = 3


def _composed_again(analyzer: EffectsAnalyzer, entry: InitializerEntry,
                    first: Effects | list[Part]) -> Effects | list[Part]:
    """``_initializer_effects``, or a stripped merge split as ``_split_lone`` split it."""
    if isinstance(first, list) and not is_merged_initializer(entry.symbol):
        assert entry.address is not None
        return analyzer.parts(entry.address, by_code=True)
    return _initializer_effects(analyzer, entry)


def _every_effects(results: Iterable[Effects | list[Part]]) -> list[Effects]:
    """The effects of each initializer, each part of a merged one apart."""
    return [effects for result in results
            for effects in ([result] if isinstance(result, Effects)
                            else [part.effects for part in result])]


def _initializer_effects(analyzer: EffectsAnalyzer, entry: InitializerEntry,
                         ) -> Effects | list[Part]:
    """An initializer's effects, or a merged initializer's parts."""
    assert entry.address is not None
    if is_merged_initializer(entry.symbol):
        return analyzer.parts(entry.address)
    return analyzer.effects(entry.address, settle=False)


def _placed(analysed: list[AnalysedInitializer], exit_code: dict[int, Effects],
            hooks: list[Effects], evidence: Sequence[Effects] = (),
            ) -> tuple[list[AnalysedInitializer], dict[int, Effects], list[Effects],
                       dict[str, str]]:
    """In a file without symbols, the bare addresses the code touches placed in the
    objects that the addresses it takes as pointers start (``summary.object_keys``),
    from every piece of code at once (``evidence`` too: code whose effects are not
    reported), so that each object has one key everywhere; and where each bare
    address went."""
    every = (*(item.effects for item in analysed), *exit_code.values(), *hooks, *evidence)
    # Each key alone too: code not in a function's summary (a merged initializer's own
    # stretch) still has its addresses placed.  A function's group comes once however
    # many initializers reach it (where an address goes depends on which groups hold
    # it, not how often): a big library's initializers share most of their callees.
    alone = dict.fromkeys(key for effects in every for key in effects_keys(effects))
    groups = dict.fromkeys(group for effects in every for group in effects.groups)
    written = {key for effects in every
               for key in (*effects.writes, *effects.passed, *(p[0] for p in effects.pending),
                           *(r.object for r in effects.atexit if r.object))}
    destroyed = {r.object for effects in every for r in effects.atexit if r.object}
    keys = object_keys(groups, written, destroyed, alone, _apart(every, exit_code))
    if not keys:
        return analysed, exit_code, hooks, keys
    keys = with_pointees(keys, alone)
    return ([dataclasses.replace(item, effects=rekeyed(item.effects, keys))
             for item in analysed],
            {address: rekeyed(effects, keys) for address, effects in exit_code.items()},
            [rekeyed(effects, keys) for effects in hooks], keys)


def _apart(every: Sequence[Effects], exit_code: Mapping[int, Effects]) -> dict[int, set[int]]:
    """Bare addresses -> the objects they are no member of: one destructor registered
    for several objects (a nifty counter's init objects, each of one byte) reaches
    each through its parameter, so what its code touches at a fixed address (the
    count, the log it flushes) is a global of its own, whichever lies next to
    them."""
    registered: dict[int, set[int]] = {}
    for effects in every:
        for entry in effects.atexit:
            if entry.object and entry.object[:1] in (BARE, ANCHOR) \
                    and entry.destructor_address is not None:
                registered.setdefault(entry.destructor_address, set()).add(
                    int(entry.object[1:], 16))
    apart: dict[int, set[int]] = {}
    for code, objects in registered.items():
        shared = exit_code.get(code)
        if len(objects) > 1 and shared is not None:
            for key in effects_keys(shared):
                if key[:1] in (BARE, ANCHOR):
                    apart.setdefault(int(key[1:], 16), set()).update(objects)
    return apart


class _Calls:
    """The calls by which code reaches a global a risk names (``Risk.via``): from the
    initializer (or destructor) down to the function whose own code touches it,
    worked out only for the globals risks name."""

    def __init__(self, analyzer: EffectsAnalyzer, keys: dict[str, str]) -> None:
        self.analyzer, self.keys = analyzer, keys
        self._bare: dict[str, set[str]] | None = None

    def __call__(self, root: int | None, symbol: str) -> tuple[str, ...] | None:
        if root is None:
            return None
        path = self.analyzer.path_to(root, {symbol, *self.bare_keys().get(symbol, ())})
        if path is None or len(path) < 2:
            return None  # not found, or in the code that starts there
        return tuple(self.label(key[0] if isinstance(key, tuple) else key)
                     for key in path[1:])

    def bare_keys(self) -> dict[str, set[str]]:
        """Each object of a file without symbols -> the bare addresses placed in it."""
        if self._bare is None:
            self._bare = {}
            for bare, placed in self.keys.items():
                self._bare.setdefault(placed, set()).add(bare)
        return self._bare

    def label(self, function: int) -> str:
        found = self.analyzer.index.function_at(function)
        return demangle(found[0]) if found and found[0] else f"{function:#x}"


def _objects(labels: Mapping[str, str], analysed: list[AnalysedInitializer],
             exit_code: dict[int, Effects], hooks: list[Effects],
             sources: Callable[[int], str | None]) -> Objects:
    """Labels of the globals known by address, those built on first use and guards."""
    every = [*(item.effects for item in analysed), *exit_code.values(), *hooks]
    return Objects(labels, lazy_objects(every), guard_bytes(every), set_on_first_use(every),
                   sources, raised_flags(every))


class _SourceFiles:
    """The source file of a local object or function, by address (``Objects.source_file``),
    read from .symtab the first time one is asked for: only where a risk is at stake
    (libjax_common.so's 523,000 local symbols take 0.27 s)."""

    def __init__(self, elf: ElfFile) -> None:
        self._elf = elf
        self._files: dict[int, str] | None = None

    def __call__(self, address: int) -> str | None:
        if self._files is None:
            table = read_symtab(self._elf)
            self._files = local_source_files(table) if table is not None else {}
        return self._files.get(address)


class _AddressLabels(Mapping[str, str]):
    """The label of each global the effects know by address (``0x…``), worked out the
    first time it is asked for: a big stripped library's initializers touch 100,000
    addresses (nvjitlink), and only those a risk names, or the settling of pointers
    passed asks about, are ever shown.  Iterating gives the labels asked for so far."""

    def __init__(self, label: Callable[[str], str]) -> None:
        self._label = label
        self._known: dict[str, str] = {}

    def __getitem__(self, key: str) -> str:
        known = self._known.get(key)
        if known is None:
            if not key.startswith("0x"):
                raise KeyError(key)
            known = self._known[key] = self._label(key)
        return known

    def __iter__(self) -> Iterator[str]:
        return iter(self._known)

    def __len__(self) -> int:
        return len(self._known)


def _settled(analyzer: EffectsAnalyzer, analysed: list[AnalysedInitializer],
             exit_code: dict[int, Effects], hooks: list[Effects], exported: frozenset[str],
             objects: Objects,
             ) -> tuple[list[AnalysedInitializer], dict[int, Effects], list[Effects]]:
    """Work out what a function does with a global's address passed to it only where
    that can matter: a global that more than one initializer (or destructor, or
    thread) touches, another object's global, and, in a closure, one this object
    exports (``exported``).  The rest are taken for addresses: following them
    costs time and changes no verdict.  A global with internal linkage is one
    TU's own: another TU's initializer with a global of the same name touches
    a different object."""
    touched: Counter[str] = Counter()
    built: set[str] = set()  # what some code may construct
    for effects in (*(item.effects for item in analysed), *exit_code.values(), *hooks):
        registered = {r.object for r in effects.atexit if r.object}
        touched.update({*effects.reads, *effects.writes, *(p[0] for p in effects.pending),
                        *registered})
        built.update(effects.writes, registered, (p[0] for p in effects.pending if p[2] <= 0))
    worth = {s for s, n in touched.items() if n > 1 and s in built
             and not objects.is_lazy(s) and not has_internal_linkage(s)}
    worth.update(s for s in exported if s in touched)
    # In initializers, a registry built on first use that several of them touch too:
    # registering into it is writing through a pointer passed (``early_lookups``).
    # Not at exit: no risk there needs it, and a destructor's pass of it taken for a
    # read (aarch64 libnvJitLink.so.12: 23 destruction-order errors whose read a
    # process that loads and unloads the library never makes) is none.
    registries = Counter(s for item in analysed for s in {
        *item.effects.reads, *item.effects.writes, *(p[0] for p in item.effects.pending)})
    shared = {s for s, n in registries.items() if n > 1 and s in built and objects.is_lazy(s)}
    # Without symbols, a member handed to a function of the registry's (its map's
    # ``find``) is an object of its own, touched by one initializer only.
    handed = {p[0] for item in analysed for p in item.effects.pending}
    in_registries = worth | shared | registry_members(shared, handed, objects)
    # Code of several TUs inlined into one fetches a registry anew for each TU's part:
    # whether a part only looks into it (``Effects.looked_up_first``).
    in_registries.update(entry[1] for item in analysed if item.inline
                         for entry in item.effects.fetch_log)
    # Code of several TUs inlined into one: whether it builds an object before it
    # reads it is a finding of its own (``order_risks``), one initializer alone.
    for item in analysed:
        if item.inline:
            registered = registered_destructors(item)
            worth.update(p[0] for p in item.effects.pending if p[0] in registered)

    def user(wanted: set[str]) -> Callable[[str, int, int, bool], int | None]:
        def use(symbol: str, function: int, position: int, foreign: bool) -> int | None:
            if foreign or symbol in wanted:
                return analyzer.parameter_use(function, position)
            return None
        return use

    at_init, elsewhere = user(in_registries), user(worth)
    return ([dataclasses.replace(item, effects=settle(item.effects, at_init))
             for item in analysed],
            {address: settle(effects, elsewhere) for address, effects in exit_code.items()},
            [settle(effects, elsewhere) for effects in hooks])

def _analysed(elf: ElfFile, entries: list[InitializerEntry],
              found: list[Effects | list[Part]], label: Callable[[str], str],
              sorted_below: int | None = None,
              ) -> tuple[list[AnalysedInitializer], dict[InitializerEntry, InitializerEntry]]:
    """The initializers in run order, merged ones expanded into their parts; and each
    entry as listed once its registrations and parts are known (``sorted_below``:
    ``_sorted_below``)."""
    analysed: list[AnalysedInitializer] = []
    named: dict[InitializerEntry, InitializerEntry] = {}
    units: UnitFinder | None = None
    lone = _may_be_merged(entries)
    for entry, result in zip(entries, found, strict=True):
        prioritised = _prioritised(entry, sorted_below)
        if isinstance(result, Effects):
            items = [AnalysedInitializer(entry, result, inline=lone, prioritised=prioritised)]
        else:
            units = units or UnitFinder(elf)
            items = [dataclasses.replace(item, prioritised=prioritised)
                     for item in _parts(units, entry, result, label)]
        analysed += items
        registers = any(item.effects.atexit for item in items)
        parts = tuple(item.part for item in items if item.part is not None)
        if registers or parts:
            named[entry] = dataclasses.replace(entry, registers_destructor=registers,
                                               parts=parts)
    return analysed, named


def _prioritised(entry: InitializerEntry, sorted_below: int | None) -> bool | None:
    """Whether the entry runs at an init_priority (True) or the default (False), by
    its slot (``_sorted_below``), else by its name; None where neither tells."""
    if entry.kind != InitializerKind.INIT_ARRAY:
        return None
    if sorted_below is not None:
        return entry.index < sorted_below
    priority = run_priority(entry.symbol)
    return None if priority is None else priority < DEFAULT_PRIORITY


def _split_lone(analyzer: EffectsAnalyzer, entries: list[InitializerEntry],
                found: list[Effects | list[Part]]) -> list[Effects | list[Part]]:
    """A stripped object's one initializer that calls what looks like per-TU
    initializers (``EffectsAnalyzer.parts(by_code=True)``) split into them, as its
    name would have split it: gcc -flto's merge, whose name strip removed."""
    if not _may_be_merged(entries) or not isinstance(found[0], Effects):
        return found
    assert entries[0].address is not None
    parts = analyzer.parts(entries[0].address, by_code=True)
    return [parts] if any(not part.inline for part in parts) else found


def _may_be_merged(entries: list[InitializerEntry]) -> bool:
    """A stripped object's one initializer may be gcc -flto's merge of every TU's
    (``_sub_I_65535_0.0``, known by name only): its code is then read as code of
    several TUs in program order, as an unstripped merge's inlined part is.  In a
    single TU, reading a global before the code after it constructs it is the
    same fiasco."""
    return len(entries) == 1 and entries[0].symbol is None


def _parts(units: UnitFinder, entry: InitializerEntry, parts: list[Part],
           label: Callable[[str], str]) -> list[AnalysedInitializer]:
    units.prime(part.address for part in parts if part.address is not None)
    items = []
    for position, part in enumerate(parts, 1):
        item = AnalysedInitializer(entry, part.effects)
        # Inlined code may hold several TUs' initializers: no one TU names it.  In a
        # file without symbols the keys are not placed yet: the bare address labels.
        built = () if part.inline else (
            label(key[1:] if key[:1] in (BARE, ANCHOR) else key)
            for key in constructed_by(item))
        named = name_part(units, position, part.address, part.symbol, built)
        items.append(AnalysedInitializer(entry, part.effects, named, part.inline))
    return items


# Below this many pieces of work a second process costs more than it saves.
_PARALLEL_MINIMUM = 64


def _shared_out(items: Sequence[T], work: Callable[[T], Effects | list[Part]],
                alongside: Alongside) -> list[Effects | list[Part]]:
    """``work`` on each item; for many, shared out between two halves (``alongside``).

    The items alternate between the halves, so that the big initializers
    of a library (often in neighbouring slots) do not all land on one side.
    """
    def half(part: Sequence[T]) -> Callable[[], list[Effects | list[Part]]]:
        return lambda: [work(item) for item in part]

    if len(items) < _PARALLEL_MINIMUM:
        return half(items)()
    even, odd = alongside(half(items[0::2]), half(items[1::2]))
    return [result for pair in zip_longest(even, odd, fillvalue=None) for result in pair
            if result is not None]


def _exit_code(analyzer: EffectsAnalyzer, analysed: list[AnalysedInitializer],
               alongside: Alongside) -> dict[int, Effects]:
    """The effects of each destructor (and atexit function) registered, of this object."""
    addresses = list(dict.fromkeys(
        r.atexit.destructor_address for r in registrations(analysed)
        if r.atexit.destructor_address is not None))
    if analyzer.supported and len(addresses) >= _PARALLEL_MINIMUM:
        analyzer.prefetch(addresses, alongside)
    found = _shared_out(addresses, lambda address: analyzer.effects(address, settle=False),
                        alongside)
    return {a: e for a, e in zip(addresses, found, strict=True) if isinstance(e, Effects)}


def _hook_code(elf: ElfFile, analyzer: EffectsAnalyzer,
               analysed: list[AnalysedInitializer]) -> list[Effects]:
    """What fork handlers and thread bodies read: they may run while or after
    destructors run.  Only worth reading when something is destroyed at exit."""
    if not any(item.effects.atexit for item in analysed):
        return []
    addresses = [*dict.fromkeys(a for item in analysed for a in item.effects.hooks),
                 *_thread_bodies(elf)]
    return [analyzer.effects(address, settle=False) for address in dict.fromkeys(addresses)]


# gcc's names for the bodies std::thread runs (one per callable type).
_THREAD_BODY_PREFIX = b"_ZNSt6thread11_State_impl"
_THREAD_BODY = re.compile(re.escape(_THREAD_BODY_PREFIX) + rb"[^\x00]*?E6_M_runEv\x00")
_THREAD_START = b"_ZNSt6thread15_M_start_thread"


def _thread_bodies(elf: ElfFile) -> list[int]:
    """Addresses of the std::thread bodies this object defines (when it starts threads:
    the C++ runtime's thread start is then among its imports, a quick look)."""
    dynamic = read_dynsym(elf)
    if dynamic is None or elf.find(_THREAD_START, dynamic.strtab_offset,
                                   dynamic.strtab_offset + dynamic.strtab_size) < 0:
        return []
    table = read_symtab(elf) or dynamic
    names = set(_thread_body_names(elf, table.strtab_offset, table.strtab_size))
    if not names:
        return []
    picked = compress(range(table.count), map(names.__contains__, table.name_offsets))
    return [table.values[i] for i in picked
            if table.defined(i) and table.symbol_type(i) == C.STT_FUNC]


def _thread_body_names(elf: ElfFile, strtab_offset: int, strtab_size: int) -> Iterator[int]:
    """The offsets in the string table of the names ``_THREAD_BODY`` matches, as its
    ``finditer`` gives them; the names' common start is searched for first (a big
    library's table is 76 MB, and a regular expression reads it byte by byte)."""
    end = strtab_offset + strtab_size
    at = elf.find(_THREAD_BODY_PREFIX, strtab_offset, end)
    while at >= 0:
        found = _THREAD_BODY.match(elf.view, at, end)
        if found is not None:
            yield at - strtab_offset
        at = elf.find(_THREAD_BODY_PREFIX, found.end() if found is not None else at + 1, end)


def _quiet_labelled(analyzer: EffectsAnalyzer) -> tuple[tuple[int, int, str], ...]:
    """The quiet bytes the initializers were composed knowing, each with its label."""
    index, quiet = analyzer.index, analyzer.quiet
    if quiet is None:
        return ()
    found = []
    for start, width in sorted(quiet.ranges()):
        key = index.data_key(start)
        named = key is not None and not key.startswith(("0x", BARE, ANCHOR))
        found.append((start, width, key if named and key else index.data_label(f"{start:#x}")))
    return tuple(found)


def _coverage(analysed: list[AnalysedInitializer], exit_code: dict[int, Effects],
              quiet: tuple[tuple[int, int, str], ...] = ()) -> Coverage:
    followed = [item.effects for item in analysed]
    destructors = list(exit_code.values())
    stopped = Counter(reason for effects in (*followed, *destructors)
                      for reason in effects.stopped)
    every = (*followed, *destructors)
    return Coverage(len(followed), sum(e.complete for e in followed),
                    len(destructors), sum(e.complete for e in destructors),
                    tuple(sorted(stopped.items(), key=lambda pair: (-pair[1], pair[0]))),
                    (sum(e.branches[0] for e in every), sum(e.branches[1] for e in every)),
                    quiet)


def exported_definitions(elf: ElfFile) -> frozenset[str]:
    """Names of the definitions .dynsym exports (``SymbolTable.exported_indices``)."""
    table = read_dynsym(elf)
    if table is None:
        return frozenset()
    return frozenset(map(table.name, table.exported_indices()))

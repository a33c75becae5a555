"""The fix plan: for every UNIQUE symbol of every library, its new binding and why.

The plan is decided for the whole set of libraries before any byte is
written, so that a symbol another library needs is never localised.  It is
plain data: ``--dry-run`` prints it, the writer executes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from elfpatch.analysis.crosslib import SharedUse
from elfpatch.base.text_enum import TextEnum
from elfpatch.cxx.demangle import demangle
from elfpatch.elf.symbols import DYNSYM
from elfpatch.errors import UsageError


class FixMode(TextEnum):
    """``fix --to``: the binding UNIQUE symbols get; the value is the option's and the JSON's."""

    LOCAL = "local"
    WEAK_HIDDEN = "weak-hidden"
    GLOBAL = "global"


MODES = tuple(mode.value for mode in FixMode)  # the choices of --to


def fix_mode(given: FixMode | str) -> FixMode:
    """The mode given as the enum or its value; anything else is one line."""
    if given not in MODES:
        raise UsageError("mode", f"{given!r} is not one of {', '.join(MODES)}")
    return FixMode(given)


class BindingTarget(TextEnum):
    """What a change writes, as readelf would print binding (+ visibility)."""

    LOCAL = "LOCAL"
    WEAK_HIDDEN = "WEAK HIDDEN"
    GLOBAL = "GLOBAL"
    # What --hide writes: LOCAL, and HIDDEN because glibc's lazy binding (_dl_fixup)
    # looks a default-visibility symbol up by name even when it is LOCAL, finds
    # nothing, and fails the first call through the PLT ("undefined symbol").
    LOCAL_HIDDEN = "LOCAL HIDDEN"


LOCAL_TARGETS = (BindingTarget.LOCAL, BindingTarget.LOCAL_HIDDEN)
MODE_TARGETS = {FixMode.LOCAL: BindingTarget.LOCAL, FixMode.WEAK_HIDDEN: BindingTarget.WEAK_HIDDEN,
                FixMode.GLOBAL: BindingTarget.GLOBAL}


@dataclass(frozen=True)
class Candidate:
    """A UNIQUE symbol entry found in one table of one library."""

    table: str
    index: int
    name: str
    defined: bool
    hidden: bool = False  # not UNIQUE: an export --hide asked to make LOCAL
    binding: str = "UNIQUE"  # as readelf prints it

    @property
    def demangled(self) -> str:
        # Demangled only when something reads it (a pattern, a report that lists names):
        # a plain fix of libtorch would spend a fifth of its time demangling otherwise.
        return demangle(self.name)


@dataclass(frozen=True)
class SymbolChange:
    table: str
    index: int
    name: str
    target: BindingTarget
    reason: str
    original: str = "UNIQUE"  # the binding before: UNIQUE, or GLOBAL/WEAK for --hide

    @property
    def demangled(self) -> str:
        return demangle(self.name)


@dataclass(frozen=True)
class Refusal:
    """A symbol --strict will not rewrite, and the libraries that need it as is.

    ``referenced_by`` and ``also_defined_by`` name at most
    ``crosslib.SAMPLE_SIZE`` libraries; the counts say how many there are.
    """

    library: str
    name: str
    demangled: str
    referenced_by: tuple[str, ...]
    also_defined_by: tuple[str, ...]
    referenced_count: int
    also_defined_count: int


@dataclass(frozen=True)
class LibraryPlan:
    label: str  # path, or archive:member
    changes: tuple[SymbolChange, ...]
    skipped: tuple[Candidate, ...]  # UNIQUE symbols left alone by --only/--exclude
    # Exports --hide matched but left exported: (name, why), e.g. another library needs it
    kept_exported: tuple[tuple[str, str], ...] = ()

    def count(self, target: str) -> int:
        return sum(1 for c in self.changes if c.target == target)


@dataclass(frozen=True)
class FixPlan:
    mode: FixMode
    libraries: tuple[LibraryPlan, ...]
    refusals: tuple[Refusal, ...]


@dataclass(frozen=True)
class FixOptions:
    """What ``fix`` is asked to do; checked when made, so a bad value fails at once."""

    mode: FixMode = FixMode.LOCAL
    only: str | None = None  # a regular expression on mangled or demangled names
    exclude: str | None = None
    strict: bool = False
    force: bool = False
    # Exports to make LOCAL: regexes on demangled names, or "preset:NAME" (HIDE_PRESETS)
    hide: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Checked again: a caller without a type checker may give any value.
        object.__setattr__(self, "mode", fix_mode(self.mode))  # frozen: only while being made
        if self.strict and self.force:
            raise UsageError("strict", "strict and force contradict each other")
        for text in self.hide:
            _hide_matcher(text)  # a bad pattern or preset fails here, with one line
        for option, pattern in (("only", self.only), ("exclude", self.exclude)):
            if pattern is None:
                continue
            try:
                re.compile(pattern)
            except re.error as error:
                raise UsageError(option, f"{pattern!r} is not a regular expression "
                                 f"({error})") from None


# Named sets of exports --hide can make LOCAL.  "cxx-instantiations": the
# definitions of the C++ runtime's templates and inline functions (std::,
# __gnu_cxx::, their vtables and typeinfo) that a library exports only because
# its code instantiated them (weak), or because it was linked with a static
# part of the runtime (libstdc++_nonshared.a of manylinux2014's devtoolset:
# global).  libstdc++ binds its own references to such a copy when the library
# brings libstdc++ in, and then keeps the library loaded.  A C++ runtime itself
# is left alone.
PRESET_CXX_INSTANTIATIONS = "cxx-instantiations"
# Mangled names in std:: or __gnu_cxx:: (std::string and the other abbreviations
# included), their vtables, VTTs and typeinfo, and their transaction clones
# (_ZGTt, libstdc++_nonshared.a's copies of the std:: exceptions' members): the
# scope is in the mangling, whereas a demangled template function starts with
# its return type.
_CXX_RUNTIME_MANGLED = re.compile(r"_Z(?:GTt|T[VTIS]|TC)?N?K?(?:St|S[absiod]|9__gnu_cxx)")
# The runtime's own functions newer than manylinux2014's libstdc++, which
# libstdc++_nonshared.a copies into every library: the sized and the aligned
# operator new and delete, and __cxa_throw_bad_array_new_length.  libstdc++
# calls them through its PLT, so with RTLD_NOW (Python's import) it binds them
# to the copy of the library that brought it in.
_CXX_RUNTIME_ALLOCATION = re.compile(
    r"_Zd[la]Pv[mj]|_Z(?:nw|na|dl|da)\w*St11align_val_t|__cxa_throw_bad_array_new_length$")
# A library that exports the plain operator new replaces the allocator on purpose
# (nonshared never copies it: every libstdc++ has it); its delete must stay paired.
PLAIN_OPERATOR_NEW = frozenset({"_Znwm", "_Znwj", "_Znam", "_Znaj"})
# Each preset: the names it hides, and the allocation functions it hides where the
# library does not replace the allocator.
HIDE_PRESETS = {PRESET_CXX_INSTANTIATIONS: (_CXX_RUNTIME_MANGLED, _CXX_RUNTIME_ALLOCATION)}
PRESET_PREFIX = "preset:"
HIDE_REASON = "--hide: no other library of the set references it"


@dataclass(frozen=True)
class HideRule:
    """One --hide pattern: a regex on demangled names, or a preset."""

    text: str
    pattern: re.Pattern[str]
    preset: bool
    allocation: re.Pattern[str] | None = None  # a preset's allocation functions

    def matches(self, name: str, runtime_itself: bool, replaces_allocator: bool = False
                ) -> bool:
        """Whether ``name`` is to be hidden; ``runtime_itself``: the library is a C++
        runtime (libstdc++, libc++), whose std:: definitions are its API;
        ``replaces_allocator``: it exports the plain operator new (PLAIN_OPERATOR_NEW)."""
        if not self.preset:
            return bool(self.pattern.search(demangle(name)))
        if runtime_itself:
            return False
        if self.pattern.match(name):
            return True
        return (self.allocation is not None and not replaces_allocator
                and bool(self.allocation.match(name)))


def _hide_matcher(text: str) -> HideRule:
    if text.startswith(PRESET_PREFIX):
        name = text[len(PRESET_PREFIX):]
        if name not in HIDE_PRESETS:
            raise UsageError("hide", f"{name!r} is not a preset",
                             hint=f"presets: {', '.join(sorted(HIDE_PRESETS))}")
        names, allocation = HIDE_PRESETS[name]
        return HideRule(text, names, True, allocation)
    try:
        return HideRule(text, re.compile(text), False)
    except re.error as error:
        raise UsageError("hide", f"{text!r} is not a regular expression ({error})") from None


def hide_rules(options: FixOptions) -> tuple[HideRule, ...]:
    return tuple(_hide_matcher(text) for text in options.hide)


def selected(candidate: Candidate, options: FixOptions) -> bool:
    if not options.only and not options.exclude:
        return True
    names = (candidate.name, candidate.demangled)
    if options.only and not any(re.search(options.only, n) for n in names):
        return False
    return not (options.exclude and any(re.search(options.exclude, n) for n in names))


def guard_partner(name: str) -> str | None:
    """The guard variable of an object, or the object of a guard variable."""
    if name.startswith("_ZGV"):
        return "_Z" + name[4:]
    if name.startswith("_Z"):
        return "_ZGV" + name[2:]
    return None


# A reason names this many libraries and counts the rest, so that its length
# does not grow with the size of the set.
REASON_NAMES = 3


def name_some(labels: tuple[str, ...], count: int, limit: int = REASON_NAMES) -> str:
    """``a.so, b.so, c.so and 1,997 more``: the first ``limit`` labels, then a count."""
    shown = labels[:limit]
    text = ", ".join(shown)
    rest = count - len(shown)
    return f"{text} and {rest:,} more" if rest > 0 else text


def _shared_reason(use: SharedUse) -> str:
    parts = []
    if use.referenced_count:
        parts.append(f"referenced (undefined) by "
                     f"{name_some(use.referenced_by, use.referenced_count)}: LOCAL or "
                     "hidden would make it fail to load")
    if use.also_defined_count:
        parts.append(f"also defined by {name_some(use.also_defined_by, use.also_defined_count)}"
                     ": kept GLOBAL in case they share it on purpose (a singleton, a type tag); "
                     "libraries linked together or loaded RTLD_GLOBAL still share it, RTLD_LOCAL "
                     "plugins each bind their own; --force makes it private")
    return "; ".join(parts)


def plan_library(label: str, candidates: Iterable[Candidate], uses: dict[str, SharedUse],
                 options: FixOptions) -> tuple[LibraryPlan, list[Refusal]]:
    """Decide every selected candidate of one library; ``uses`` is keyed by symbol name."""
    chosen: list[Candidate] = []
    skipped: list[Candidate] = []
    for candidate in candidates:
        (chosen if selected(candidate, options) else skipped).append(candidate)
    hidden = [c for c in chosen if c.hidden]
    chosen = [c for c in chosen if not c.hidden]
    decisions = _decide(chosen, uses, options)
    refusals = [_refusal(label, c, uses.get(c.name)) for c in chosen
                if options.strict and decisions[c.name][1] is _Why.SHARED and c.table == DYNSYM]
    changes = tuple(SymbolChange(c.table, c.index, c.name, decisions[c.name][0],
                                 decisions[c.name][2]) for c in chosen)
    hides, kept = _decide_hidden(hidden, uses)
    return LibraryPlan(label, changes + hides, tuple(skipped), kept), refusals


def _decide_hidden(hidden: list[Candidate], uses: dict[str, SharedUse]
                   ) -> tuple[tuple[SymbolChange, ...], tuple[tuple[str, str], ...]]:
    """Exports --hide matched: LOCAL, unless another library of the set needs them."""
    changes, kept = [], []
    for c in hidden:
        use = uses.get(c.name)
        if use is not None and use.referenced_count:
            kept.append((c.name, f"referenced (undefined) by "
                         f"{name_some(use.referenced_by, use.referenced_count)}: hidden, it "
                         "would make them fail to load"))
        else:
            changes.append(SymbolChange(c.table, c.index, c.name, BindingTarget.LOCAL_HIDDEN,
                                        HIDE_REASON, c.binding))
    return tuple(changes), tuple(kept)


def _refusal(label: str, candidate: Candidate, use: SharedUse | None) -> Refusal:
    use = use or SharedUse((), (), 0, 0)
    return Refusal(label, candidate.name, candidate.demangled, use.referenced_by,
                   use.also_defined_by, use.referenced_count, use.also_defined_count)


class _Why(TextEnum):
    """Why a symbol gets its target: only SHARED ones are refused by --strict and keep
    their guard variable shared too."""

    UNDEFINED = "undefined"
    REQUESTED = "requested"
    SHARED = "shared"
    FORCED = "forced"
    PRIVATE = "private"


# A symbol's decision: (target, why, the reason the plan shows).
_Decision = tuple[BindingTarget, _Why, str]


def _decide(chosen: list[Candidate], uses: dict[str, SharedUse],
            options: FixOptions) -> dict[str, _Decision]:
    """name -> its decision, for every chosen symbol name."""
    wanted = MODE_TARGETS[options.mode]
    decisions: dict[str, _Decision] = {}
    for c in chosen:
        if c.name in decisions:
            continue
        use = uses.get(c.name)
        if not c.defined:
            decisions[c.name] = (BindingTarget.GLOBAL, _Why.UNDEFINED, "undefined reference")
        elif wanted == BindingTarget.GLOBAL:
            decisions[c.name] = (BindingTarget.GLOBAL, _Why.REQUESTED, "--to global")
        elif use is not None and use.is_shared and not options.force:
            decisions[c.name] = (BindingTarget.GLOBAL, _Why.SHARED, _shared_reason(use))
        elif use is not None and use.is_shared:
            decisions[c.name] = (wanted, _Why.FORCED, "--force: " + _shared_reason(use))
        else:
            decisions[c.name] = (wanted, _Why.PRIVATE, "no other library of the set uses it")
    _pair_guards(decisions)
    return decisions


def _pair_guards(decisions: dict[str, _Decision]) -> None:
    """An object and its guard variable must stay shared or private together.

    If the object stayed shared (GLOBAL) while its guard went private, each
    library would construct the one shared object again.
    """
    for name, (_target, why, _reason) in list(decisions.items()):
        partner = guard_partner(name)
        if why is not _Why.SHARED or partner not in decisions:
            continue
        if decisions[partner][0] != BindingTarget.GLOBAL:
            decisions[partner] = (BindingTarget.GLOBAL, _Why.SHARED,
                                  f"kept together with {name}, which stays shared")

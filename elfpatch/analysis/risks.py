"""Initialization-order and destruction risks, from initializers and what they touch.

Inside one object: an initializer that reads a global which another
translation unit's initializer constructs *later* in the run order reads it
unconstructed (the static initialization order fiasco): an error.  If that
TU's initializer runs *earlier*, the program works only because of the link
order: a warning.  Globals no initializer writes are constant- or
zero-initialized and function-local statics are built on first use: neither
is a risk.

Across objects: an initializer that reads a global defined by another
object whose initializers run later (a library reading the executable's
global, say) sees it unconstructed; ASan's init-order checker misses this.

Every exit-time destructor registration is reported too, for projects that
follow "construct on first use, never destroy".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elfpatch.analysis.effects import Effects
from elfpatch.analysis.initializers import InitializerEntry
from elfpatch.demangle import demangle

SEVERITY_ERROR = "error"
SEVERITY_WARNING = "warning"

KIND_INIT_ORDER = "init-order"
KIND_LINK_ORDER = "link-order-dependence"
KIND_CROSS_OBJECT = "cross-object-init-order"
KIND_EXIT_DESTRUCTOR = "exit-time-destructor"


@dataclass(frozen=True)
class Risk:
    severity: str
    kind: str
    reader: str  # the initializer (symbol name, or address when unnamed)
    object: str  # the global, as named in the symbol table
    constructed_by: str | None  # the initializer that constructs it, when known
    message: str


@dataclass(frozen=True)
class AnalysedInitializer:
    entry: InitializerEntry
    effects: Effects

    @property
    def label(self) -> str:
        if self.entry.symbol:
            return self.entry.symbol
        return f"{self.entry.kind}[{self.entry.index}]@{self.entry.address or 0:#x}"

    @property
    def unit(self) -> str:
        return self.entry.translation_unit or self.label


def is_lazily_initialised(symbol: str) -> bool:
    """Function-local statics and their guards: built on first use, not at load."""
    return symbol.startswith(("_ZZ", "_ZGVZ"))


def constructed_by(item: AnalysedInitializer) -> set[str]:
    """Globals an initializer builds: those it writes, and those whose destructor it registers.

    The second catches construction the code does not show as a store: a
    global initialised from a function returning it by value is built by
    the callee through the hidden return pointer (``lea rdi, [rip+g]``).
    """
    registered = {r.object for r in item.effects.atexit if r.object}
    return set(item.effects.writes) | registered


def constructors_of(initializers: Sequence[AnalysedInitializer]) -> dict[str, int]:
    """Global -> position of the first initializer that constructs it."""
    built: dict[str, int] = {}
    for position, item in enumerate(initializers):
        for symbol in constructed_by(item):
            built.setdefault(symbol, position)
    return built


def order_risks(initializers: Sequence[AnalysedInitializer]) -> list[Risk]:
    """Reads of globals another TU's initializer of the same object constructs."""
    built = constructors_of(initializers)
    risks = []
    for position, item in enumerate(initializers):
        for symbol in item.effects.reads:
            builder = built.get(symbol)
            if builder is None or is_lazily_initialised(symbol):
                continue
            constructor = initializers[builder]
            if constructor.unit == item.unit or symbol in constructed_by(item):
                continue
            risks.append(_order_risk(item, constructor, symbol, later=builder > position))
    return risks


def _order_risk(reader: AnalysedInitializer, constructor: AnalysedInitializer, symbol: str,
                later: bool) -> Risk:
    name = demangle(symbol)
    if later:
        return Risk(SEVERITY_ERROR, KIND_INIT_ORDER, reader.label, symbol, constructor.label,
                    f"{reader.unit} reads {name} before {constructor.unit} constructs it "
                    "(static initialization order fiasco); make it constinit/constexpr or a "
                    "function-local static")
    return Risk(SEVERITY_WARNING, KIND_LINK_ORDER, reader.label, symbol, constructor.label,
                f"{reader.unit} reads {name}, constructed by {constructor.unit}: correct only "
                "because that initializer runs first (link order or init_priority)")


def destructor_risks(initializers: Sequence[AnalysedInitializer]) -> list[Risk]:
    risks = []
    for item in initializers:
        for registration in item.effects.atexit:
            target = registration.object or "an object"
            destructor = demangle(registration.destructor) if registration.destructor else "?"
            risks.append(Risk(
                SEVERITY_WARNING, KIND_EXIT_DESTRUCTOR, item.label, target, item.label,
                f"{item.unit} registers {destructor} for {demangle(target)} to run at exit; "
                "anything using it after that (other destructors, detached threads) reads a "
                "destroyed object; never destroying it avoids that"))
    return risks


@dataclass(frozen=True)
class ObjectInitialisation:
    """One object of a closure: its position in the run order and its analysed initializers."""

    label: str
    position: int
    initializers: tuple[AnalysedInitializer, ...]
    defines: frozenset[str]  # exported (dynamic) definitions


def cross_object_risks(objects: Sequence[ObjectInitialisation],
                       lookup_order: Sequence[str]) -> dict[str, list[Risk]]:
    """Reads of another object's global whose initializers have not run yet.

    ``lookup_order`` lists labels in symbol lookup order (the executable,
    then its dependencies breadth first): the first definer wins.
    """
    by_label = {o.label: o for o in objects}
    ordered = [by_label[label] for label in lookup_order if label in by_label]
    risks: dict[str, list[Risk]] = {}
    for reader in objects:
        for item in reader.initializers:
            for symbol in item.effects.reads:
                definer = next((o for o in ordered if symbol in o.defines), None)
                if definer is None or definer is reader or definer.position < reader.position:
                    continue
                constructor = next((c for c in definer.initializers
                                    if symbol in constructed_by(c)), None)
                if constructor is None or is_lazily_initialised(symbol):
                    continue
                risks.setdefault(reader.label, []).append(Risk(
                    SEVERITY_ERROR, KIND_CROSS_OBJECT, item.label, symbol, constructor.label,
                    f"{reader.label}: {item.unit} reads {demangle(symbol)}, which "
                    f"{definer.label} constructs in an initializer that runs later; make it "
                    "constinit/constexpr or reach it through a function-local static"))
    return risks

"""Initialization-order and destruction risks, from initializers and what they touch.

Inside one object: an initializer that reads a global which another
translation unit's initializer constructs *later* in the run order reads it
unconstructed (the static initialization order fiasco): an error.  If that
TU's initializer runs *earlier*, the program works only because of the link
order: a warning.  Globals no initializer writes are constant- or
zero-initialized and function-local statics are built on first use: neither
is a risk.  Registering a global's destructor is not constructing it: a
constant-initialized object (C++20 ``const std::string s = "ab";``) is
complete in the file before any initializer runs, and its TU's initializer
only registers the destructor.  Taking a global's address is not reading
it either.

Across objects: an initializer that reads a global defined by another
object whose initializers run later (a library reading the executable's
global, say) sees it unconstructed; ASan's init-order checker misses this.

At exit, destructors run in the reverse order of their registration: a
destructor (or a function registered with ``atexit``) that reads a global
whose destructor was registered *later* reads a destroyed object (the
static destruction order fiasco): an error, inside one object and, since
objects are finalized in the reverse order of their initialization, across
the objects of a closure.

Every exit-time destructor registration is reported too, for projects that
follow "construct on first use, never destroy"; each says whether the
object is read at exit (by a destructor, an ``atexit`` function, a fork
handler or a thread), where destroying it is what can go wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from elfpatch.analysis.effects import AtExit, Effects
from elfpatch.analysis.effects.summary import POINTEE
from elfpatch.analysis.initializers import (
    InitializerEntry,
    InitializerPart,
    run_priority,
)
from elfpatch.base.text_enum import TextEnum
from elfpatch.cxx.demangle import demangle, demangle_label
from elfpatch.elf.arrays import InitializerKind


class Severity(TextEnum):
    """How sure a risk is: a bug in this build, or correct only by luck of order."""

    ERROR = "error"
    WARNING = "warning"


class RiskKind(TextEnum):
    """What can go wrong; the value is the JSON's ``kind``."""

    INIT_ORDER = "init-order"
    LINK_ORDER = "link-order-dependence"
    CROSS_OBJECT = "cross-object-init-order"
    EXIT_DESTRUCTOR = "exit-time-destructor"
    DESTRUCTION_ORDER = "destruction-order"
    CROSS_OBJECT_DESTRUCTION = "cross-object-destruction-order"
    REGISTRATION_ORDER = "registration-order"


@dataclass(frozen=True)
class Risk:
    severity: Severity
    kind: RiskKind
    reader: str  # the initializer (symbol name, or address when unnamed)
    object: str  # the global, as named in the symbol table (else its address)
    constructed_by: str | None  # the initializer that constructs it, when known
    message: str
    # The part of a merged initializer (gcc -flto) that reads, and that constructs.
    reader_part: int | None = None
    constructed_by_part: int | None = None
    # exit-time-destructor: the object is read at exit (by a destructor, an
    # atexit function, a fork handler or a thread body).
    read_at_exit: bool | None = None
    # What identifies them, whatever names the file keeps: the global's address
    # (None for one .dynsym exports, known by its name), and where the reading
    # and the constructing (or destroying) code start.
    object_address: int | None = None
    reader_address: int | None = None
    constructed_by_address: int | None = None
    # registration-order: the key looked up and registered (``string:<text>`` or
    # ``type:<_ZTI…>``), and the object that registers it when it is another one.
    key: str | None = None
    registered_in: str | None = None
    # The functions by which the reading code reaches the object, from the first
    # it calls down to the one whose own code touches it (None: its own code does).
    via: tuple[str, ...] | None = None
    # A look-up paired with the registrations by the registry alone, without a key
    # (``registries.early_lookups``): said again, with its key, when a keyed call is.
    unkeyed: bool = False


# The calls from where code starts (an address) down to the function that touches a
# global (its key), shown by name, or None (``init_order._Calls``).
Via = Callable[[int | None, str], tuple[str, ...] | None]


def no_via(_root: int | None, _symbol: str) -> tuple[str, ...] | None:
    return None


@dataclass(frozen=True)
class Objects:
    """How the globals effects name are shown: the labels of those known by address
    (``0x…``: the symbol at that address, else the address), those a
    function-local static's guard showed are built on first use, and the guard
    bytes themselves."""

    labels: Mapping[str, str] = field(default_factory=dict)
    lazy: frozenset[str] = frozenset()
    guards: frozenset[str] = frozenset()
    # Pointers code sets where it finds them still null (``set_on_first_use``).
    set_later: frozenset[str] = frozenset()
    # The source file of a local object or function at an address (None: not known),
    # from the symbol table's STT_FILE entries (``init_order._SourceFiles``).
    source_file: Callable[[int], str | None] = field(default=lambda _address: None,
                                                     compare=False)
    # Flags code raises and nothing writes otherwise (``raised_flags``): no registries.
    flags: frozenset[str] = frozenset()

    def label(self, key: str) -> str:
        if key[:1] == POINTEE:
            return POINTEE + self.label(key[1:])
        return self.labels.get(key, key)

    def shown(self, key: str) -> str:
        if key[:1] == POINTEE:
            return f"what {self.shown(key[1:])} points to"
        return demangle_label(self.label(key))

    @staticmethod
    def address(key: str) -> int | None:
        return int(key, 16) if key.startswith("0x") else None

    def is_lazy(self, key: str) -> bool:
        """Built on first use; an object reached through a global's pointer is built by
        no initializer at all (``POINTEE``): only look-ups are said of it."""
        return key in self.lazy or key[:1] == POINTEE or is_lazily_initialised(self.label(key))

    def is_guard(self, key: str) -> bool:
        return key in self.guards or self.label(key).startswith("_ZGV")

    def defined_apart(self, key: str, item: AnalysedInitializer) -> bool:
        """Whether the object ``key`` is a local one of another source file than the
        initializer ``item``'s, both known: then ``item`` does not build it, whatever
        it writes there.  A TU's initializer builds its own objects only, and another
        TU cannot name a local one: what it writes there goes through a function of
        the object's file (``absl::SetMinLogLevel`` storing into a constant-initialized
        ``min_log_level``: an update, not a construction).  Code of several TUs
        merged into one initializer (-flto) is not judged so."""
        address = self.address(key)
        if address is None or item.address is None or item.part is not None or item.inline:
            return False
        defined, running = self.source_file(address), self.source_file(item.address)
        return defined is not None and running is not None and defined != running


NAMES = Objects()  # globals known by name alone (tests, other objects of a closure)


@dataclass(frozen=True)
class AnalysedInitializer:
    entry: InitializerEntry
    effects: Effects
    part: InitializerPart | None = None  # one part of a merged initializer
    inline: bool = False  # code of several TUs inlined into one: program order decides
    # Whether it runs among the initializers the linker sorts by init_priority (True),
    # among those of the default priority (False), or not known (None).
    prioritised: bool | None = None

    @property
    def label(self) -> str:
        if self.entry.symbol:
            return self.entry.symbol
        return f"{self.entry.kind}[{self.entry.index}]@{self.entry.address or 0:#x}"

    @property
    def unit(self) -> str:
        if self.part is not None:
            return self.part.translation_unit or f"part {self.part.position} of {self.label}"
        if self.entry.translation_unit:
            return self.entry.translation_unit
        if self.entry.symbol or self.entry.address is None:
            return self.label
        # A stripped file: the TU by its initializer's slot and address, and where that
        # is in a disassembly.
        where = f", after {self.entry.nearest}" if self.entry.nearest else ""
        return (f"the TU of {self.entry.kind}[{self.entry.index}] "
                f"({self.entry.address:#x}{where})")

    @property
    def position(self) -> int | None:
        return self.part.position if self.part is not None else None

    @property
    def address(self) -> int | None:
        """Where its code starts: the part's function, else the entry's."""
        if self.part is not None and self.part.address is not None:
            return self.part.address
        return self.entry.address


# Whether what a reader reads of a global are bytes the initializer constructing it
# never writes (``members.UnwrittenBytes``).
Unwritten = Callable[[AnalysedInitializer, AnalysedInitializer, str], bool]


def never_unwritten(_reader: AnalysedInitializer, _builder: AnalysedInitializer,
                    _symbol: str) -> bool:
    return False


def held_by_priority(first: AnalysedInitializer, then: AnalysedInitializer) -> bool:
    """Whether init_priority, not the link order, runs ``first`` before ``then``: their
    names give both priorities, and ``first``'s is lower; or ``first`` runs at some
    priority and ``then`` at the default (``prioritised``).  The linker sorts
    initializers by priority before the link order counts, so no link order
    reverses these two."""
    before = run_priority(first.entry.symbol)
    after = run_priority(then.entry.symbol)
    if before is not None and after is not None:
        return before < after
    return first.prioritised is True and then.prioritised is False


def is_lazily_initialised(symbol: str) -> bool:
    """Function-local statics and their guards: built on first use, not at load; and
    every guard variable (``_ZGV``: an inline variable's, a template static
    member's), which only the code that builds what it guards sets."""
    return symbol.startswith(("_ZZ", "_ZGV"))


def constructed_by(item: AnalysedInitializer, surely: bool = False) -> dict[str, None]:
    """Globals an initializer builds: those it writes, and those whose destructor it
    registers after handing their address to code that is not followed.

    The second catches construction the code does not show as a store: a
    global initialised from a function of another library returning it by
    value is built by that function through the hidden return pointer.  A
    registration alone is not a construction: a constant-initialized object
    needs none.  ``surely``: only those its code shows it builds, not those
    code of several TUs inlined into one writes after it reads them.
    """
    effects = item.effects
    registered = {r.object for r in effects.atexit if r.object}
    handed = registered & set(effects.passed)
    built = set(effects.writes) | handed
    # Registered by code that stores to it itself (a constructor inlined there), or
    # after handing it to code not followed (taken to read it: the construction the
    # code does not show).
    constructs = handed | set(effects.built_by_registrar)
    # In the order the code first touches them (a set's order would vary from run to run).
    # Code that reads a global before it writes it updates what is already there (a
    # registration inserting into a container, a counter bumped): that is not
    # building it, unless the same code registers its destructor and builds it as
    # above (what it read first, itself or through a call, another TU's
    # registration may have filled).  A destructor registered for an object that
    # the code fills only through calls, as its other users do, is that of a
    # constant-initialized object filled on first use (ZDoom's name table):
    # others' registrations before are kept.  Inlined code of several TUs is
    # another matter: its first touch may be another TU's read (``order_risks``).
    return {name: None for name, written in effects.first_access
            if name in built and (written or name in constructs
                                  or (item.inline and not surely))}


def registered_destructors(item: AnalysedInitializer) -> set[str]:
    """Globals whose destructor an initializer registers: objects of a class it builds.

    In code of several TUs inlined into one (gcc -flto), a global read before
    it is written is another TU's read before construction only for these: a
    counter each registration bumps is read, then written, and built by no one.
    """
    return {r.object for r in item.effects.atexit if r.object}


def updated_by(item: AnalysedInitializer, built: Collection[str]) -> dict[str, None]:
    """Globals an initializer writes, other than those it builds (``built``): a
    registration into a container, a member store, a counter bumped."""
    writes = set(item.effects.writes)
    return {name: None for name, _written in item.effects.first_access
            if name in writes and name not in built}


# What one initializer builds: (everything, what its code surely builds), the second
# no bigger than the first (``constructed_by``).
Claims = tuple[dict[str, None], dict[str, None]]


def _claims_of(item: AnalysedInitializer) -> Claims:
    return constructed_by(item), constructed_by(item, surely=True)


def constructors_of(claims: Sequence[Claims]) -> tuple[dict[str, int], dict[str, int]]:
    """Global -> position of the first initializer that constructs it (``claims``: each
    initializer's, in run order); and the same for those whose code surely does,
    which come first: code of several TUs inlined into one that reads a global and
    then writes it may only update what another initializer builds (a lock a
    -flto priority-101 initializer takes before the default-priority one stores
    its zero)."""
    surely: dict[str, int] = {}
    maybe: dict[str, int] = {}
    for position, (built, sure) in enumerate(claims):
        for symbol in built:
            (surely if symbol in sure else maybe).setdefault(symbol, position)
    return {**maybe, **surely}, surely


def _own(claims: Claims, position: int, surely: Mapping[str, int]) -> dict[str, None]:
    """What the initializer at ``position`` builds, less what its inlined code only
    may build where another initializer surely does."""
    built, sure = claims
    return {symbol: None for symbol in built
            if symbol in sure or surely.get(symbol, position) == position}


def lazy_objects(effects: Iterable[Effects]) -> frozenset[str]:
    """Globals some code builds under a function-local static's guard."""
    return frozenset(key for e in effects for key in e.lazy)


def set_on_first_use(effects: Iterable[Effects]) -> frozenset[str]:
    """Pointers that code reads, then sets, and reaches an object through, and that no
    code writes before it reads them: null until first used, then pointing to
    what the first user built (gflags' ``FlagRegistry::global_registry_``, set
    under a lock by ``if (!global_registry_) global_registry_ = new …``), as a
    function-local static is built on first use."""
    every = list(effects)
    pointed = {key[len(POINTEE):] for e in every for key in (*e.reads, *e.writes)
               if key.startswith(POINTEE)}
    built = {key for e in every for key, written in e.first_access if written}
    return frozenset(key for e in every for key in e.updates
                     if key in pointed and key not in built)


def raised_flags(effects: Iterable[Effects]) -> frozenset[str]:
    """Globals some code sets as a flag (to 1, or to an address: ``Effects.raised``)
    and no code writes otherwise, nor hands to code that may: once-only flags
    (protobuf's ``init_protobuf_defaults_state``, set by whichever caller of
    ``InitProtobufDefaults`` comes first and tested by every other), which hold no
    entry of any registry."""
    raised: set[str] = set()
    otherwise: set[str] = set()
    for each in effects:
        raised_here = set(each.raised)
        raised |= raised_here
        otherwise.update(key for key in each.writes if key not in raised_here)
        otherwise.update(each.passed)
    return frozenset(raised - otherwise)


def guard_bytes(effects: Iterable[Effects]) -> frozenset[str]:
    """The guards some code tests or takes (``Effects.guards``)."""
    return frozenset(key for e in effects for key in e.guards)


def order_risks(initializers: Sequence[AnalysedInitializer],
                objects: Objects = NAMES, via: Via = no_via,
                unwritten: Unwritten = never_unwritten) -> list[Risk]:
    """Reads of globals another TU's initializer of the same object constructs
    (``via``: how the reader's code reaches each; ``unwritten``: whether what a
    reader reads of one are bytes its constructor never writes)."""
    claims = [_claims_of(item) for item in initializers]
    built, surely = constructors_of(claims)
    risks = []
    for position, item in enumerate(initializers):
        own = _own(claims[position], position, surely)
        updated = updated_by(item, own)
        for symbol in dict.fromkeys((*item.effects.reads, *updated)):
            if objects.is_lazy(symbol):
                continue
            if symbol in own:
                if item.inline and item.effects.written_first(symbol) is False \
                        and (symbol in registered_destructors(item)
                             or symbol in item.effects.stamped):
                    risks.append(_inline_risk(item, symbol, objects))
                continue
            builder = built.get(symbol)
            if builder is not None and objects.defined_apart(symbol, initializers[builder]):
                builder = _builder_of_its_file(symbol, initializers, claims, objects)
            if builder is None:
                continue  # built by no initializer: constant- or zero-initialized
            if symbol in updated and symbol not in surely:
                # Its builder's inlined code only reads it, then writes it, as this
                # initializer does: each updates what is there already (z3's -flto
                # registration lists, a head each registration reads and replaces).
                continue
            constructor = initializers[builder]
            if constructor.unit == item.unit:
                continue
            if symbol not in updated and symbol not in constructor.effects.changed:
                continue  # built with zeros into .bss: a read before it reads the same
            if builder < position and held_by_priority(constructor, item):
                continue  # no link order can reverse them
            if symbol not in updated and unwritten(item, constructor, symbol):
                continue  # what it reads is in the file, as the constructor leaves it
            risks.append(_order_risk(item, constructor, symbol, builder > position, objects,
                                     registers=symbol in updated,
                                     assumed=symbol in item.effects.assumed,
                                     via=via(item.address, symbol),
                                     zeroes=symbol not in constructor.effects.changed))
    return risks


def _builder_of_its_file(symbol: str, initializers: Sequence[AnalysedInitializer],
                         claims: Sequence[Claims], objects: Objects) -> int | None:
    """The first initializer that builds ``symbol`` and is not of another source file
    than the object (``Objects.defined_apart``); None: no initializer does."""
    surely = [n for n, claim in enumerate(claims) if symbol in claim[1]]
    maybe = [n for n, claim in enumerate(claims) if symbol in claim[0]]
    return next((n for n in (*surely, *maybe)
                 if not objects.defined_apart(symbol, initializers[n])), None)


def _order_risk(reader: AnalysedInitializer, constructor: AnalysedInitializer, symbol: str,
                later: bool, objects: Objects, registers: bool = False,
                assumed: bool = False, via: tuple[str, ...] | None = None,
                zeroes: bool = False) -> Risk:
    """``assumed``: the read is only assumed of code not followed to the end;
    ``zeroes``: the constructor only stores zeros into memory already zero."""
    name = objects.shown(symbol)
    if later and assumed and not registers:
        # Not seen: a warning, which says what to look at, not an error.
        severity, kind = Severity.WARNING, RiskKind.INIT_ORDER
        message = (f"{reader.unit} may read {name} before {constructor.unit} constructs it: "
                   f"it passes {name}'s address to code of this object that was not followed "
                   "to the end, taken to read it (static initialization order fiasco if it "
                   "does); make it constinit/constexpr or a function-local static")
    elif later and registers:
        severity, kind = Severity.ERROR, RiskKind.INIT_ORDER
        if zeroes:
            then = ("only stores zeros, over what was written: harmless only where that "
                    "was zero again, as a lock released is (static initialization order "
                    "fiasco); make it constinit: its constructor stores nothing but zeros")
        else:
            then = ("discards or corrupts what was written (static initialization order "
                    "fiasco); make it a function-local static that registrations reach "
                    "through a function")
        message = (f"{reader.unit} writes into {name} (a registration) before "
                   f"{constructor.unit} constructs it, and the constructor then {then}")
    elif later:
        severity, kind = Severity.ERROR, RiskKind.INIT_ORDER
        message = (f"{reader.unit} reads {name} before {constructor.unit} constructs it "
                   "(static initialization order fiasco); make it constinit/constexpr or a "
                   "function-local static")
    elif registers:
        severity, kind = Severity.WARNING, RiskKind.LINK_ORDER
        message = (f"{reader.unit} writes into {name} (a registration), constructed by "
                   f"{constructor.unit}: correct only because that initializer runs first "
                   "(link order or init_priority)")
    else:
        severity, kind = Severity.WARNING, RiskKind.LINK_ORDER
        reads = "may read" if assumed else "reads"
        message = (f"{reader.unit} {reads} {name}, constructed by {constructor.unit}: correct "
                   "only because that initializer runs first (link order or init_priority)")
    return Risk(severity, kind, reader.label, objects.label(symbol), constructor.label,
                message, reader_part=reader.position, constructed_by_part=constructor.position,
                object_address=objects.address(symbol), reader_address=reader.address,
                constructed_by_address=constructor.address, via=via)


def merged_order(item: AnalysedInitializer) -> str:
    """What decided the order of code of several TUs inlined into one initializer, for
    a sentence: a stripped object's one initializer may be one TU's as well as a
    merge."""
    if item.part is not None or item.entry.symbol:
        return "the order link-time optimisation merged the initializers"
    return "declaration order within one TU, or the order link-time optimisation merged the TUs"


def _inline_risk(item: AnalysedInitializer, symbol: str, objects: Objects) -> Risk:
    """Code of several TUs inlined into one merged initializer reads a global before
    the same function constructs it: the order link-time optimisation chose."""
    return Risk(Severity.ERROR, RiskKind.INIT_ORDER, item.label, objects.label(symbol), item.label,
                f"{item.unit} reads {objects.shown(symbol)} before the code inlined after it "
                "constructs it (static initialization order fiasco, in "
                f"{merged_order(item)}); make it "
                "constinit/constexpr or a function-local static", reader_part=item.position,
                constructed_by_part=item.position, object_address=objects.address(symbol),
                reader_address=item.address, constructed_by_address=item.address)


# -- at exit --------------------------------------------------------------------------
@dataclass(frozen=True)
class Registration:
    """One exit-time registration, in the order they happen."""

    item: AnalysedInitializer
    atexit: AtExit


def registrations(initializers: Sequence[AnalysedInitializer]) -> list[Registration]:
    """The registrations that happen, in run order.

    Only an object of vague linkage (a function-local static, an inline variable,
    a class template's static member) has its construction in more than one TU,
    and each is built under a guard: by the first initializer whose code reaches
    it, which registers its destructor; every later one finds the guard set and
    registers nothing.  Statics nested in one accessor are so registered by that
    first initializer alone, inner first (nvJitLink 12.9: 23 TUs reach the same
    two).  So an object's destructor counts once, where it is first registered.
    """
    found: list[Registration] = []
    made: set[tuple[str, str | None, int | None]] = set()
    for item in initializers:
        for entry in item.effects.atexit:
            if entry.object is not None:
                key = (entry.object, entry.destructor, entry.destructor_address)
                if key in made:
                    continue
                made.add(key)
            found.append(Registration(item, entry))
    return found


def read_at_exit(initializers: Sequence[AnalysedInitializer],
                 exit_code: Mapping[int, Effects], hooks: Iterable[Effects] = ()) -> set[str]:
    """Globals read by code that runs at exit or alongside it: the registered
    destructors and atexit functions (``exit_code``, by address), fork handlers
    and thread bodies (``hooks``)."""
    read: set[str] = set()
    for registration in registrations(initializers):
        code = registration.atexit.destructor_address
        effects = exit_code.get(code) if code is not None else None
        if effects is not None:
            read.update(s for s in effects.reads if s != registration.atexit.object)
    for effects in hooks:
        read.update(effects.reads)
    return read


def destructor_risks(initializers: Sequence[AnalysedInitializer],
                     read: set[str] | None = None, objects: Objects = NAMES) -> list[Risk]:
    """Every exit-time destructor registration (``read``: globals read at exit).  A
    function registered with ``atexit`` is no object's destructor: what it reads at
    exit is checked (``destruction_order_risks``), but never destroying an object is
    no cure for it."""
    risks = []
    for made in registrations(initializers):
        if made.atexit.no_object:
            continue
        item, key = made.item, made.atexit.object
        target = objects.label(key) if key else "an object"
        destructor = _destructor_name(made.atexit)
        risks.append(Risk(
            Severity.WARNING, RiskKind.EXIT_DESTRUCTOR, item.label, target, item.label,
            f"{item.unit} registers {destructor} for {demangle_label(target)} to run at exit; "
            "anything using it after that (other destructors, detached threads) reads a "
            "destroyed object; never destroying it avoids that",
            reader_part=item.position, constructed_by_part=item.position,
            read_at_exit=None if read is None else key in read,
            object_address=objects.address(key) if key else None,
            reader_address=item.address, constructed_by_address=item.address))
    return risks


def _destructor_name(atexit: AtExit) -> str:
    """The function registered: its name, else where its code is (a stripped file)."""
    if atexit.destructor:
        return demangle(atexit.destructor)
    if atexit.destructor_address is not None:
        return f"the function at {atexit.destructor_address:#x}"
    return "a function"


def destruction_order_risks(initializers: Sequence[AnalysedInitializer],
                            exit_code: Mapping[int, Effects],
                            objects: Objects = NAMES, via: Via = no_via,
                            leaves_object: Callable[[int], bool] = lambda code: False,
                            ) -> list[Risk]:
    """Destructors that read a global whose destructor, registered later, ran first.
    ``leaves_object``: whether the function at an address, registered for an object,
    never touches it (a nifty counter's init object: an empty class whose destructor
    only counts down), so that its bytes are as they were once it has run."""
    order = registrations(initializers)
    destroyed_at = {r.atexit.object: k for k, r in enumerate(order) if r.atexit.object}
    risks = []
    for position, registration in enumerate(order):
        code = registration.atexit.destructor_address
        effects = exit_code.get(code) if code is not None else None
        if effects is None:
            continue
        for symbol in effects.reads:
            later = destroyed_at.get(symbol)
            if later is None or later <= position or symbol == registration.atexit.object:
                continue
            code_run = order[later].atexit.destructor_address
            if code_run is not None and leaves_object(code_run):
                continue
            risks.append(_destruction_risk(registration, order[later], symbol, objects,
                                           symbol in effects.assumed, via(code, symbol)))
    return risks


def _destruction_risk(reader: Registration, destroyer: Registration, symbol: str,
                      objects: Objects, assumed: bool = False,
                      via: tuple[str, ...] | None = None) -> Risk:
    """``assumed``: the read is only assumed of code not followed to the end (a warning)."""
    function = _registered(reader.atexit, objects)
    first = _registered(destroyer.atexit, objects)
    reads = _reads(assumed, "code of this object")
    return Risk(_severity(assumed), RiskKind.DESTRUCTION_ORDER,
                _code_label(reader.atexit), objects.label(symbol), destroyer.atexit.destructor,
                f"at exit {function} {reads} {objects.shown(symbol)}, which {first} has already "
                f"destroyed: {destroyer.item.unit} registered that destructor after "
                f"{reader.item.unit} registered this one, and they run in reverse (static "
                "destruction order fiasco); never destroy it (static T& t = *new T)",
                reader_part=reader.item.position, constructed_by_part=destroyer.item.position,
                object_address=objects.address(symbol),
                reader_address=reader.atexit.destructor_address,
                constructed_by_address=destroyer.atexit.destructor_address, via=via)


def _reads(assumed: bool, code: str) -> str:
    """How a risk says its code reads the object: surely, or only assumed of ``code``
    not followed to the end."""
    return (f"may read (passes its address to {code} that was not followed to the end, "
            "taken to read it)") if assumed else "reads"


def _severity(assumed: bool) -> Severity:
    """A read only assumed is a warning: what to look at, not an error."""
    return Severity.WARNING if assumed else Severity.ERROR


def _code_label(atexit: AtExit) -> str:
    if atexit.destructor:
        return atexit.destructor
    if atexit.destructor_address is not None:
        return f"{atexit.destructor_address:#x}"
    return "?"


def _registered(atexit: AtExit, objects: Objects = NAMES) -> str:
    name = _destructor_name(atexit)
    if atexit.object:
        return f"{name} (destroying {objects.shown(atexit.object)})"
    return name


# -- across objects ---------------------------------------------------------------------
@dataclass(frozen=True)
class ObjectInitialisation:
    """One object of a closure: its position in the run order and its analysed initializers."""

    label: str
    position: int
    initializers: tuple[AnalysedInitializer, ...]
    defines: frozenset[str]  # exported (dynamic) definitions
    exit_code: Mapping[int, Effects] | None = None  # its registered destructors' effects


def _run_position(reader: ObjectInitialisation, item: AnalysedInitializer) -> int:
    """Where ``item`` runs among the closure's objects: a program's preinit array
    runs before every library's initializers, the rest at the object's place."""
    return -1 if item.entry.kind == InitializerKind.PREINIT_ARRAY else reader.position


def _constructor(symbol: str, ordered: Sequence[ObjectInitialisation],
                 ) -> tuple[ObjectInitialisation, AnalysedInitializer] | None:
    """The object whose initializer builds ``symbol``, and that initializer.

    The first definer in lookup order is not always it: a program that reads
    a library's global has a copy of it (a copy relocation) that every
    reference binds to, and the library's initializer builds that copy
    through its GOT.  So the first definer that also builds it is taken.
    """
    for definer in ordered:
        if symbol in definer.defines:
            builder = next((c for c in definer.initializers if symbol in constructed_by(c)),
                           None)
            if builder is not None:
                return definer, builder
    return None


def _definer(symbol: str, ordered: Sequence[ObjectInitialisation],
             ) -> ObjectInitialisation | None:
    return next((o for o in ordered if symbol in o.defines), None)


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
            runs_at = _run_position(reader, item)
            for symbol in item.effects.reads:
                found = _constructor(symbol, ordered)
                if found is None or is_lazily_initialised(symbol):
                    continue
                definer, constructor = found
                if definer is reader or definer.position < runs_at:
                    continue
                assumed = symbol in item.effects.assumed
                reads = _reads(assumed, "code")
                risks.setdefault(reader.label, []).append(Risk(
                    _severity(assumed), RiskKind.CROSS_OBJECT,
                    item.label, symbol, constructor.label,
                    f"{reader.label}: {item.unit} {reads} {demangle(symbol)}, which "
                    f"{definer.label} constructs in an initializer that runs later; make it "
                    "constinit/constexpr or reach it through a function-local static",
                    reader_part=item.position, constructed_by_part=constructor.position))
    return risks


def cross_object_destruction_risks(objects: Sequence[ObjectInitialisation],
                                   lookup_order: Sequence[str]) -> dict[str, list[Risk]]:
    """Destructors that read another object's global destroyed before them.

    An object initialized later registers its destructors later, so they run
    earlier: a destructor of an object initialized first (a library) that
    reads a global of one initialized after it (the program) reads it
    destroyed.
    """
    by_label = {o.label: o for o in objects}
    ordered = [by_label[label] for label in lookup_order if label in by_label]
    risks: dict[str, list[Risk]] = {}
    for reader in objects:
        for registration in registrations(reader.initializers):
            code = registration.atexit.destructor_address
            effects = (reader.exit_code or {}).get(code) if code is not None else None
            for symbol in effects.reads if effects is not None else ():
                definer = _definer(symbol, ordered)
                if definer is None or definer is reader or definer.position < reader.position:
                    continue
                destroyer = next((r for r in registrations(definer.initializers)
                                  if r.atexit.object == symbol), None)
                if destroyer is None:
                    continue
                assert effects is not None
                assumed = symbol in effects.assumed
                reads = _reads(assumed, "code")
                risks.setdefault(reader.label, []).append(Risk(
                    _severity(assumed), RiskKind.CROSS_OBJECT_DESTRUCTION,
                    registration.atexit.destructor or "?", symbol, destroyer.atexit.destructor,
                    f"{reader.label}: at exit {_registered(registration.atexit)} {reads} "
                    f"{demangle(symbol)}, which {definer.label} destroys first (its "
                    "initializers run later, so its destructors run earlier); never destroy "
                    "it (static T& t = *new T)",
                    reader_part=registration.item.position,
                    constructed_by_part=destroyer.item.position))
    return risks

"""Registries filled by registrations and read by look-ups with the same key.

Plugin systems, test frameworks and factories keep a registry (a map behind
an accessor's function-local static, often in a library of its own): an
initializer registers an entry under a key, a string literal or a type's
``type_info``, and other code looks the entry up by the same key.  The
registry itself is built on first use, so its construction is never out of
order; the entry is: a look-up that runs before the registration of its key
finds nothing, whatever the registry's own construction.

Roles come from the code of the function called, in the object that
defines it: a *registration* writes into a global outside its first-use
construction (an entry inserted, a count bumped); a *look-up* reads the
same global and writes nothing there.  A registration and a look-up pair up
when they share a key and the global the one writes is one the other reads.

Run order is the loader's: objects in the order their initializers run
(dependencies first, as ``_dl_sort_maps`` sorts them), inside an object its
initializers in order, inside an initializer its calls in program order.
A look-up that runs before every registration of its key is an error.  One
that runs after is fine when the order is certain: the same translation
unit, or the look-up's object depends on the registration's.  Otherwise it
holds only because of the link order (two TUs of one object, or two
objects neither of which needs the other): a warning.

Keys are compared by what they are, not where: a string literal by its
text (each object has its own copy), a ``type_info`` by its symbol.  A
``type_info`` known only by address (a stripped object's own, unexported
type) is no key.

Most registries take their key as a ``std::string`` the caller builds on
its stack, and -O2 inlines the look-up (``std::map::find``) into the
initializer: no call is left to pair.  Inside one object the registry
itself pairs them (``early_lookups``): an initializer that reads a registry
built on first use, after code that is all followed, and writes nothing into
it, runs before or after the initializers of other TUs that register into it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from elfpatch.analysis.effects import Effects, EffectsAnalyzer
from elfpatch.analysis.effects.summary import (
    ADDRESS,
    ANCHOR,
    BARE,
    INSERTIONS,
    MEMBER_REACH,
    PASS,
    POINTEE,
    READ,
    UNKNOWN_PASS,
    WRITE,
    KeyedCall,
    effects_keys,
    object_keys,
    rekeyed,
    with_pointees,
)
from elfpatch.analysis.risks import (
    NAMES,
    AnalysedInitializer,
    Objects,
    Risk,
    RiskKind,
    Severity,
    Via,
    held_by_priority,
    merged_order,
    no_via,
    set_on_first_use,
)
from elfpatch.cxx.demangle import demangle

MARKS = BARE + ANCHOR
# How far a registry function is followed for its role: its insertion or look-up
# and the container code they call (an initializer is followed further).
ROLE_DEPTH = 3
ROLE_FUNCTIONS = 32
# How many functions of one object are read for their role at most (``_likeliest``).
MAX_ROLE_FUNCTIONS = 64
# How many of a function's callees say what it touches (``_touched_here``).
MAX_CALLEES_TOUCHING = 8


@dataclass(frozen=True)
class KeyedUse:
    """One call that passes a key, made by one initializer of one object."""

    object: str  # the calling object's label (its path)
    object_position: int  # where that object's initializers run among the closure's
    initializer_position: int  # where this initializer runs among its object's
    call_position: int  # where the call is among the initializer's keyed calls
    item: AnalysedInitializer
    call: KeyedCall

    @property
    def runs_at(self) -> tuple[int, int, int]:
        return self.object_position, self.initializer_position, self.call_position


@dataclass(frozen=True)
class FunctionRole:
    """What a function called with a key does with the globals of its object."""

    definer: str  # the label of the object whose code it is
    updates: frozenset[str]  # globals it writes outside a first-use construction
    reads: frozenset[str]
    labels: Mapping[str, str]  # how those globals are shown

    @property
    def registers(self) -> bool:
        return bool(self.updates)

    @property
    def looks_up(self) -> bool:
        return bool(self.reads) and not self.updates


def registered_into(effects: Effects, set_later: Collection[str] = ()) -> frozenset[str]:
    """The globals code writes into outside their first-use construction
    (``Effects.updates``), and, when it inserts into a container, those it only
    takes or gives back a lock in (``Effects.locked``); not the pointers it sets
    where it finds them null (``set_later``: ``risks.set_on_first_use``), whose
    setting builds what they point to on first use.

    A registration takes the registry's lock around its insertion, and the sweep
    may lose the insertion itself (the registry's pointer reloaded from a
    spilled slot on the way): its lock and its call to the container's insertion
    still tell.  A look-up takes the lock too, and inserts nothing."""
    found = set(effects.updates)
    if effects.locked and INSERTIONS.intersection(effects.external_calls):
        found.update(effects.locked)
    return frozenset(found.difference(set_later))


def role_of(definer: str, effects: Effects, label: Callable[[str], str],
            set_later: Collection[str] = ()) -> FunctionRole:
    """The role of a function from its effects (``label``: a global's name for people;
    ``set_later``: as ``registered_into`` takes it)."""
    updates, reads = registered_into(effects, set_later), frozenset(effects.reads)
    return FunctionRole(definer, updates, reads,
                        {key: _label(key, label) for key in updates | reads})


def _label(key: str, label: Callable[[str], str]) -> str:
    """A global's label, and that of what a global points to (``*`` and its label)."""
    return POINTEE + label(key[len(POINTEE):]) if key.startswith(POINTEE) else label(key)


def roles_in_object(analyzer: EffectsAnalyzer, definer: str,
                    functions: Mapping[int, Collection[str]]) -> dict[int, FunctionRole]:
    """The roles of some functions of one object (address -> the keys passed to it).

    Only a function whose own code touches a global that another function
    called with one of its keys touches too is followed for its role (a
    registration and a look-up of one registry do; a function that reports
    an error with a message does not), which keeps the cost to the pairs
    that can be.  In a file without symbols the globals are bare addresses,
    placed in objects from what all of them touch (``summary.object_keys``),
    so that a registration's entry and a look-up's read of one registry have
    one key.
    """
    functions = _likeliest(functions)
    touched = {address: _touched_here(analyzer, address) for address in functions}
    callers: dict[str, list[int]] = {}
    for address, keys in functions.items():
        for key in keys:
            callers.setdefault(key, []).append(address)
    kept = [address for address, keys in functions.items()
            if any(_near(touched[address], touched[other])
                   for key in keys for other in callers[key] if other != address)]
    found = {address: analyzer.effects(address, max_depth=ROLE_DEPTH,
                                       max_functions=ROLE_FUNCTIONS) for address in kept}
    every = list(found.values())
    groups = [*(group for effects in every for group in effects.groups),
              *((key,) for effects in every for key in effects_keys(effects))]
    written = {key for effects in every for key in (*effects.writes, *effects.passed)}
    destroyed = {r.object for effects in every for r in effects.atexit if r.object}
    keys = with_pointees(object_keys(groups, written, destroyed),
                         (key for effects in every for key in effects_keys(effects)))
    placed = {address: rekeyed(effects, keys) for address, effects in found.items()}
    set_later = set_on_first_use(placed.values())
    return {address: role_of(definer, effects, analyzer.index.data_label, set_later)
            for address, effects in placed.items()}


def _likeliest(functions: Mapping[int, Collection[str]]) -> Mapping[int, Collection[str]]:
    """At most ``MAX_ROLE_FUNCTIONS`` of them, those whose keys the fewest functions
    share first: a registry's key goes to its registration and its look-up, a
    word of a message to many functions."""
    if len(functions) <= MAX_ROLE_FUNCTIONS:
        return functions
    sharing: dict[str, int] = {}
    for keys in functions.values():
        for key in keys:
            sharing[key] = sharing.get(key, 0) + 1
    ranked = sorted(functions, key=lambda a: (min(sharing[k] for k in functions[a]), a))
    return {address: functions[address] for address in ranked[:MAX_ROLE_FUNCTIONS]}


_TOUCHING = frozenset({READ, WRITE, PASS, UNKNOWN_PASS, ADDRESS})


def _touched_here(analyzer: EffectsAnalyzer, address: int) -> set[int | str]:
    """The globals the function's own code touches, and the code of the functions it
    calls directly (a flag's registering constructor hands the registry's work to
    a function of its own): names, or addresses where the file keys them by
    address (members of one object lie close together)."""
    summary = analyzer.summary(address)
    callees = [key if isinstance(key, int) else key[0] for key in summary.callees]
    found: set[int | str] = set()
    for function in (address, *callees[:MAX_CALLEES_TOUCHING]):
        for kind, subject, _callee, _position in analyzer.summary(function).events:
            if kind in _TOUCHING and type(subject) is str:
                bare = subject.lstrip(MARKS)
                found.add(int(bare, 16) if bare[:2] == "0x" else subject)
    return found


def _near(mine: set[int | str], theirs: set[int | str]) -> bool:
    """Whether two functions touch one global: the same name, or addresses within
    ``MEMBER_REACH`` of each other."""
    if mine & theirs:
        return True
    ours = sorted(a for a in theirs if isinstance(a, int))
    return any(isinstance(a, int) and _within(ours, a) for a in mine)


def _within(addresses: list[int], address: int) -> bool:
    k = bisect_left(addresses, address - MEMBER_REACH + 1)
    return k < len(addresses) and addresses[k] < address + MEMBER_REACH


def keyed_uses(object_label: str, object_position: int,
               initializers: Sequence[AnalysedInitializer]) -> list[KeyedUse]:
    """Every keyed call of an object's initializers, in run order."""
    return [KeyedUse(object_label, object_position, position, number, item, call)
            for position, item in enumerate(initializers)
            for number, call in enumerate(item.effects.keyed_calls)]


def contested(uses: Sequence[KeyedUse]) -> list[KeyedUse]:
    """The uses worth knowing the role of: a key passed to two different functions from
    two different translation units (or objects).  A key only one TU passes (its
    ``__FILE__``, its messages) orders nothing against another TU."""
    by_key: dict[str, list[KeyedUse]] = {}
    for use in uses:
        if could_be_key(use.call.key):
            by_key.setdefault(use.call.key, []).append(use)
    wanted: list[KeyedUse] = []
    for group in by_key.values():
        units: dict[str, set[tuple[str, str, int]]] = {}
        for use in group:
            units.setdefault(use.call.function, set()).add(_unit(use))
        if len(units) < 2:
            continue
        paired = {function for function, mine in units.items()
                  if any(theirs - mine or (len(mine) > 1 and theirs)
                         for other, theirs in units.items() if other != function)}
        wanted += [use for use in group if use.call.function in paired]
    return wanted


def _unit(use: KeyedUse) -> tuple[str, str, int]:
    """The translation unit a use is made from; in code of several TUs inlined into one
    (-flto), each call may be another TU's."""
    return use.object, use.item.unit, use.call_position if use.item.inline else 0


def could_be_key(key: str) -> bool:
    """Whether a constant can name a registry entry: a type, or a string that is not a
    message (it has no white space), punctuation, nor a source file's absolute path
    (``__FILE__``, passed by every check that can fail)."""
    kind, _, text = key.partition(":")
    # split() cuts at exactly the characters isspace() tells: text without any is whole.
    spaced = bool(text) and text.split() != [text]
    return kind != "string" or not (text.startswith("/") or spaced
                                    or not any(c.isalnum() for c in text))


# (calling object, function) -> the function's role, None when its code is not at hand.
Roles = Mapping[tuple[str, str], FunctionRole | None]
# (the object that looks up, the object that registers) -> whether the first needs the
# second (so the loader runs the second's initializers first, whatever the link order).
Depends = Callable[[str, str], bool]


def registration_risks(uses: Sequence[KeyedUse], roles: Roles,
                       depends: Depends) -> dict[str, list[Risk]]:
    """Look-ups against the registrations of their key: object label -> its risks."""
    risks: dict[str, list[Risk]] = {}
    registrations: dict[tuple[str, str], list[tuple[KeyedUse, FunctionRole]]] = {}
    for use in uses:
        role = roles.get((use.object, use.call.function))
        if role is not None and role.registers:
            registrations.setdefault((use.call.key, role.definer), []).append((use, role))
    for use in uses:
        role = roles.get((use.object, use.call.function))
        if role is None or not role.looks_up:
            continue
        matching = [(u, r) for u, r in registrations.get((use.call.key, role.definer), ())
                    if r.updates & role.reads]
        if not matching:
            continue
        risk = _lookup_risk(use, role, matching, depends)
        if risk is not None:
            risks.setdefault(use.object, []).append(risk)
    return risks


def _lookup_risk(use: KeyedUse, role: FunctionRole,
                 matching: list[tuple[KeyedUse, FunctionRole]], depends: Depends,
                 ) -> Risk | None:
    earlier = [(u, r) for u, r in matching if u.runs_at < use.runs_at]
    if not earlier:
        registrar, registry = matching[0]
        return _risk(Severity.ERROR, RiskKind.REGISTRATION_ORDER, use, role, registrar, registry,
                     "runs only after it: the look-up finds nothing (static initialization "
                     "order fiasco); look it up on first use (or in main), not from an "
                     "initializer")
    if any(_certain(use, u, depends) for u, _ in earlier):
        return None
    registrar, registry = earlier[0]
    return _risk(Severity.WARNING, RiskKind.LINK_ORDER, use, role, registrar,
                 registry, "runs first only because of the link order (of the TUs, or of "
                 "DT_NEEDED entries that do not depend on each other): correct by chance")


def _certain(use: KeyedUse, registrar: KeyedUse, depends: Depends) -> bool:
    """Whether the registration runs first whatever the link order."""
    if registrar.object != use.object:
        return depends(use.object, registrar.object)
    return registrar.item.unit == use.item.unit or held_by_priority(registrar.item, use.item)


def _risk(severity: Severity, kind: RiskKind, use: KeyedUse, role: FunctionRole,
          registrar: KeyedUse, registry: FunctionRole, verdict: str) -> Risk:
    shared = sorted(registry.updates & role.reads)
    registry_label = registry.labels.get(shared[0], shared[0])
    where = "" if registrar.object == use.object else f" (in {registrar.object})"
    message = (f"{use.item.unit} looks up {_key(use.call.key)} with {demangle(use.call.function)}"
               f" in {_registry_of(registry_label, role.definer)}, and the "
               f"registration of that key by {registrar.item.unit}{where} through "
               f"{demangle(registrar.call.function)} {verdict}")
    return Risk(severity, kind, use.item.label, registry_label, registrar.item.label, message,
                reader_part=use.item.position, constructed_by_part=registrar.item.position,
                reader_address=use.item.address, constructed_by_address=registrar.item.address,
                key=use.call.key, registered_in=None if registrar.object == use.object
                else registrar.object)


def _key(key: str) -> str:
    kind, _, value = key.partition(":")
    return f'the key "{value}"' if kind == "string" else f"the key {demangle(value)}"


def _registry_of(label: str, definer: str) -> str:
    """The registry ``label`` names, of the object ``definer``, for a sentence."""
    if label.startswith(POINTEE):
        return f"the registry that {_shown(label[len(POINTEE):])} points to, of {definer}"
    return f"the registry {_shown(label)} of {definer}"


def _shown(label: str) -> str:
    return demangle(label) if label.startswith("_Z") else label


# -- look-ups without a key -----------------------------------------------------------
def early_lookups(initializers: Sequence[AnalysedInitializer], objects: Objects = NAMES,
                  via: Via = no_via) -> list[Risk]:
    """Look-ups in a registry built on first use against other TUs' registrations into
    it, one object's initializers in run order, whatever the key.

    A registration writes into the registry outside its construction (an entry
    inserted, a count bumped: ``Effects.updates``).  A look-up reads it outside
    its construction too (``Effects.open_reads``: building the registry, the
    first to ask looks nothing up) and writes nothing there, before any code that
    is not followed runs (``Effects.leading_reads``; all of them in code followed
    to the end): what runs before the look-up is then all seen, and none of it
    registers.  Code not followed after the look-up may register too; it does so
    too late for what the look-up found.  Code that hands the registry
    to code not followed to the end (a registration through ``std::function``,
    say) may register: a look-up before it only may find nothing (a warning).
    A guard byte, set once by whoever builds first, holds no entry.
    Registrations of the look-up's own TU run in the order of its source.
    """
    registrars: dict[str, dict[int, bool]] = {}  # registry -> position -> surely
    written = [registered_into(item.effects, objects.set_later) for item in initializers]
    for position, item in enumerate(initializers):
        for symbol in (*written[position], *item.effects.passed):
            if _registry(symbol, objects):
                registrars.setdefault(symbol, {}).setdefault(
                    position, symbol in written[position])
    starts = _starts(registrars, objects)
    risks = []
    for position, item in enumerate(initializers):
        effects = item.effects
        # What it registers into, and the pointers to what it registers into (reading
        # ``static Dispatcher& s`` to write through it fetches the registry, looks
        # nothing up).
        own = {*written[position], *effects.passed}
        own.update([key[len(POINTEE):] for key in own if key.startswith(POINTEE)])
        looked_up: set[str] = set()  # a registry and its members (a stripped file): once
        for read in effects.open_reads if effects.complete else effects.leading_reads:
            registry = read if read in registrars else _member_of(read, starts, objects)
            if registry is None or registry in own or registry in looked_up or read in own \
                    or (registry != read and registry not in effects.lazy) \
                    or objects.is_guard(read):  # testing whether a static is built
                continue
            others = {p: surely for p, surely in registrars[registry].items()
                      if initializers[p].unit != item.unit}
            if others:
                earlier = [(initializers[p], s) for p, s in others.items() if p < position]
                later = [(initializers[p], s) for p, s in others.items() if p > position]
                if not later and all(held_by_priority(r, item) for r, _ in earlier):
                    continue  # no link order can reverse them
                looked_up.add(registry)
                risks.append(_early_lookup(item, registry, earlier, later, objects,
                                           via(item.address, read)))
    return risks


def inlined_early_lookups(initializers: Sequence[AnalysedInitializer], objects: Objects = NAMES,
                          via: Via = no_via) -> list[Risk]:
    """Code of several TUs inlined into one initializer (gcc -flto's merge) that looks
    into a registry it fetched from its accessor, then fetches it anew and registers
    into it (``Effects.looked_up_first``): the look-up ran before that registration,
    in the order the TUs were merged, and finds none of its entries.  Each TU's part
    fetches the registry for itself; one registration that checks its key is free
    before inserting does both after a single fetch."""
    risks = []
    for item in initializers:
        if not item.inline:
            continue
        for read in item.effects.looked_up_first:
            name = objects.shown(read)
            risks.append(Risk(
                Severity.ERROR, RiskKind.REGISTRATION_ORDER, item.label, objects.label(read),
                item.label, f"{item.unit} looks up {name} before the code inlined after it "
                "registers into it: it finds none of those entries (static initialization "
                f"order fiasco, in {merged_order(item)}); look it up on first use (or in "
                "main), not from an initializer", reader_part=item.position,
                constructed_by_part=item.position, object_address=objects.address(read),
                reader_address=item.address, constructed_by_address=item.address,
                via=via(item.address, read), unkeyed=True))
    return risks


def _registry(key: str, objects: Objects) -> bool:
    """Whether ``key`` may be a registry built on first use: a function-local static, or
    what one points to (``static Registry* r = new Registry``) or what a pointer
    set on first use points to (``Objects.set_later``), never a guard nor a flag
    (``Objects.flags``)."""
    if key in objects.flags:
        return False
    if key[:1] == POINTEE:
        key = key[1:]
        if key in objects.set_later:
            return True
    if objects.address(key) is not None:  # known by address: by what the code shows
        return key in objects.lazy and key not in objects.guards
    return objects.is_lazy(key) and not objects.is_guard(key)


def registry_members(registries: Iterable[str], keys: Iterable[str],
                     objects: Objects) -> set[str]:
    """Those of ``keys`` that may be members of one of ``registries`` (``_member_of``)."""
    starts = _starts(registries, objects)
    if not starts:
        return set()
    return {key for key in keys if _member_of(key, starts, objects) is not None}


def _starts(registries: Iterable[str], objects: Objects) -> list[tuple[int, str]]:
    return sorted((address, key) for key in registries
                  if (address := objects.address(key)) is not None)


def _member_of(key: str, starts: list[tuple[int, str]], objects: Objects) -> str | None:
    """The registry ``key`` may be a member of, in a file without symbols: one starting
    at most ``MEMBER_REACH`` below it.

    A member the code hands to a function (``std::map::find`` on the registry's
    map, not inlined) is taken there for an object of its own.  A read of it is
    a read of the registry only when the reading code builds that registry on
    first use itself (through its accessor): then it is that registry's member,
    not another static's lying next to it (``early_lookups`` checks).
    """
    address = objects.address(key)
    if address is None:
        return None
    k = bisect_left(starts, (address, "")) - 1
    if k < 0 or address - starts[k][0] >= MEMBER_REACH:
        return None
    return starts[k][1]


# Initializers that register into a registry, each with whether its code surely does
# (it writes there) or only may (it hands the registry to code not followed).
Registrars = list[tuple[AnalysedInitializer, bool]]


def _early_lookup(item: AnalysedInitializer, symbol: str, earlier: Registrars,
                  later: Registrars, objects: Objects, via: tuple[str, ...] | None) -> Risk:
    """The risk of one look-up (``earlier``, ``later``: the TUs registering before and
    after it, at least one of them)."""
    name = objects.shown(symbol)
    surely_later = [entry for entry in later if entry[1]]
    if not earlier and surely_later:
        severity, kind = Severity.ERROR, RiskKind.REGISTRATION_ORDER
        registrar = surely_later[0][0]
        message = (f"{item.unit} looks up {name} (a registry built on first use) before "
                   f"{_register(later)} into it: it finds none of their entries "
                   "(static initialization order fiasco); look it up on first use (or in "
                   "main), not from an initializer")
    elif not earlier:
        severity, kind, registrar = Severity.WARNING, RiskKind.REGISTRATION_ORDER, later[0][0]
        message = (f"{item.unit} looks up {name} (a registry built on first use) before "
                   f"{_register(later)} into it: it may find none of their entries (static "
                   "initialization order fiasco); look it up on first use (or in main), "
                   "not from an initializer")
    elif later:
        severity, kind, registrar = Severity.WARNING, RiskKind.LINK_ORDER, later[0][0]
        message = (f"{item.unit} looks up {name} (a registry built on first use) after "
                   f"{_register(earlier)} into it but before {_register(later)}: what it "
                   "finds depends on the link order")
    else:
        severity, kind, registrar = Severity.WARNING, RiskKind.LINK_ORDER, earlier[-1][0]
        message = (f"{item.unit} looks up {name} (a registry built on first use) after "
                   f"{_register(earlier)} into it: correct only because the registrations "
                   "run first (link order)")
    return Risk(severity, kind, item.label, objects.label(symbol), registrar.label, message,
                reader_part=item.position, constructed_by_part=registrar.position,
                object_address=objects.address(symbol), reader_address=item.address,
                constructed_by_address=registrar.address, via=via, unkeyed=True)


def with_keyed(risks: Sequence[Risk], keyed: Sequence[Risk]) -> tuple[Risk, ...]:
    """An object's risks and its look-ups paired by key; a look-up the registry alone
    paired as well (the same initializer, the same registry) is said once, with its
    key and the functions it calls."""
    paired = {(risk.reader, risk.object) for risk in keyed}
    return (*(risk for risk in risks if not (risk.unkeyed and (risk.reader, risk.object)
                                             in paired)), *keyed)


def _register(registrars: Registrars) -> str:
    """Who registers, for a sentence: the first TU, and how many more; "may" where no
    code seen surely does."""
    units = list(dict.fromkeys(item.unit for item, _surely in registrars))
    surely = any(surely for _item, surely in registrars)
    if len(units) == 1:
        return f"{units[0]} {'registers' if surely else 'may register'}"
    others = len(units) - 1
    return (f"{units[0]} and {others} other TU{'s' if others > 1 else ''} "
            f"{'register' if surely else 'may register'}")

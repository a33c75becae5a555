"""What glibc's ``dlopen`` and ``dlclose`` do with one library in one host process.

A host process (the Python interpreter, a plain C program, a C++ program,
or a program named by path) has loaded its program's closure at start.
``dlopen(root, RTLD_LAZY | RTLD_LOCAL)`` then

* maps the root's closure objects that are not loaded yet (breadth first,
  ``loader.closure``), and relocates them dependencies first;
* looks every symbol a relocation needs up in the global scope (the
  program's closure), then in the root's local scope (the root's closure,
  breadth first): the first definition that is exported (GLOBAL, WEAK or
  UNIQUE, DEFAULT or PROTECTED) and of the version asked for wins.  With
  RTLD_LAZY, function slots (JUMP_SLOT) are bound only when called, unless
  the object asks for BIND_NOW;
* keeps one table of UNIQUE names per namespace (glibc ``do_lookup_unique``):
  a name is entered when it is first looked up, with the definition the
  lookup found, and that object is marked NODELETE when dlopen loaded it.
  Later lookups of the name bind to the entered definition, whoever defines
  it too; a UNIQUE name nobody looks up pins nothing;
* fails when a DT_NEEDED is not found, a required symbol version is not
  defined by the object that should provide it, a symbol a load-time
  relocation needs is defined nowhere, the object is a PIE program, or it
  needs more initial-exec TLS than glibc keeps for dlopen (512 bytes).

``dlclose`` unloads every object of the dlopen that nothing keeps: an
object marked NODELETE (a first UNIQUE definition, ``DF_1_NODELETE``)
stays, and keeps the objects it needs and every object it bound a symbol
to (glibc ``add_dependency``: a NODELETE object's definer becomes NODELETE
too, otherwise it joins ``l_reldeps``).  Objects the host loaded at start
never unload.  An object registering ``thread_local`` destructors
(``__cxa_thread_atexit_impl``) stays while a thread that built one lives:
a condition, unless the caller's ``registers_at_load`` (the machine-code
analysis, a layer above) finds its initializers registering one while it
loads, which pins it like NODELETE.  musl's ``dlclose`` unloads nothing.

Not modelled: ``dlsym`` and lazy bindings made by calls (during the
initializers too; both can only add pins), IFUNC resolvers, copy
relocations, static TLS already used by the host.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress
from pathlib import Path
from typing import TypeAlias, cast

from elfpatch.base.text_enum import TextEnum
from elfpatch.elf import constants as C
from elfpatch.elf.columns import byte_mask
from elfpatch.elf.file import ElfFile
from elfpatch.elf.relocations import dynamic_relocation_tables
from elfpatch.elf.symbols import SymbolTable, read_dynsym
from elfpatch.elf.versions import VERSYM_HIDDEN, VERSYM_INDEX, SymbolVersions, read_versions
from elfpatch.errors import UsageError
from elfpatch.loader.cache import read_ld_cache
from elfpatch.loader.closure import (
    DF_1_PIE,
    Closure,
    LoaderProfile,
    dependency_closure,
    loader_profile,
)
from elfpatch.loader.host import HostProfile


class HostKind(TextEnum):
    """The hosts known by name (``--host``); any other host is named by its program's path."""

    PYTHON = "python"
    C = "c"
    CXX = "c++"


class DlopenMode(TextEnum):
    """How the host's dlopen binds function slots; the value is the JSON's ``mode``."""

    LAZY = "RTLD_LAZY"  # at each slot's first call
    NOW = "RTLD_NOW"  # all at load (Python's import: sys.getdlopenflags())


# What a plain C program and a C++ program have loaded at start, besides themselves.
_C_RUNTIME = ("libc.so.6",)
_CXX_RUNTIME = ("libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libc.so.6")

class BlockerKind(TextEnum):
    """Why dlclose leaves an object mapped; the value is the JSON's ``kind``."""

    FIRST_UNIQUE = "first_unique_provider"
    NODELETE_FLAG = "nodelete_flag"
    BOUND_BY_PINNED = "bound_by_pinned"
    NEEDED_BY_PINNED = "needed_by_pinned"
    LOADED_BY_HOST = "loaded_by_host"
    MUSL = "musl"
    TLS_DESTRUCTORS = "thread_local_destructors"


CURES = {
    BlockerKind.FIRST_UNIQUE:
        "elfpatch fix (UNIQUE to LOCAL or GLOBAL), or build with -fno-gnu-unique",
    BlockerKind.NODELETE_FLAG: "relink without -z nodelete (DF_1_NODELETE)",
    BlockerKind.BOUND_BY_PINNED:
        "stop exporting the symbols the pinned object binds to (elfpatch fix --hide, "
        "-fvisibility=hidden, a version script), or load that object before this one",
    BlockerKind.NEEDED_BY_PINNED: "drop the DT_NEEDED of the pinned object on this library",
    BlockerKind.LOADED_BY_HOST:
        "nothing: the host loaded it at start, and such objects never unload",
    BlockerKind.MUSL: "nothing: musl's dlclose never unloads",
    BlockerKind.TLS_DESTRUCTORS:
        "end the threads that used its thread_local objects before dlclose, "
        "or give those objects trivial destructors",
}

EVIDENCE = 5  # symbols kept as evidence for one blocker

_DF_BIND_NOW = 0x8
_DF_STATIC_TLS = 0x10
_PT_TLS = 7
# glibc.rtld.optional_static_tls: the static TLS left for objects dlopen'ed
# with initial-exec TLS (DF_STATIC_TLS); one that needs more fails to load.
OPTIONAL_STATIC_TLS = 512
_DF_1_NOW = 0x1
_DT_BIND_NOW = 24
_ALLOWED_TYPES = frozenset({C.STT_NOTYPE, C.STT_OBJECT, C.STT_FUNC, C.STT_COMMON, C.STT_TLS,
                            C.STT_GNU_IFUNC})
_ALLOWED_TYPE_MASK = byte_mask(_ALLOWED_TYPES)
_JUMP_SLOTS = {C.EM_X86_64: 7, C.EM_386: 7, C.EM_AARCH64: 1026, C.EM_ARM: 22,
               C.EM_PPC64: 21, C.EM_S390: 11, C.EM_RISCV: 5}
_TLS_ATEXIT = (b"__cxa_thread_atexit_impl", b"__cxa_thread_atexit")


# -- the host ----------------------------------------------------------------------------

@dataclass(frozen=True)
class LoadHost:
    """The process that calls dlopen: its program and what it loaded at start.

    ``program`` None stands for a program that exports nothing and needs
    ``runtime`` (SONAMEs found the way ld.so finds them); a program given
    by path brings its own closure.  ``musl`` hosts never unload.  The
    default mode is RTLD_LAZY | RTLD_LOCAL; ``bind_now`` is RTLD_NOW.
    """

    name: str
    program: Path | None = None
    runtime: tuple[str, ...] = ()
    musl: bool = False
    # dlopen(RTLD_NOW): function slots bound at load too (Python's import does this,
    # sys.getdlopenflags()), which can only add bindings, hence pins
    bind_now: bool = False

    @classmethod
    def python(cls, executable: str | os.PathLike[str] | None = None) -> LoadHost:
        """The Python interpreter (by default the one running): how a wheel's members load."""
        path = Path(os.path.realpath(executable or sys.executable))
        return cls(HostKind.PYTHON, path)

    @classmethod
    def c_program(cls) -> LoadHost:
        """A plain C program: how a loose library loads by default."""
        return cls(HostKind.C, None, _C_RUNTIME)

    @classmethod
    def cxx_program(cls) -> LoadHost:
        """A C++ program: libstdc++ loaded from the start (a typical plugin host)."""
        return cls(HostKind.CXX, None, _CXX_RUNTIME)

    @classmethod
    def named(cls, text: str) -> LoadHost:
        """``--host`` as typed: python, c, c++, or the path of a program."""
        if text == HostKind.PYTHON:
            return cls.python()
        if text == HostKind.C:
            return cls.c_program()
        if text in (HostKind.CXX, "cxx"):
            return cls.cxx_program()
        path = Path(text)
        if not path.is_file():
            raise UsageError(text, "no such host program",
                             hint="give python, c, c++ or the path of a program")
        return cls(str(path), path)


# -- results -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Blocker:
    """One reason dlclose leaves the library mapped, with its evidence and cure.

    ``via`` is the other object involved (the pinned object that binds into
    the library or needs it); ``symbols`` a few names (mangled) that show it.
    ``certain`` False: it pins only under a condition (TLS destructors).
    """

    kind: BlockerKind
    detail: str
    symbols: tuple[str, ...] = ()
    count: int = 0  # how many symbols in all
    via: str | None = None
    cure: str = ""
    certain: bool = True


@dataclass(frozen=True)
class LoadVerdict:
    """Whether ``path`` loads in ``host`` and whether dlclose then unloads it.

    ``unloads`` is None when it cannot load (``load_errors`` says why).
    ``added`` are the objects the dlopen maps (the root first); ``kept`` those
    of them that dlclose leaves mapped; ``unique_providers`` those marked
    NODELETE for entering a UNIQUE name first (LD_DEBUG=bindings: "marking
    ... as NODELETE due to unique symbol").
    """

    path: str
    host: str
    loads: bool
    unloads: bool | None
    blockers: tuple[Blocker, ...] = ()
    load_errors: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    unique_providers: tuple[str, ...] = ()
    mode: DlopenMode = DlopenMode.LAZY

    @property
    def certain_blockers(self) -> tuple[Blocker, ...]:
        return tuple(b for b in self.blockers if b.certain)


# -- one object's symbols as the loader sees them -----------------------------------------

@dataclass(eq=False)
class _Image:
    """One mapped object: its exports by name, and the symbols its relocations look up."""

    path: str
    soname: str | None
    needed: tuple[str, ...]
    new: bool  # mapped by this dlopen (else loaded by the host at start)
    flags_1: int = 0
    bind_now: bool = False
    exports: dict[bytes, int] = field(default_factory=dict)  # name -> default definition
    versioned: dict[tuple[bytes, str], int] = field(default_factory=dict)
    unique: frozenset[int] = frozenset()  # export indices bound UNIQUE
    versions: SymbolVersions | None = None
    references: list[tuple[bytes, str | None, bool]] = field(default_factory=list)
    lazy: dict[bytes, int] = field(default_factory=dict)  # lazy function slots: name -> index
    registers_tls_destructors: bool = False
    static_tls: int = 0  # PT_TLS size of an object built for initial-exec TLS
    deps: list[_Image] = field(default_factory=list)

    def definition(self, name: bytes, version: str | None) -> int | None:
        """The index a lookup of ``name`` (at ``version``) takes here, or None."""
        index = self.exports.get(name)
        if version is None or self.versions is None or not self.versions.has_definitions:
            return index
        if index is not None:
            found, _hidden = self.versions.version_of(index)
            if found is None or found == version:
                return index
        return self.versioned.get((name, version))


# Each object dlclose leaves mapped: why, and the pinned object that holds it, if any.
_Pins: TypeAlias = "dict[_Image, tuple[BlockerKind, _Image | None]]"


def _read_image(path: str, new: bool, now: bool = False) -> _Image:
    with ElfFile.open(path) as elf:
        return _image_of(elf, path, new, now)


def _image_of(elf: ElfFile, path: str, new: bool, now: bool) -> _Image:
    dynamic = bool(elf.dynamic)
    flags = (elf.dynamic_value(C.DT_FLAGS) or 0) if dynamic else 0
    flags_1 = (elf.dynamic_value(C.DT_FLAGS_1) or 0) if dynamic else 0
    bind_now = bool(now or flags & _DF_BIND_NOW or flags_1 & _DF_1_NOW
                    or (dynamic and elf.dynamic_value(_DT_BIND_NOW) is not None))
    image = _Image(path, elf.soname if dynamic else None,
                   tuple(elf.needed) if dynamic else (), new, flags_1, bind_now)
    if flags & _DF_STATIC_TLS:
        image.static_tls = sum(s.memsz for s in elf.segments if s.type == _PT_TLS)
    table = read_dynsym(elf) if dynamic else None
    if table is None:
        return image
    image.versions = read_versions(elf, table.count)
    names = _Names(table)
    _read_exports(image, table, names)
    _read_references(image, elf, table, names)
    return image


class _Names:
    """Symbol names of one table as bytes, split out of the string table at once."""

    def __init__(self, table: SymbolTable) -> None:
        self.offsets = table.name_offsets
        self.raw = table.elf.view[table.strtab_offset:
                                  table.strtab_offset + table.strtab_size].tobytes()
        parts = self.raw.split(b"\0")
        self.starts = dict(zip(accumulate((len(p) + 1 for p in parts), initial=0), parts,
                               strict=False))

    def of(self, indices: Sequence[int]) -> list[bytes]:
        """The names of ``indices``, in their order."""
        names = list(map(self.starts.get, map(self.offsets.__getitem__, indices)))
        if None in names:  # a name that is the suffix of a longer string
            for k, name in enumerate(names):
                if name is None:
                    offset = self.offsets[indices[k]]
                    end = self.raw.find(b"\0", offset)
                    names[k] = self.raw[offset:end if end >= 0 else len(self.raw)]
        return cast(list[bytes], names)


def _read_exports(image: _Image, table: SymbolTable, names: _Names) -> None:
    """Every definition a lookup can take, by name; one loop in C per column."""
    indices = table.exported_indices()
    kinds = table.symbol_types
    indices = list(compress(indices, bytes(map(kinds.__getitem__, indices)).translate(
        _ALLOWED_TYPE_MASK)))
    # glibc's do_lookup_x skips a definition of value 0 unless it is TLS.
    values = table.values
    indices = [i for i in indices if values[i] or kinds[i] == C.STT_TLS]
    exported = names.of(indices)
    bindings = table.bindings
    image.unique = frozenset(i for i in indices if bindings[i] == C.STB_GNU_UNIQUE)
    versions = image.versions
    if versions is None or not versions.has_definitions or not versions.versym:
        image.exports = dict(zip(reversed(exported), reversed(indices), strict=True))
        return
    raw = list(map(versions.versym.__getitem__, indices))
    defaults = [k for k, entry in enumerate(raw) if not entry & VERSYM_HIDDEN]
    image.exports = {exported[k]: indices[k] for k in reversed(defaults)}
    version_names = [versions.names.get(entry & VERSYM_INDEX)
                     if entry & VERSYM_INDEX not in versions.base else None for entry in raw]
    image.versioned = {(name, version): index for name, version, index
                       in zip(reversed(exported), reversed(version_names), reversed(indices),
                              strict=True) if version is not None}


def _read_references(image: _Image, elf: ElfFile, table: SymbolTable, names: _Names) -> None:
    """The symbols the relocations applied at dlopen look up (lazy function slots aside)."""
    now, lazy = _relocated_symbols(elf, image.bind_now)
    if max(now | lazy, default=0) >= table.count:
        raise elf.corrupt(f"a relocation names a symbol past .dynsym's {table.count} entries")
    bindings, visibilities, shndxs = table.bindings, table.visibilities, table.shndxs
    looked_up = sorted(i for i in now if bindings[i] != C.STB_LOCAL
                       and visibilities[i] not in (C.STV_HIDDEN, C.STV_INTERNAL))
    versions = image.versions
    version_names: list[str | None] = [None] * len(looked_up)
    if versions is not None and versions.versym:
        version_names = [versions.version_of(i)[0] for i in looked_up]
    weak = [bindings[i] == C.STB_WEAK and shndxs[i] == C.SHN_UNDEF for i in looked_up]
    image.references = list(zip(names.of(looked_up), version_names, weak, strict=True))
    lazy_only = sorted(i for i in lazy - now if bindings[i] != C.STB_LOCAL
                       and visibilities[i] not in (C.STV_HIDDEN, C.STV_INTERNAL))
    image.lazy = dict(zip(names.of(lazy_only), lazy_only, strict=True))
    undefined = [i for i in now | lazy if shndxs[i] == C.SHN_UNDEF]
    image.registers_tls_destructors = any(n in _TLS_ATEXIT for n in names.of(undefined))


def _relocated_symbols(elf: ElfFile, bind_now: bool) -> tuple[set[int], set[int]]:
    """The symbol indices of the relocations applied at load, and of lazy function slots."""
    jump_slot = _JUMP_SLOTS.get(elf.header.machine)
    now: set[int] = set()
    lazy: set[int] = set()
    for relocations in dynamic_relocation_tables(elf):
        types, symbols = relocations.types, relocations.symbol_indices
        if jump_slot is None or jump_slot not in types or bind_now:
            now.update(symbols)
        elif types.count(jump_slot) == len(types):
            lazy.update(symbols)
        else:
            for kind, symbol in zip(types, symbols, strict=True):
                (lazy if kind == jump_slot else now).add(symbol)
    now.discard(0)
    lazy.discard(0)
    return now, lazy


# -- the model ----------------------------------------------------------------------------

# The calls by which an object's initializers register a thread_local destructor
# while it loads (initializer first), or None: the machine-code analysis, which
# lives above this layer, passed in by the caller.
ThreadDestructorsAtLoad = Callable[[str], "tuple[str, ...] | None"]
# The names an object's code calls through its PLT or GOT from the given entries (its
# exported functions' names, "" for its initializers) and those asked before: the
# machine-code walk (``analysis.calls_at_load``), passed in by the caller too.
CallsAtLoad = Callable[[str, "tuple[str, ...]"], "tuple[str, ...]"]
INITIALIZERS = ""


def dlopen_verdict(root: str | os.PathLike[str], host: LoadHost | None = None, *,
                   profile: HostProfile | None = None,
                   registers_at_load: ThreadDestructorsAtLoad | None = None,
                   calls_at_load: CallsAtLoad | None = None) -> LoadVerdict:
    """Whether ``root`` loads in ``host`` (default: a plain C program), and whether
    ``dlclose`` unloads it again, with every blocker and its cure.

    ``registers_at_load`` answers, for an object that registers thread_local
    destructors, whether its initializers do so while it loads; without it
    that stays a condition (``Blocker.certain`` False).  ``calls_at_load``
    tells which functions the initializers call, so that the lazy slots they
    bind are bound in the model too; without it lazy slots stay unbound.
    """
    host = host or LoadHost.c_program()
    profile = profile or HostProfile.of_this_host()
    path = os.fspath(root)
    closure = dependency_closure(path, host=profile)
    started = _host_images(host, closure, path, profile)
    return _Dlopen(path, host, closure, started, registers_at_load,
                   calls_at_load).verdict()


def _host_images(host: LoadHost, closure: Closure, root: str,
                 profile: HostProfile) -> list[_Image]:
    """The host's global scope: its program, then what the program loaded, in load order."""
    if host.program is not None:
        program = dependency_closure(host.program, host=profile)
        paths = [str(o.path) for o in program.load_order]
    else:
        paths = ["", *_runtime_paths(host.runtime, closure, root, profile)]
    images = []
    seen: set[str] = set()
    for path in paths:
        if path in seen:
            continue
        seen.add(path)
        images.append(_Image("", None, (), False) if path == "" else _read_image(path, False))
    return images


def _runtime_paths(sonames: tuple[str, ...], closure: Closure, root: str,
                   profile: HostProfile) -> Iterator[str]:
    """The files a program needing ``sonames`` loads: each one's closure, breadth first."""
    for soname in sonames:
        found = _find_library(soname, closure, root, profile)
        if found is not None:
            for loaded in dependency_closure(found, host=profile).load_order:
                yield str(loaded.path)


def find_system_library(soname: str, profile: HostProfile | None = None) -> str | None:
    """Where a program on ``profile`` (None: this machine) finds ``soname`` of its own
    kind (x86-64 here): the ld.so.cache, then the system directories."""
    profile = profile or HostProfile.of_this_host()
    with ElfFile.open(sys.executable) as elf:  # this interpreter: the machine's own kind
        loader = loader_profile(elf.header, None, profile)
    return _in_system(soname, loader, profile)


def _find_library(soname: str, closure: Closure, root: str,
                  profile: HostProfile) -> str | None:
    for loaded in closure.load_order:
        if loaded.soname == soname or loaded.path.name == soname:
            return str(loaded.path)
    with ElfFile.open(root) as elf:
        loader = loader_profile(elf.header, None, profile)
    return _in_system(soname, loader, profile)


def _in_system(soname: str, loader: LoaderProfile, profile: HostProfile) -> str | None:
    """``soname`` as the loader finds it without a search path: ld.so.cache, then the
    system directories."""
    cache = read_ld_cache(profile.cache_path) if profile.cache_path else None
    if cache is not None:
        cached = cache.lookup(soname, loader.cache_flags, loader.cache_hwcaps,
                              legacy_entries=profile.takes_legacy_cache_entries)
        if cached is not None:
            return cached
    return next((d + soname for d in loader.system_dirs if Path(d + soname).is_file()), None)


class _Dlopen:
    """One dlopen of ``root`` in a host, then its dlclose."""

    def __init__(self, root: str, host: LoadHost, closure: Closure, started: list[_Image],
                 registers_at_load: ThreadDestructorsAtLoad | None = None,
                 calls_at_load: CallsAtLoad | None = None) -> None:
        self.root_path = root
        self.host = host
        self.closure = closure
        self.global_scope = started
        self.read: dict[str, _Image] = {}
        # A path is matched to a loaded object by its file, a DT_NEEDED name also
        # by the SONAMEs of the objects loaded (glibc's _dl_map_object).
        self.local_scope = [self._image_for(str(o.path), None if k == 0 else o.soname, started)
                            for k, o in enumerate(closure.load_order)]
        self.root = self.local_scope[0]
        by_path = {str(o.path): image for o, image in zip(closure.load_order,
                                                          self.local_scope, strict=True)}
        for loaded in closure.load_order:
            image = by_path[str(loaded.path)]
            if image.new:
                image.deps = [d for name in image.needed
                              if (d := self._provider_of(name)) is not None]
        order = [by_path[str(o.path)] for o in closure.objects if str(o.path) in by_path]
        self.relocation_order = [image for image in order if image.new]
        self.unique_entered: dict[bytes, _Image] = {}
        self.first_unique: dict[_Image, list[bytes]] = {}
        self.bindings: dict[_Image, dict[_Image, list[bytes]]] = {}
        self.errors: list[str] = []
        self.registers_at_load = registers_at_load
        self.calls_at_load = calls_at_load
        self.scope: list[_Image] = []
        self.merged: dict[bytes, _Image] = {}
        self.thread_destructors: dict[_Image, tuple[str, ...]] = {}

    def _image_for(self, path: str, soname: str | None, started: list[_Image]) -> _Image:
        identity = _identity(path)
        for image in started:
            if image.path and ((soname is not None and image.soname == soname)
                               or _identity(image.path) == identity):
                return image
        if path not in self.read:
            self.read[path] = _read_image(path, True, self.host.bind_now)
        return self.read[path]

    def _provider_of(self, needed: str) -> _Image | None:
        for image in self.local_scope:
            if image.soname == needed or Path(image.path).name == needed:
                return image
        return None

    # -- dlopen -------------------------------------------------------------------------
    def verdict(self) -> LoadVerdict:
        return dataclasses.replace(self._verdict(),
                                   mode=DlopenMode.NOW if self.host.bind_now else DlopenMode.LAZY)

    def _verdict(self) -> LoadVerdict:
        added = tuple(i.path for i in self.local_scope if i.new)
        self._check_dependencies()
        self._check_loadable()
        self._check_versions()
        self._enter_host_unique_names()
        self._relocate()
        if self.errors:
            return LoadVerdict(self.root_path, self.host.name, False, None,
                               load_errors=tuple(self.errors), added=added)
        if not self.root.new:
            blocker = _blocker(BlockerKind.LOADED_BY_HOST,
                               f"{self.host.name} loaded it at start")
            return LoadVerdict(self.root_path, self.host.name, True, False, (blocker,),
                               added=added)
        pinned = self._pinned()
        if self.root not in pinned and self.registers_at_load is not None:
            pinned = self._pinned_by_thread_destructors(pinned)
        if self.root not in pinned and self.calls_at_load is not None \
                and self._lazy_slots_could_pin(pinned):
            self._bind_calls_at_load()
            pinned = self._pinned()
        blockers = self._blockers(pinned)
        kept = tuple(i.path for i in self.local_scope if i.new and i in pinned)
        unloads = not (self.host.musl or self.root in pinned)
        providers = tuple(i.path for i in self.relocation_order if i in self.first_unique)
        return LoadVerdict(self.root_path, self.host.name, True, unloads, tuple(blockers),
                           added=added, kept=kept, unique_providers=providers)

    def _check_loadable(self) -> None:
        """What dlopen refuses before relocating anything."""
        for image in self.relocation_order:
            if image.flags_1 & DF_1_PIE:
                self.errors.append(f"{image.path}: cannot dynamically load "
                                   "position-independent executable")
            if image.static_tls > OPTIONAL_STATIC_TLS:
                self.errors.append(f"{image.path}: cannot allocate memory in static TLS "
                                   f"block (needs {image.static_tls} bytes of initial-exec "
                                   f"TLS, dlopen has {OPTIONAL_STATIC_TLS})")

    def _check_dependencies(self) -> None:
        for missing in self.closure.missing:
            self.errors.append(f"{missing.name}: {missing.reason} "
                               f"(needed by {missing.requested_by})")

    def _check_versions(self) -> None:
        for image in self.relocation_order:
            for need in image.versions.needs if image.versions else ():
                provider = self._provider_of(need.file)
                if need.weak or provider is None or provider.versions is None:
                    continue
                if provider.versions.has_definitions \
                        and need.name not in provider.versions.defined:
                    self.errors.append(f"version `{need.name}' not found in {provider.path} "
                                       f"(required by {image.path})")

    def _enter_host_unique_names(self) -> None:
        """The UNIQUE names the host's own relocations entered at start."""
        merged = _merged_scope(self.global_scope)
        for image in self.global_scope:
            for name, version, _weak in image.references:
                definer = self._lookup(merged, self.global_scope, name, version)
                if definer is not None:
                    index = definer.definition(name, version)
                    if index in definer.unique:
                        self.unique_entered.setdefault(name, definer)

    def _relocate(self) -> None:
        scope = self.scope = self.global_scope + self.local_scope
        merged = self.merged = _merged_scope(scope)
        for image in self.relocation_order:
            edges = self.bindings.setdefault(image, {})
            for name, version, weak in image.references:
                definer = self._lookup(merged, scope, name, version)
                if definer is None:
                    if not weak:
                        self.errors.append(f"undefined symbol: {_text(name)}"
                                           f"{'@' + version if version else ''} "
                                           f"(in {image.path})")
                    continue
                if definer.definition(name, version) in definer.unique:
                    definer = self._enter_unique(name, definer)
                if definer is not image and definer.new:
                    edges.setdefault(definer, []).append(name)

    def _enter_unique(self, name: bytes, definer: _Image) -> _Image:
        entered = self.unique_entered.get(name)
        if entered is not None:
            return entered
        self.unique_entered[name] = definer
        if definer.new:
            self.first_unique.setdefault(definer, []).append(name)
        return definer

    @staticmethod
    def _lookup(merged: dict[bytes, _Image], scope: list[_Image], name: bytes,
                version: str | None) -> _Image | None:
        definer = merged.get(name)
        if definer is None and version is None:
            return None
        if definer is not None and (version is None or
                                    definer.definition(name, version) is not None):
            return definer
        # A versioned reference the first default definition does not satisfy.
        return next((image for image in scope if image.definition(name, version) is not None),
                    None)

    # -- initializers --------------------------------------------------------------------
    def _lazy_slots_could_pin(self, pinned: _Pins) -> bool:
        """Whether a pinned object has a lazy slot that a call would bind to a new object
        not pinned yet: only then can the calls the initializers make change anything."""
        merged = self.merged
        for image in pinned:
            for name in image.lazy:
                definer = merged.get(name)
                if definer is not None and definer.new and definer not in pinned:
                    return True
        return False

    def _bind_calls_at_load(self) -> None:
        """The lazy slots bound by the calls the new objects' initializers make, and by
        the calls those functions make in turn, across objects (glibc's ``_dl_fixup``
        looks them up in the same scope as the relocations did)."""
        assert self.calls_at_load is not None
        entries = {image: {INITIALIZERS} for image in self.relocation_order}
        handled: dict[_Image, set[bytes]] = {image: set() for image in self.relocation_order}
        queue = deque(self.relocation_order)
        while queue:
            image = queue.popleft()
            called = self.calls_at_load(image.path, tuple(sorted(entries[image])))
            for text in called:
                name = text.encode("utf-8", "surrogateescape")
                if name in handled[image]:
                    continue
                handled[image].add(name)
                definer = self._bind_call(image, name)
                if definer is not None and definer.new and text not in entries[definer]:
                    entries[definer].add(text)
                    queue.append(definer)

    def _bind_call(self, image: _Image, name: bytes) -> _Image | None:
        """The object a call of ``name`` from ``image`` reaches; a lazy slot's binding is
        recorded like a relocation's."""
        index = image.lazy.get(name)
        version = None
        if index is not None and image.versions is not None and image.versions.versym:
            version = image.versions.version_of(index)[0]
        definer = self._lookup(self.merged, self.scope, name, version)
        if index is not None and definer is not None and definer is not image and definer.new:
            self.bindings.setdefault(image, {}).setdefault(definer, []).append(name)
        return definer

    # -- dlclose ------------------------------------------------------------------------
    def _pinned_by_thread_destructors(self, pinned: _Pins) -> _Pins:
        """``pinned`` with the objects whose initializers register a thread_local destructor
        while they load (asked only of those that register any, until the root is held)."""
        assert self.registers_at_load is not None
        for image in self.relocation_order:
            if image.registers_tls_destructors and image not in pinned:
                chain = self.registers_at_load(image.path)
                if chain:
                    self.thread_destructors[image] = chain
                    pinned = self._pinned()
                    if self.root in pinned:
                        break
        return pinned

    def _pinned(self) -> _Pins:
        """Every object of the dlopen that dlclose leaves mapped, and why."""
        pinned: _Pins = {}
        queue: list[_Image] = []
        for image in self.relocation_order:
            reason = (BlockerKind.NODELETE_FLAG if image.flags_1 & C.DF_1_NODELETE
                      else BlockerKind.FIRST_UNIQUE if image in self.first_unique
                      else BlockerKind.TLS_DESTRUCTORS if image in self.thread_destructors
                      else None)
            if reason is not None:
                pinned[image] = (reason, None)
                queue.append(image)
        while queue:
            holder = queue.pop(0)
            held = [(d, BlockerKind.NEEDED_BY_PINNED) for d in holder.deps]
            held += [(d, BlockerKind.BOUND_BY_PINNED) for d in self.bindings.get(holder, {})]
            for image, reason in held:
                if image.new and image not in pinned:
                    pinned[image] = (reason, holder)
                    queue.append(image)
        return pinned

    def _blockers(self, pinned: _Pins) -> list[Blocker]:
        root = self.root
        blockers = []
        if self.host.musl:
            blockers.append(_blocker(BlockerKind.MUSL, "musl's dlclose never unloads"))
        if root.flags_1 & C.DF_1_NODELETE:
            blockers.append(_blocker(BlockerKind.NODELETE_FLAG,
                                     "DF_1_NODELETE is set (-z nodelete)"))
        first = self.first_unique.get(root, [])
        if first:
            blockers.append(_blocker(
                BlockerKind.FIRST_UNIQUE,
                f"first to provide {len(first)} UNIQUE name(s) looked up",
                _evidence(first), len(first)))
        blockers.extend(self._held_by_others(pinned))
        chain = self.thread_destructors.get(root)
        if chain:
            blockers.append(_blocker(
                BlockerKind.TLS_DESTRUCTORS, "an initializer registers a thread_local "
                f"destructor while it loads ({_chain_text(chain)}): it stays while the "
                "loading thread lives", chain[-EVIDENCE:], len(chain)))
        elif root.registers_tls_destructors:
            blockers.append(_blocker(
                BlockerKind.TLS_DESTRUCTORS, "registers thread_local destructors: stays mapped "
                "while a thread that built one lives", certain=False))
        return blockers

    def _held_by_others(self, pinned: _Pins) -> list[Blocker]:
        """The pinned objects that bind into the root or need it."""
        root = self.root
        found = []
        for holder in pinned:
            if holder is root:
                continue
            names = self.bindings.get(holder, {}).get(root)
            why = _pin_reason(holder, pinned)
            if names:
                found.append(_blocker(
                    BlockerKind.BOUND_BY_PINNED,
                    f"{Path(holder.path).name} stays loaded ({why}) and binds "
                    f"{len(names)} symbol(s) to this library",
                    _evidence(names), len(names), holder.path))
            elif root in holder.deps:
                found.append(_blocker(
                    BlockerKind.NEEDED_BY_PINNED,
                    f"{Path(holder.path).name} stays loaded ({why}) and needs this library",
                    via=holder.path))
        return found


def _blocker(kind: BlockerKind, detail: str, symbols: tuple[str, ...] = (), count: int = 0,
             via: str | None = None, certain: bool = True) -> Blocker:
    """A blocker with its kind's cure."""
    return Blocker(kind, detail, symbols, count, via, CURES[kind], certain)


def _pin_reason(image: _Image, pinned: _Pins) -> str:
    reason, holder = pinned[image]
    if reason == BlockerKind.FIRST_UNIQUE:
        return "first provider of UNIQUE symbols"
    if reason == BlockerKind.NODELETE_FLAG:
        return "DF_1_NODELETE"
    if reason == BlockerKind.TLS_DESTRUCTORS:
        return "its initializers register a thread_local destructor"
    assert holder is not None
    verb = "bound to by" if reason == BlockerKind.BOUND_BY_PINNED else "needed by"
    return f"{verb} {Path(holder.path).name}"


def _chain_text(chain: tuple[str, ...]) -> str:
    """The initializer, then the last two calls to the registration (all, when short)."""
    shown = chain if len(chain) <= 3 else (chain[0], "...", *chain[-2:])
    return " -> ".join(shown)


def _merged_scope(scope: list[_Image]) -> dict[bytes, _Image]:
    """Each exported name to the first object of ``scope`` defining it (its default version)."""
    merged: dict[bytes, _Image] = {}
    for image in reversed(scope):
        merged.update(dict.fromkeys(image.exports, image))
    return merged


def _identity(path: str) -> tuple[int, int] | None:
    try:
        stat = Path(path).stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _text(name: bytes) -> str:
    return name.decode("utf-8", "surrogateescape")


def _evidence(names: Iterable[bytes]) -> tuple[str, ...]:
    shown: list[str] = []
    for name in names:
        if len(shown) == EVIDENCE:
            break
        shown.append(_text(name))
    return tuple(shown)


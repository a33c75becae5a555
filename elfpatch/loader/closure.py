"""The objects ld.so loads for a program or library, in the order their initializers run.

``dependency_closure`` follows glibc's loader step by step, as glibc 2.35
to 2.42 behave (older versions are refused; see ``loader.host``).  What
the loader takes from the machine comes from one ``HostProfile``: the
glibc version, the machine and CPU ($PLATFORM, hwcap names, the x86-64
ISA level), LD_LIBRARY_PATH, the ld.so.cache file and the system
directories.  ``HostProfile.of_this_host()`` reads this machine; a caller
analysing files built for another target passes that target's profile,
and nothing of this machine is read.

* ``_dl_map_object``: a needed name is first matched against the objects
  already loaded (the names they were requested by, their path, their
  DT_SONAME); a name with a slash is a path; otherwise the search goes
  DT_RPATH of the requesting object and of the objects that loaded it
  (only when the requester has no DT_RUNPATH; an object's DT_RPATH is
  ignored when it also has DT_RUNPATH), LD_LIBRARY_PATH, DT_RUNPATH of the
  requester alone, /etc/ld.so.cache, the default directories.  Under each
  directory the glibc-hwcaps subdirectories come first; before glibc 2.37
  the legacy hwcaps subdirectories follow them (the power set of the
  hwcap names, $PLATFORM and ``tls``), 2.37 removed those.
  ``$ORIGIN``, ``$LIB`` and ``$PLATFORM`` are expanded; a file of another
  ELF class or machine is skipped, and a found file that is the same file
  (device and inode) as one already loaded is that object.
* ``_dl_map_object_deps``: the breadth-first list of the root and every
  object it needs, each object's direct dependencies in DT_NEEDED order.
* ``_dl_sort_maps``: the DFS sort (``glibc.rtld.dynamic_sort=2``, the
  default since 2.35) or the original one (``=1``), with their handling of
  cycles, and the root forced back to the end of the run order.
* ``_dl_init``: a DF_1_INITFIRST object first, then the sorted list from
  the last entry to the first.

Not modelled: secure-execution (setuid) programs, which ignore
LD_LIBRARY_PATH; ld.so's memory of search directories found missing
(which only saves system calls, except before glibc 2.38 for a search
path naming ``/`` and before 2.39 for a relative element naming a file);
cache entries that need a legacy hwcap bit other than ``tls``, which
ldconfig stopped writing in 2.37.

The root is treated as the main program when it is an executable
(ET_EXEC, or DF_1_PIE, or a PT_INTERP without a DT_SONAME): the DFS sort
never enters it through a dependency, and ``$ORIGIN`` is its real
directory.  Any other root is treated as a library dlopen'ed by a program
that has nothing loaded but ld.so, and without DT_RPATH of its own.

Libraries that cannot be found are reported in ``Closure.missing``
instead of stopping the walk, where ld.so would stop the program.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISDIR, S_ISREG

from elfpatch.base.regular_file import NOT_REGULAR
from elfpatch.elf import constants as C
from elfpatch.elf.constants import (
    EM_386,
    EM_AARCH64,
    EM_ARM,
    EM_LOONGARCH,
    EM_PPC,
    EM_PPC64,
    EM_RISCV,
    EM_S390,
    EM_SPARCV9,
    EM_X86_64,
)
from elfpatch.elf.file import ElfFile, ElfHeader
from elfpatch.errors import ElfpatchError
from elfpatch.loader.cache import LdCache, accepted_cache_flags, read_ld_cache
from elfpatch.loader.host import HostProfile

DF_1_INITFIRST = 0x20
DF_1_NODEFLIB = 0x800
DF_1_PIE = 0x08000000
LIBC_SONAME = "libc.so.6"  # when it is the root, glibc lets it take part in the sort

_EF_ARM_ABI_FLOAT_HARD = 0x400


# -- results -------------------------------------------------------------------------

@dataclass(frozen=True)
class LoadedObject:
    """One object of the closure; ``path`` is the name ld.so gives it (LD_DEBUG prints it)."""

    path: Path
    soname: str | None
    needed: tuple[str, ...]  # DT_NEEDED as written in the file
    requested_by: Path | None  # the object whose DT_NEEDED brought it in first; None: root


@dataclass(frozen=True)
class MissingLibrary:
    """A DT_NEEDED entry no file was found for (ld.so would refuse to start)."""

    name: str
    requested_by: Path
    reason: str = "not found"


@dataclass(frozen=True)
class Closure:
    """The root and everything it loads.

    ``objects`` is the order initializers run in (dependencies first, the
    root last); ``load_order`` the breadth-first order ld.so loads them in,
    which is also the order symbols are looked up in.
    """

    objects: tuple[LoadedObject, ...]
    missing: tuple[MissingLibrary, ...]
    load_order: tuple[LoadedObject, ...] = ()
    sort_algorithm: int = 2

    @property
    def root(self) -> LoadedObject:
        return self.load_order[0] if self.load_order else self.objects[-1]


# -- what the loader that would run the root substitutes and searches -------------------

@dataclass(frozen=True)
class LoaderProfile:
    """The values ld.so for objects like one ELF header takes from the host it runs on.

    ``subdirectories`` are tried under every search directory, best first;
    the last is ``""``, the directory itself.
    """

    machine: int
    elf_class: int
    little_endian: bool
    interpreter: str | None
    platform: str | None  # $PLATFORM; None: paths using it are dropped
    lib: str  # $LIB
    system_dirs: tuple[str, ...]
    subdirectories: tuple[str, ...]
    cache_flags: frozenset[int]
    cache_hwcaps: tuple[str, ...]  # glibc-hwcaps names, best first
    host: HostProfile


_TRIPLETS = {
    (EM_X86_64, 64): "x86_64-linux-gnu",
    (EM_X86_64, 32): "x86_64-linux-gnux32",
    (EM_386, 32): "i386-linux-gnu",
    (EM_AARCH64, 64): "aarch64-linux-gnu",
    (EM_PPC64, 64): "powerpc64le-linux-gnu",
    (EM_PPC, 32): "powerpc-linux-gnu",
    (EM_S390, 64): "s390x-linux-gnu",
    (EM_RISCV, 64): "riscv64-linux-gnu",
    (EM_LOONGARCH, 64): "loongarch64-linux-gnu",
    (EM_SPARCV9, 64): "sparc64-linux-gnu",
}

_INTERPRETERS = {
    (EM_X86_64, 64): "/lib64/ld-linux-x86-64.so.2",
    (EM_X86_64, 32): "/libx32/ld-linux-x32.so.2",
    (EM_386, 32): "/lib/ld-linux.so.2",
    (EM_AARCH64, 64): "/lib/ld-linux-aarch64.so.1",
    (EM_PPC64, 64): "/lib64/ld64.so.2",
    (EM_PPC, 32): "/lib/ld.so.1",
    (EM_S390, 64): "/lib/ld64.so.1",
    (EM_RISCV, 64): "/lib/ld-linux-riscv64-lp64d.so.1",
    (EM_LOONGARCH, 64): "/lib64/ld-linux-loongarch-lp64d.so.1",
}


def loader_profile(header: ElfHeader, interpreter: str | None = None,
                   host: HostProfile | None = None) -> LoaderProfile:
    """What ld.so for objects like ``header`` uses on ``host`` (None: this machine, read now)."""
    host = host or HostProfile.of_this_host()
    system_dirs, lib = _system_layout(header, host)
    capabilities = host.capabilities(header.machine)
    legacy: tuple[str, ...] = ("",)
    if host.searches_legacy_hwcaps:
        platform = [capabilities.platform] if capabilities.platform else []
        legacy = _legacy_subdirectories([*capabilities.hwcap_names, *platform, "tls"])
    hwcaps = capabilities.glibc_hwcaps
    return LoaderProfile(
        header.machine, header.elf_class, header.little_endian,
        interpreter or _INTERPRETERS.get((header.machine, header.elf_class)),
        capabilities.platform, lib, system_dirs,
        tuple(f"glibc-hwcaps/{name}/" for name in hwcaps) + legacy,
        accepted_cache_flags(header.machine, header.elf_class, header.flags), hwcaps, host)


def _system_layout(header: ElfHeader, host: HostProfile) -> tuple[tuple[str, ...], str]:
    """ld.so's trusted system directories and $LIB for this ABI on ``host``."""
    triplet = _TRIPLETS.get((header.machine, header.elf_class))
    if header.machine == EM_ARM:
        hard = header.flags & _EF_ARM_ABI_FLOAT_HARD
        triplet = "arm-linux-gnueabihf" if hard else "arm-linux-gnueabi"
    if (header.machine, header.elf_class) == (EM_PPC64, 64) and not header.little_endian:
        triplet = "powerpc64-linux-gnu"
    if triplet and host.multiarch:
        system_dirs: tuple[str, ...] = (f"/lib/{triplet}/", f"/usr/lib/{triplet}/", "/lib/",
                                        "/usr/lib/")
        lib = f"lib/{triplet}"
    elif header.elf_class == 64:
        system_dirs, lib = ("/lib64/", "/usr/lib64/"), "lib64"
    else:
        system_dirs, lib = ("/lib/", "/usr/lib/"), "lib"
    if host.system_dirs is not None:
        system_dirs = tuple(d if d.endswith("/") else d + "/" for d in host.system_dirs)
    return system_dirs, lib


def _legacy_subdirectories(parts: list[str]) -> tuple[str, ...]:
    """ld.so's power set of hwcap names, platform and "tls", most specific first (glibc < 2.37)."""
    subdirectories = []
    for mask in range((1 << len(parts)) - 1, -1, -1):
        chosen = [parts[i] for i in reversed(range(len(parts))) if mask >> i & 1]
        subdirectories.append("".join(f"{part}/" for part in chosen))
    return tuple(subdirectories)


# -- the walk --------------------------------------------------------------------------

@dataclass(eq=False)
class _Object:
    """One link map as the walk builds it."""

    name: str  # l_name: the path as ld.so formed it
    soname: str | None
    needed: tuple[str, ...]
    names: set[str]  # every name it was requested by, and its path
    identity: tuple[int, int] | None  # (st_dev, st_ino); None: ld.so cannot tell (main, ld.so)
    origin: str | None
    rpath: str | None  # None when absent or overridden by DT_RUNPATH
    runpath: str | None
    flags_1: int
    loader: _Object | None = None
    is_main: bool = False
    requested_by: _Object | None = None
    deps: list[_Object] | None = None  # direct dependencies; None for the root
    result: LoadedObject | None = None

    def matches(self, name: str) -> bool:
        return name in self.names or name == self.soname

    def loaded_object(self) -> LoadedObject:
        if self.result is None:
            requester = self.requested_by.name if self.requested_by else None
            self.result = LoadedObject(Path(self.name), self.soname, self.needed,
                                       Path(requester) if requester is not None else None)
        return self.result


class _Unusable(Exception):
    """A file ld.so would refuse with an error rather than skip."""


_OTHER = "other"  # a file of another class or machine: ld.so skips it


def dependency_closure(root: Path | str, *, ld_library_path: str | None = None,
                       sort_algorithm: int = 2, cache: LdCache | None = None,
                       profile: LoaderProfile | None = None,
                       host: HostProfile | None = None) -> Closure:
    """Every object ld.so loads for ``root``, in the order their initializers run.

    ``host`` is the machine the program runs on; None takes ``profile``'s
    host, else reads this machine (``HostProfile.of_this_host()``).
    ``ld_library_path`` None takes the host's; pass "" for none.
    ``sort_algorithm`` is ``glibc.rtld.dynamic_sort``: 2 (DFS, the default
    since glibc 2.35) or 1 (the original algorithm).  ``cache`` defaults to
    the host's ld.so.cache file, ``profile`` to the host's loader for ``root``.
    """
    if sort_algorithm not in (1, 2):
        raise ValueError(f"sort_algorithm must be 1 or 2, not {sort_algorithm!r}")
    if host is not None and profile is not None and profile.host != host:
        raise ValueError("profile was built for another host than the one given")
    host = host or (profile.host if profile is not None else HostProfile.of_this_host())
    if ld_library_path is None:
        ld_library_path = host.ld_library_path
    walk = _Walk(Path(root), ld_library_path, cache, profile, host)
    walk.load_dependencies()
    initfini = walk.sorted_maps(sort_algorithm)
    run_order = walk.run_order(initfini)
    return Closure(tuple(o.loaded_object() for o in run_order), tuple(walk.missing),
                   tuple(o.loaded_object() for o in walk.search_list), sort_algorithm)


class _Walk:
    """ld.so's state while it maps one root and its dependencies."""

    def __init__(self, root: Path, ld_library_path: str, cache: LdCache | None,
                 profile: LoaderProfile | None, host: HostProfile) -> None:
        with ElfFile.open(root) as elf:
            self.header = elf.header
            self.profile = profile or loader_profile(elf.header, _interpreter(elf), host)
            self.root = self._root_object(root, elf)
        self.cache = cache
        self.chain: list[_Object] = [self.root]  # the namespace's list, in load order
        self.interpreter = self._preloaded_interpreter()
        self.search_list: list[_Object] = [self.root]
        self.missing: list[MissingLibrary] = []
        self.env_dirs = self._directories(ld_library_path, ":;", self.root)

    # -- the objects present before the walk ------------------------------------------
    def _root_object(self, root: Path, elf: ElfFile) -> _Object:
        dynamic = _dynamic_fields(elf)
        if _is_program(elf):
            # The kernel mapped it; ld.so knows it by no name and $ORIGIN is
            # the directory of /proc/self/exe.
            origin = _directory_of(os.path.realpath(root))
            return _Object(str(root), dynamic[0], dynamic[1], {""}, None, origin, *dynamic[2:],
                           is_main=True)
        name = str(root)
        stat = Path(root).stat()
        return _Object(name, dynamic[0], dynamic[1], {name}, (stat.st_dev, stat.st_ino),
                       _origin_of(name), *dynamic[2:])

    def _preloaded_interpreter(self) -> _Object | None:
        path = self.profile.interpreter
        if path is None:
            return None
        try:
            with ElfFile.open(path) as elf:
                dynamic = _dynamic_fields(elf)
        except ElfpatchError:
            return None
        interpreter = _Object(path, dynamic[0], dynamic[1], {path}, None, _origin_of(path),
                              *dynamic[2:])
        self.chain.append(interpreter)
        return interpreter

    # -- breadth-first loading (_dl_map_object_deps) ------------------------------------
    def load_dependencies(self) -> None:
        position = 0
        while position < len(self.search_list):
            current = self.search_list[position]
            position += 1
            deps = [dep for name in current.needed
                    if (dep := self._load_needed(name, current)) is not None]
            if current is not self.root:
                current.deps = deps

    def _load_needed(self, needed: str, requester: _Object) -> _Object | None:
        name = self._expand(needed, requester)
        if not name:
            self._report(needed, requester, "a dynamic string token cannot be expanded")
            return None
        try:
            found = self._map_object(name, requester)
        except _Unusable as error:
            self._report(name, requester, str(error))
            return None
        if found is None:
            self._report(name, requester, "not found")
            return None
        if found not in self.search_list:
            self.search_list.append(found)
            if found.requested_by is None and found is not self.root:
                found.requested_by = requester
        return found

    def _report(self, name: str, requester: _Object, reason: str) -> None:
        entry = MissingLibrary(name, Path(requester.name), reason)
        if entry not in self.missing:
            self.missing.append(entry)

    # -- one name (_dl_map_object) --------------------------------------------------------
    def _map_object(self, name: str, requester: _Object) -> _Object | None:
        for candidate in self.chain:
            if candidate.matches(name):
                candidate.names.add(name)
                return candidate
        if "/" in name:
            verdict = _verify(name, self.header)
            return None if verdict is None else self._object_for(name, name, verdict, requester)
        for path in self._candidates(name, requester):
            verdict = _verify(path, self.header)
            if verdict is not None:
                return self._object_for(path, name, verdict, requester)
        return None

    def _object_for(self, path: str, name: str, identity: tuple[int, int],
                    requester: _Object) -> _Object:
        for candidate in self.chain:
            if candidate.identity == identity:
                candidate.names.add(name)
                return candidate
        try:
            with ElfFile.open(path) as elf:
                dynamic = _dynamic_fields(elf)
        except ElfpatchError as error:
            raise _Unusable(f"{path}: {error.reason}") from None
        loaded = _Object(path, dynamic[0], dynamic[1], {path, name}, identity,
                         _origin_of(path), *dynamic[2:], loader=requester)
        self.chain.append(loaded)
        return loaded

    def _candidates(self, name: str, requester: _Object) -> Iterator[str]:
        """Every path ld.so tries for ``name``, in order."""
        if requester.runpath is None:
            for loader in _loader_chain(requester):
                if loader.rpath is not None:
                    yield from self._in_directories(
                        name, self._directories(loader.rpath, ":", loader))
        yield from self._in_directories(name, self.env_dirs)
        if requester.runpath is not None:
            yield from self._in_directories(
                name, self._directories(requester.runpath, ":", requester))
        nodeflib = bool(requester.flags_1 & DF_1_NODEFLIB)
        cached = self._cached(name)
        if cached is not None and not (nodeflib and cached.startswith(self.profile.system_dirs)):
            yield cached
        if not nodeflib:
            yield from self._in_directories(name, list(self.profile.system_dirs))

    def _in_directories(self, name: str, directories: list[str]) -> Iterator[str]:
        for directory in directories:
            for subdirectory in self.profile.subdirectories:
                yield f"{directory}{subdirectory}{name}"

    def _cached(self, name: str) -> str | None:
        host = self.profile.host
        if self.cache is None:
            self.cache = read_ld_cache(host.cache_path) if host.cache_path else LdCache()
        return self.cache.lookup(name, self.profile.cache_flags, self.profile.cache_hwcaps,
                                 legacy_entries=host.takes_legacy_cache_entries)

    # -- search paths and dynamic string tokens ------------------------------------------
    def _directories(self, paths: str, separators: str, owner: _Object) -> list[str]:
        """A DT_RPATH, DT_RUNPATH or LD_LIBRARY_PATH as ld.so splits it (fillin_rpath)."""
        directories: list[str] = []
        for element in _split(paths, separators) if paths else []:
            directory = ""  # an empty element is the current directory
            if element:
                expanded = self._expand(element, owner)
                if not expanded:
                    continue
                directory = expanded.rstrip("/") + "/" if expanded != "/" else "/"
            if directory not in directories:
                directories.append(directory)
        return directories

    def _expand(self, text: str, owner: _Object) -> str:
        """``text`` with $ORIGIN, $LIB, $PLATFORM replaced; "" when one has no value."""
        values = {"ORIGIN": owner.origin, "LIB": self.profile.lib,
                  "PLATFORM": self.profile.platform}
        result: list[str] = []
        i = 0
        while i < len(text):
            if text[i] != "$":
                result.append(text[i])
                i += 1
                continue
            token, length = _token_at(text, i + 1)
            if token is None:
                result.append("$")
                i += 1
                continue
            value = values[token]
            if value is None:
                return ""
            result.append(value)
            i += 1 + length
        return "".join(result)

    # -- sorting (_dl_sort_maps) and running (_dl_init) ---------------------------------
    def sorted_maps(self, algorithm: int) -> list[_Object]:
        """The root's l_initfini: initializers run from its last entry to its first."""
        maps = list(self.search_list)
        force_first = self.root.soname != LIBC_SONAME
        if algorithm == 1:
            return _sort_original(maps, force_first)
        return _sort_dfs(maps, force_first)

    def run_order(self, initfini: list[_Object]) -> list[_Object]:
        order = list(reversed(initfini))
        first = [o for o in self.chain if o in order and o is not self.interpreter
                 and not o.is_main and o.flags_1 & DF_1_INITFIRST]
        if first:  # the last one loaded with DF_1_INITFIRST runs before everything
            order.remove(first[-1])
            order.insert(0, first[-1])
        return order


def _sort_dfs(maps: list[_Object], force_first: bool) -> list[_Object]:
    """glibc's DFS sort: post-order over l_initfini, maps visited from the last."""
    first_map = maps[0]
    visited: set[int] = set()
    finished: list[_Object] = []
    for start in reversed(maps):
        _depth_first(start, visited, finished)
    result = list(reversed(finished))
    if force_first and result[0] is not first_map:
        result.remove(first_map)
        result.insert(0, first_map)
    return result


def _depth_first(start: _Object, visited: set[int], finished: list[_Object]) -> None:
    """Post-order from ``start``, never entering the main program through a dependency."""
    if id(start) in visited:
        return
    visited.add(id(start))
    stack: list[tuple[_Object, Iterator[_Object]]] = [(start, iter(start.deps or ()))]
    while stack:
        current, pending = stack[-1]
        for dep in pending:
            if id(dep) not in visited and not dep.is_main:
                visited.add(id(dep))
                stack.append((dep, iter(dep.deps or ())))
                break
        else:
            stack.pop()
            finished.append(current)


def _sort_original(maps: list[_Object], force_first: bool) -> list[_Object]:
    """glibc's original sort: move each object behind the last one that needs it.

    A cycle would make that loop forever; an object seen more often than the
    objects left behind it is left where it is, as glibc does.
    """
    head, rest = maps[: int(force_first)], maps[int(force_first):]
    count = len(rest)
    if count <= 1:
        return maps
    seen = [0] * count
    i = 0
    while True:
        seen[i] += 1
        current = rest[i]
        k = _last_needing(rest, i, current)
        if k is None:
            i += 1
            if i == count:
                break
            seen[i:] = [0] * (count - i)
            continue
        del rest[i]
        rest.insert(k, current)
        if seen[i + 1] > count - i:
            i += 1
            seen[i:] = [0] * (count - i)
        else:
            seen.insert(k, seen.pop(i))
    return head + rest


def _last_needing(maps: list[_Object], i: int, target: _Object) -> int | None:
    """The last position after ``i`` whose object lists ``target`` in its l_initfini."""
    for k in range(len(maps) - 1, i, -1):
        if any(dep is target for dep in maps[k].deps or ()):
            return k
    return None


# -- reading objects -------------------------------------------------------------------

_DynamicFields = tuple[str | None, tuple[str, ...], str | None, str | None, int]


def _dynamic_fields(elf: ElfFile) -> _DynamicFields:
    """(soname, needed, effective rpath, runpath, DT_FLAGS_1) of a dynamic object."""
    if not elf.dynamic:
        return None, (), None, None, 0
    runpath = elf.runpath
    rpath = None if runpath is not None else elf.rpath  # DT_RUNPATH hides DT_RPATH
    return (elf.soname, tuple(elf.needed), rpath, runpath,
            elf.dynamic_value(C.DT_FLAGS_1) or 0)


def _interpreter(elf: ElfFile) -> str | None:
    for segment in elf.segments:
        if segment.type == C.PT_INTERP:
            raw = bytes(elf.bytes_at(segment.offset, segment.filesz, "PT_INTERP"))
            return raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape") or None
    return None


def _is_program(elf: ElfFile) -> bool:
    if elf.header.type == C.ET_EXEC:
        return True
    flags_1 = elf.dynamic_value(C.DT_FLAGS_1) if elf.dynamic else None
    if flags_1 is not None and flags_1 & DF_1_PIE:
        return True
    return _interpreter(elf) is not None and (not elf.dynamic or elf.soname is None)


_EHDR_SIZE = {32: 52, 64: 64}
_PHENTSIZE = {32: 32, 64: 56}
_ELFOSABI_SYSV, _ELFOSABI_GNU = 0, 3
_LIBC_ABI_MAX = 4  # glibc 2.36 on x86: DEFAULT, UNIQUE, IFUNC, ABSOLUTE


def _verify(path: str, root: ElfHeader) -> tuple[int, int] | None:
    """ld.so's open_verify: the file's (dev, inode), None to go on searching.

    Raises ``_Unusable`` where ld.so stops with an error (not ELF, wrong
    byte order, a directory ...); a file of another class or machine is
    skipped, as ld.so skips it.
    """
    try:
        # O_NONBLOCK: a FIFO on the search path must not hang the analysis.
        descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        stat = os.fstat(descriptor)
        if not (S_ISREG(stat.st_mode) or S_ISDIR(stat.st_mode)):
            # ld.so itself would wait on a FIFO here; we report it instead.
            raise _Unusable(f"{path}: {NOT_REGULAR}")
        try:
            head = os.read(descriptor, 64)
        except OSError as error:
            raise _Unusable(f"{path}: cannot read file data: {error.strerror}") from None
    finally:
        os.close(descriptor)
    if _check_header(path, head, root) == _OTHER:
        return None
    return stat.st_dev, stat.st_ino


def _check_header(path: str, head: bytes, root: ElfHeader) -> str | None:
    if len(head) < _EHDR_SIZE[root.elf_class]:
        raise _Unusable(f"{path}: file too short")
    if head[:4] != C.ELF_MAGIC:
        raise _Unusable(f"{path}: invalid ELF header")
    if head[4] != (C.ELFCLASS64 if root.elf_class == 64 else C.ELFCLASS32):
        return _OTHER
    order = "<" if root.little_endian else ">"
    if head[5] != (C.ELFDATA2LSB if root.little_endian else C.ELFDATA2MSB):
        raise _Unusable(f"{path}: ELF file data encoding differs from the program's")
    osabi, abiversion = head[7], head[8]
    if head[6] != 1 or osabi not in (_ELFOSABI_SYSV, _ELFOSABI_GNU) or any(head[9:16]):
        raise _Unusable(f"{path}: ELF identification (version, OS ABI, padding) invalid")
    if abiversion != 0 and not (osabi == _ELFOSABI_GNU and abiversion < _LIBC_ABI_MAX):
        raise _Unusable(f"{path}: ELF file ABI version invalid")
    e_type, machine, version = struct.unpack_from(order + "HHI", head, 16)
    if version != 1:
        raise _Unusable(f"{path}: ELF file version does not match current one")
    if machine != root.machine:
        return _OTHER
    if e_type not in (C.ET_DYN, C.ET_EXEC):
        raise _Unusable(f"{path}: only ET_DYN and ET_EXEC can be loaded")
    phentsize_offset = 42 if root.elf_class == 32 else 54
    if struct.unpack_from(order + "H", head, phentsize_offset)[0] != _PHENTSIZE[root.elf_class]:
        raise _Unusable(f"{path}: ELF file's phentsize not the expected size")
    return None


# -- small helpers -----------------------------------------------------------------------

def _loader_chain(start: _Object) -> Iterator[_Object]:
    current: _Object | None = start
    while current is not None:
        yield current
        current = current.loader


def _split(paths: str, separators: str) -> list[str]:
    for separator in separators[1:]:
        paths = paths.replace(separator, separators[0])
    return paths.split(separators[0])


def _token_at(text: str, start: int) -> tuple[str | None, int]:
    """The DST at ``text[start:]`` (after a "$") and its length, or (None, 0)."""
    for token in ("ORIGIN", "PLATFORM", "LIB"):
        if text.startswith("{" + token + "}", start):
            return token, len(token) + 2
        end = start + len(token)
        if text.startswith(token, start) and not (end < len(text) and _identifier(text[end])):
            return token, len(token)
    return None, 0


def _identifier(char: str) -> bool:
    return char.isascii() and (char.isalnum() or char == "_")


def _origin_of(name: str) -> str:
    """$ORIGIN of an object ld.so knows as ``name``: its directory, made absolute."""
    absolute = name if name.startswith("/") else f"{Path.cwd()}/{name}"
    return _directory_of(absolute)


def _directory_of(path: str) -> str:
    directory = path.rsplit("/", 1)[0]
    return directory or "/"


"""Itanium C++ ABI demangling through the C++ runtime's own ``__cxa_demangle``.

The runtime's demangler is the reference implementation (it is what
``c++filt`` and gdb agree with), it is already on every machine that runs
C++ code, and it costs no dependency.  When it is missing or a name does not
demangle, the mangled name is returned unchanged: demangling never fails.

Loading a library runs its constructors, so *which* runtime is loaded must
never depend on the inputs, the current folder or ``LD_LIBRARY_PATH`` (CI
jobs often put the libraries under test there, and a ``libstdc++.so.6`` in
such a folder would otherwise run inside elfpatch).  The runtime is taken

1. from this process, when the interpreter has already loaded one
   (``/proc/self/maps``): opening it again by its path runs nothing;
2. else from the loader's trusted places only: ``/etc/ld.so.cache`` and the
   system directories, for this interpreter's machine and ELF class.

A library is only ever opened by absolute path, and every library it needs
that the process has not loaded yet is resolved the same way and opened
first, leaves first: by the time the runtime is opened, each of its
DT_NEEDED names matches an object already loaded (by DT_SONAME), so the
loader never searches ``LD_LIBRARY_PATH`` for it.  When anything cannot be
resolved that way, nothing is loaded and names stay mangled.
"""

from __future__ import annotations

import ctypes
import os
import re
from collections.abc import Iterator
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elfpatch.errors import ElfpatchError

if TYPE_CHECKING:
    from elfpatch.loader.closure import LoaderProfile

_RUNTIMES = ("libstdc++.so.6", "libc++abi.so.1", "libc++.so.1")
_MAPS = "/proc/self/maps"
# Searched after the loader's own default directories (which depend on the
# distribution's layout): the places every distribution installs its C++
# runtime in.  A file of another machine or ELF class there is skipped.
_SYSTEM_DIRS = ("/lib64/", "/usr/lib64/", "/lib/", "/usr/lib/")
_DEPTH = 8  # the runtimes' dependency chains are two or three deep

# Demangled names, bounded: a scan of libtorch_cpu.so demangles ~800 names
# and its inits a few thousand; 16k entries hold that several times over
# without letting a long-running process (check -j, a library caller) grow
# without end.
_CACHE_SIZE = 1 << 14

# (__cxa_demangle, free) from the loaded runtime: ctypes function pointers, whose
# class typeshed names only privately, hence Any.
_Functions = tuple[Any, Any]


@cache
def _cxa_demangle() -> _Functions | None:
    """``__cxa_demangle`` and ``free``, or None when no trusted runtime is available."""
    for runtime in _RUNTIMES:
        library = open_trusted_library(runtime)
        functions = _functions(library) if library is not None else None
        if functions is not None:
            return functions
    return None


def open_trusted_library(soname: str) -> ctypes.CDLL | None:
    """The system library ``soname``: the copy this process has loaded, else one from the
    loader's trusted places (its cache, the system folders) opened by absolute path.

    Never a search of ``LD_LIBRARY_PATH`` or the current folder, and no
    program is started to find it (``ctypes.util.find_library`` runs
    ``ldconfig``, then ``gcc`` and ``ld`` from ``PATH``).  None when there
    is no such copy, or without ``/proc`` (what is loaded cannot be told).
    """
    loaded = loaded_sonames()
    if loaded is None:
        return None
    return _open_loaded(loaded.get(soname)) or _open_trusted(soname, loaded)


def _functions(library: ctypes.CDLL) -> _Functions | None:
    try:
        demangle = library.__cxa_demangle
    except AttributeError:
        return None
    demangle.restype = ctypes.c_void_p
    demangle.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.POINTER(ctypes.c_int)]
    free = ctypes.CDLL(None).free  # the process's own C library frees what it allocated
    free.argtypes = [ctypes.c_void_p]
    free.restype = None
    return demangle, free


# -- what this process has loaded --------------------------------------------------

def mapped_files(maps: str = _MAPS, *, code_only: bool = False) -> list[str] | None:
    """The files mapped into this process, in map order; None when ``maps`` cannot be read.

    ``code_only`` keeps the files with a private executable mapping, which is
    how the loader maps an object's code.  The files elfpatch itself is
    reading are mapped shared and not executable: an input whose DT_SONAME
    is ``libgcc_s.so.1`` must not pass for the loaded ``libgcc_s.so.1``.
    """
    try:
        lines = Path(maps).read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError:
        return None
    paths: dict[str, None] = {}
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].startswith("/") or fields[5].endswith(" (deleted)"):
            continue
        if not code_only or fields[1][2:4] == "xp":
            paths[fields[5]] = None
    return list(paths)


def loaded_sonames(maps: str = _MAPS) -> dict[str, str] | None:
    """DT_SONAME -> path of every object the loader mapped into this process; None without /proc.

    The loader matches a DT_NEEDED name against the DT_SONAME of the
    objects already loaded, which is why the SONAME, not the file name,
    is the key (``libc.so.6`` may be ``libc-2.31.so`` on disk).
    """
    from elfpatch.elf.file import ElfFile

    paths = mapped_files(maps, code_only=True)
    if paths is None:
        return None
    sonames: dict[str, str] = {}
    for path in paths:
        try:
            with ElfFile.open(path) as elf:
                soname = elf.soname if elf.dynamic else None
        except (ElfpatchError, ValueError):
            continue  # locale archives, caches and other data files
        if soname is not None:
            sonames.setdefault(soname, path)
    return sonames


def _open_loaded(path: str | None) -> ctypes.CDLL | None:
    """A handle to an object already in the process; RTLD_NOLOAD guarantees nothing new runs."""
    if path is None:
        return None
    try:
        return ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL)
    except OSError:
        return None


# -- the loader's trusted places ---------------------------------------------------

@cache
def _interpreter_profile() -> LoaderProfile:
    """The loader profile of this interpreter (machine, class, system dirs, cache flags)."""
    from elfpatch.elf.file import ElfFile
    from elfpatch.loader.closure import loader_profile
    from elfpatch.loader.host import OLDEST_MODELLED_GLIBC, HostProfile

    # Only the system directories and the cache's ABI rules are used here,
    # and those are the same in every glibc: the version is not read, so a
    # host whose glibc the closure model does not cover still demangles.
    host = HostProfile.of_this_host(glibc=OLDEST_MODELLED_GLIBC)
    with ElfFile.open("/proc/self/exe") as elf:
        return loader_profile(elf.header, host=host)


def trusted_candidates(name: str) -> Iterator[str]:
    """Absolute paths for ``name`` from /etc/ld.so.cache, then the system directories.

    Never ``LD_LIBRARY_PATH``, never the current folder: a name with a slash
    or a relative cache entry yields nothing.
    """
    from elfpatch.loader.cache import read_ld_cache

    if "/" in name or not name:
        return
    profile = _interpreter_profile()
    cache_path = profile.host.cache_path
    cached = read_ld_cache(cache_path).lookup(name, profile.cache_flags) if cache_path else None
    if cached is not None and Path(cached).is_absolute():
        yield cached
    for directory in dict.fromkeys((*profile.system_dirs, *_SYSTEM_DIRS)):
        if Path(directory).is_absolute():
            yield str(Path(directory, name))


def _matching_object(name: str) -> tuple[str, list[str]] | None:
    """The first trusted file for ``name`` built for this interpreter, and its DT_NEEDED.

    Its DT_SONAME must be ``name``: that is what lets the loader match the
    DT_NEEDED entries of the libraries opened after it to this object.
    """
    from elfpatch.elf.file import ElfFile

    profile = _interpreter_profile()
    for path in trusted_candidates(name):
        if not Path(path).is_file():
            continue
        try:
            with ElfFile.open(path) as elf:
                if (elf.header.machine, elf.header.elf_class) != \
                        (profile.machine, profile.elf_class):
                    continue  # e.g. the i386 copy in /usr/lib
                if not elf.dynamic or elf.soname != name:
                    continue
                return path, list(elf.needed)
        except (ElfpatchError, ValueError):
            continue
    return None


def _open_trusted(name: str, loaded: dict[str, str], depth: int = 0) -> ctypes.CDLL | None:
    """Open ``name`` from a trusted path, its missing dependencies first; None on any doubt."""
    if depth > _DEPTH:
        return None
    try:
        found = _matching_object(name)
    except (OSError, ElfpatchError):
        return None
    if found is None:
        return None
    path, needed = found
    for dependency in needed:
        if dependency in loaded:
            continue
        if _open_trusted(dependency, loaded, depth + 1) is None:
            return None  # the loader would search for it, maybe on LD_LIBRARY_PATH
    try:
        library = ctypes.CDLL(path, mode=os.RTLD_LOCAL)
    except OSError:
        return None
    loaded[name] = path
    return library


# -- the demangler -----------------------------------------------------------------

@lru_cache(maxsize=_CACHE_SIZE)
def demangle(name: str) -> str:
    """The demangled form of an Itanium-mangled ``name``, or ``name`` itself."""
    if not name.startswith("_Z"):
        return name
    functions = _cxa_demangle()
    if functions is None:
        return name
    demangle_fn, free = functions
    status = ctypes.c_int(0)
    result = demangle_fn(name.encode("utf-8", "surrogateescape"), None, None,
                         ctypes.byref(status))
    if status.value != 0 or not result:
        return name
    try:
        return ctypes.string_at(result).decode("utf-8", "replace")
    finally:
        free(result)


# The suffixes gcc gives the copies it makes (-flto's ".lto_priv.0", ".constprop.1").
_CLONE_SUFFIX = re.compile(r"((?:\.[A-Za-z_]+\.\d+)+)$")


def demangle_label(name: str) -> str:
    """``name`` demangled, with a clone suffix the C++ runtime's demangler refuses on a
    variable (``_ZL5label.lto_priv.0``) kept apart, as c++filt shows it on a function:
    ``label [clone .lto_priv.0]``."""
    shown = demangle(name)
    suffix = _CLONE_SUFFIX.search(name) if shown == name else None
    if suffix is None:
        return shown
    base = demangle(name[: suffix.start()])
    return name if base == name[: suffix.start()] else f"{base} [clone {suffix.group(1)}]"

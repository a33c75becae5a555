"""Itanium C++ ABI demangling through the C++ runtime's own ``__cxa_demangle``.

The runtime's demangler is the reference implementation (it is what
``c++filt`` and gdb agree with), it is already on every machine that runs
C++ code, and it costs no dependency.  When it is missing or a name does not
demangle, the mangled name is returned unchanged: demangling never fails.
"""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any

_RUNTIMES = ("libstdc++.so.6", "libc++abi.so.1", "libc++.so.1")


@cache
def _cxa_demangle() -> tuple[Any, Any] | None:
    for runtime in _RUNTIMES:
        try:
            library = ctypes.CDLL(runtime)
        except OSError:
            continue
        libc = ctypes.CDLL(None)  # the process's own symbols: free() is the C library's
        demangle = library.__cxa_demangle
        demangle.restype = ctypes.c_void_p
        demangle.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.POINTER(ctypes.c_int)]
        free = libc.free
        free.argtypes = [ctypes.c_void_p]
        free.restype = None
        return demangle, free
    return None


def demangler_available() -> bool:
    return _cxa_demangle() is not None


@cache
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

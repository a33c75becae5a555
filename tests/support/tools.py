"""What the tests need from the machine, and the package that provides each thing.

A test that cannot run here skips through one of these helpers, so its
reason says what is missing and how to get it, e.g. ``qemu-aarch64 is not
installed (apt-get install qemu-user)``; ``tests/conftest.py`` fails any
skip that names no package and is not on its short allow-list.
"""

from __future__ import annotations

import importlib
import shutil
from types import ModuleType
from typing import NoReturn

import pytest

# Debian packages of the programs the tests run (cross tools are named by their prefix).
PACKAGES = {
    "g++": "g++", "gcc": "gcc", "c++filt": "binutils", "readelf": "binutils",
    "nm": "binutils", "strip": "binutils", "ar": "binutils", "objcopy": "binutils",
    "objdump": "binutils", "ld": "binutils", "eu-elflint": "elfutils",
    "eu-readelf": "elfutils", "zip": "zip", "unzip": "unzip", "ldconfig": "libc-bin",
    "true": "coreutils", "strace": "strace", "unshare": "util-linux", "ld.lld": "lld",
}
_CROSS = {"aarch64-linux-gnu-": "aarch64-linux-gnu", "s390x-linux-gnu-": "s390x-linux-gnu",
          "i686-linux-gnu-": "i686-linux-gnu", "powerpc64-linux-gnu-": "powerpc64-linux-gnu"}
INSTALL_MARKERS = ("(apt-get install ", "(pip install ")


def package_of(program: str) -> str:
    """The Debian package that installs ``program``."""
    if program.startswith("qemu-"):
        return "qemu-user"
    for prefix, triplet in _CROSS.items():
        if program.startswith(prefix):
            tool = program[len(prefix):]
            if tool in ("g++", "gcc"):
                return f"{tool}-{triplet}"
            return f"binutils-{triplet}"
    return PACKAGES.get(program, program)


def cxx_package(machine: str) -> str:
    """The package of the g++ that builds for ``machine`` (x86_64 here, else a cross g++)."""
    return "g++" if machine in ("x86_64", "host") else f"g++-{machine}-linux-gnu"


def missing(what: str, package: str) -> NoReturn:
    """Skip: ``what`` is not installed, and ``package`` (apt) installs it."""
    pytest.skip(f"{what} is not installed (apt-get install {package})")


def require_tool(program: str) -> str:
    """The path of ``program``, or a skip naming its package."""
    path = shutil.which(program)
    if path is None:
        missing(program, package_of(program))
    return path


def require_runner(runner: tuple[str, ...] | list[str], what: str = "") -> None:
    """Skip unless the emulator a cross build runs under (``toolchain.runner``) is here."""
    if runner and shutil.which(runner[0]) is None:
        suffix = f": {what}" if what else ""
        pytest.skip(f"{runner[0]} is not installed{suffix} (apt-get install qemu-user)")


def require_module(name: str, package: str | None = None) -> ModuleType:
    """The Python module ``name``, or a skip naming the PyPI package that provides it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        pytest.skip(f"the Python module {name} is not installed "
                    f"(pip install {package or name.partition('.')[0]})")


def names_a_package(reason: str) -> bool:
    return any(marker in reason for marker in INSTALL_MARKERS)

"""The machine a program runs on, as far as glibc's ld.so cares: one frozen ``HostProfile``.

What ld.so loads depends on more than the files: the glibc version (2.37
dropped the legacy hwcaps subdirectories, 2.40 the legacy hwcap entries of
/etc/ld.so.cache), the kernel's machine name, the CPU (x86's $PLATFORM, its
legacy hwcap names and its ISA level, which picks ``glibc-hwcaps/x86-64-vN``),
``$LD_LIBRARY_PATH``, the cache file and the distribution's system
directories.  ``HostProfile.of_this_host()`` reads them from this machine
when it is called, and only then; every other function of the loader
model takes a profile, so a wheel built for another target is analysed by
describing that target (``HostProfile(glibc=(2, 38), machine="aarch64")``).

The model covers glibc 2.35 and later; a profile naming an older glibc is
refused with a ``UsageError``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from elfpatch.elf.constants import EM_386, EM_AARCH64, EM_X86_64
from elfpatch.errors import UsageError
from elfpatch.loader.cache import DEFAULT_CACHE_PATH

GlibcVersion = tuple[int, int]

OLDEST_MODELLED_GLIBC: GlibcVersion = (2, 35)  # glibc.rtld.dynamic_sort=2 became the default
LEGACY_HWCAPS_REMOVED: GlibcVersion = (2, 37)  # no more tls/, $PLATFORM/, hwcap-name subdirectories
LEGACY_CACHE_ENTRIES_SKIPPED: GlibcVersion = (2, 40)  # cache entries with hwcap bits ignored

_X86_MACHINES = ("x86_64", "i386", "i486", "i586", "i686")

# x86-64 ISA levels (glibc-hwcaps/x86-64-vN) by the /proc/cpuinfo flags they need
# (glibc's get_isa_level; "abm" is LZCNT, "xsave" stands for OSXSAVE).
X86_64_LEVELS = (
    ("x86-64-v2", ("cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3")),
    ("x86-64-v3", ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave")),
    ("x86-64-v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
)
_HASWELL = ("avx2", "fma", "bmi1", "bmi2", "abm", "movbe", "popcnt")


@dataclass(frozen=True)
class Capabilities:
    """What ld.so derives from the CPU for objects of one machine."""

    platform: str | None  # $PLATFORM (AT_PLATFORM as ld.so rewrites it); None: unknown
    hwcap_names: tuple[str, ...]  # legacy hwcap names, by bit
    glibc_hwcaps: tuple[str, ...]  # glibc-hwcaps subdirectory names, best first


@dataclass(frozen=True)
class HostProfile:
    """The facts of one machine that decide what ld.so loads there.

    ``cpu_vendor`` and ``cpu_flags`` are /proc/cpuinfo's ``vendor_id`` and
    ``flags`` (x86 only; ``x86_64_level_flags`` writes them for an ISA
    level).  ``cache_path`` None means no /etc/ld.so.cache.  ``multiarch``
    is Debian's layout (``/lib/<triplet>/`` before ``/lib/``), else the
    ``/lib64/`` one; ``system_dirs``, when given, replaces either.
    """

    glibc: GlibcVersion
    machine: str  # the kernel's name for it (uname -m): x86_64, aarch64 ...
    cpu_vendor: str = ""
    cpu_flags: frozenset[str] = frozenset()
    ld_library_path: str = ""
    cache_path: Path | None = DEFAULT_CACHE_PATH
    multiarch: bool = True
    system_dirs: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if tuple(self.glibc) < OLDEST_MODELLED_GLIBC:
            raise UsageError(
                "host profile",
                f"glibc {format_glibc(self.glibc)} is older than the loader model covers "
                f"({format_glibc(OLDEST_MODELLED_GLIBC)} and later)",
                "analyse on a machine with a newer glibc, or describe the target "
                "with a supported glibc version")

    @classmethod
    def of_this_host(cls, *, glibc: GlibcVersion | None = None) -> HostProfile:
        """This machine, read now: its glibc (unless ``glibc`` is given), CPU, environment."""
        machine = os.uname().machine
        vendor, flags = _cpuinfo() if machine in _X86_MACHINES else ("", frozenset[str]())
        return cls(glibc or this_glibc(), machine, vendor, flags,
                   os.environ.get("LD_LIBRARY_PATH", ""), DEFAULT_CACHE_PATH,
                   _has_multiarch_layout())

    @property
    def searches_legacy_hwcaps(self) -> bool:
        """Whether ld.so tries tls/, $PLATFORM/ and hwcap-name subdirectories."""
        return self.glibc < LEGACY_HWCAPS_REMOVED

    @property
    def takes_legacy_cache_entries(self) -> bool:
        """Whether ld.so may take an ld.so.cache entry carrying legacy hwcap bits (tls)."""
        return self.glibc < LEGACY_CACHE_ENTRIES_SKIPPED

    @property
    def x86_64_level(self) -> int:
        """The x86-64 ISA level the CPU flags reach (1: baseline)."""
        return 1 + len(_levels_reached(self.cpu_flags))

    def capabilities(self, e_machine: int) -> Capabilities:
        """$PLATFORM, legacy hwcap names and glibc-hwcaps for objects of ``e_machine``."""
        if e_machine == EM_386:
            return Capabilities("i686", ("sse2",) if "sse2" in self.cpu_flags else (), ())
        if e_machine == EM_X86_64:
            return _x86_64_capabilities(self.cpu_vendor, self.cpu_flags)
        if e_machine == EM_AARCH64:
            return Capabilities("aarch64", (), ())
        return Capabilities(None, (), ())


def x86_64_level_flags(level: int) -> frozenset[str]:
    """CPU flags that reach x86-64 ISA level ``level`` (1 to 4), to describe a target."""
    flags: set[str] = set()
    for _name, needs in X86_64_LEVELS[: max(level - 1, 0)]:
        flags.update(needs)
    return frozenset(flags)


def _x86_64_capabilities(vendor: str, flags: frozenset[str]) -> Capabilities:
    """glibc's x86-64 choices (sysdeps/x86/cpu-features.c, dl-hwcaps-subdirs.c).

    The same from 2.35 to 2.42: only Intel CPUs get the "haswell" and
    "xeon_phi" platforms.
    """
    platform = "x86_64"
    names = ["x86_64"]
    if vendor == "GenuineIntel":
        if {"avx512cd", "avx512er", "avx512pf"} <= flags:
            platform = "xeon_phi"
        elif "avx512cd" in flags and "avx512er" not in flags and \
                {"avx512bw", "avx512dq", "avx512vl"} <= flags:
            names.append("avx512_1")
        if platform == "x86_64" and set(_HASWELL) <= flags:
            platform = "haswell"
    return Capabilities(platform, tuple(names), tuple(reversed(_levels_reached(flags))))


def _levels_reached(flags: frozenset[str]) -> list[str]:
    """The glibc-hwcaps x86-64 levels ``flags`` reach, lowest first (each needs the last)."""
    levels: list[str] = []
    for name, needs in X86_64_LEVELS:
        if not set(needs) <= flags:
            break
        levels.append(name)
    return levels


# -- reading this machine ------------------------------------------------------------

def this_glibc() -> GlibcVersion:
    """The version of this machine's glibc; a ``UsageError`` when it has none."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        text = None
    if not text or not text.startswith("glibc "):
        raise UsageError("host profile", "this machine's C library is not glibc",
                         "describe the target's glibc with HostProfile(glibc=...)")
    return parse_glibc_version(text)


def parse_glibc_version(text: str) -> GlibcVersion:
    """``(2, 36)`` from "2.36", "glibc 2.36" or "2.36.9000"."""
    words = text.split()
    numbers = words[-1].split(".") if words else []
    try:
        return int(numbers[0]), int(numbers[1])
    except (IndexError, ValueError):
        raise UsageError("host profile", f"{text!r} is not a glibc version",
                         "write it as 2.36") from None


def format_glibc(version: GlibcVersion) -> str:
    return ".".join(str(part) for part in version)


def _cpuinfo() -> tuple[str, frozenset[str]]:
    vendor, flags = "", frozenset[str]()
    try:
        with Path("/proc/cpuinfo").open() as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id" and not vendor:
                    vendor = value.strip()
                elif key.strip() == "flags":
                    return vendor, frozenset(value.split())
    except OSError:
        pass
    return vendor, flags


def _has_multiarch_layout() -> bool:
    """Debian's layout: /usr/lib holds <triplet> folders such as x86_64-linux-gnu."""
    try:
        return any(entry.is_dir() and "-linux-gnu" in entry.name
                   for entry in Path("/usr/lib").iterdir())
    except OSError:
        return False

"""``fix`` on mutated files: a clean refusal, or an output readelf finds nothing new in.

A seeded loop mutates libraries built for x86-64, i386 and aarch64, with
packed relative relocations, stripped, without section headers, and a
fixed-address executable whose GNU hash table hashes nothing.  The
mutations poke values into the headers and tables, point the dynamic
table's entries at other tables, the ELF header or the program headers,
resize them, move sections and segments over one another, and cut files
short.  Each mutant goes through ``fix -o`` and ``fix --in-place`` (the
command line, in-process) in one of the three modes, and:

- nothing ends in a traceback or an internal error;
- when the exit is 0, ``readelf -W -a`` reports no warning or error for
  the output that it did not report for the input;
- when it is not, the input is byte-identical and no file was added.

The seed makes every run the same; a failure names the seed, the case and
its mutations, which rebuild the mutant.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from elfpatch.fixtures import build
from support.build import invoke, require_tool
from support.fixlib import VARIANTS, Layout, built_library, elf_layout, toolchain, variant_input
from support.readelf import readelf_problems

from elfpatch.service import parallel

SEED = 13
# 2,000 mutants carry about 3,500 mutations and make 4,000 runs of fix: about 40 s
# on one core (a refused mutant costs a few milliseconds, a fixed one ~20).
CASES = 2000

# A fixed-address executable exports nothing: all its GNU hash buckets are empty.
EXECUTABLE = {
    "prog.cpp": """
#include <cstdio>
inline int& counter() { static int count = 0; return count; }
int main() { std::printf("%d\\n", ++counter()); return 0; }
""",
}

# name -> how to get the file to mutate and the layout of its tables
SEEDS = ("x86-64", "x86-64 both hashes", "RELR", "stripped", "no section headers", "i386",
         "aarch64", "executable")

_WORDS = (0, 1, 2, 3, 7, 8, 0x10, 0x18, 0x40, 0x7F, 0x80, 0xFF, 0xFFFF, 0x10000, 0x7FFFFFFF,
          0x80000000, 0xFFFFFFFF, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1)
_POINTERS = ("DT_VERSYM", "DT_VERNEED", "DT_RELA", "DT_REL", "DT_JMPREL", "DT_GNU_HASH",
             "DT_HASH", "DT_SYMTAB", "DT_STRTAB", "DT_RELR", "DT_INIT_ARRAY")
_SIZES = ("DT_RELASZ", "DT_RELSZ", "DT_PLTRELSZ", "DT_STRSZ", "DT_RELRSZ", "DT_VERNEEDNUM")
_SEGMENTS = ("PT_NOTE", "PT_DYNAMIC", "PT_TLS", "PT_GNU_EH_FRAME", "PT_LOAD")
_TABLES = (".dynsym", ".dynstr", ".symtab", ".gnu.hash", ".hash", ".rela.dyn", ".rel.dyn",
           ".rela.plt", ".rel.plt", ".relr.dyn", ".gnu.version", ".gnu.version_r", ".dynamic")


@dataclass(frozen=True)
class Seed:
    name: str
    data: bytes
    layout: Layout  # of the file with section headers (the same offsets)
    headerless: bool

    @property
    def landmarks(self) -> list[int]:
        """Offsets worth pointing a table at: headers, each table's start and end."""
        layout = self.layout
        found = {0, 8, layout.phoff, layout.phoff + 8}
        found |= {layout.phoff + k * layout.phentsize for k in range(layout.phnum)}
        for section in layout.sections:
            if section.name in _TABLES:
                found |= {section.offset, section.offset + section.size,
                          section.offset + 8, section.offset - 8, section.offset - 24}
        return sorted(o for o in found if 0 <= o < len(self.data))

    @property
    def regions(self) -> list[tuple[int, int]]:
        """(offset, size) of the structures whose bytes are worth poking."""
        layout = self.layout
        found = [(0, 64 if layout.elf_class == 64 else 52),
                 (layout.phoff, layout.phnum * layout.phentsize)]
        if not self.headerless:
            found.append((layout.shoff, len(layout.sections) * (64 if layout.elf_class == 64
                                                                else 40)))
        found += [(s.offset, s.size) for s in layout.sections if s.name in _TABLES]
        return [(offset, size) for offset, size in found if size > 0]


@cache
def _seed(name: str) -> Seed | str:
    try:
        return _build_seed(name)
    except pytest.skip.Exception as skipped:
        return str(skipped)


def _build_seed(name: str) -> Seed:
    import tempfile

    if name == "executable":
        built = build.build_executable(EXECUTABLE, "fuzzprog", ["-O1", "-fno-pie", "-no-pie"],
                                       toolchain=toolchain("host"))
        return Seed(name, built.read_bytes(), elf_layout(built), False)
    variant = VARIANTS[{"x86-64": "default", "x86-64 both hashes": "both-hash", "RELR": "relr",
                        "stripped": "stripped", "no section headers": "no-section-headers",
                        "i386": "i686", "aarch64": "aarch64"}[name]]
    with tempfile.TemporaryDirectory() as folder:
        path = variant_input(variant, Path(folder))
        laid_out = built_library(variant) if variant.alteration == "no-section-headers" else path
        return Seed(name, path.read_bytes(), elf_layout(laid_out),
                    variant.alteration == "no-section-headers")


def seeds() -> list[Seed]:
    found = [s for s in map(_seed, SEEDS) if isinstance(s, Seed)]
    if not found:
        pytest.skip(str(_seed(SEEDS[0])))
    return found


# -- mutations: each returns a description (to reproduce it) after changing ``data`` ---------

Mutator = Callable[[random.Random, Seed, bytearray], str]


def _poke(rng: random.Random, seed: Seed, data: bytearray) -> str:
    offset, size = rng.choice(seed.regions)
    where = offset + rng.randrange(size)
    width = rng.choice((1, 2, 4, 8))
    value = rng.choice(_WORDS) % (1 << (8 * width))
    order = "little" if seed.layout.little == (rng.random() < 0.9) else "big"
    data[where : where + width] = value.to_bytes(width, order)[: max(len(data) - where, 0)]
    return f"poke {value:#x} ({width} bytes, {order}) at {where:#x}"


def _retarget(rng: random.Random, seed: Seed, data: bytearray) -> str:
    tags = [t for t in _POINTERS if seed.layout.dynamic_entry(t) is not None]
    if not tags:
        return _poke(rng, seed, data)
    tag, target = rng.choice(tags), rng.choice(seed.landmarks)
    try:
        address = seed.layout.address_of(target)
    except ValueError:  # not loaded: point at it by its offset anyway
        address = target
    seed.layout.set_dynamic(data, tag, address)
    return f"{tag} -> offset {target:#x}"


def _resize(rng: random.Random, seed: Seed, data: bytearray) -> str:
    tags = [t for t in _SIZES if seed.layout.dynamic_entry(t) is not None]
    if not tags:
        return _poke(rng, seed, data)
    tag = rng.choice(tags)
    entry = seed.layout.dynamic_entry(tag)
    assert entry is not None
    step = rng.choice((1, 8, 16, 24))
    value = max(entry[1] + step * rng.choice((-3, -1, 1, 2, 10)), 0)
    seed.layout.set_dynamic(data, tag, value)
    return f"{tag} = {value:#x}"


def _move_section(rng: random.Random, seed: Seed, data: bytearray) -> str:
    sections = [s for s in seed.layout.sections if s.name in _TABLES]
    if seed.headerless or not sections:
        return _retarget(rng, seed, data)
    section = rng.choice(sections)
    if rng.random() < 0.6:
        target = rng.choice(seed.landmarks)
        seed.layout.set_section(data, section.name, "offset", target)
        return f"section {section.name} at {target:#x}"
    size = max(section.size + rng.choice((-24, -8, -2, 2, 8, 24, 0x1000)), 0)
    seed.layout.set_section(data, section.name, "size", size)
    return f"section {section.name} size {size:#x}"


def _move_segment(rng: random.Random, seed: Seed, data: bytearray) -> str:
    segments = [s for s in seed.layout.segments if s.type in _SEGMENTS]
    if rng.random() < 0.2 or not segments:
        count = seed.layout.phnum + rng.choice((1, 2, 4, 8))
        seed.layout.set_phnum(data, count)
        return f"e_phnum = {count}"
    segment, target = rng.choice(segments), rng.choice(seed.landmarks)
    field = rng.choice(("offset", "filesz"))
    value = target if field == "offset" else target - segment.offset
    seed.layout.set_segment(data, segment.index, field, max(value, 0))
    return f"{segment.type} {segment.index} {field} = {max(value, 0):#x}"


def _symbol_value(rng: random.Random, seed: Seed, data: bytearray) -> str:
    """An st_value or st_size at the top of the address space, or just past a table."""
    tables = [s for s in seed.layout.sections if s.name in (".dynsym", ".symtab")]
    if not tables:
        return _poke(rng, seed, data)
    table, wide = rng.choice(tables), seed.layout.elf_class == 64
    entry = 24 if wide else 16
    index = rng.randrange(max(table.size // entry, 1))
    field = rng.choice((8, 16) if wide else (4, 8))
    value = rng.choice(((1 << seed.layout.elf_class) - 16, (1 << seed.layout.elf_class) - 1,
                        1 << (seed.layout.elf_class - 1)))
    seed.layout.put(data, table.offset + index * entry + field, value)
    return f"{table.name} symbol {index} field +{field} = {value:#x}"


MUTATORS: tuple[tuple[Mutator, int], ...] = (
    (_poke, 5), (_retarget, 5), (_resize, 2), (_move_section, 2), (_move_segment, 2),
    (_symbol_value, 1))


@dataclass(frozen=True)
class Mutant:
    seed: Seed
    number: int
    mode: str
    steps: tuple[str, ...]
    data: bytes

    def __str__(self) -> str:
        return f"case {self.number} of seed {SEED}: {self.seed.name}, --to {self.mode}, " \
               f"{'; '.join(self.steps)}"


def mutants(count: int) -> list[Mutant]:
    rng, pool = random.Random(SEED), seeds()
    mutators, weights = zip(*MUTATORS, strict=True)
    found = []
    for number in range(count):
        seed = rng.choice(pool)
        data = bytearray(seed.data)
        steps = [mutate(rng, seed, data)
                 for mutate in rng.choices(mutators, weights, k=rng.choice((1, 1, 2, 3)))]
        if rng.random() < 0.05:
            cut = rng.randrange(len(data))
            del data[cut:]
            steps.append(f"cut at {cut:#x}")
        mode = rng.choice(("local", "local", "weak-hidden", "global"))
        found.append(Mutant(seed, number, mode, tuple(steps), bytes(data)))
    return found


# -- what must hold --------------------------------------------------------------------------

def files_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


class Checker:
    """Runs the two commands on one mutant and keeps what went wrong, if anything."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.failures: list[str] = []

    def check(self, mutant: Mutant) -> None:
        for old in files_in(self.folder):
            old.unlink()
        source = self.folder / "libmutant.so"
        source.write_bytes(mutant.data)
        problems: set[str] | None = None  # the input's, read when first needed
        judged: dict[bytes, set[str]] = {}  # readelf's new lines for each output seen
        for target in ("-o", "--in-place"):
            where = ("-o", str(self.folder / "fixed.so")) if target == "-o" else ("--in-place",)
            present = files_in(self.folder)
            result = invoke("fix", "--to", mutant.mode, *where, str(source))
            written = self.folder / "fixed.so" if target == "-o" else source
            text = result.stdout + result.stderr
            if result.exception is not None or "internal error" in text or "Traceback" in text:
                self.fail(mutant, target, f"crashed: {result.exception!r} {text[-300:]}")
            elif result.exit_code not in (0, 2):
                self.fail(mutant, target, f"exit {result.exit_code}: {text[-300:]}")
            elif result.exit_code == 0:
                if problems is None:
                    problems = self._input_problems(mutant)
                output = written.read_bytes() if written.exists() else mutant.data
                if output not in judged:
                    judged[output] = readelf_problems(written) - problems \
                        if output != mutant.data else set()
                new = judged[output]
                if new:
                    self.fail(mutant, target, f"exit 0 but readelf now says {sorted(new)}")
            elif source.read_bytes() != mutant.data or files_in(self.folder) != present:
                self.fail(mutant, target, f"exit {result.exit_code} but files changed: "
                          f"{[p.name for p in files_in(self.folder)]}")
            if source.read_bytes() != mutant.data:  # the next run starts from the mutant
                source.write_bytes(mutant.data)

    def _input_problems(self, mutant: Mutant) -> set[str]:
        original = self.folder / "original.so"
        original.write_bytes(mutant.data)
        try:
            return readelf_problems(original)
        finally:
            original.unlink()

    def fail(self, mutant: Mutant, target: str, what: str) -> None:
        self.failures.append(f"{mutant} (fix {target}): {what}")


@pytest.fixture
def one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Verification's two halves run here in turn, as where forking is not possible:
    the same checks, without a fork per run that costs more than they do on these
    small files."""
    monkeypatch.setattr(parallel, "_can_fork", lambda: False)


@pytest.mark.usefixtures("one_process")
def test_fix_refuses_cleanly_or_writes_what_readelf_accepts(tmp_path: Path) -> None:
    require_tool("readelf")
    checker = Checker(tmp_path)
    for mutant in mutants(CASES):
        checker.check(mutant)
    assert not checker.failures, "\n".join(checker.failures[:20])


def test_the_seeds_are_fixed_as_they_are(tmp_path: Path) -> None:
    """Unmutated, every seed is fixed with exit 0 in every mode (else the fuzz proves little)."""
    require_tool("readelf")
    checker = Checker(tmp_path)
    for seed in seeds():
        shoff = seed.data[0x28:0x30] if seed.layout.elf_class == 64 else seed.data[0x20:0x24]
        assert (int.from_bytes(shoff, "little" if seed.layout.little else "big") == 0) \
            == seed.headerless
        for mode in ("local", "weak-hidden", "global"):
            checker.check(Mutant(seed, -1, mode, (), seed.data))
            result = invoke("fix", "--to", mode, str(tmp_path / "libmutant.so"), "-o",
                            str(tmp_path / "again.so"))
            assert result.exit_code == 0, (seed.name, result.stderr)
    assert not checker.failures, "\n".join(checker.failures)


# -- what the fuzzing found ----------------------------------------------------------------

# A data symbol with a static initializer, so ``inits`` reads the data symbols.
INITIALIZED = {
    "made.cpp": """
#include <vector>
static std::vector<int> made_at_load(3, 1);
extern "C" int made_size() { return (int)made_at_load.size(); }
""",
}


@pytest.mark.parametrize("field", ["st_value", "st_size"])
def test_a_symbol_reaching_past_the_top_of_the_address_space(field: str, tmp_path: Path) -> None:
    """Its extent is cut at the top (no address there is code or data we read),
    instead of an OverflowError: ``inits`` reported "malformed ELF data", and
    ``inits --closure`` an internal error."""
    built = build.build_shared(INITIALIZED, "libmade", ["-O1"], toolchain=toolchain("host"))
    layout = elf_layout(built)
    symtab = layout.section(".symtab")
    assert symtab is not None and layout.elf_class == 64
    data = bytearray(built.read_bytes())
    strtab = layout.section(".strtab")
    assert strtab is not None
    index = _symbol_index(data, symtab.offset, symtab.size, strtab.offset, b"_ZL12made_at_load")
    layout.put(data, symtab.offset + 24 * index + (8 if field == "st_value" else 16),
               (1 << 64) - 16)
    path = tmp_path / "libmade.so"
    path.write_bytes(bytes(data))
    for args in (("inits", str(path)), ("inits", "--closure", str(path))):
        result = invoke(*args)
        assert result.exception is None, result.exception
        assert result.exit_code == 0, result.stderr
        assert "_GLOBAL__sub_I" in result.stdout


def _symbol_index(data: bytearray, offset: int, size: int, names: int, name: bytes) -> int:
    """The index of the .symtab symbol called ``name`` (little-endian ELF64)."""
    for index in range(size // 24):
        (name_offset,) = struct.unpack_from("<I", data, offset + 24 * index)
        start = names + name_offset
        if bytes(data[start : data.index(0, start)]) == name:
            return index
    raise AssertionError(f"no symbol {name!r}")


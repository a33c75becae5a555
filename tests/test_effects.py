"""What `effects` reads from an initializer's machine code matches what its source does.

Small translation units are built with g++ for x86-64 (and aarch64 with the
cross compiler) as PIE and fixed-address executables and as shared
libraries, at -O0 and -O2, with and without the PLT; each test looks at the
initializer of one TU and checks the globals it writes and reads, the
destructors it registers and the functions it calls.  Symbol names are
checked against pyelftools' reading of the same file, so a test cannot pass
by asserting a name the binary does not have.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from elfpatch.fixtures import build as build_driver

from elfpatch.analysis.effects import (
    UNKNOWN_EFFECTS,
    AtExit,
    Effects,
    EffectsAnalyzer,
    initializer_effects,
    is_constructor,
)
from elfpatch.analysis.effects.aarch64 import Arm64Walk
from elfpatch.analysis.effects.x86_64 import X86Walk
from elfpatch.analysis.initializers import list_initializers
from elfpatch.elf.file import ElfFile
from elfpatch.errors import ElfpatchError

STRING_DTOR = "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev"
IOS_INIT_DTOR = "_ZNSt8ios_base4InitD1Ev"
IOINIT_OBJECT = "_ZStL8__ioinit"
S = "_Z1sB5cxx11"  # std::string s  (the [abi:cxx11] tag is part of the name)
B = "_Z1bB5cxx11"  # std::string b

SOURCES = {
    "s.cpp": '#include <string>\nstd::string s("x");\n',
    "io.cpp": '#include <iostream>\nvoid hello() { std::cout << "hi\\n"; }\n',
    "a.cpp": "int compute_a();\nint a = compute_a();\n",
    "b.cpp": ('#include <string>\nstd::string b("hello");\n'
              "int compute_a() { return b.size(); }\n"),
    "ci.cpp": "constinit int ci = 5;\nconstexpr int cx = 7;\nint reads_ci = ci + cx;\n",
    "fls.cpp": ('#include <string>\n'
                'static std::string& name() { static std::string n("local"); return n; }\n'
                "int user = name().size();\n"),
    "ext.cpp": ('#include <cstdlib>\n#include <cstring>\n'
                'int env_len = std::strlen(std::getenv("PATH") ? std::getenv("PATH") : "");\n'),
    "lib.cpp": "extern int exe_value;\nint lib_copy = exe_value * 2;\n",
    "main.cpp": ("int exe_value = 21;\nint (*volatile hook)() = nullptr;\n"
                 "int main() { return 0; }\n"),
    "tls.cpp": "__thread int tv = 3;\nint copy_tv = tv + 1;\n",
    "calls.cpp": (
        "#include <cstdio>\n"
        '#define LOCAL extern "C" __attribute__((noinline, visibility("hidden")))\n'
        "LOCAL void writes_nothing() { asm volatile(\"\"); }\n"
        "LOCAL int sum(int a, int b) { return a + b; }\n"
        "LOCAL int calls_sum(int a) { return sum(a, 2) * 3; }\n"
        "LOCAL int calls_outside(const char* text) { return std::puts(text) * 3; }\n"
        "LOCAL int pong(int n);\n"
        "LOCAL int ping(int n) { return n > 0 ? pong(n - 1) * 3 : 1; }\n"
        "LOCAL int pong(int n) { return n > 0 ? ping(n - 2) * 5 : 2; }\n"
        'extern "C" int (*table[])(int) = {calls_sum, ping};\n'
        'extern "C" void* more[] = {(void*)writes_nothing, (void*)calls_outside};\n'),
    "switch.cpp": (
        "void f0(); void f1(); void f2(); void f3(); void f4(); void f5(); void f6(); void f7();\n"
        "extern volatile int selector;\n"
        "static int pick() {\n  switch (selector) {\n"
        "    case 0: f0(); return 10; case 1: f1(); return 21; case 2: f2(); return 32;\n"
        "    case 3: f3(); return 43; case 4: f4(); return 54; case 5: f5(); return 65;\n"
        "    case 6: f6(); return 76; case 7: f7(); return 87;\n  }\n  return 0;\n}\n"
        "int picked = pick();\n"),
    "hook.cpp": "extern int (*volatile hook)();\nint hooked = hook();\n",
    "keep.cpp": ('#include <string>\nextern std::string kept;\n'
                 "void keep(const std::string* name);\n"
                 "bool kept_once = (keep(&kept), true);\n"),
    "measure.cpp": ('#include <string>\nextern std::string kept;\n'
                    "unsigned long measure(const std::string* name);\n"
                    "unsigned long measured = measure(&kept);\n"),
    "keepers.cpp": ('#include <string>\nconst std::string* keeper;\n'
                    "void keep(const std::string* name) { keeper = name; }\n"
                    "unsigned long measure(const std::string* name) { return name->size(); }\n"),
    "kept.cpp": '#include <string>\nstd::string kept("kept-long-enough-for-the-heap");\n',
    "switch_defs.cpp": ("volatile int selector = 3;\n"
                        "void f0(){} void f1(){} void f2(){} void f3(){}\n"
                        "void f4(){} void f5(){} void f6(){} void f7(){}\n"),
}
UNITS = ["s.cpp", "io.cpp", "a.cpp", "b.cpp", "ci.cpp", "fls.cpp", "ext.cpp"]


@dataclass(frozen=True)
class Variant:
    name: str
    compiler: str
    flags: tuple[str, ...]
    shared: bool = False

    @property
    def optimized(self) -> bool:
        return "-O2" in self.flags


X86 = "g++"
ARM = "aarch64-linux-gnu-g++"
EXECUTABLES = [
    Variant("x86-pie-O0", X86, ("-O0", "-fPIE", "-pie")),
    Variant("x86-pie-O2", X86, ("-O2", "-fPIE", "-pie")),
    Variant("x86-nopie-O0", X86, ("-O0", "-fno-PIE", "-no-pie")),
    Variant("x86-nopie-O2", X86, ("-O2", "-fno-PIE", "-no-pie")),
    Variant("arm-pie-O0", ARM, ("-O0", "-fPIE", "-pie")),
    Variant("arm-pie-O2", ARM, ("-O2", "-fPIE", "-pie")),
    Variant("arm-nopie-O2", ARM, ("-O2", "-fno-PIE", "-no-pie")),
]
LIBRARIES = [
    Variant("x86-shared-O0", X86, ("-O0", "-fPIC"), shared=True),
    Variant("x86-shared-O2", X86, ("-O2", "-fPIC"), shared=True),
    Variant("x86-shared-noplt", X86, ("-O2", "-fPIC", "-fno-plt"), shared=True),
    Variant("arm-shared-O2", ARM, ("-O2", "-fPIC"), shared=True),
    Variant("arm-shared-noplt", ARM, ("-O2", "-fPIC", "-fno-plt"), shared=True),
]
ALL = EXECUTABLES + LIBRARIES


# -- building -----------------------------------------------------------------
def toolchain(variant: Variant) -> build_driver.Toolchain:
    """The variant's compiler, or a skip naming the package that provides it."""
    if variant.compiler == X86:
        found = build_driver.host_toolchain()
        if not found.available():
            pytest.skip(f"{found.cxx} is not installed (apt-get install g++)")
        return found
    cross = build_driver.cross_toolchain("aarch64")
    if cross is None:
        pytest.skip(f"{variant.compiler} is not installed (apt-get install g++-aarch64-linux-gnu)")
    return cross


def build(variant: Variant, units: list[str] | None = None) -> Path:
    """The units compiled and linked in this order, through the shared build cache."""
    units = units or (UNITS + (["lib.cpp", "tls.cpp"] if variant.shared else ["main.cpp"]))
    output = "libunits.so" if variant.shared else "program"
    target = build_driver.Target(output, tuple(units), shared=variant.shared,
                                 flags=variant.flags)
    folder = build_driver.build_targets({unit: SOURCES[unit] for unit in units}, [target],
                                        ("-std=c++20",), toolchain(variant),
                                        label=f"effects-{variant.name}")
    return folder / output


def effects_of(path: Path, **budget: int) -> dict[str, Effects]:
    """Effects of every initializer (runtime entries left out), by symbol name."""
    with ElfFile.open(path) as elf:
        listing = list_initializers(elf, str(path))
        analyzer = EffectsAnalyzer(elf)
        return {e.symbol or hex(e.address or 0):
                analyzer.labelled(analyzer.effects(e.address or 0, **budget))
                for e in listing.followed}


def initializer(found: dict[str, Effects], unit: str, first_global: str) -> Effects:
    """gcc names a TU's initializer after its first global, or after the file with -fPIC."""
    for name in (f"_GLOBAL__sub_I_{first_global}", f"_GLOBAL__sub_I_{unit}"):
        if name in found:
            return found[name]
    raise AssertionError(f"no initializer for {unit} among {sorted(found)}")


def symbols(path: Path) -> dict[str, tuple[str, str]]:
    """name -> (type, section name or UND), read independently with pyelftools."""
    from elftools.elf.elffile import ELFFile

    found: dict[str, tuple[str, str]] = {}
    with path.open("rb") as handle:
        elf = ELFFile(handle)
        for table_name in (".dynsym", ".symtab"):
            table = elf.get_section_by_name(table_name)
            for symbol in table.iter_symbols() if table is not None else []:
                index = symbol["st_shndx"]
                section = "UND" if index == "SHN_UNDEF" else (
                    elf.get_section(index).name if isinstance(index, int) else index)
                found.setdefault(symbol.name, (symbol["st_info"]["type"], section))
    return found


def got_symbols(path: Path) -> set[str]:
    """Symbols named by GLOB_DAT relocations (pyelftools)."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection

    names = set()
    with path.open("rb") as handle:
        elf = ELFFile(handle)
        dynsym = elf.get_section_by_name(".dynsym")
        for section in elf.iter_sections():
            if isinstance(section, RelocationSection):
                for relocation in section.iter_relocations():
                    if relocation["r_info_type"] in (6, 1025) and relocation["r_info_sym"]:
                        names.add(dynsym.get_symbol(relocation["r_info_sym"]).name)
    return names


# -- exit-time destructors, <iostream> ----------------------------------------------
@pytest.mark.parametrize("variant", ALL, ids=lambda v: v.name)
def test_string_global_registers_its_destructor(variant: Variant) -> None:
    path = build(variant)
    assert symbols(path)[S][0] == "STT_OBJECT"
    found = initializer(effects_of(path), "s.cpp", S)
    assert AtExit(object=S, destructor=STRING_DTOR) in found.atexit
    assert S in found.writes
    assert "__cxa_atexit" in found.external_calls
    assert not found.constructs_ios_init


@pytest.mark.parametrize("variant", ALL, ids=lambda v: v.name)
def test_iostream_constructs_ios_base_init(variant: Variant) -> None:
    path = build(variant)
    found = effects_of(path)
    io = initializer(found, "io.cpp", "_Z5hellov")
    assert io.constructs_ios_init
    assert AtExit(object=IOINIT_OBJECT, destructor=IOS_INIT_DTOR) in io.atexit
    assert IOINIT_OBJECT in io.writes
    others = [e for name, e in found.items() if e is not io]
    assert others and not any(e.constructs_ios_init for e in others)


# -- reads and writes across translation units ----------------------------------------
@pytest.mark.parametrize("variant", EXECUTABLES, ids=lambda v: v.name)
def test_read_through_a_function_of_another_unit(variant: Variant) -> None:
    path = build(variant)
    found = effects_of(path)
    reader = initializer(found, "a.cpp", "a")
    assert "_Z9compute_av" in reader.calls
    assert B in reader.reads
    assert "a" in reader.writes and B not in reader.writes
    constructor = initializer(found, "b.cpp", B)
    assert B in constructor.writes
    assert AtExit(object=B, destructor=STRING_DTOR) in constructor.atexit
    if variant.optimized:
        assert reader.complete


@pytest.mark.parametrize("variant", LIBRARIES, ids=lambda v: v.name)
def test_interposable_call_to_own_function_is_followed(variant: Variant) -> None:
    """In a library compute_a() is called through the PLT/GOT, yet defined here."""
    path = build(variant)
    reader = initializer(effects_of(path), "a.cpp", "a")
    assert "_Z9compute_av" in reader.external_calls
    assert B in reader.reads


def test_budget_leaves_the_result_incomplete() -> None:
    path = build(EXECUTABLES[1])
    with ElfFile.open(path) as elf:
        entry = next(e for e in list_initializers(elf, str(path)).initializers
                     if e.symbol == "_GLOBAL__sub_I_a")
        assert entry.address is not None
        shallow = initializer_effects(elf, entry.address, max_depth=0)
        one = initializer_effects(elf, entry.address, max_functions=1)
        full = initializer_effects(elf, entry.address)
    assert not shallow.complete and B not in shallow.reads
    assert not one.complete
    assert full.complete and B in full.reads


@pytest.mark.parametrize("variant", LIBRARIES, ids=lambda v: v.name)
def test_library_reads_executable_global_through_got(variant: Variant) -> None:
    path = build(variant)
    assert symbols(path)["exe_value"][1] == "UND"
    assert "exe_value" in got_symbols(path)
    found = initializer(effects_of(path), "lib.cpp", "lib_copy")
    assert "exe_value" in found.reads
    assert "lib_copy" in found.writes
    assert "exe_value" not in found.writes


@pytest.mark.parametrize("variant", LIBRARIES, ids=lambda v: v.name)
def test_thread_local_read(variant: Variant) -> None:
    """__tls_get_addr(&pair) on x86-64, a TLS descriptor call on aarch64."""
    path = build(variant)
    assert symbols(path)["tv"][0] == "STT_TLS"
    found = initializer(effects_of(path), "tls.cpp", "tv")
    assert "tv" in found.reads
    assert "copy_tv" in found.writes
    assert "tv" not in found.external_calls


@pytest.mark.parametrize("variant", ALL, ids=lambda v: v.name)
def test_calls_into_another_library(variant: Variant) -> None:
    path = build(variant)
    assert symbols(path)["getenv"][1] == "UND"
    found = initializer(effects_of(path), "ext.cpp", "env_len")
    assert {"getenv", "strlen"} <= set(found.external_calls)
    assert "env_len" in found.writes
    assert not found.calls or variant.flags[0] == "-O0"


@pytest.mark.parametrize("variant", ALL, ids=lambda v: v.name)
def test_constinit_global_is_never_written(variant: Variant) -> None:
    path = build(variant)
    assert symbols(path)["ci"] == ("STT_OBJECT", ".data")
    found = effects_of(path)
    reader = initializer(found, "ci.cpp", "ci")
    assert "ci" in reader.reads
    assert "reads_ci" in reader.writes
    assert not [name for name, e in found.items() if "ci" in e.writes]


@pytest.mark.parametrize("variant", ALL, ids=lambda v: v.name)
def test_function_local_static_is_not_a_global_write(variant: Variant) -> None:
    path = build(variant)
    found = initializer(effects_of(path), "fls.cpp", "user")
    local = [w for w in found.writes if w.startswith(("_ZZ", "_ZGV"))]
    assert local, "the local static is reported (the risk logic filters it)"
    assert set(found.writes) - set(local) == {"user"}
    assert AtExit(object=local[0], destructor=STRING_DTOR) in found.atexit


# -- what cannot be followed ---------------------------------------------------------------
@pytest.mark.parametrize("variant", [EXECUTABLES[1], EXECUTABLES[5]], ids=lambda v: v.name)
def test_jump_table(variant: Variant) -> None:
    """gcc's x86-64 switch table (32-bit offsets from the table) is read and every case
    followed (gcc for aarch64 compares and branches here)."""
    path = build(variant, ["switch.cpp", "switch_defs.cpp", "main.cpp"])
    found = initializer(effects_of(path), "switch.cpp", "picked")
    assert "selector" in found.reads and "picked" in found.writes
    assert {f"_Z2f{k}v" for k in range(8)} <= set(found.calls)
    assert found.complete and found.stopped == ()


def test_call_through_a_pointer_stops_the_walk() -> None:
    path = build(EXECUTABLES[1], ["hook.cpp", "main.cpp"])
    found = initializer(effects_of(path), "hook.cpp", "hooked")
    assert not found.complete and found.stopped == ("indirect call",)
    assert "hooked" in found.writes


# -- an address is not a read ----------------------------------------------------------------
ADDRESS_UNITS = ["keep.cpp", "measure.cpp", "keepers.cpp", "kept.cpp"]
KEPT = "_Z4keptB5cxx11"


@pytest.mark.parametrize("variant", ALL, ids=lambda v: v.name)
def test_passing_an_address_is_not_reading(variant: Variant) -> None:
    """keep(&kept) stores the pointer; measure(&kept) reads kept.size(): what the called
    function does with its parameter decides, followed through the stack at -O0 and
    through the PLT and GOT in a shared library."""
    units = ADDRESS_UNITS + ([] if variant.shared else ["main.cpp"])
    found = effects_of(build(variant, units))
    keep = initializer(found, "keep.cpp", "kept_once")
    measure = initializer(found, "measure.cpp", "measured")
    assert KEPT not in keep.reads and KEPT not in keep.writes
    assert KEPT in keep.addresses
    assert KEPT in measure.reads and KEPT not in measure.writes


def test_unsupported_machine_gives_unknown_effects() -> None:
    path = build(EXECUTABLES[1])
    data = bytearray(path.read_bytes())
    with ElfFile(bytes(data), str(path)) as elf:
        address = next(e.address for e in list_initializers(elf, str(path)).initializers
                       if e.symbol == "_GLOBAL__sub_I_a")
    data[18:20] = (243).to_bytes(2, "little")  # e_machine = EM_RISCV
    with ElfFile(bytes(data), "riscv") as elf:
        assert address is not None
        assert EffectsAnalyzer(elf).effects(address) == UNKNOWN_EFFECTS
    assert not UNKNOWN_EFFECTS.complete


@pytest.mark.parametrize("variant", [EXECUTABLES[1], EXECUTABLES[5], LIBRARIES[1]],
                         ids=lambda v: v.name)
def test_corrupt_code_raises_only_elfpatch_errors(variant: Variant) -> None:
    path = build(variant)
    data = path.read_bytes()
    with ElfFile(data, str(path)) as elf:
        addresses = [e.address for e in list_initializers(elf, str(path)).initializers
                     if e.address is not None]
        text = next(s for s in elf.sections if s.name == ".text")
    chance = random.Random(20240229)
    for _ in range(60):
        poked = bytearray(data)
        for _ in range(chance.randint(1, 300)):
            poked[chance.randrange(text.offset, text.offset + text.size)] = chance.randrange(256)
        with ElfFile(bytes(poked), "poked") as elf:
            analyzer = EffectsAnalyzer(elf)
            for address in addresses + [chance.randrange(1 << 24) for _ in range(4)]:
                # Any other exception fails the test.
                with contextlib.suppress(ElfpatchError):
                    analyzer.effects(address, max_depth=8, max_functions=500)


# -- what a call may change (gcc's -fipa-ra keeps values across such calls) ------------------
@pytest.mark.parametrize(("mnemonic", "operands", "written"), [
    ("mov", "qword ptr [rdi], rdx", ()),
    ("mov", "rax, rdi", ("rax",)),
    ("lea", "edx, [rdi + 0x10]", ("rdx",)),
    ("movsx", "eax, byte ptr [rdi]", ("rax",)),
    ("pop", "rbx", ("rbx",)),
    ("cmp", "rsi, rdi", ()),
    ("imul", "rcx, rdx, 3", ("rcx",)),
    ("imul", "rdx", None),  # rdx:rax
    ("cdqe", "", None),
    ("rep stosq", "qword ptr [rdi], rax", None),
    ("stosb", "byte ptr [rdi], al", None),
    ("loop", "0x1234", ("rcx",)),
    ("lock add", "dword ptr [rip + 0x10], 1", ()),
    ("movq", "r10, xmm0", ("r10",)),
    ("movaps", "xmm1, xmm0", ()),
])
def test_x86_registers_set(mnemonic: str, operands: str,
                           written: tuple[str, ...] | None) -> None:
    assert X86Walk.registers_set(mnemonic, operands) == written


@pytest.mark.parametrize(("mnemonic", "operands", "written"), [
    ("add", "x2, x8, #0x10", ("x2",)),
    ("mov", "w1, #0xb", ("x1",)),
    ("str", "x2, [x8]", ()),
    ("stp", "x29, x30, [sp, #-0x10]!", ()),  # sp is not tracked
    ("ldp", "x29, x30, [sp], #0x10", ("x29", "x30")),
    ("ldr", "x3, [x1, #8]!", ("x3", "x1")),
    ("stxr", "w1, x2, [x0]", ("x1",)),
    ("ldadd", "w1, w2, [x0]", ("x1", "x2")),
    ("cmp", "x0, #1", ()),
    ("cbz", "x0, #0x40", ()),
    ("svc", "#0", None),
    ("fmov", "x0, d0", ("x0",)),
])
def test_aarch64_registers_set(mnemonic: str, operands: str,
                               written: tuple[str, ...] | None) -> None:
    assert Arm64Walk.registers_set(mnemonic, operands) == written


@pytest.mark.parametrize("variant", [LIBRARIES[1], LIBRARIES[3]], ids=lambda v: v.name)
def test_registers_a_call_may_change(variant: Variant) -> None:
    path = build(variant, ["calls.cpp"])
    address = function_addresses(path)
    with ElfFile.open(path) as elf:
        analyzer = EffectsAnalyzer(elf)

        def written(name: str) -> frozenset[str] | None:
            return analyzer.registers_written(analyzer.code_target(address[name]))

        walk = X86Walk if variant.compiler == X86 else Arm64Walk
        result, first = ("rax", "rdi") if walk is X86Walk else ("x0", "x0")
        assert written("writes_nothing") == frozenset()
        assert written("sum") is not None and result in written("sum")
        if walk is X86Walk:
            assert first not in written("sum")  # read, never written
        inner, outer = written("sum"), written("calls_sum")
        assert outer is not None and inner < outer <= walk.CALLER_SAVED
        assert outer >= walk.CALL_WRITES
        assert written("calls_outside") is None  # through the PLT: anything may run
        assert written("ping") is None and written("pong") is None  # recursion


def function_addresses(path: Path) -> dict[str, int]:
    """name -> st_value of every function symbol (pyelftools)."""
    from elftools.elf.elffile import ELFFile

    with path.open("rb") as handle:
        table = ELFFile(handle).get_section_by_name(".symtab")
        return {s.name: s["st_value"] for s in table.iter_symbols()
                if s["st_info"]["type"] == "STT_FUNC"}


# -- constructor names -----------------------------------------------------------------------
@pytest.mark.parametrize(("symbol", "expected"), [
    ("_ZNSt8ios_base4InitC1Ev", True),
    ("_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEC2IS3_EEPKcRKS3_", True),
    ("_ZN12_GLOBAL__N_13FooC2Ev", True),
    (STRING_DTOR, False),
    ("_ZNKSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE4sizeEv", False),
    ("_ZN3c104ABC1ltEv", False),  # "C1" inside a name, not a constructor
    ("_Z9compute_av", False),
])
def test_is_constructor(symbol: str, expected: bool) -> None:
    assert is_constructor(symbol) is expected

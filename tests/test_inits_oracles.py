"""`elfpatch inits` against independent oracles: the program, ASan, readelf and nm.

1. Across objects: a library's initializer that reads a global the program
   (or a library depending on it) constructs later prints the unconstructed
   value; ``inits --closure`` calls it a ``cross-object-init-order`` error,
   the fixed programs get none, and one object alone gets none either
   (``fixtures/cross_object_init_order``).
2. ASan's init-order checker on the same binaries, strict and not: where it
   and elfpatch agree, and where and why they do not.
3. The init_array slots (index, address, symbol) equal what ``readelf -W -r``
   (RELA, REL, RELR), ``readelf -x .init_array`` and ``nm`` give, for
   executables (PIE and fixed-address) and shared libraries, with and
   without packed relative relocations, for x86-64, aarch64, i686 (REL) and
   s390x (big-endian), and with slots whose bytes are zero (aarch64's
   ``--no-apply-dynamic-relocs``, an x86-64 copy zeroed by hand) so that only
   the addends give the targets; and, opt-in, for a real library named by
   ``$ELFPATCH_TORCH_LIB`` (e.g. libtorch_cpu.so).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import pytest
from conftest import run_elfpatch
from elfpatch.fixtures import build
from support.build import TORCH_LIBRARY_VARIABLE, opt_in_file
from support.readelf import (
    ReadelfRelocation,
    nm_names,
    readelf_dynamic_tags,
    readelf_hex_dump,
    readelf_relocations,
    readelf_section,
    readelf_word_and_order,
)
from support.tools import cxx_package

DESTRUCTOR = "exit-time-destructor"
CROSS = "cross-object-init-order"

APP_NAME = "_Z8app_nameB5cxx11"  # std::string app_name
TOP_LABEL = "_Z9top_labelB5cxx11"  # std::string top_label
CONFIG_NAME = "_Z11config_nameB5cxx11"  # siof's std::string config_name
APP_CONSTRUCTOR = "_GLOBAL__sub_I__Z9make_nameB5cxx11v"  # gcc names it after make_name()


@cache
def inits_document(*args: str) -> dict:
    """``elfpatch inits --json ARGS``, once per argument list."""
    result = run_elfpatch("inits", "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def order_risks(document: dict, folder: Path | None = None,
                ) -> list[tuple[str, str, str, str, str, str | None]]:
    """(file name, severity, kind, object, reader, constructed_by) of every risk but
    exit-time destructors, of the files inside ``folder`` (all files when None)."""
    inside = folder.resolve() if folder is not None else None
    return [(Path(f["path"]).name, r["severity"], r["kind"], r["object"], r["reader"],
             r["constructed_by"])
            for f in document["files"]
            if inside is None or Path(f["path"]).resolve().parent == inside
            for r in f["risks"] if r["kind"] != DESTRUCTOR]


def cross_object_risks(document: dict) -> list[tuple[str, str, str, str, str, str | None]]:
    """The cross-object risks of every object of the closure, system libraries included."""
    return [risk for risk in order_risks(document) if risk[2] == CROSS]


def printed(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    return dict(pairs)


# -- 1. cross-object init order, end to end ----------------------------------------------

@pytest.fixture(scope="module", params=["x86_64", "aarch64"])
def cross_object(request: pytest.FixtureRequest, cxx: build.Toolchain) -> build.ScenarioBuild:
    toolchain: build.Toolchain | None = cxx
    if request.param != "x86_64":
        toolchain = build.cross_toolchain(request.param)
        if toolchain is None:
            pytest.skip(f"no {request.param} cross compiler installed "
                        f"(apt-get install g++-{request.param}-linux-gnu)")
    return build.build_scenario("cross_object_init_order", toolchain=toolchain)


def run_program(built: build.ScenarioBuild, program: str) -> dict[str, str]:
    if not built.toolchain.runner_available():
        pytest.skip(f"cannot run {built.toolchain.name} programs: {built.toolchain.runner[0]} is "
                    "not installed (apt-get install qemu-user)")
    result = built.run(program=program)
    assert result.returncode == 0, result.stderr
    return printed(result)


BROKEN = {
    # program: (what it prints, the risk inits --closure reports)
    "app": ({"reader_seen_length": "0", "app_name_length": "11"},
            ("libreader.so", "error", CROSS, APP_NAME, "_GLOBAL__sub_I_reader.cpp",
             APP_CONSTRUCTOR)),
    "stack": ({"base_seen_length": "0", "top_label_length": "9"},
              ("libbase.so", "error", CROSS, TOP_LABEL, "_GLOBAL__sub_I_base.cpp",
               "_GLOBAL__sub_I_top.cpp")),
}


@pytest.mark.parametrize("program", sorted(BROKEN))
def test_cross_object_read_is_an_error_in_the_closure(cross_object: build.ScenarioBuild,
                                                      program: str) -> None:
    output, risk = BROKEN[program]
    # The oracle: the library's initializer really saw the global unconstructed.
    assert run_program(cross_object, program) == output
    document = inits_document("--closure", str(cross_object.path(program)))
    assert order_risks(document, cross_object.dir) == [risk]
    assert cross_object_risks(document) == [risk]
    reader = next(f for f in document["files"] if Path(f["path"]).name == risk[0])
    (message,) = [r["message"] for r in reader["risks"] if r["kind"] == CROSS]
    definer = "app" if program == "app" else "libtop.so"
    assert f"{cross_object.path(definer)} constructs in an initializer that runs later" \
        in message
    assert "constinit/constexpr or reach it through a function-local static" in message
    closure = [Path(entry["path"]).name for entry in document["closure"]]
    assert closure.index(risk[0]) < closure.index(definer)  # glibc's run order


@pytest.mark.parametrize("program", ["app_first_use", "app_constinit"])
def test_fixed_programs_have_no_cross_object_risk(cross_object: build.ScenarioBuild,
                                                  program: str) -> None:
    assert run_program(cross_object, program) == {"reader_seen_length": "11",
                                                  "app_name_length": "11"}
    document = inits_document("--closure", str(cross_object.path(program)))
    assert order_risks(document, cross_object.dir) == []
    assert cross_object_risks(document) == []
    library = f"libreader{program.removeprefix('app')}.so"
    assert {Path(f["path"]).name for f in document["files"]} >= {program, library}


def test_one_object_alone_has_no_cross_object_risk(cross_object: build.ScenarioBuild) -> None:
    names = ["app", "libreader.so", "stack", "libbase.so", "libtop.so"]
    document = inits_document(*(str(cross_object.path(name)) for name in names))
    assert "closure" not in document
    assert [Path(f["path"]).name for f in document["files"]] == names
    # Each object alone: the program and libtop.so construct their string (and
    # register its destructor); the readers read a global no initializer of
    # their own object constructs, which is not a risk inside that object.
    risks = {Path(f["path"]).name: [(r["kind"], r["object"]) for r in f["risks"]]
             for f in document["files"]}
    assert risks == {"app": [(DESTRUCTOR, APP_NAME)], "libreader.so": [], "stack": [],
                     "libbase.so": [], "libtop.so": [(DESTRUCTOR, TOP_LABEL)]}


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_cross_object_read_found_when_registers_live_across_a_local_call(
        cxx: build.Toolchain, machine: str) -> None:
    """At -Os, gcc's -fipa-ra keeps &app_name in a caller-saved register (rsi; x8 on
    aarch64) across the call to make_name(), which it knows leaves that register
    alone, and then passes it to __cxa_atexit: the analysis must keep what a call
    into the object's own code provably does not change."""
    toolchain = cxx if machine == "x86_64" else build.cross_toolchain(machine)
    if toolchain is None:
        pytest.skip(f"no {machine} cross compiler installed "
                    f"(apt-get install {cxx_package(machine)})")
    scenario = build.SCENARIOS["cross_object_init_order"]
    targets = [t for t in scenario.targets if t.output in ("libreader.so", "app")]
    folder = build.build_targets(scenario.sources(), targets, ("-Os", "-g0", "-std=c++20"),
                                 toolchain, label=f"cross_object_init_order-Os-{machine}")
    built = build.ScenarioBuild(scenario, "Os", folder, toolchain)
    assert run_program(built, "app")["reader_seen_length"] == "0"
    document = inits_document("--closure", str(folder / "app"))
    assert order_risks(document, folder) == [BROKEN["app"][1]]


# -- 2. ASan's init-order checker ------------------------------------------------------------

ASAN_FLAGS = ("-fsanitize=address", "-g")
# Leak checking is off: it is not what is compared, and it needs ptrace at exit.
STRICT = "check_initialization_order=1:strict_init_order=1:detect_leaks=0"
NOT_STRICT = "check_initialization_order=1:detect_leaks=0"

_FIASCO = re.compile(r"ERROR: AddressSanitizer: (initialization-order-fiasco) on address")
_GLOBAL = re.compile(r"is located \d+ bytes inside of global variable '([^']+)' "
                     r"defined in '([^':]+)")
_FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in (\S+) (\S+?):\d+")


@dataclass(frozen=True)
class AsanRun:
    exit_code: int
    printed: dict[str, str]
    # (error, global, the file defining it, the initializer reading it, its file)
    findings: tuple[tuple[str, str, str, str, str], ...]


def asan_findings(stderr: str) -> tuple[tuple[str, str, str, str, str], ...]:
    found = []
    for report in stderr.split("==ERROR: ")[1:]:
        error = _FIASCO.search("ERROR: " + report)
        variable = _GLOBAL.search(report)
        frames = [m.groups() for m in map(_FRAME.match, report.splitlines()) if m]
        reader = next((f for f in frames if f[0].startswith("_GLOBAL__sub_I")), ("?", "?"))
        assert error and variable, report
        found.append((error.group(1), variable.group(1), variable.group(2), reader[0],
                      Path(reader[1]).name))
    return tuple(found)


@pytest.fixture(scope="module")
def asan(cxx: build.Toolchain) -> dict[str, Path]:
    """The siof and cross-object programs built with -fsanitize=address -g."""
    try:
        build.build_executable({"probe.cpp": "int main() { return 0; }\n"}, "asan_probe",
                               ASAN_FLAGS)
    except build.BuildError as error:
        pytest.skip(f"cannot link with -fsanitize=address (apt-get install libasan8): "
                    f"{error.reason}")
    folders = {}
    for name in ("siof", "cross_object_init_order"):
        scenario = build.SCENARIOS[name]
        folders[name] = build.build_targets(scenario.sources(), scenario.targets,
                                            (*scenario.flags, *ASAN_FLAGS), label=f"{name}-asan")
    return folders


def asan_run(folder: Path, program: str, options: str) -> AsanRun:
    environment = {**os.environ, "ASAN_OPTIONS": options, "LD_LIBRARY_PATH": str(folder)}
    result = subprocess.run([str(folder / program)], capture_output=True, text=True,
                            env=environment, cwd=folder, timeout=60)
    return AsanRun(result.returncode, printed(result), asan_findings(result.stderr))


SIOF_FIASCO = ("initialization-order-fiasco", "config_name", "config.cpp",
               "_GLOBAL__sub_I_consumer_length", "consumer.cpp")
SIOF_LINK_ORDER_WARNING = ("warning", "link-order-dependence", CONFIG_NAME,
                           "_GLOBAL__sub_I_consumer_length")


def siof_risks(folder: Path, program: str) -> list[tuple[str, str, str, str]]:
    return [risk[1:5] for risk in order_risks(inits_document(str(folder / program)))]


@pytest.mark.parametrize("options", [STRICT, NOT_STRICT])
def test_asan_and_elfpatch_agree_on_the_wrong_link_order(asan: dict[str, Path],
                                                         options: str) -> None:
    run = asan_run(asan["siof"], "bad_order", options)
    assert (run.exit_code, run.printed, run.findings) == (1, {}, (SIOF_FIASCO,))
    assert siof_risks(asan["siof"], "bad_order") == [
        ("error", "init-order", CONFIG_NAME, "_GLOBAL__sub_I_consumer_length")]


@pytest.mark.parametrize("program", ["good_order", "priority_order"])
def test_asan_strict_mode_flags_an_order_that_works(asan: dict[str, Path],
                                                    program: str) -> None:
    # Not strict: config.cpp's initializer has run (link order, or init_priority(200)),
    # so ASan is silent and the program prints the constructed length.
    relaxed = asan_run(asan["siof"], program, NOT_STRICT)
    assert (relaxed.exit_code, relaxed.findings) == (0, ())
    assert relaxed.printed["consumer_length"] == "10"
    # Strict: ASan poisons every other TU's dynamically initialised global while
    # an initializer runs, whether or not it is already constructed, so it reports
    # the same fiasco as in the wrong order and stops the program.
    strict = asan_run(asan["siof"], program, STRICT)
    assert (strict.exit_code, strict.printed, strict.findings) == (1, {}, (SIOF_FIASCO,))
    # elfpatch disagrees on purpose: it sees config.cpp's initializer run first, so
    # the read is no error.  By the link order alone, it is a link-order dependence
    # (a warning); init_priority(200) holds in every link order, so no risk at all.
    expected = [SIOF_LINK_ORDER_WARNING] if program == "good_order" else []
    assert siof_risks(asan["siof"], program) == expected


def test_neither_sees_the_registry_winner_depend_on_link_order(asan: dict[str, Path]) -> None:
    # Two TUs register the same key in a function-local static registry: the last
    # one wins, so the link order decides the winner.  No global is read before
    # its construction, so ASan is silent and elfpatch names only config_name.
    good, bad = (asan_run(asan["siof"], program, NOT_STRICT)
                 for program in ("good_order", "bad_order"))
    assert (good.printed["winner"], good.findings) == ("plugin_b", ())
    assert bad.findings == (SIOF_FIASCO,)  # bad_order stops at config_name first
    relaxed = asan_run(asan["siof"], "bad_order", "detect_leaks=0")
    assert (relaxed.printed["winner"], relaxed.findings) == ("plugin_a", ())
    for program in ("good_order", "bad_order"):
        assert {risk[2] for risk in siof_risks(asan["siof"], program)} == {CONFIG_NAME}


@pytest.mark.parametrize("options", [STRICT, NOT_STRICT])
@pytest.mark.parametrize("program", sorted(BROKEN))
def test_asan_misses_the_cross_object_read(asan: dict[str, Path], program: str,
                                           options: str) -> None:
    folder = asan["cross_object_init_order"]
    run = asan_run(folder, program, options)
    output, risk = BROKEN[program]
    # ASan registers an object's globals from that object's own initializer (gcc's
    # _sub_I_00099_1, first in its init_array, calls __asan_register_globals): when
    # the library's initializer reads the global, the program's (or libtop.so's)
    # initializers have not run, so ASan does not know the global exists and cannot
    # poison it.  The program reads the unconstructed value and ASan reports nothing,
    # in either mode.
    assert (run.exit_code, run.printed, run.findings) == (0, output, ())
    # elfpatch reports the read from the same instrumented binaries.
    assert order_risks(inits_document("--closure", str(folder / program)), folder) == [risk]


@pytest.mark.parametrize("options", [STRICT, NOT_STRICT])
@pytest.mark.parametrize("program", ["app_first_use", "app_constinit"])
def test_asan_and_elfpatch_agree_the_fixed_programs_are_clean(asan: dict[str, Path],
                                                              program: str,
                                                              options: str) -> None:
    folder = asan["cross_object_init_order"]
    run = asan_run(folder, program, options)
    assert (run.exit_code, run.printed, run.findings) == (
        0, {"reader_seen_length": "11", "app_name_length": "11"}, ())
    assert order_risks(inits_document("--closure", str(folder / program)), folder) == []


# -- 3. init_array slots against readelf and nm ---------------------------------------------

SLOT_SOURCES = {
    "first.cpp": """
extern "C" int puts(const char*);
namespace { struct Announce { explicit Announce(const char* what) { puts(what); } }; }
static Announce first_unit("first");
__attribute__((init_priority(300))) static Announce early_unit("first, early");
// Global and default visibility: in a shared library its slot is filled by an
// absolute relocation against the symbol, which another object may interpose.
extern "C" __attribute__((constructor)) void exported_constructor() { puts("exported"); }
__attribute__((constructor(250))) static void local_constructor() { puts("local"); }
""",
    "second.cpp": """
extern "C" int puts(const char*);
namespace { struct Announce { explicit Announce(const char* what) { puts(what); } }; }
static Announce second_unit("second");
""",
}
MAIN = {"main.cpp": "int main() { return 0; }\n"}
LAYOUTS = {"pie": ["-fPIE", "-pie"], "no-pie": ["-fno-PIE", "-no-pie"], "shared": ["-fPIC"]}
VARIANT_FLAGS = {
    "plain": [],
    "relr": ["-Wl,-z,pack-relative-relocs"],
    # aarch64's ld leaves the relocated words zero; RELA addends are the only targets.
    "no-apply-dynamic-relocs": ["-Wl,--no-apply-dynamic-relocs"],
    # Built plain, then the .init_array bytes of a copy are zeroed (see zero_the_slots).
    "zeroed-slots": [],
}
MACHINES = ["x86_64", "aarch64", "i686", "s390x"]
ABSOLUTE_TYPES = {"R_X86_64_64", "R_AARCH64_ABS64", "R_386_32", "R_390_64"}
# ld packs relative relocations for these (binutils 2.40 ignores the option, with a
# warning, for aarch64 and s390x).
PACKING_LINKERS = {"x86_64", "i686"}
# The slots' symbols, in order: constructor(250) and init_priority(300) first, then
# the crt's frame_dummy and the unprioritised entries in link order.  gcc names a
# TU's initializer after its first global symbol or after the file.
EXPECTED_PREFIXES = ["_ZL17local_constructorv", "_GLOBAL__sub_I.00300_", "frame_dummy",
                     "exported_constructor", "_GLOBAL__sub_I_", "_GLOBAL__sub_I_second.cpp"]


def init_array_section(path: Path) -> tuple[int, int, int, Literal["little", "big"]]:
    """(address, size, word size, byte order) of .init_array, from readelf -h and -S."""
    word, order = readelf_word_and_order(path)
    section = readelf_section(path, ".init_array")
    return section.address, section.size, word, order


def section_words(path: Path, size: int, word: int, order: Literal["little", "big"]) -> list[int]:
    """The section's words as stored in the file, from ``readelf -x``'s hex dump."""
    data = readelf_hex_dump(path, ".init_array", size)
    return [int.from_bytes(data[i:i + word], order) for i in range(0, size, word)]


def relocations(path: Path, low: int, high: int) -> tuple[dict[int, ReadelfRelocation], set[int]]:
    """The dynamic relocations (and RELR locations) of the slots in [low, high)."""
    listed = readelf_relocations(path)
    by_slot = {r.offset: r for r in listed.entries if low <= r.offset < high}
    return by_slot, {address for address in listed.relr if low <= address < high}


def readelf_init_array(path: Path) -> list[tuple[int, int, int, str]]:
    """(index, slot address, target, how) of every .init_array slot, as readelf shows them.

    A RELATIVE relocation's target is its addend (RELA) or the slot's content
    (REL); an absolute one's the symbol's value plus that addend; a RELR
    location's or an unrelocated slot's (fixed-address executables) the content.
    """
    address, size, word, order = init_array_section(path)
    contents = section_words(path, size, word, order)
    by_slot, relr = relocations(path, address, address + size)
    slots = []
    for index, stored in enumerate(contents):
        slot = address + index * word
        relocation = by_slot.get(slot)
        if relocation is None:
            slots.append((index, slot, stored, "relr" if slot in relr else "content"))
            continue
        assert slot not in relr, f"slot {slot:#x} relocated twice"
        how = "relative" if relocation.type.endswith("_RELATIVE") else "absolute"
        assert how == "relative" or relocation.type in ABSOLUTE_TYPES, relocation
        addend = stored if relocation.addend is None else relocation.addend
        slots.append((index, slot, relocation.value + addend, how))
    return slots


def oracle_slots(path: Path) -> list[tuple[int, int, set[str], str]]:
    """(index, target, names nm gives the target, how the slot is filled), in slot order."""
    slots = readelf_init_array(path)
    names = nm_names(path, {target for _index, _slot, target, _how in slots})
    return [(index, target, names.get(target, set()), how)
            for index, _slot, target, how in slots]


def elfpatch_slots(path: Path) -> list[tuple[int, int, str]]:
    (listed,) = inits_document(str(path))["files"]
    return [(e["index"], e["address"], e["symbol"]) for e in listed["initializers"]
            if e["kind"] == "init_array"]


def slot_fixture(machine: str, layout: str, variant: str) -> Path:
    toolchain = build.host_toolchain() if machine == "x86_64" else build.cross_toolchain(machine)
    if toolchain is None or not toolchain.available():
        pytest.skip(f"no {machine} C++ compiler installed (apt-get install {cxx_package(machine)})")
    flags = ["-O1", *LAYOUTS[layout], *VARIANT_FLAGS[variant]]
    name = f"slots-{machine}-{layout}-{variant}"
    if layout == "shared":
        return build.build_shared(SLOT_SOURCES, name, flags, toolchain=toolchain)
    return build.build_executable({**SLOT_SOURCES, **MAIN}, name, flags, toolchain=toolchain)


def zero_the_slots(path: Path, destination: Path) -> Path:
    """A copy whose .init_array bytes are zero: the loader only uses the RELA addends."""
    section = readelf_section(path, ".init_array")
    offset, size = section.offset, section.size
    data = bytearray(path.read_bytes())
    data[offset:offset + size] = bytes(size)
    destination.write_bytes(bytes(data))
    destination.chmod(0o755)
    return destination


def expected_filling(path: Path, machine: str, layout: str, variant: str) -> dict[str, int]:
    """How readelf must show the six slots filled: what the fixture exercises."""
    if layout == "no-pie":  # nothing to relocate, packed or not
        return {"content": 6}
    packed = variant == "relr" and "RELR" in readelf_dynamic_tags(path)
    assert packed or variant != "relr" or machine not in PACKING_LINKERS
    relative = "relr" if packed else "relative"
    return {relative: 6} if layout == "pie" else {relative: 5, "absolute": 1}


def _case(machine: str, layout: str, variant: str) -> object:
    return pytest.param((machine, layout, variant), id=f"{machine}-{layout}-{variant}")


CASES = [*(_case(machine, layout, variant) for machine in MACHINES for layout in LAYOUTS
           for variant in ("plain", "relr")),
         *(_case("aarch64", layout, "no-apply-dynamic-relocs") for layout in ("pie", "shared")),
         *(_case("x86_64", layout, "zeroed-slots") for layout in ("pie", "shared"))]


@pytest.mark.parametrize("case", [*CASES, pytest.param(None, id="real-library")])
def test_init_array_slots_equal_readelf_and_nm(case: tuple[str, str, str] | None,
                                               tmp_path: Path) -> None:
    if case is None:
        path = opt_in_file(TORCH_LIBRARY_VARIABLE, "a library (e.g. libtorch_cpu.so)")
    else:
        path = slot_fixture(*case)
        if case[2] == "zeroed-slots":
            path = zero_the_slots(path, tmp_path / path.name)
    expected = oracle_slots(path)
    ours = elfpatch_slots(path)
    assert expected, f"{path}: readelf shows no .init_array slot"
    assert [(index, target) for index, target, _names, _how in expected] == \
        [(index, address) for index, address, _symbol in ours]
    # The name is one nm gives that address; where nm gives several (aliases),
    # the compiler's name for a TU's initializer is the one to show; where it
    # gives none (a stripped object), there is no name.
    for (index, target, names, _how), (_i, _a, symbol) in zip(expected, ours, strict=True):
        preferred = {n for n in names if n.startswith("_GLOBAL__")} or names
        assert symbol in preferred if names else symbol is None, \
            (index, hex(target), symbol, names)
    if case is None:
        return
    fillings: dict[str, int] = {}
    for _index, _target, _names, how in expected:
        fillings[how] = fillings.get(how, 0) + 1
    assert fillings == expected_filling(path, *case)
    if case[2] in ("no-apply-dynamic-relocs", "zeroed-slots"):
        # The slots hold nothing: only the addends can give the targets.
        _address, size, word, order = init_array_section(path)
        assert set(section_words(path, size, word, order)) == {0}
    if case[:2] == ("x86_64", "pie"):  # the run order is the slot order
        run = subprocess.run([str(path)], capture_output=True, text=True, timeout=60)
        assert run.stdout.splitlines() == ["local", "first, early", "exported", "first",
                                           "second"]
    assert all(len(names) == 1 for _i, _t, names, _how in expected)  # no aliases here
    symbols = [symbol for _i, _a, symbol in ours]
    assert len(symbols) == len(EXPECTED_PREFIXES)
    assert all(s.startswith(p) for s, p in zip(symbols, EXPECTED_PREFIXES, strict=True)), symbols

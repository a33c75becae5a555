"""What the `inits` fixture tests share: builds per machine, runs, and `inits --json` risks.

A fixture is built for x86-64 with the host's g++ and for aarch64 with
Debian's cross g++; the aarch64 programs run under qemu-user when it is
installed (otherwise the test that needs the run skips).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest
from conftest import run_elfpatch
from elfpatch.fixtures import build

from elfpatch.analysis.effects import EffectsAnalyzer
from elfpatch.elf.file import ElfFile
from support.build import compile_linked
from support.readelf import symtab_address

MACHINES = ["x86_64", "aarch64"]
DESTRUCTOR = "exit-time-destructor"


def toolchain(machine: str) -> build.Toolchain:
    """The compiler for ``machine``, or a skip naming what to install."""
    if machine == "x86_64":
        found = build.host_toolchain()
        if not found.available():
            pytest.skip(f"{found.cxx} is not installed (apt-get install g++)")
        return found
    cross = build.cross_toolchain(machine)
    if cross is None:
        pytest.skip(f"no {machine} cross compiler (apt-get install g++-{machine}-linux-gnu)")
    return cross


def scenario(name: str, machine: str = "x86_64") -> build.ScenarioBuild:
    return build.build_scenario(name, toolchain=toolchain(machine))


def printed(built: build.ScenarioBuild, program: str,
            env: dict[str, str] | None = None) -> dict[str, str]:
    """The ``key=value`` lines ``program`` prints (run under qemu for aarch64)."""
    if not built.toolchain.runner_available():
        pytest.skip(f"cannot run {built.toolchain.name} programs: {built.toolchain.runner[0]} is "
                    "not installed (apt-get install qemu-user)")
    result = built.run(program=program, env=env)
    assert result.returncode == 0, result.stderr
    pairs = (line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    return dict(pairs)


@cache
def inits(*args: str) -> dict:
    """``elfpatch inits --json ARGS``, once per argument list."""
    result = run_elfpatch("inits", "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def inits_of(path: Path, *options: str) -> dict:
    """The one file's record of ``inits --json``."""
    (record,) = inits(*options, str(path))["files"]
    return record


# The findings of an order between initializers (the rest: exit-time destructors).
ORDER_KINDS = ("init-order", "link-order-dependence")


def risks(record: dict, *kinds: str) -> list[dict]:
    """The risks of one file's record, of the given kinds (all but exit-time destructors)."""
    return [r for r in record["risks"]
            if (r["kind"] in kinds if kinds else r["kind"] != DESTRUCTOR)]


def risk_identities(record: dict) -> set[tuple]:
    """What identifies each risk by address, whatever names the file keeps (a stripped
    build's findings are its unstripped build's)."""
    return {(r["severity"], r["kind"], r.get("object_address"), r.get("reader_address"),
             r.get("constructed_by_address")) for r in record["risks"]}


def errors(record: dict) -> list[tuple[str, str]]:
    """(kind, object) of each error of one file's record."""
    return [(r["kind"], r["object"]) for r in record["risks"] if r["severity"] == "error"]


def closure_errors(document: dict, folder: Path) -> list[tuple[str, str, str]]:
    """(file name, kind, object) of each error of the closure's objects inside ``folder``."""
    inside = folder.resolve()
    return [(Path(f["path"]).name, r["kind"], r["object"]) for f in document["files"]
            if Path(f["path"]).resolve().parent == inside
            for r in f["risks"] if r["severity"] == "error"]


def compiler_runs(flags: tuple[str, ...], machine: str = "x86_64") -> bool:
    """Whether g++ can build and link a program with ``flags`` (a sanitizer's library)."""
    try:
        build.build_executable({"probe.cpp": "int main() { return 0; }\n"}, "probe",
                               flags, toolchain=toolchain(machine))
    except build.BuildError:
        return False
    return True


def local_objects(**sizes: int) -> str:
    """The end of a hand-written assembly source: a zeroed object of this file alone
    for each name (its size its alignment), and the note that asks for no executable
    stack."""
    lines = [f"    .local {name}\n    .comm {name}, {size}, {size}\n"
             for name, size in sizes.items()]
    return "".join(lines) + '    .section .note.GNU-stack,"",@progbits\n'


def assembled_events(compiler: str, source: str, library: Path, function: str) -> list:
    """The events of ``function``'s own code (``EffectsAnalyzer.summary``) in the shared
    library ``compiler`` assembles from ``source`` at ``library``: hand-written code
    whose layout no compiler moves."""
    compile_linked(compiler, "assembler", library, source, soname=library.name)
    with ElfFile.open(str(library)) as elf:
        return EffectsAnalyzer(elf).summary(symtab_address(library, function)).events


def strip_unneeded(machine: str, path: Path, folder: Path) -> Path:
    """A ``strip --strip-unneeded`` copy of ``path`` in ``folder`` (what distributions and
    most wheels ship), made with ``machine``'s binutils."""
    name = "strip" if machine == "x86_64" else f"{machine}-linux-gnu-strip"
    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed (apt-get install binutils)")
    copy = folder / path.name
    shutil.copy(path, copy)
    subprocess.run([name, "--strip-unneeded", str(copy)], check=True, capture_output=True)
    return copy


def charged_only_the_reader(path: Path, found: list[dict], printed_out: dict[str, str],
                            object_symbol: str) -> None:
    """``found`` (``path``'s order findings) names only ``object_symbol``, never
    ``early.cpp``'s initializer, and holds an error exactly where the program printed
    that ``reader.cpp`` saw the object unbuilt (``reader_seen=0``): the fixtures
    whose ``early.cpp`` only looks like a reader (``error_path``,
    ``constant_switch``)."""
    from support.readelf import symtab_address, tu_initializer

    target = symtab_address(path, object_symbol)
    assert all(r["object_address"] == target for r in found), found
    early = tu_initializer(path, "early")
    assert not [r for r in found if r["reader_address"] == early], found
    assert not [r for r in found if "early.cpp" in r["message"]], found
    errors = [r for r in found if r["severity"] == "error"]
    assert bool(errors) == (printed_out["reader_seen"] == "0"), (printed_out, found)


def same_when_stripped(machine: str, path: Path, folder: Path) -> dict:
    """``path``'s ``inits --json`` record, once its ``strip --strip-unneeded`` copy (in
    ``folder``) is checked to give the same findings, by address."""
    plain = inits_of(path)
    stripped = inits_of(strip_unneeded(machine, path, folder))
    assert risk_identities(stripped) == risk_identities(plain), (plain["risks"],
                                                                 stripped["risks"])
    return plain


def order_risks_when_stripped(machine: str, path: Path, folder: Path) -> list[dict]:
    """``path``'s init-order and link-order findings, once its stripped copy (in ``folder``)
    is checked to give the same (``same_when_stripped``)."""
    return risks(same_when_stripped(machine, path, folder), *ORDER_KINDS)


ASAN = ("-fsanitize=address", "-g")
ASAN_DEFAULT = "check_initialization_order=1:detect_leaks=0"
ASAN_STRICT = "check_initialization_order=1:strict_init_order=1:detect_leaks=0"


def asan_build(name: str) -> Path:
    """The scenario's programs but those built with -flto (gcc's init-order checker is
    off there), rebuilt with AddressSanitizer for x86-64."""
    if not compiler_runs(ASAN):
        pytest.skip("cannot link with -fsanitize=address (apt-get install libasan8)")
    fixture = build.SCENARIOS[name]
    targets = [t for t in fixture.targets if not t.output.endswith("_lto")]
    return build.build_targets(fixture.sources(), targets, (*fixture.flags, *ASAN),
                               toolchain("x86_64"), label=f"{name}-asan")


def asan_reader(program: Path, options: str) -> str | None:
    """The TU ASan's init-order checker stops in, or None when the run is clean."""
    result = subprocess.run([str(program)], capture_output=True, text=True,
                            env={**os.environ, "ASAN_OPTIONS": options}, timeout=60)
    if "initialization-order-fiasco" not in result.stderr:
        assert result.returncode == 0, result.stderr[-2000:]
        return None
    # _GLOBAL__sub_I_<file>, or _GLOBAL__sub_I.00101_<object> at an init_priority.
    frames = [line for line in result.stderr.splitlines() if " in _GLOBAL__sub_I" in line]
    return Path(frames[0].rpartition(" ")[2].partition(":")[0]).name


def run_raw(built: build.ScenarioBuild, folder: Path, program: str,
            env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``program`` of a build made outside the scenario cache (another set of flags)."""
    copy = build.ScenarioBuild(built.scenario, built.variant, folder, built.toolchain)
    return copy.run(program=program, env=env)


def merged_initializer(path: Path) -> str:
    """The x86-64 disassembly of the function gcc -flto merged ``path``'s initializers
    into (``_sub_I_65535_0.0``)."""
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump is not installed (apt-get install binutils)")
    listing = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(path)],
                             capture_output=True, text=True, check=True).stdout
    start = listing.index("<_sub_I_65535_0.0>:")
    return listing[start:listing.find("\n\n", start)]

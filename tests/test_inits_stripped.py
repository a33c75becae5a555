"""`inits` on stripped files: entries are placed by address and the nearest exported function."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from elfpatch.fixtures import build
from support.build import invoke
from support.inits import MACHINES, inits_of, scenario, strip_unneeded

SOURCES = {
    "lib.cpp": """
#include <string>
extern "C" int exported_first() { return 1; }
std::string made_at_load(20, 'x');
extern "C" int exported_last() { return (int)made_at_load.size(); }
""",
}


@pytest.fixture(scope="module")
def stripped(tmp_path_factory: pytest.TempPathFactory, cxx: object) -> Path:
    strip = shutil.which("strip")
    if strip is None:
        pytest.skip("strip is not installed (apt-get install binutils)")
    library = build.build_shared(SOURCES, "libstripped", ["-O1", "-g0"])
    copy = tmp_path_factory.mktemp("stripped") / library.name
    shutil.copy(library, copy)
    subprocess.run([strip, "--strip-all", str(copy)], check=True)
    return copy


def test_unnamed_entries_say_where_they_are(stripped: Path) -> None:
    document = json.loads(invoke("inits", "--json", str(stripped)).stdout)
    entries = document["files"][0]["initializers"]
    tu_initializer = [e for e in entries if e["kind"] == "init_array" and e["symbol"] is None]
    assert tu_initializer, entries
    # The TU's initializer follows exported_last; the C runtime's frame_dummy precedes
    # every export and is said to be unnamed.
    assert any((e["nearest"] or "").startswith("exported_last+0x") for e in tu_initializer)
    text = invoke("inits", str(stripped)).stdout
    assert "(unnamed)" not in text
    assert "(no symbol names it; after exported_" in text


# -- findings by address: a stripped build says what its unstripped build says --------------
SCENARIOS = ["siof", "destruction_order", "exit_use_after_free", "constant_init",
             "address_only", "cross_object_init_order", "registration", "lto_init_order",
             "constant_switch", "error_path"]


def _findings(path: Path) -> list[tuple]:
    """What identifies each risk of ``inits --json``, whatever names the file keeps."""
    (record,) = json.loads(invoke("inits", "--json", str(path)).stdout)["files"]
    return sorted(((r["severity"], r["kind"], r.get("object_address"),
                    r["object"] if r.get("object_address") is None else None,
                    r.get("reader_address"), r.get("constructed_by_address"))
                   for r in record["risks"]), key=repr)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("name", SCENARIOS)
def test_strip_unneeded_keeps_every_finding(name: str, machine: str, tmp_path: Path) -> None:
    """Every output of the scenario (programs and libraries, -O1 to -O2, with and
    without -flto): the same risks, by address, before and after ``strip
    --strip-unneeded``.  -flto's merged initializer, known by name only, is then
    split into its TUs' initializers by what they do."""
    strip = "strip" if machine == "x86_64" else f"{machine}-linux-gnu-strip"
    if shutil.which(strip) is None:
        pytest.skip(f"{strip} is not installed (apt-get install binutils)")
    built = scenario(name, machine)
    compared = 0
    for output in built.outputs():
        copy = tmp_path / output.name
        shutil.copy(output, copy)
        subprocess.run([strip, "--strip-unneeded", str(copy)], check=True)
        original = _findings(output)
        assert _findings(copy) == original, output.name
        compared += bool(original)
    assert compared  # some output of every scenario has findings to keep


@pytest.mark.parametrize("program", ["lto_ab", "lto_ba"])
def test_stripped_lto_parts_are_labelled_by_plain_address(program: str, tmp_path: Path) -> None:
    """A part of a stripped -flto initializer is named by the first global it builds,
    shown as an address (``the TU constructing 0x51a0``), never as an internal key
    (``@0x51a0``, ``^0x5100``)."""
    import re

    path = scenario("lto_init_order").path(program)
    shown = json.dumps(inits_of(strip_unneeded("x86_64", path, tmp_path)))
    assert "the TU constructing 0x" in shown
    assert not re.search(r"(constructing|reads|for|into) [@^]0x", shown), shown


# A table one vector store fills (gcc -O2 stores the four ints with one movaps, or
# one str q0), and a read of its last element by another TU that the link order
# runs first.  Without symbols, only the store's width says the element is the
# table's.
VECTOR_FILLED = {
    "reader.cpp": "extern int table[4];\nint seen = table[3] + 1;\n",
    "table.cpp": """
int table[4];
static int square(int x) { return x * x; }
__attribute__((constructor)) static void fill_table() {
    for (int i = 0; i < 4; ++i) table[i] = square(i + 1);
}
""",
    "main.cpp": '#include <cstdio>\nextern int seen;\n'
                'int main() { std::printf("seen=%d\\n", seen); }\n',
}


@pytest.mark.parametrize("machine", MACHINES)
def test_a_read_inside_a_vector_store_is_of_the_stored_object(machine: str,
                                                                tmp_path: Path) -> None:
    toolchain = build.host_toolchain() if machine == "x86_64" else build.cross_toolchain(machine)
    if toolchain is None or not toolchain.available():
        pytest.skip(f"no {machine} compiler installed")
    program = build.build_executable(VECTOR_FILLED, "vector_filled", ["-O2"],
                                     toolchain=toolchain)
    if toolchain.runner_available():
        run = subprocess.run([*toolchain.runner, str(program)], capture_output=True, text=True)
        assert run.stdout == "seen=1\n"  # the reader ran first
    for path in (program, strip_unneeded(machine, program, tmp_path)):
        found = [(r["severity"], r["kind"], r["object_address"])
                 for r in inits_of(path)["risks"] if r["kind"] != "exit-time-destructor"]
        assert found == [("error", "init-order", found[0][2])], path

"""`elfpatch inits` finds the init-order errors the fixture programs show at run time."""

from __future__ import annotations

import json
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from conftest import run_elfpatch
from elfpatch.fixtures import build

SAFE_PROGRAM = {
    "value.cpp": """
#include <string>
constinit int table_size = 64;
std::string& greeting() { static std::string text("hello"); return text; }
""",
    "user.cpp": """
#include <string>
extern constinit int table_size;
std::string& greeting();
int doubled = table_size * 2 + static_cast<int>(greeting().size());
""",
    "main.cpp": "extern int doubled;\nint main() { return doubled == 133 ? 0 : 1; }\n",
}


def inits_json(path: Path) -> dict:
    result = run_elfpatch("inits", "--json", str(path))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def order_risks(document: dict) -> list[dict]:
    return [r for r in document["files"][0]["risks"] if r["kind"] != "exit-time-destructor"]


def test_siof_wrong_order_is_an_error(cxx: object) -> None:
    siof = build.build_scenario("siof")
    bad = order_risks(inits_json(siof.path("bad_order")))
    assert [(r["severity"], r["kind"], r["object"]) for r in bad] == [
        ("error", "init-order", "_Z11config_nameB5cxx11")]
    assert bad[0]["reader"] == "_GLOBAL__sub_I_consumer_length"
    assert bad[0]["constructed_by"] == "_GLOBAL__sub_I__Z9make_nameB5cxx11v"
    # The oracle: the program really reads it unconstructed.
    run = subprocess.run([str(siof.path("bad_order"))], capture_output=True, text=True)
    assert "consumer_length=0" in run.stdout


def test_siof_right_link_order_is_a_warning(cxx: object) -> None:
    risks = order_risks(inits_json(build.build_scenario("siof").path("good_order")))
    assert [(r["severity"], r["kind"]) for r in risks] == [("warning", "link-order-dependence")]


def test_an_order_init_priority_holds_is_no_risk(cxx: object) -> None:
    # The wrong link order, with init_priority(200) on config_name: the linker runs
    # its initializer first whatever the link order, as the program shows.
    siof = build.build_scenario("siof")
    assert order_risks(inits_json(siof.path("priority_order"))) == []
    run = subprocess.run([str(siof.path("priority_order"))], capture_output=True, text=True)
    assert "consumer_length=10" in run.stdout


# A size a constructor function computes, read by another TU's initializer that the
# link order runs first: only the constructor's priority decides, which its name does
# not show.  The program prints what the reader saw.
COMPUTED_SIZE = {
    "reader.cpp": "extern int table_size;\nint seen = table_size + 1;\n",
    "size.cpp": """
int table_size;
static int square(int x) { return x * x; }
__attribute__((constructor PRIORITY)) static void compute_size() { table_size = square(4); }
""",
    "main.cpp": '#include <cstdio>\nextern int seen;\n'
                'int main() { std::printf("seen=%d\\n", seen); }\n',
}


@pytest.mark.parametrize("stripped", [False, True])
@pytest.mark.parametrize("priority", ["(200)", ""])
def test_a_constructor_function_priority_is_known_by_its_slot(
        cxx: object, tmp_path: Path, priority: str, stripped: bool) -> None:
    sources = {name: text.replace("PRIORITY", priority)
               for name, text in COMPUTED_SIZE.items()}
    program = build.build_executable(sources, f"size{priority[1:-1]}", ["-O2"])
    if stripped:
        program = Path(shutil.copy(program, tmp_path / program.name))
        subprocess.run(["strip", "--strip-unneeded", str(program)], check=True)
    printed = subprocess.run([str(program)], capture_output=True, text=True).stdout
    risks = [(r["severity"], r["kind"]) for r in order_risks(inits_json(program))]
    if priority:
        # init_priority(200) runs it before every default initializer, the reader too.
        assert printed == "seen=17\n"
        assert risks == []
    else:
        # The default: the link order runs the reader first.
        assert printed == "seen=1\n"
        assert risks == [("error", "init-order")]


def test_constinit_and_function_local_statics_are_not_risks(cxx: object) -> None:
    program = build.build_executable(SAFE_PROGRAM, "safe", ["-O1", "-std=c++20"])
    assert subprocess.run([str(program)]).returncode == 0
    assert order_risks(inits_json(program)) == []


def test_exit_time_destructors_are_listed(cxx: object) -> None:
    scenario = build.build_scenario("destruction_order")
    buggy = inits_json(scenario.path("buggy"))
    destructors = {r["object"] for r in buggy["files"][0]["risks"]
                   if r["kind"] == "exit-time-destructor"}
    assert {"the_logger", "the_service"} <= destructors
    entries = [e for e in buggy["files"][0]["initializers"] if e["registers_destructor"]]
    # No DWARF: the files are named by the STT_FILE symbols of .symtab.
    assert [(e["translation_unit"], e["translation_unit_source"]) for e in entries] == [
        ("service.cpp", "file symbol"), ("logger.cpp", "file symbol")]
    cured = inits_json(scenario.path("cured"))
    cured_objects = {r["object"] for r in cured["files"][0]["risks"]
                     if r["kind"] == "exit-time-destructor"}
    assert "the_logger" not in cured_objects


def test_inits_json_matches_schema(cxx: object) -> None:
    schema = json.loads(resources.files("elfpatch.report").joinpath("inits.schema.json")
                        .read_text())
    document = inits_json(build.build_scenario("siof").path("bad_order"))
    jsonschema.validate(document, schema)
    text = run_elfpatch("inits", str(build.build_scenario("siof").path("bad_order"))).stdout
    assert "init-order" in text and "consumer.cpp" in text


@pytest.mark.parametrize(("symbol", "internal"), [
    ("_ZL8__ioinit", True),  # static std::ios_base::Init __ioinit
    ("_ZStL8__ioinit", True),
    ("_ZN5torch3jitL14activation_opsE", True),  # a namespace-scope static
    ("_ZN12_GLOBAL__N_13fooE", True),  # an anonymous namespace's member
    ("_ZN2at6native12_GLOBAL__N_1L46TORCH_LIBRARY_IMPL_static_init_quantized_CPU_1E", True),
    ("_Z11config_nameB5cxx11", False),
    ("_ZN3c104impl3fooE", False),
    ("plain_c_global", False),
])
def test_internal_linkage_from_the_mangled_name(symbol: str, internal: bool) -> None:
    from elfpatch.analysis.linkage import has_internal_linkage

    assert has_internal_linkage(symbol) is internal

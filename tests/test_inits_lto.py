"""Link-time optimised initializers (``fixtures/lto_init_order``, ``fixtures/siof``).

With -flto gcc merges every TU's dynamic initialization into one
``_sub_I_65535_0.0`` that calls each TU's initializer (or inlines small
ones) in an order of its choosing, which here is not the link order.  Each
program prints the TUs' initializers as they run and what ``a.cpp`` (or
``consumer.cpp``) saw; ``inits`` must report the init-order error exactly
for the builds that print the unconstructed value, with and without LTO, at
-O0 to -O2, on x86-64 and aarch64, and split the merged initializer into
parts in the order the program runs them.
"""

from __future__ import annotations

import pytest
from elfpatch.fixtures import build
from support.inits import MACHINES, errors, inits_of, printed, toolchain

B_NAME = "_Z6b_nameB5cxx11"
CONFIG_NAME = "_Z11config_nameB5cxx11"
MERGED = "_sub_I_65535_0.0"

FLAGS = {
    "O2": ("-O2",),
    "O2-lto": ("-O2", "-flto"),
    "O0-lto": ("-O0", "-flto"),
    "O1-lto": ("-O1", "-flto"),
    "Os-lto-g": ("-Os", "-flto", "-g"),
}


def built(name: str, machine: str, flags: str, orders: dict[str, tuple[str, ...]],
          ) -> build.ScenarioBuild:
    """The fixture's sources linked in each of ``orders``, with one set of flags."""
    scenario = build.SCENARIOS[name]
    compiler = toolchain(machine)
    targets = [build.Target(program, units) for program, units in orders.items()]
    folder = build.build_targets(scenario.sources(), targets, FLAGS[flags], compiler,
                                 label=f"{name}-{flags}-{machine}")
    return build.ScenarioBuild(scenario, flags, folder, compiler)


LTO_ORDERS = {"ab": ("a.cpp", "b.cpp", "main.cpp"), "ba": ("b.cpp", "a.cpp", "main.cpp")}


def run_order(output: str) -> list[str]:
    return [line.split("=", 1)[1] for line in output.splitlines() if line.startswith("init=")]


def part_units(record: dict) -> list[str]:
    """The TU of each part of the merged initializer, told by the global that names it
    (gcc's name for the TU's initializer at -O0, else the first global it builds)."""
    (merged,) = [e for e in record["initializers"] if e["symbol"] == MERGED]
    units = []
    for part in merged["parts"]:
        unit = part["translation_unit"] or ""
        units.append("b.cpp" if " b_" in unit or "make_b" in unit
                     else "a.cpp" if " a_" in unit else unit)
    return units


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("flags", sorted(FLAGS))
@pytest.mark.parametrize("order", sorted(LTO_ORDERS))
def test_error_where_the_program_reads_unconstructed(machine: str, flags: str,
                                                     order: str) -> None:
    programs = built("lto_init_order", machine, flags, LTO_ORDERS)
    if not programs.toolchain.runner_available():
        pytest.skip(f"{programs.toolchain.runner[0]} is not installed: cannot run the aarch64 "
                    "program (apt-get install qemu-user)")
    result = programs.run(program=order)
    assert result.returncode == 0, result.stderr
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines())["a_seen"]
    record = inits_of(programs.path(order))
    expected = [("init-order", B_NAME)] if seen == "0" else []
    assert errors(record) == expected
    if "lto" not in flags:
        assert seen == ("0" if order == "ab" else "17")  # link order
        return
    # LTO ran the TUs in the other order: the bug shows in the other link order.
    assert seen == ("17" if order == "ab" else "0")
    assert part_units(record) == run_order(result.stdout)
    if expected:
        (risk,) = [r for r in record["risks"] if r["severity"] == "error"]
        assert (risk["reader"], risk["constructed_by"]) == (MERGED, MERGED)
        assert risk["reader_part"] < risk["constructed_by_part"]


@pytest.mark.parametrize("machine", MACHINES)
def test_the_fixture_scenario(machine: str) -> None:
    scenario = build.build_scenario("lto_init_order", toolchain=toolchain(machine))
    for program, seen in {"plain_ab": "0", "plain_ba": "17", "lto_ab": "17",
                          "lto_ba": "0"}.items():
        assert printed(scenario, program)["a_seen"] == seen
        assert bool(errors(inits_of(scenario.path(program)))) == (seen == "0")


SIOF_ORDERS = {
    "good": ("config.cpp", "consumer.cpp", "registry.cpp", "plugin_a.cpp", "plugin_b.cpp",
             "main.cpp"),
    "bad": ("consumer.cpp", "config.cpp", "registry.cpp", "plugin_b.cpp", "plugin_a.cpp",
            "main.cpp"),
}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("flags", ["O2", "O2-lto", "O0-lto"])
@pytest.mark.parametrize("order", sorted(SIOF_ORDERS))
def test_small_units_inlined_into_one_initializer(machine: str, flags: str,
                                                  order: str) -> None:
    """At -O2 -flto the siof fixture's TUs are all inlined into the merged initializer:
    program order inside it is what tells the read from the construction."""
    programs = built("siof", machine, flags, SIOF_ORDERS)
    length = printed(programs, order)["consumer_length"]
    record = inits_of(programs.path(order))
    assert errors(record) == ([("init-order", CONFIG_NAME)] if length == "0" else [])
    if flags == "O2":
        assert length == ("0" if order == "bad" else "10")

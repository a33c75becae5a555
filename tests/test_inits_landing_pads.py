"""A call through a register only in code that runs while unwinding leaves the rest
followed to the end.

A factory map of ``std::function`` makers behind an accessor's pointer:
``Factory::add`` inserts with ``std::unordered_map::operator[]``, whose landing
pad (run only when building the node throws) destroys the half-built
``std::function`` through its manager, a call through a register.  That call
used to make ``operator[]`` code not followed to the end, so what ``add`` does
with the factory was unknown, and a look-up before the registration was only a
warning ("may find none").  Code entered only by unwinding is dropped (its
reads and writes were already): its calls through a register no longer stop
the function either.  The oracle is what the program prints: ``lost=1`` where
the look-up ran first.
"""

from __future__ import annotations

import subprocess

import pytest
from elfpatch.fixtures import build
from support.inits import MACHINES, ORDER_KINDS, inits_of, risks, toolchain
from support.tools import require_runner

SOURCES = {
    "factory.h": (
        "#include <functional>\n#include <string>\n#include <unordered_map>\n"
        "struct Factory {\n"
        "    std::unordered_map<std::string, std::function<int()>> makers;\n"
        "    void add(const std::string& name, std::function<int()> maker);\n"
        "    bool knows(const std::string& name) const { return makers.count(name) != 0; }\n"
        "};\n"
        "Factory& factory();\n"),
    "factory.cpp": (
        '#include "factory.h"\n'
        "Factory& factory() { static Factory* made = new Factory(); return *made; }\n"
        "void Factory::add(const std::string& name, std::function<int()> maker) {\n"
        "    makers[name] = std::move(maker);\n"
        "}\n"),
    "maker.cpp": (
        '#include "factory.h"\n'
        'static bool added = (factory().add("sphere", [] { return 3; }), true);\n'),
    "asker.cpp": (
        '#include "factory.h"\n'
        'static const bool known = factory().knows("sphere");\n'
        "bool sphere_known() { return known; }\n"),
    "main.cpp": (
        "#include <cstdio>\nbool sphere_known();\n"
        'int main() { std::printf("lost=%d\\n", sphere_known() ? 0 : 1); }\n'),
}
ORDERS = {"asker_first": ("asker.cpp", "maker.cpp", "factory.cpp", "main.cpp"),
          "maker_first": ("maker.cpp", "asker.cpp", "factory.cpp", "main.cpp")}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("program", sorted(ORDERS))
def test_a_lookup_before_a_member_registration_is_an_error(program: str,
                                                           machine: str) -> None:
    chain = toolchain(machine)
    folder = build.build_targets(SOURCES, [build.Target(program, ORDERS[program])],
                                 ["-O2", "-g0"], toolchain=chain, label="landing-pads")
    require_runner(chain.runner)
    printed = subprocess.run([*chain.runner, str(folder / program)], capture_output=True,
                             text=True, check=True).stdout
    found = [(r["severity"], r["kind"])
             for r in risks(inits_of(folder / program), "registration-order", *ORDER_KINDS)]
    if printed == "lost=1\n":
        assert found == [("error", "registration-order")]
    else:
        assert printed == "lost=0\n"
        assert found == [("warning", "link-order-dependence")]

"""Each fixture reproduces its bug on the plain build and not on the -fno-gnu-unique build."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from elfpatch.fixtures import build
from tests_support import output_of, readelf_unique_names

UNIQUE_SCENARIOS = ["dlclose_noop", "rtld_local_clash", "tls_and_template_member",
                    "cross_library_reference", "shared_singleton", "unload_exposes_bug"]


@pytest.mark.parametrize("scenario", UNIQUE_SCENARIOS)
def test_plain_build_has_unique_symbols_and_oracle_has_none(cxx: object, scenario: str) -> None:
    plain = build.build_scenario(scenario)
    oracle = build.build_scenario(scenario, build.VARIANT_NO_GNU_UNIQUE)
    assert any(readelf_unique_names(lib) for lib in plain.libraries())
    assert not any(readelf_unique_names(lib) for lib in oracle.libraries())


def test_dlclose_noop(cxx: object) -> None:
    assert output_of(build.build_scenario("dlclose_noop")) == {
        "before_close": "2", "still_loaded": "1", "in_maps": "1", "after_reload": "3"}
    assert output_of(build.build_scenario("dlclose_noop", "no-gnu-unique")) == {
        "before_close": "2", "still_loaded": "0", "in_maps": "0", "after_reload": "1"}


def test_rtld_local_clash(cxx: object) -> None:
    plain = build.build_scenario("rtld_local_clash").run().stdout
    assert "plugin2 version=2 cache_version=1 cache_value=100 initialisations=0" in plain
    assert "shared_cache=1" in plain
    oracle = build.build_scenario("rtld_local_clash", "no-gnu-unique").run().stdout
    assert "plugin2 version=2 cache_version=2 cache_value=200 initialisations=1" in oracle
    assert "shared_cache=0" in oracle


def test_tls_and_template_member(cxx: object) -> None:
    plain = build.build_scenario("tls_and_template_member").run().stdout
    assert "plugin2 version=2 member=10 member_initialisations=0 tls=1" in plain
    oracle = build.build_scenario("tls_and_template_member", "no-gnu-unique").run().stdout
    assert "plugin2 version=2 member=20 member_initialisations=1 tls=2" in oracle


def test_cross_library_reference_and_singleton_work_as_built(cxx: object) -> None:
    for variant in ("plain", "no-gnu-unique"):
        reference = build.build_scenario("cross_library_reference", variant)
        assert "base_sees=2" in reference.run().stdout
        assert build.build_scenario("shared_singleton", variant).run().stdout.strip() == \
            "sequence=1,2,3"
    assert "_ZN8RegistryIiE5countE" in readelf_unique_names(
        build.build_scenario("cross_library_reference").path("libbase.so"))


def test_unload_exposes_bug(cxx: object) -> None:
    assert "stale_callback=ok" in build.build_scenario("unload_exposes_bug").run().stdout
    oracle = build.build_scenario("unload_exposes_bug", "no-gnu-unique").run().stdout
    assert "stale_callback=crashed signal=11" in oracle


def test_siof_link_order_changes_results(cxx: object) -> None:
    siof = build.build_scenario("siof")
    outputs = {}
    for program in ("good_order", "bad_order", "priority_order"):
        result = subprocess.run([str(siof.path(program))], capture_output=True, text=True,
                                check=True)
        outputs[program] = result.stdout
    assert "consumer_length=10\nwinner=plugin_b" in outputs["good_order"]
    assert "consumer_length=0\nwinner=plugin_a" in outputs["bad_order"]
    assert "consumer_length=10" in outputs["priority_order"]


def test_destruction_order_and_its_cure(cxx: object) -> None:
    scenario = build.build_scenario("destruction_order")
    buggy = subprocess.run([str(scenario.path("buggy"))], capture_output=True, text=True).stdout
    cured = subprocess.run([str(scenario.path("cured"))], capture_output=True, text=True).stdout
    assert "DESTROYED alive=0: service stopping" in buggy and "thread_saw_alive=0" in buggy
    assert "log alive=1: service stopping" in cured and "thread_saw_alive=1" in cured


def ld_debug_init_order(program: str, cwd: str) -> list[str]:
    env = {**os.environ, "LD_DEBUG": "files"}
    result = subprocess.run([program], capture_output=True, text=True, env=env, cwd=cwd)
    return [Path(m).name for m in re.findall(r"calling init: (\S+)", result.stderr)]


def test_diamond_prints_dependencies_first(cxx: object) -> None:
    diamond = build.build_scenario("init_order_diamond")
    printed = [line.split()[1] for line in diamond.run().stdout.splitlines()]
    assert printed == ["libc_base", "libb", "liba", "main"]
    order = ld_debug_init_order(str(diamond.path("main")), str(diamond.dir))
    users = [name for name in order if name.startswith("lib") and name[3:4] in "abc"
             and name in ("libc_base.so", "liba.so", "libb.so")]
    assert users == ["libc_base.so", "libb.so", "liba.so"]


def test_aarch64_clash_reproduces_under_qemu(aarch64: build.Toolchain) -> None:
    plain = build.build_scenario("rtld_local_clash", toolchain=aarch64)
    assert all(readelf_unique_names(lib) for lib in plain.libraries())
    if not aarch64.runner_available():
        pytest.skip("qemu-user is not installed: built, not run")
    assert "shared_cache=1" in plain.run().stdout
    oracle = build.build_scenario("rtld_local_clash", "no-gnu-unique", toolchain=aarch64)
    assert "shared_cache=0" in oracle.run().stdout

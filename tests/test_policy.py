"""The check policy checks itself when made, in the API and in ``[tool.elfpatch]``: a
mistyped level, a pattern that is not one, a value of the wrong type or an unknown key is
one line (exit 2), never a policy that quietly passes; and what the API returns is
exported from ``elfpatch``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.fixlib import VARIANTS, built_library

import elfpatch
from elfpatch.analysis.policy import DestructorScope, Level, Policy
from elfpatch.errors import ElfpatchError
from elfpatch.service.policy_file import load_policy

SCRIPT = Path(sys.executable).with_name("elfpatch")


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(VARIANTS["default"])


# -- the API -----------------------------------------------------------------------------

def test_levels_are_an_enum_of_strings() -> None:
    policy = Policy(unique="warn", exit_time_destructors_scope="read-at-exit")
    assert policy.unique is Level.WARN and policy.unique == "warn"
    assert policy.exit_time_destructors_scope is DestructorScope.READ_AT_EXIT
    assert Policy(unique=Level.IGNORE).unique is Level.IGNORE
    assert f"{Level.ERROR}" == str(Level.ERROR) == "error"


@pytest.mark.parametrize(("settings", "named"), [
    ({"unique": "eror"}, "unique='eror'"),
    ({"init_order": None}, "init_order=None"),
    ({"destruction_order": 1}, "destruction_order=1"),
    ({"exit_time_destructors_scope": "some"}, "exit_time_destructors_scope='some'"),
    ({"allow": "^std::"}, "allow='^std::'"),  # a string is not a list of patterns
    ({"allow": ("(unclosed",)}, "allow='(unclosed'"),
    ({"allow": (3,)}, "allow=(3,)"),
    ({"max_initializers": {"*": "40"}}, "max_initializers="),
    ({"max_initializers": {"*": True}}, "max_initializers="),
    ({"max_initializers": {"*": -1}}, "max_initializers="),
    ({"max_initializers": 40}, "max_initializers=40"),
])
def test_a_wrong_setting_is_refused_when_made(settings: dict[str, object], named: str) -> None:
    with pytest.raises(ElfpatchError) as caught:
        Policy(**settings)  # type: ignore[arg-type]
    line = caught.value.one_line()
    assert "\n" not in line and named in line, line


def test_an_unknown_argument_is_refused() -> None:
    with pytest.raises(TypeError):
        Policy(uniq="warn")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Policy("warn")  # type: ignore[misc]  # keywords only: no positional mix-up


def test_allow_given_directly_is_honoured(library: Path) -> None:
    failing = elfpatch.check(library, policy=Policy())
    assert not failing.passed and failing.violations
    allowed = elfpatch.check(library, policy=Policy(allow=[".*"]))
    assert allowed.passed and not allowed.violations
    some = elfpatch.check(library, policy=Policy(allow=("^Table<",)))
    assert 0 < len(some.violations) < len(failing.violations)


def test_budgets_from_a_mapping_are_honoured(library: Path) -> None:
    policy = Policy(unique="ignore", max_initializers={"*": 0})
    assert policy.max_initializers == (("*", 0),)
    result = elfpatch.check(library, policy=policy)
    assert [f.rule for f in result.violations] == ["max-initializers"]


def test_a_dict_is_not_a_policy(library: Path) -> None:
    with pytest.raises(ElfpatchError) as caught:
        elfpatch.check(library, policy={"unique": "warn"})  # type: ignore[arg-type]
    assert "expected an elfpatch.Policy, not dict" in caught.value.one_line()


# -- [tool.elfpatch] ---------------------------------------------------------------------

@pytest.mark.parametrize(("toml", "said"), [
    ('[tool.elfpatch]\nunique = "eror"\n', "unique = 'eror': expected one of error, warn"),
    ('[tool.elfpatch]\nallow = "^std::"\n', "allow = '^std::'"),
    ('[tool.elfpatch]\nallow = ["(x"]\n', "not a regular expression"),
    ('[tool.elfpatch]\nmax-initializers = { "*" = "4" }\n', "max-initializers ="),
    ('[tool.elfpatch]\nmax-initializers = [["*", 4]]\n', "max-initializers ="),
    ('[tool.elfpatch]\nuniqe = "warn"\n', "unknown keys: uniqe"),
    ('[tool.elfpatch]\n"exit-time-destructors-scope" = "any"\n', "expected one of all, "),
    ("[tool]\nelfpatch = 3\n", "[tool.elfpatch] must be a table"),
    ("tool = 3\n", "[tool] must be a table"),
])
def test_a_mistyped_pyproject_is_one_line_exit_2(toml: str, said: str, library: Path,
                                                  tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(toml)
    with pytest.raises(ElfpatchError) as caught:
        load_policy(None, tmp_path)
    assert said in caught.value.one_line()
    if not SCRIPT.exists():
        pytest.skip("the elfpatch console script is not installed beside this interpreter")
    run = subprocess.run([str(SCRIPT), "check", str(library)], cwd=tmp_path, text=True,
                         capture_output=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    assert run.returncode == 2, run.stderr
    assert run.stdout == "" and run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("elfpatch: error: ") and said in run.stderr


def test_the_readme_policy_is_accepted(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    snippet = readme.split("### `check`", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "pyproject.toml").write_text(snippet)
    policy = load_policy(None, tmp_path)
    assert policy.allow and policy.max_initializers


# -- exports -------------------------------------------------------------------------------

def test_every_result_type_is_exported() -> None:
    import dataclasses

    from elfpatch import _PUBLIC

    assert sorted(elfpatch.__all__) == sorted(["__version__", *_PUBLIC])
    for name in _PUBLIC:
        assert getattr(elfpatch, name).__name__ == name
    for result in ("ScanReport", "FixResult", "WheelsResult", "InitsResult", "CheckResult",
                   "Finding", "Clash", "FileScan", "UniqueSymbol"):
        assert dataclasses.is_dataclass(getattr(elfpatch, result))
    assert elfpatch.Policy is Policy and elfpatch.Level is Level


def test_importing_the_package_imports_nothing_else() -> None:
    code = "import sys, elfpatch; print(sorted(m for m in sys.modules if m.startswith('elfpatch')))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert run.stdout.strip() == "['elfpatch']"

"""The published schemas: ``check --format json`` (``elfpatch/report/check.schema.json``)
validated on real output, and ``[tool.elfpatch]`` (``elfpatch/analysis/policy.schema.json``, a
validate-pyproject ``tool_schema`` plugin) against the policy the code reads and every
README example."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support.build import another_distribution, invoke
from support.fixlib import VARIANTS, built_library

from elfpatch.analysis.policy import DESTRUCTOR_SCOPES, LEVELS, TABLE_KEYS
from elfpatch.errors import ElfpatchError
from elfpatch.service.policy_file import load_policy, tool_schema

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(VARIANTS["default"])


def check_schema() -> dict[str, Any]:
    text = resources.files("elfpatch.report").joinpath("check.schema.json").read_text()
    return dict(json.loads(text))


def check_json(*args: str) -> dict[str, Any]:
    result = invoke("check", "--format", "json", *args)
    assert result.exception is None and result.exit_code in (0, 1, 2), result.stderr
    return dict(json.loads(result.stdout))


def test_check_json_validates(library: Path, wheel: Path, tmp_path: Path) -> None:
    validator = jsonschema.Draft202012Validator(check_schema())
    other = another_distribution(wheel, tmp_path)
    policy = tmp_path / "policy.toml"
    policy.write_text('[tool.elfpatch]\nexit-time-destructors = "error"\n'
                      'max-initializers = { "*" = 0 }\n')
    baseline = tmp_path / "baseline.json"
    documents = [
        check_json("--config", os.devnull, str(library)),
        check_json("--config", str(policy), str(wheel), str(other)),  # clashes, every rule
        check_json("--config", os.devnull, str(library), str(tmp_path / "missing.so")),
        check_json("--config", os.devnull, "--baseline", str(baseline), "--update-baseline",
                   str(library)),
    ]
    for document in documents:
        assert list(validator.iter_errors(document)) == []
    assert documents[1]["clashes"] and documents[2]["errors"]
    assert {f["rule"] for f in documents[1]["violations"]} >= {"unique", "max-initializers"}
    assert all(f["baselined"] for f in documents[3]["files"][0]["findings"]
               if f["level"] == "error")


def test_the_check_schema_keeps_scans_file_record() -> None:
    scan = json.loads(resources.files("elfpatch.report").joinpath("scan.schema.json")
                      .read_text())
    mine = check_schema()["properties"]["files"]["items"]["properties"]
    theirs = scan["properties"]["files"]["items"]["properties"]
    assert {name: mine[name] for name in theirs} == theirs


# -- [tool.elfpatch] -------------------------------------------------------------------------

def policy_validator() -> Any:
    return jsonschema.Draft7Validator(tool_schema(), format_checker=jsonschema.FormatChecker())


def test_the_policy_schema_is_the_policy_read() -> None:
    schema = tool_schema()
    assert set(schema["properties"]) == set(TABLE_KEYS)
    assert tuple(schema["definitions"]["level"]["enum"]) == LEVELS
    assert tuple(schema["properties"]["exit-time-destructors-scope"]["enum"]) == \
        DESTRUCTOR_SCOPES
    jsonschema.Draft7Validator.check_schema(schema)


def readme_policies() -> list[str]:
    """Every TOML block of README that sets [tool.elfpatch]."""
    text = (ROOT / "README.md").read_text()
    return [block for block in re.findall(r"^```toml\n(.*?)^```", text, re.S | re.M)
            if "[tool.elfpatch]" in block]


def test_every_readme_policy_validates_and_loads(tmp_path: Path) -> None:
    blocks = readme_policies()
    assert blocks
    for block in blocks:
        table = tomllib.loads(block)["tool"]["elfpatch"]
        assert list(policy_validator().iter_errors(table)) == [], block
        (tmp_path / "pyproject.toml").write_text(block)
        load_policy(None, tmp_path)


@pytest.mark.parametrize("toml", ['uniqe = "warn"', 'unique = "eror"', 'allow = "^std::"',
                                  'allow = ["(x"]', 'max-initializers = { "*" = "4" }'])
def test_what_the_code_refuses_the_schema_refuses(toml: str, tmp_path: Path) -> None:
    text = f"[tool.elfpatch]\n{toml}\n"
    assert list(policy_validator().iter_errors(tomllib.loads(text)["tool"]["elfpatch"]))
    (tmp_path / "p.toml").write_text(text)
    with pytest.raises(ElfpatchError, match=r"tool\.elfpatch"):
        load_policy(str(tmp_path / "p.toml"))


def test_validate_pyproject_checks_the_table(tmp_path: Path) -> None:
    tool = shutil.which("validate-pyproject", path=str(Path(sys.executable).parent))
    if tool is None:
        pytest.skip("validate-pyproject is not installed (pip install -e '.[test]')")
    project = '[project]\nname = "demo"\nversion = "1.0"\n'
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text(project + readme_policies()[0])
    bad.write_text(project + '[tool.elfpatch]\nunique = "eror"\n')
    assert subprocess.run([tool, str(good)], capture_output=True).returncode == 0
    refused = subprocess.run([tool, str(bad)], capture_output=True, text=True)
    assert refused.returncode != 0 and "tool.elfpatch" in refused.stdout + refused.stderr

"""README's "In CI" recipes run as written: elfpatch installed from a checkout at
``./elfpatch`` into a fresh virtual environment, cibuildwheel's audit and repair commands
run as cibuildwheel runs them (placeholders filled, ``sh -c``), on the success and the
failure path, the GitHub Actions step given inputs the action has, and the pre-commit
hook run on a good and a mistyped policy."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="pip install -e '.[test]' installs PyYAML")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def recipes(language: str) -> list[str]:
    """The README's blocks of ``language`` in its "In CI" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### In CI", 1)[1].split("\n## ", 1)[0]
    return [body for lang, body in _BLOCK.findall(section) if lang == language]


def cibuildwheel_tables() -> list[dict[str, Any]]:
    return [tomllib.loads(block)["tool"]["cibuildwheel"] for block in recipes("toml")]


@dataclass(frozen=True)
class Project:
    """A project folder with elfpatch's checkout at ./elfpatch, and the environment
    the README's install line made."""

    folder: Path
    env: dict[str, str]

    def sh(self, command: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", command], cwd=self.folder, capture_output=True,
                              text=True, env={**self.env, **extra}, timeout=900)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    folder = tmp_path_factory.mktemp("project")
    (folder / "elfpatch").symlink_to(ROOT, target_is_directory=True)
    environment = folder.parent / "venv"
    venv.EnvBuilder(with_pip=True).create(environment)
    # The README's environment first; this interpreter's next, for auditwheel (which
    # cibuildwheel's manylinux images carry).
    path = os.pathsep.join([str(environment / "bin"), str(Path(sys.executable).parent),
                            os.environ["PATH"]])
    made = Project(folder, {**os.environ, "PATH": path, "NO_COLOR": "1",
                            "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    (install,) = recipes("bash")
    done = made.sh(install)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (environment / "bin" / "elfpatch").exists()
    return made


def fill(command: str, **values: Path) -> str:
    """cibuildwheel's placeholders, as its prepare_command fills them."""
    for name, value in values.items():
        command = command.replace("{" + name + "}", str(value))
    assert "{" not in command.replace("${", ""), command
    return command


def test_the_recipes_are_what_cibuildwheel_accepts() -> None:
    cibuildwheel = pytest.importorskip("cibuildwheel")
    del cibuildwheel
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("cibuildwheel").joinpath(
        "resources/cibuildwheel.schema.json").read_text())
    tables = cibuildwheel_tables()
    assert len(tables) == 2
    for table in tables:
        document = {"tool": {"cibuildwheel": table}}
        jsonschema.validate(document["tool"]["cibuildwheel"], schema)
    assert "pip install elfpatch" not in (ROOT / "README.md").read_text()


def test_the_audit_fails_a_unique_wheel_and_passes_a_fixed_one(project: Project, wheel: Path,
                                                               tmp_path: Path) -> None:
    audit = next(t for t in cibuildwheel_tables() if "audit-command" in t)
    assert "./elfpatch" in audit["audit-requires"]  # installed by the README's line
    commands = audit["audit-command"]
    fixed_dir = tmp_path / "fixed"
    fixing = project.sh(f"elfpatch fix {wheel} -w {fixed_dir}")
    assert fixing.returncode == 0, fixing.stderr
    (fixed,) = fixed_dir.glob("*.whl")
    for built, expected in ((wheel, 1), (fixed, 0)):
        codes = []
        for command in commands:
            if "{abi3_wheel}" in command:  # cibuildwheel runs these on abi3 wheels only
                assert "abi3" not in built.name
                continue
            codes.append(project.sh(fill(command, wheel=built)).returncode)
        assert codes == [expected], (built, codes)


def pure_wheel(folder: Path) -> Path:
    """A wheel auditwheel refuses to repair: it has no platform."""
    path = folder / "purepkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("purepkg/__init__.py", "")
        archive.writestr("purepkg-1.0.dist-info/METADATA",
                         "Metadata-Version: 2.1\nName: purepkg\nVersion: 1.0\n")
        archive.writestr("purepkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n"
                         "Generator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr("purepkg-1.0.dist-info/RECORD", "")
    return path


def test_the_repair_leaves_one_wheel_or_nothing(project: Project, wheel: Path,
                                                tmp_path: Path) -> None:
    repair = next(t for t in cibuildwheel_tables() if "linux" in t)["linux"]
    before = project.sh(repair["before-build"])
    assert before.returncode == 0, before.stderr[-2000:]
    scratch = tmp_path / "scratch"  # what mktemp uses: must be empty after each run
    scratch.mkdir()

    failed = tmp_path / "dest-failed"
    failed.mkdir()
    run = project.sh(fill(repair["repair-wheel-command"], wheel=pure_wheel(tmp_path),
                          dest_dir=failed), TMPDIR=str(scratch))
    assert run.returncode != 0, run.stdout
    assert list(failed.iterdir()) == [] and list(scratch.iterdir()) == []

    dest = tmp_path / "dest"
    dest.mkdir()
    run = project.sh(fill(repair["repair-wheel-command"], wheel=wheel, dest_dir=dest),
                     TMPDIR=str(scratch))
    assert run.returncode == 0, run.stderr[-2000:]
    (repaired,) = dest.iterdir()
    assert "manylinux" in repaired.name and list(scratch.iterdir()) == []
    checked = project.sh(f"elfpatch check {repaired}")
    assert checked.returncode == 0, checked.stdout


def test_the_github_step_uses_the_actions_inputs() -> None:
    (workflow,) = recipes("yaml")[:1]
    steps = yaml.safe_load(workflow)["jobs"]["wheels"]["steps"]
    checkout = next(s for s in steps if s.get("with", {}).get("path") == "elfpatch")
    assert checkout["uses"].startswith("actions/checkout@")
    used = next(s for s in steps if s.get("uses") == "./elfpatch")
    inputs = yaml.safe_load((ROOT / "action.yml").read_text())["inputs"]
    assert set(used["with"]) <= set(inputs)


def test_the_pre_commit_hook_refuses_a_mistyped_policy(project: Project,
                                                       tmp_path: Path) -> None:
    config = yaml.safe_load(next(b for b in recipes("yaml") if "repos:" in b))
    (hook,) = config["repos"][0]["hooks"]
    assert hook["language"] == "system" and re.search(hook["files"], "pyproject.toml")
    folder = tmp_path / "repo"
    folder.mkdir()
    project_table = '[project]\nname = "demo"\nversion = "1.0"\n'
    for policy, passes in (('[tool.elfpatch]\nunique = "warn"\n', True),
                           ('[tool.elfpatch]\nunique = "wran"\n', False)):
        (folder / "pyproject.toml").write_text(project_table + policy)
        run = subprocess.run(["sh", "-c", f"{hook['entry']} pyproject.toml"], cwd=folder,
                             capture_output=True, text=True, env=project.env, timeout=300)
        assert (run.returncode == 0) == passes, (policy, run.stdout, run.stderr)

"""The ``check`` policy: what fails a build, read from ``[tool.elfpatch]`` in pyproject.toml.

```toml
[tool.elfpatch]
unique = "error"                  # error | warn | ignore   (STB_GNU_UNIQUE definitions)
allow = ["^guard variable for "]  # regexes on demangled names that are always accepted
exit-time-destructors = "warn"    # error | warn | ignore
exit-time-destructors-scope = "all"   # all | read-at-exit (only those a destructor,
                                      # an atexit function or a thread reads)
init-order = "warn"               # error | warn | ignore   (init-order errors found in code)
destruction-order = "warn"        # error | warn | ignore   (destruction-order errors)
max-initializers = { "*/_C*.so" = 40, "*" = 400 }   # budget per library (glob on its path)
cannot-load = "ignore"            # error | warn | ignore   (dlopen would fail: a DT_NEEDED
                                  # or symbol version not found, an undefined symbol)
stays-loaded = "ignore"           # error | warn | ignore   (dlclose leaves it mapped)
hide = ["preset:cxx-instantiations"]  # fix: exports to make LOCAL (regexes on demangled
                                      # names, or a preset)
```

Out of the box only UNIQUE definitions fail the check; the rest warn until
configured, and the two loader rules (which unpack each wheel to ask the
loader model) are off.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NoReturn

from elfpatch.base.text_enum import TextEnum
from elfpatch.errors import InputError, UsageError


class Level(TextEnum):
    """What a rule's findings do to the verdict."""

    ERROR = "error"
    WARN = "warn"
    IGNORE = "ignore"


class DestructorScope(TextEnum):
    """Which exit-time destructors the exit-time-destructors rule reports."""

    ALL = "all"
    READ_AT_EXIT = "read-at-exit"  # only objects a destructor, atexit function or thread reads


LEVELS = tuple(level.value for level in Level)
DESTRUCTOR_SCOPES = tuple(scope.value for scope in DestructorScope)


@dataclass(frozen=True, kw_only=True)
class Policy:
    """A ``check`` policy, checked and compiled when made: a mistyped level, a pattern
    that is not a regular expression or a value of the wrong type is an ElfpatchError
    at once, never a policy that quietly passes everything.

    Levels and the scope take their enum or its string (``unique="warn"``);
    ``allow`` a sequence of regular expressions; ``max_initializers`` a mapping
    (or pairs) of globs to budgets.
    """

    unique: Level = Level.ERROR
    allow: tuple[str, ...] = ()
    exit_time_destructors: Level = Level.WARN
    init_order: Level = Level.WARN
    exit_time_destructors_scope: DestructorScope = DestructorScope.ALL
    destruction_order: Level = Level.WARN
    max_initializers: tuple[tuple[str, int], ...] = ()
    cannot_load: Level = Level.IGNORE
    stays_loaded: Level = Level.IGNORE
    hide: tuple[str, ...] = ()  # for fix: see FixOptions.hide
    source: str | None = None  # the file it was read from
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.source is not None and not isinstance(self.source, str):
            self._refuse("source", self.source, "expected the path it was read from (a string)")
        for name in ("unique", "exit_time_destructors", "init_order", "destruction_order",
                     "cannot_load", "stays_loaded"):
            self._set(name, self._choice(name, Level))
        self._set("exit_time_destructors_scope",
                  self._choice("exit_time_destructors_scope", DestructorScope))
        self._set("allow", self._strings("allow", "expected a list of regular expressions"))
        self._set("hide", self._strings("hide", "expected a list of regular expressions or "
                                        "presets"))
        self._set("_compiled", tuple(self._compile(pattern) for pattern in self.allow))
        self._set("max_initializers", self._budgets())

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # frozen: only while being made

    def _refuse(self, name: str, value: Any, expected: str) -> NoReturn:
        """One line naming the setting as the user wrote it: the TOML key, or the argument."""
        if self.source is not None:
            raise InputError(self.source, f"[tool.elfpatch] {name.replace('_', '-')} = "
                             f"{_shown(value)}: {expected}")
        raise UsageError("Policy", f"{name}={_shown(value)}: {expected}")

    def _choice(self, name: str, kind: type[enum.Enum]) -> Any:
        value = getattr(self, name)
        try:
            return kind(value)
        except ValueError:
            self._refuse(name, value, "expected one of " +
                         ", ".join(str(choice.value) for choice in kind))

    def _strings(self, name: str, expected: str) -> tuple[str, ...]:
        given = getattr(self, name)
        # A lone string is a sequence of characters, each a pattern: never meant.
        if isinstance(given, (str, bytes)) or not isinstance(given, (list, tuple)) \
                or not all(isinstance(pattern, str) for pattern in given):
            self._refuse(name, given, expected)
        return tuple(given)

    def _compile(self, pattern: str) -> re.Pattern[str]:
        try:
            return re.compile(pattern)
        except re.error as error:
            self._refuse("allow", pattern, f"not a regular expression ({error})")

    def _budgets(self) -> tuple[tuple[str, int], ...]:
        given = self.max_initializers
        expected = "expected a table of globs to numbers of initializers"
        try:
            pairs = tuple(given.items() if isinstance(given, Mapping) else given)
        except TypeError:
            self._refuse("max_initializers", given, expected)
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)
                    and isinstance(pair[1], int) and not isinstance(pair[1], bool)
                    and pair[1] >= 0):
                self._refuse("max_initializers", given, expected)
        return pairs

    @property
    def asks_the_loader(self) -> bool:
        """Whether a rule needs the load and unload verdicts."""
        return self.cannot_load is not Level.IGNORE or self.stays_loaded is not Level.IGNORE

    def allowed(self, *names: str) -> bool:
        return any(p.search(n) for p in self._compiled for n in names)

    def initializer_budget(self, library: str) -> int | None:
        """The first budget whose glob matches the library's path (or its file name)."""
        name = library.rsplit("/", 1)[-1]
        for pattern, budget in self.max_initializers:
            if fnmatch.fnmatch(library, pattern) or fnmatch.fnmatch(name, pattern):
                return budget
        return None


def _shown(value: Any) -> str:
    """A refused value in a one-line message: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# The keys of [tool.elfpatch]: the Policy's fields, spelt with hyphens.
TABLE_KEYS = {f.name.replace("_", "-"): f.name for f in fields(Policy)
              if f.init and f.name != "source"}


def policy_from_table(table: Any, source: str) -> Policy:
    """The policy of a ``[tool.elfpatch]`` table read from ``source``."""
    if not isinstance(table, dict):
        raise InputError(source, "[tool.elfpatch] must be a table")
    unknown = sorted(set(table) - set(TABLE_KEYS))
    if unknown:
        raise InputError(source, f"[tool.elfpatch] has unknown keys: {', '.join(unknown)}",
                         hint=f"known keys: {', '.join(sorted(TABLE_KEYS))}")
    settings = {TABLE_KEYS[key]: value for key, value in table.items()}
    return Policy(**settings, source=source)


def as_policy(given: Any) -> Policy:
    """The API's ``policy=``: a Policy, nothing else (a dict's keys would go unchecked)."""
    if isinstance(given, Policy):
        return given
    raise UsageError("policy", f"expected an elfpatch.Policy, not {type(given).__name__}",
                     hint="elfpatch.Policy(unique=\"warn\", allow=[...]), or config= a TOML file")

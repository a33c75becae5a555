"""Demangled C++ names taken apart at their ``::``, as the demangler printed them.

A qualified name cannot be split with ``str.split("::")``: template
arguments carry their own (``std::map<std::string, int>::npos``), and so
do parameter lists, ``decltype (...)`` expressions and the braces of a
lambda or an unnamed type (``f()::{lambda()#1}::operator()() const``).
Brackets are not balanced either: ``operator<`` and ``operator>>`` open
or close nothing, and inside parentheses ``<`` and ``>`` may be
comparisons (``Foo<((3)>(2))>``).  ``(anonymous namespace)`` is a name,
not a parameter list, and a space before the name ends a return type
(``void f<int>()``, ``decltype (x) g()``).

The scan stops only at brackets, spaces, ``::`` and ``operator`` (a
regular expression finds them), keeping a stack of open brackets: inside
parentheses, brackets or braces only those count; inside angle brackets
every kind does; an ``operator`` name is skipped whole.  Everything here
works on strings alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANONYMOUS_NAMESPACE = "(anonymous namespace)"
_OPEN = {"<": ">", "(": ")", "[": "]", "{": "}"}
_CLOSE = frozenset(_OPEN.values())
# The symbolic operators, longest first so that ``<<=`` is not read as ``<``.
_OPERATOR_SYMBOL = re.compile(r"\(\)|\[\]|<=>|<<=|>>=|->\*|<<|>>|<=|>=|->|==|!=|&&|\|\||\+\+|--"
                              r"|[-+*/%^&|~!=<>,]=?")
_OPERATOR_WORD = re.compile(r" (?:new|delete)(?:\[\])?")
_WORD_CHAR = re.compile(r"[A-Za-z0-9_$]")


@dataclass(frozen=True)
class _Layout:
    """Where a name's top-level ``::`` separators are, and its top-level parameter list."""

    separators: tuple[int, ...]  # positions of each top-level "::"
    parameters: int | None  # position of the "(" of the first top-level parameter list
    name_start: int  # where the qualified name begins (after a return type, if any)


def _operator_end(text: str, at: int) -> int:
    """End of the operator name starting at ``at`` (which holds "operator")."""
    rest = at + len("operator")
    symbol = _OPERATOR_SYMBOL.match(text, rest)
    if symbol:
        return symbol.end()
    word = _OPERATOR_WORD.match(text, rest)
    if word:
        return word.end()
    if text.startswith('"" ', rest):  # a literal operator: operator"" _km
        return rest + 3
    return _conversion_end(text, rest)


def _conversion_end(text: str, at: int) -> int:
    """End of a conversion operator's type (``operator std::string``): up to the
    top-level parameter list, the type's own ``::`` and brackets included."""
    stack: list[str] = []
    for position in range(at, len(text)):
        char = text[position]
        if not stack and char == "(":
            return position
        _track(stack, char)
    return len(text)


def _track(stack: list[str], char: str) -> None:
    """Push or pop ``char`` on the stack of open brackets (angle brackets only count
    outside parentheses, brackets and braces)."""
    inside_angle = not stack or stack[-1] == ">"
    if char in _OPEN and (char != "<" or inside_angle):
        stack.append(_OPEN[char])
    elif char in _CLOSE and stack and char == stack[-1]:
        stack.pop()


def _starts_operator(text: str, position: int) -> bool:
    """An ``operator`` name starts here, not an identifier such as ``operators``."""
    after = position + len("operator")
    return text.startswith("operator", position) \
        and (position == 0 or not _WORD_CHAR.match(text, position - 1)) \
        and not _WORD_CHAR.match(text, after)


# What the scan stops at; every other character belongs to the current component.
_TOKEN = re.compile(r"\(anonymous namespace\)|operator|::|[<>()\[\]{} ]")


def _layout(text: str) -> _Layout:
    separators: list[int] = []
    parameters: int | None = None
    name_start = 0
    stack: list[str] = []
    resume = 0  # tokens before this were consumed with an operator name
    for token in _TOKEN.finditer(text):
        position, word = token.start(), token.group()
        if position < resume:
            continue
        if word == "operator":
            # Inside template arguments too: H<&operator< > opens nothing.
            if (not stack or stack[-1] == ">") and _starts_operator(text, position):
                resume = _operator_end(text, position) if not stack else \
                    _symbol_operator_end(text, position)
        elif stack:
            _track(stack, word)
        elif word == _ANONYMOUS_NAMESPACE:
            continue
        elif word == "::":
            separators.append(position)
        elif word == "(" and parameters is None and not _after_decltype(text, position):
            parameters = position
            _track(stack, word)
        elif word == " " and parameters is None and not text.startswith(" <", position):
            # A return type ends here (``void f<int>()``): the name starts after it.
            # (A space before "<" separates operator<< from its template arguments.)
            separators.clear()
            name_start = position + 1
        else:
            _track(stack, word)
    return _Layout(tuple(separators), parameters, name_start)


def _after_decltype(text: str, position: int) -> bool:
    return text.endswith("decltype ", 0, position) or text.endswith("decltype", 0, position)


def _symbol_operator_end(text: str, at: int) -> int:
    """End of a symbolic operator name (``operator<``) at ``at``; ``at`` when it is none."""
    symbol = _OPERATOR_SYMBOL.match(text, at + len("operator"))
    return symbol.end() if symbol else at


def scope_parts(name: str) -> list[str]:
    """The components of a qualified name, split at its top-level ``::`` only.

    ``ns::Map<a::b, int>::size`` gives ``["ns", "Map<a::b, int>", "size"]``;
    ``f()::x`` (a function-local static) gives ``["f()", "x"]``.  A return
    type in front of a function template's name is dropped.
    """
    layout = _layout(name)
    bounds = [layout.name_start, *(s + 2 for s in layout.separators)]
    ends = [*layout.separators, len(name)]
    return [name[start:end] for start, end in zip(bounds, ends, strict=True)]


def enclosing_scope(name: str) -> str | None:
    """``ns::Cls<int>`` of ``ns::Cls<int>::member``; None for a name at the top level."""
    layout = _layout(name)
    if not layout.separators or layout.separators[-1] <= layout.name_start:
        return None
    return name[layout.name_start : layout.separators[-1]]


def parameter_types(name: str) -> list[str] | None:
    """The parameter types of the function ``name`` names, as printed
    (``["char const*", "int"]`` of ``a::f(char const*, int) const``; of a
    lambda's ``operator()``, its own); [] for ``f()`` or ``f(void)``; None when
    the name has no parameter list."""
    return component_parameters(scope_parts(name)[-1])


def component_parameters(last: str) -> list[str] | None:
    """``parameter_types`` of a name's last component (``f(int)``, ``operator()(int)
    const``), already split off with ``scope_parts``."""
    start = _layout(last).parameters
    if start is None:
        return None
    types: list[str] = []
    stack: list[str] = []
    begin = start + 1
    for position in range(begin, len(last)):
        char = last[position]
        if not stack and char in ",)":
            types.append(last[begin:position].strip())
            if char == ")":
                break
            begin = position + 1
        else:
            _track(stack, char)
    return [] if types in ([""], ["void"]) else types


def function_path(name: str) -> list[str]:
    """``["a", "B<x>", "B"]`` of ``a::B<x>::B(int) const``: the components of the
    name before its first top-level parameter list (for an entity local to a
    function, ``f()::{lambda()#1}::operator()()``, the enclosing function's);
    [] when the name has no parameter list."""
    layout = _layout(name)
    if layout.parameters is None:
        return []
    inside = [s for s in layout.separators if s < layout.parameters]
    bounds = [layout.name_start, *(s + 2 for s in inside)]
    ends = [*inside, layout.parameters]
    return [name[start:end] for start, end in zip(bounds, ends, strict=True)]

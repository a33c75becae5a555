"""Demangled C++ names split at their top-level ``::`` (``elfpatch.cxx.names``).

The names are what GNU c++filt prints for real symbols (checked against it
where it is installed); each case is one the plain ``str.split("::")`` or a
count of angle brackets gets wrong.
"""

from __future__ import annotations

import pytest
from support.build import cxxfilt

from elfpatch.analysis.effects.names import is_constructor
from elfpatch.analysis.unique import (
    UniqueKind,
    classify,
)
from elfpatch.cxx.names import enclosing_scope, function_path, scope_parts

STRING = "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >"

# demangled name -> (scope_parts, enclosing_scope, function_path)
CASES: dict[str, tuple[list[str], str | None, list[str]]] = {
    # '::' inside template arguments
    f"std::map<{STRING}, int, std::less<{STRING}> >::npos": (
        ["std", f"map<{STRING}, int, std::less<{STRING}> >", "npos"],
        f"std::map<{STRING}, int, std::less<{STRING}> >", []),
    # operator< opens no template argument list
    "ns::Cls::operator<(ns::Cls const&) const": (
        ["ns", "Cls", "operator<(ns::Cls const&) const"], "ns::Cls",
        ["ns", "Cls", "operator<"]),
    # operator>> closes none
    "ns::operator>>(std::istream&, ns::X&)": (
        ["ns", "operator>>(std::istream&, ns::X&)"], "ns", ["ns", "operator>>"]),
    "ns::A<int>::operator<<=(int)": (
        ["ns", "A<int>", "operator<<=(int)"], "ns::A<int>", ["ns", "A<int>", "operator<<="]),
    "ns::A<int>::operator->() const": (
        ["ns", "A<int>", "operator->() const"], "ns::A<int>", ["ns", "A<int>", "operator->"]),
    # a conversion operator's type carries its own '::'
    f"ns::X::operator {STRING}() const": (
        ["ns", "X", f"operator {STRING}() const"], "ns::X",
        ["ns", "X", f"operator {STRING}"]),
    "ns::X::operator new[](unsigned long)": (
        ["ns", "X", "operator new[](unsigned long)"], "ns::X", ["ns", "X", "operator new[]"]),
    # an identifier that starts like the keyword is no operator
    "ns::operators::x": (["ns", "operators", "x"], "ns::operators", []),
    # '(anonymous namespace)' is a name, not a parameter list
    "(anonymous namespace)::Registry<int>::count": (
        ["(anonymous namespace)", "Registry<int>", "count"],
        "(anonymous namespace)::Registry<int>", []),
    "(anonymous namespace)::Q::Q()": (
        ["(anonymous namespace)", "Q", "Q()"], "(anonymous namespace)::Q",
        ["(anonymous namespace)", "Q", "Q"]),
    # lambdas and function-local entities
    "lam()::{lambda()#1}::operator()() const": (
        ["lam()", "{lambda()#1}", "operator()() const"], "lam()::{lambda()#1}", ["lam"]),
    "lam()::{lambda()#1}::operator()() const::y": (
        ["lam()", "{lambda()#1}", "operator()() const", "y"],
        "lam()::{lambda()#1}::operator()() const", ["lam"]),
    "f()::x": (["f()", "x"], "f()", ["f"]),
    "A::f() const::x": (["A", "f() const", "x"], "A::f() const", ["A", "f"]),
    "ns::f(std::vector<int, std::allocator<int> >)::{lambda(auto:1)#2}::operator()<int>(int) "
    "const": (
        ["ns", "f(std::vector<int, std::allocator<int> >)", "{lambda(auto:1)#2}",
         "operator()<int>(int) const"],
        "ns::f(std::vector<int, std::allocator<int> >)::{lambda(auto:1)#2}", ["ns", "f"]),
    # decltype in a return type, '>' as a comparison inside template arguments
    "decltype (Foo<((3)>(2))>::value) h<3>(Foo<((3)>(2))>*)": (
        ["h<3>(Foo<((3)>(2))>*)"], None, ["h<3>"]),
    "Foo<((3)>(2))>::value": (["Foo<((3)>(2))>", "value"], "Foo<((3)>(2))>", []),
    # a return type in front of a function template's name
    "void ns::f<int>(int)": (["ns", "f<int>(int)"], "ns", ["ns", "f<int>"]),
    # plain names
    "x": (["x"], None, []),
    "ns::X::X(int)": (["ns", "X", "X(int)"], "ns::X", ["ns", "X", "X"]),
}


@pytest.mark.parametrize("name", CASES)
def test_scope_parts(name: str) -> None:
    assert scope_parts(name) == CASES[name][0]


@pytest.mark.parametrize("name", CASES)
def test_enclosing_scope(name: str) -> None:
    assert enclosing_scope(name) == CASES[name][1]


@pytest.mark.parametrize("name", CASES)
def test_function_path(name: str) -> None:
    assert function_path(name) == CASES[name][2]


# Mangled names whose c++filt output appears above: the cases are what the
# demangler really prints, not what we expect it to.
MANGLED = {
    "_Z1hILi3EEDtsr3FooIXgtT_Li2EEE5valueEPS1_":
        "decltype (Foo<((3)>(2))>::value) h<3>(Foo<((3)>(2))>*)",
    "_ZZ3lamvENKUlvE_clEv": "lam()::{lambda()#1}::operator()() const",
    "_ZZZ3lamvENKUlvE_clEvE1y": "lam()::{lambda()#1}::operator()() const::y",
    "_ZN12_GLOBAL__N_18RegistryIiE5countE": "(anonymous namespace)::Registry<int>::count",
    "_ZZ1fvE1x": "f()::x",
    "_ZN1HIXadL_ZltRK1AS2_EEE1vE": "H<&(operator<(A const&, A const&))>::v",
    "_ZN12_GLOBAL__N_11QC2Ev": "(anonymous namespace)::Q::Q()",
}


def test_cases_are_what_the_demangler_prints() -> None:
    assert cxxfilt(list(MANGLED)) == list(MANGLED.values())


def test_template_static_member_with_operator_in_its_arguments() -> None:
    """A '<' of operator< in a template argument once unbalanced the scope."""
    name = "_ZN1HIXadL_ZltRK1AS2_EEE1vE"
    text = "H<&(operator<(A const&, A const&))>::v"
    assert enclosing_scope(text) == "H<&(operator<(A const&, A const&))>"
    assert classify(name, text) == UniqueKind.TEMPLATE_STATIC_MEMBER


def test_classify_uses_the_scope() -> None:
    assert classify("_ZN2ns6HolderIiE6memberE", "ns::Holder<int>::member") \
        == UniqueKind.TEMPLATE_STATIC_MEMBER
    assert classify("_ZN6Config5levelE", "Config::level") == UniqueKind.INLINE_VARIABLE
    assert classify("_ZZ1fvE1x", "f()::x") == UniqueKind.FUNCTION_LOCAL_STATIC


def test_constructors_are_known_through_the_path() -> None:
    assert is_constructor("_ZN12_GLOBAL__N_11QC2Ev")
    assert not is_constructor("_ZN12_GLOBAL__N_11Q1fEv")  # (anonymous namespace)::Q::f()


def test_operator_template_arguments_after_a_space() -> None:
    """``operator<< <char>``: the demangler's space is no end of a return type."""
    text = ("std::basic_ostream<char, std::char_traits<char> >& "
            "std::operator<< <std::char_traits<char> >(std::basic_ostream<char, "
            "std::char_traits<char> >&, char)")
    assert function_path(text) == ["std", "operator<< <std::char_traits<char> >"]
    assert enclosing_scope(text) == "std"

"""What an initializer (or a destructor) does that matters, read from its machine code.

An initializer is ordinary code: it constructs globals, reads others, calls
into this object and into other libraries, and registers exit-time
destructors with ``__cxa_atexit(dtor, object, &__dso_handle)``.  This
package disassembles it (capstone; x86-64 and aarch64) and follows direct
calls to functions this object defines, a few levels deep, to report:

- the globals it writes (stores to them, passes them as ``this`` to a
  constructor, or to a function that writes through that parameter) and
  the globals it reads (loads, or passes to code that reads them or that is
  not followed), named by the data symbol whose extent contains the
  address; taking an address alone touches nothing;
- the functions it calls, in this object and through the PLT/GOT;
- each destructor registration, in order: which object, which destructor;
- whether it constructs ``std::ios_base::Init`` (its TU includes <iostream>);
- whether its code was followed to the end, and if not, why.

Modules: ``walk`` (the sweep over one function), ``x86_64`` and ``aarch64``
(the instruction sets), ``summary`` (what the risks consume, composed in
program order), ``analyzer`` (caching, budgets, pointer parameters, merged
initializers), ``names`` (functions known by name).
"""

from elfpatch.analysis.effects.analyzer import EffectsAnalyzer, initializer_effects
from elfpatch.analysis.effects.names import is_constructor
from elfpatch.analysis.effects.summary import UNKNOWN_EFFECTS, AtExit, Effects, Part

__all__ = ["UNKNOWN_EFFECTS", "AtExit", "Effects", "EffectsAnalyzer", "Part",
           "initializer_effects", "is_constructor"]

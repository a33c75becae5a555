"""Which called functions mean something to the analysis, known by their names.

A call is read for what it does to its pointer arguments: a constructor
builds the object its first argument points to, ``__cxa_atexit`` registers
a destructor for an object, ``pthread_atfork`` and ``pthread_create`` hand
over functions that run later.  Constructors are recognised from their
Itanium-mangled names (demangled where the C++ runtime can).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import lru_cache

from elfpatch.analysis.effects.summary import USE_LOCK, USE_READ, USE_READ_FIRST, USE_WRITE
from elfpatch.cxx.demangle import demangle
from elfpatch.cxx.names import component_parameters, function_path, scope_parts

# Functions whose first argument is a destructor and (but for atexit) second its object.
ATEXIT_FUNCTIONS = frozenset({"__cxa_atexit", "atexit", "__cxa_thread_atexit_impl",
                              "__cxa_thread_atexit"})
# A function-local static is built between these: True takes the guard, False gives
# it back (release when built, abort on the exception path).
GUARD_FUNCTIONS = {"__cxa_guard_acquire": True, "__cxa_guard_release": False,
                   "__cxa_guard_abort": False}
IOS_INIT_CONSTRUCTORS = frozenset({"_ZNSt8ios_base4InitC1Ev", "_ZNSt8ios_base4InitC2Ev"})
# Functions that hand code over to run later, outside the initializers: the
# argument positions that are functions (fork handlers, a thread's start).
HOOK_FUNCTIONS: dict[str, tuple[int, ...]] = {"pthread_atfork": (0, 1, 2),
                                              "pthread_create": (2,)}

_CONSTRUCTOR_MARK = re.compile(r"C[123I]")
_MANGLED_CONSTRUCTOR = re.compile(r"C[123](?:B\d+\w+?)?E")
_TEMPLATE_OR_TAG = re.compile(r"<.*>|\[abi:[^\]]*\]")
# Functions that never return to their caller: they throw, unwind or end the process.
NEVER_RETURN = frozenset({
    "_Unwind_Resume", "abort", "exit", "_exit", "_Exit", "quick_exit", "pthread_exit",
    "longjmp", "siglongjmp", "_longjmp", "__longjmp_chk", "__chk_fail", "__fortify_fail",
    "__assert_fail", "__stack_chk_fail", "__cxa_pure_virtual", "__cxa_deleted_virtual",
    "_ZSt9terminatev", "__cxa_call_unexpected",
    "_ZSt17rethrow_exceptionNSt15__exception_ptr13exception_ptrE"})
# Imports that return a pointer or NULL, never (char *)-1 (mmap's MAP_FAILED): a
# branch taken when one did is never taken (``dying``).
NEVER_MINUS_ONE = frozenset({"getenv", "secure_getenv"})
# What returns memory nothing else points to yet: operator new (plain, nothrow,
# aligned; scalar and array), malloc, calloc and the aligned ones (aligned_alloc,
# which the C++ runtime's aligned operator new calls, memalign, valloc, pvalloc).
ALLOCATORS = frozenset({
    "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
    "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
    "malloc", "calloc", "aligned_alloc", "memalign", "valloc", "pvalloc"})
# The C++ runtime's throwing helpers: __cxa_throw, __cxa_rethrow,
# __cxa_throw_bad_array_new_length, __cxa_bad_cast, std::__throw_length_error ...
_THROW_HELPER = re.compile(r"__cxa_(throw|rethrow|bad_)|_ZSt\d+__throw_")
# What sanitizers call on a bad access when they stop the process there (their
# ``_noabort`` variants, under -fsanitize-recover, return).
_SANITIZER_STOP = re.compile(r"__asan_report_(load|store)(\d+|_n)$|__ubsan_handle_\w+_abort$"
                             r"|__ubsan_handle_(builtin_unreachable|missing_return)$")
# Logging libraries' fatal messages: the destructor prints the message and ends the
# process (a failed CHECK), and the library declares so: glog's (shipped as a library
# of its own, and when linked in still called through the PLT), its ``Fail``, and
# abseil's.  What the code does on the way there is no finding.
_FATAL_MESSAGE = re.compile(r"(_ZN6google15LogMessageFatalD[12]Ev|_ZN6google10LogMessage4FailEv"
                            r"|_ZN4absl\w*12log_internal(15LogMessageFatal|22LogMessageQuietlyFatal)"
                            r"D[12]Ev)(@.*)?$")
# Logging libraries' messages whose destructor ends the process when their severity
# is fatal (glog's LogMessage, Arrow's ArrowLog, Ray's RayLog: the severity, third
# after ``this``, file and line, is 3 for FATAL): a failed ``CHECK`` builds one
# with that constant.  What the code does from there on is no finding.
_FATAL_WHEN = re.compile(r"(_ZN6google10LogMessageC[12]EPKci(i|NS_11LogSeverityE)"
                         r"|_ZN5arrow4util8ArrowLogC[12]EPKciNS0_13ArrowLogLevelE"
                         r"|_ZN3ray6RayLogC[12]EPKciNS_11RayLogLevelE)(@.*)?$")
_FATAL_SEVERITY = (3, 3)  # (argument position, value)
# Lock slow paths entered only when another thread holds the lock or waits for it
# (or a debug mode is on for that lock): abseil's Mutex::LockSlow and UnlockSlow,
# its SpinLock's SlowLock and SlowUnlock, each declared cold, under abseil's
# versioned inline namespace or none.  A library's initializers run on the
# thread that loads it, and no other thread has its objects yet: each lock they
# take is free.
_CONTENDED_ONLY = re.compile(r"_ZN4absl(?:\d+lts_\d+)?(?:5Mutex(?:8LockSlow|10UnlockSlow)"
                             r"|13base_internal8SpinLock(?:8SlowLock|10SlowUnlock))E")
# gcc's name for the body of std::thread's state object: the thread's function.
_THREAD_BODY = re.compile(r"^_ZNSt6thread11_State_impl.*E6_M_runEv$")


# Parameter types that travel in one integer register (or in a vector one).
_SCALARS = frozenset({
    "bool", "char", "signed char", "unsigned char", "wchar_t", "char8_t", "char16_t",
    "char32_t", "short", "unsigned short", "int", "unsigned int", "long", "unsigned long",
    "long long", "unsigned long long", "float", "double", "long double",
    "decltype(nullptr)", "std::nullptr_t"})
_MEMBER_FUNCTION_POINTER = re.compile(r"\([^()]*::\*\)")


# C functions with one fixed prototype that C++ code (and the code gcc adds to it)
# calls most: how many integer argument registers each reads.  A C name says
# nothing of its parameters, and a pointer left in a register across a call to
# ``__stack_chk_fail`` or ``free`` is not passed to it.
_C_ARGUMENT_REGISTERS = {
    # what gcc itself emits calls to: stack protector, unwinding, exceptions, guards
    "__stack_chk_fail": 0, "abort": 0, "exit": 1, "_exit": 1, "__assert_fail": 4,
    "_Unwind_Resume": 1, "__cxa_pure_virtual": 0, "__cxa_deleted_virtual": 0,
    "__cxa_allocate_exception": 1, "__cxa_free_exception": 1, "__cxa_throw": 3,
    "__cxa_rethrow": 0, "__cxa_begin_catch": 1, "__cxa_end_catch": 0,
    "__cxa_call_unexpected": 1, "__cxa_bad_cast": 0, "__cxa_bad_typeid": 0,
    "__cxa_throw_bad_array_new_length": 0, "__cxa_guard_acquire": 1,
    "__cxa_guard_release": 1, "__cxa_guard_abort": 1, "__cxa_finalize": 1,
    "__dynamic_cast": 4, "__tls_get_addr": 1, "__errno_location": 0,
    # memory and strings
    "malloc": 1, "free": 1, "calloc": 2, "realloc": 2, "aligned_alloc": 2,
    "posix_memalign": 3, "memcpy": 3, "memmove": 3, "memset": 3, "memcmp": 3,
    "memchr": 3, "strlen": 1, "strcmp": 2, "strncmp": 3, "strchr": 2, "strrchr": 2,
    "strstr": 2, "strdup": 1, "strcpy": 2, "strncpy": 3, "getenv": 1, "secure_getenv": 1,
    # threads
    "pthread_once": 2, "pthread_mutex_lock": 1, "pthread_mutex_unlock": 1,
    "pthread_mutex_init": 2, "pthread_mutex_destroy": 1, "pthread_key_create": 2,
    "pthread_getspecific": 1, "pthread_setspecific": 2, "sysconf": 1,
}


# What C functions of one prototype do with the pointers they are passed, by
# position (``summary.USE_*`` bits): a lock reads its word, then writes it as a lock
# does (an update of an object already there, never its construction); a string function
# reads; memcpy writes its destination.  Another function of another library may
# read the pointer and, as the object it acts on, build it (``unseen_use``).
_READS, _WRITES = USE_READ | USE_READ_FIRST, USE_WRITE
_UPDATES = _READS | _WRITES
_LOCKS = _READS | USE_LOCK
_C_POINTER_USES: dict[str, tuple[int, ...]] = {
    **dict.fromkeys(("pthread_mutex_lock", "pthread_mutex_unlock", "pthread_mutex_trylock",
                     "pthread_rwlock_rdlock", "pthread_rwlock_wrlock",
                     "pthread_rwlock_unlock", "pthread_spin_lock", "pthread_spin_unlock",
                     "pthread_cond_signal", "pthread_cond_broadcast"), (_LOCKS,)),
    "pthread_cond_wait": (_LOCKS, _LOCKS), "pthread_once": (_UPDATES, 0),
    "pthread_mutex_init": (_WRITES, _READS), "pthread_key_create": (_WRITES, 0),
    **dict.fromkeys(("strlen", "strdup", "getenv", "secure_getenv"), (_READS,)),
    **dict.fromkeys(("strcmp", "strstr"), (_READS, _READS)),
    "strncmp": (_READS, _READS, 0), "memcmp": (_READS, _READS, 0),
    "strchr": (_READS, 0), "strrchr": (_READS, 0), "memchr": (_READS, 0, 0),
    "memcpy": (_WRITES, _READS, 0), "memmove": (_WRITES, _READS, 0),
    "memset": (_WRITES, 0, 0),
    # libstdc++'s node containers link a node in or out: the tree's header (its
    # count, its ends) or the list's neighbours are updated, as a registration
    # inserting into a std::map, std::set or std::list updates the registry.
    "_ZSt29_Rb_tree_insert_and_rebalancebPSt18_Rb_tree_node_baseS0_RS_":
        (0, _UPDATES, _UPDATES, _UPDATES),
    "_ZSt28_Rb_tree_rebalance_for_erasePSt18_Rb_tree_node_baseRS_": (_UPDATES, _UPDATES),
    "_ZNSt8__detail15_List_node_base7_M_hookEPS0_": (_UPDATES, _UPDATES),
    "_ZNSt8__detail15_List_node_base9_M_unhookEv": (_UPDATES,),
}


def c_pointer_use(symbol: str | None, position: int) -> int | None:
    """What the C function ``symbol`` does with the pointer passed at ``position``
    (``summary.USE_*`` bits), or None when not known."""
    uses = _C_POINTER_USES.get(symbol.partition("@")[0]) if symbol else None
    return uses[position] if uses is not None and 0 <= position < len(uses) else None


# The printf family: where the format is among the arguments.  Those after it are one
# per conversion the format holds (``format_arguments``); a register past them holds
# whatever was left there (an address gcc kept for its own use), passed to nobody.
FORMAT_POSITIONS = {
    "printf": 0, "fprintf": 1, "dprintf": 1, "sprintf": 1, "snprintf": 2, "asprintf": 1,
    "__printf_chk": 1, "__fprintf_chk": 2, "__sprintf_chk": 3, "__snprintf_chk": 4,
}
_FORMAT_FLAGS = frozenset("0123456789.-+ #'*hlLqjzt")


def format_arguments(text: str) -> int | None:
    """How many arguments a printf format's conversions take (a ``*`` width or
    precision one more each); None for a format that numbers them (``%1$d``)."""
    if "$" in text:
        return None
    count, at = 0, text.find("%")
    while at >= 0:
        end = at + 1
        while end < len(text) and text[end] in _FORMAT_FLAGS:
            end += 1
        if text[at + 1:end + 1] != "%":
            count += 1 + text.count("*", at, end)
        at = text.find("%", end + 1)
    return count


@lru_cache(maxsize=1 << 14)
def argument_registers(symbol: str, result_apart: bool = False) -> int | None:
    """The most integer argument registers a call to the C++ function ``symbol`` can
    read, from the parameter types its mangled name carries: one a pointer, a
    reference or a scalar, two any other type (a small class travels in two),
    one more for ``this`` when the name has a scope, and one for the address of a
    class returned by value, unless that has a register of its own
    (``result_apart``: aarch64's x8; the mangled name does not say what a
    function returns).  None when not known: another C name, varargs, or a copy
    gcc made (``.constprop``, ``.isra``: its parameters may differ).

    A pointer left in a register the callee does not take (``rdx`` holding a
    global's address across ``operator new(unsigned long)``) is not passed to it.
    The C functions of ``_C_ARGUMENT_REGISTERS`` are known by name.
    """
    if not symbol.startswith("_Z"):
        return _C_ARGUMENT_REGISTERS.get(symbol.partition("@")[0])
    if "." in symbol:
        return None
    parts = scope_parts(demangle(symbol))
    types = component_parameters(parts[-1])
    if types is None or "..." in types:
        return None
    count = sum(_registers_of(kind) for kind in types)
    return count + (1 if len(parts) > 1 else 0) + (0 if result_apart else 1)


def _registers_of(kind: str) -> int:
    if _MEMBER_FUNCTION_POINTER.search(kind) or kind.endswith("__int128"):
        return 2
    if kind.endswith(("*", "&")) or "(*)" in kind or "(&)" in kind or kind in _SCALARS:
        return 1
    return 2  # a class (or an enum: not told apart by name)


def never_returns(name: str | None) -> bool:
    """Whether a function of this name never returns to its caller (it throws or ends
    the process, as a sanitizer's report does)."""
    return name is not None and (name in NEVER_RETURN or bool(_THROW_HELPER.match(name))
                                 or bool(_SANITIZER_STOP.match(name))
                                 or bool(_FATAL_MESSAGE.match(name)))


def fatal_message(name: str | None, constants: Collection[tuple[int, int]]) -> bool:
    """Whether a call of ``name`` passed ``constants`` ((position, value) pairs) builds
    a logging message of fatal severity, whose destructor ends the process."""
    return name is not None and _FATAL_SEVERITY in constants \
        and bool(_FATAL_WHEN.match(name))


def runs_only_contended(name: str | None) -> bool:
    """Whether the function ``name`` is a lock's slow path, run only under contention
    (``_CONTENDED_ONLY``): code that never runs while a library loads."""
    return name is not None and name.startswith("_ZN4absl") \
        and bool(_CONTENDED_ONLY.match(name))


def is_constructor(symbol: str) -> bool:
    """An Itanium C++ constructor (complete, base or allocating; inheriting too)."""
    if not symbol.startswith("_ZN") or not _CONSTRUCTOR_MARK.search(symbol):
        return False
    return _constructor_name(symbol)


def is_thread_body(symbol: str) -> bool:
    """``std::thread::_State_impl<…>::_M_run()``: what a std::thread runs."""
    return symbol.startswith("_ZNSt6thread11_State_impl") and bool(_THREAD_BODY.match(symbol))


# Bounded like the demangler's own cache: a long-running caller (check -j, a
# library user) does not grow without end.
@lru_cache(maxsize=1 << 14)
def _constructor_name(symbol: str) -> bool:
    text = demangle(symbol)
    if text == symbol:  # no demangler: the mangled marker is the best we have
        return bool(_MANGLED_CONSTRUCTOR.search(symbol))
    path = function_path(text)
    return len(path) >= 2 and _bare(path[-1]) == _bare(path[-2]) != ""


def _bare(component: str) -> str:
    return _TEMPLATE_OR_TAG.sub("", component).strip()

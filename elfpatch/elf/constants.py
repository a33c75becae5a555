"""ELF constants elfpatch needs, named as in <elf.h>."""

from __future__ import annotations

from dataclasses import dataclass

ELF_MAGIC = b"\x7fELF"

ELFCLASS32 = 1
ELFCLASS64 = 2
ELFDATA2LSB = 1
ELFDATA2MSB = 2

ET_REL, ET_EXEC, ET_DYN, ET_CORE = 1, 2, 3, 4
ELF_TYPE_NAMES = {0: "NONE", ET_REL: "REL", ET_EXEC: "EXEC", ET_DYN: "DYN", ET_CORE: "CORE"}

# Section header types
SHT_NULL = 0
SHT_PROGBITS = 1
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_RELA = 4
SHT_HASH = 5
SHT_DYNAMIC = 6
SHT_NOBITS = 8
SHT_REL = 9
SHT_DYNSYM = 11
SHT_INIT_ARRAY = 14
SHT_FINI_ARRAY = 15
SHT_PREINIT_ARRAY = 16
SHT_GROUP = 17
SHT_SYMTAB_SHNDX = 18
SHT_RELR = 19
SHT_GNU_HASH = 0x6FFFFFF6
SHT_GNU_VERDEF = 0x6FFFFFFD
SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_GNU_VERSYM = 0x6FFFFFFF

SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
SHN_ABS = 0xFFF1
SHN_COMMON = 0xFFF2
SHN_XINDEX = 0xFFFF

# Program header types
PT_LOAD = 1
PT_DYNAMIC = 2
PT_INTERP = 3
PT_NOTE = 4
PT_PHDR = 6
PT_TLS = 7
PT_GNU_EH_FRAME = 0x6474E550

# Section header flags
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4

# Sizes of the ELF header and of one program header, by ELF class (32 or 64),
# and where sh_info sits inside a section header.
EHDR_SIZE = {32: 52, 64: 64}
PHDR_SIZE = {32: 32, 64: 56}
SH_INFO_OFFSET = {32: 28, 64: 44}

# Symbol binding, type, visibility
STB_LOCAL = 0
STB_GLOBAL = 1
STB_WEAK = 2
STB_GNU_UNIQUE = 10
BINDING_NAMES = {STB_LOCAL: "LOCAL", STB_GLOBAL: "GLOBAL", STB_WEAK: "WEAK",
                 STB_GNU_UNIQUE: "UNIQUE"}

STT_NOTYPE = 0
STT_OBJECT = 1
STT_FUNC = 2
STT_SECTION = 3
STT_FILE = 4
STT_COMMON = 5
STT_TLS = 6
STT_GNU_IFUNC = 10
TYPE_NAMES = {
    STT_NOTYPE: "NOTYPE",
    STT_OBJECT: "OBJECT",
    STT_FUNC: "FUNC",
    STT_SECTION: "SECTION",
    STT_FILE: "FILE",
    STT_COMMON: "COMMON",
    STT_TLS: "TLS",
    STT_GNU_IFUNC: "IFUNC",
}

STV_DEFAULT = 0
STV_INTERNAL = 1
STV_HIDDEN = 2
STV_PROTECTED = 3
VISIBILITY_NAMES = {STV_DEFAULT: "DEFAULT", STV_INTERNAL: "INTERNAL", STV_HIDDEN: "HIDDEN",
                    STV_PROTECTED: "PROTECTED"}


# st_info and st_other, taken apart and put together as <elf.h>'s ELF64_ST_BIND,
# ELF64_ST_TYPE, ELF64_ST_INFO and ELF64_ST_VISIBILITY do (the same for ELF32).
def st_bind(info: int) -> int:
    """The binding (STB_*) of an st_info byte."""
    return info >> 4


def st_type(info: int) -> int:
    """The type (STT_*) of an st_info byte."""
    return info & 0xF


def st_info(bind: int, symbol_type: int) -> int:
    """The st_info byte of a binding and a type."""
    return (bind << 4) | (symbol_type & 0xF)


def st_visibility(other: int) -> int:
    """The visibility (STV_*) of an st_other byte."""
    return other & 0x3


def with_visibility(other: int, visibility: int) -> int:
    """``other`` with its visibility bits replaced, every other bit kept."""
    return (other & ~0x3 & 0xFF) | visibility


# ``bytes.translate`` tables: a whole st_info (st_other) column decoded in C.
BINDING_OF_INFO = bytes(st_bind(b) for b in range(256))
TYPE_OF_INFO = bytes(st_type(b) for b in range(256))
VISIBILITY_OF_OTHER = bytes(st_visibility(b) for b in range(256))

# Dynamic tags
DT_NULL = 0
DT_NEEDED = 1
DT_PLTRELSZ = 2
DT_HASH = 4
DT_STRTAB = 5
DT_SYMTAB = 6
DT_RELA = 7
DT_RELASZ = 8
DT_RELAENT = 9
DT_STRSZ = 10
DT_SYMENT = 11
DT_INIT = 12
DT_FINI = 13
DT_SONAME = 14
DT_RPATH = 15
DT_REL = 17
DT_RELSZ = 18
DT_RELENT = 19
DT_PLTREL = 20
DT_JMPREL = 23
DT_INIT_ARRAY = 25
DT_FINI_ARRAY = 26
DT_INIT_ARRAYSZ = 27
DT_FINI_ARRAYSZ = 28
DT_RUNPATH = 29
DT_FLAGS = 30
DT_PREINIT_ARRAY = 32
DT_PREINIT_ARRAYSZ = 33
DT_RELRSZ = 35
DT_RELR = 36
DT_RELRENT = 37
DT_GNU_HASH = 0x6FFFFEF5
DT_VERSYM = 0x6FFFFFF0
DT_FLAGS_1 = 0x6FFFFFFB
DT_VERDEF = 0x6FFFFFFC
DT_VERDEFNUM = 0x6FFFFFFD
DT_VERNEED = 0x6FFFFFFE
DT_VERNEEDNUM = 0x6FFFFFFF

DF_1_NODELETE = 0x8

VER_NDX_LOCAL = 0
VER_NDX_GLOBAL = 1

# e_machine values this package names or treats specially.
EM_386 = 3
EM_MIPS = 8
EM_PPC = 20
EM_PPC64 = 21
EM_S390 = 22
EM_ARM = 40
EM_SPARCV9 = 43
EM_IA_64 = 50
EM_X86_64 = 62
EM_AARCH64 = 183
EM_RISCV = 243
EM_LOONGARCH = 258
EM_ALPHA = 0x9026  # unofficial, but what Linux uses; with s390x, 8-byte .hash entries

# Relocation types (the type part of r_info), named as in <elf.h>, for the
# machines whose relocations elfpatch reads.
R_X86_64_64 = 1
R_X86_64_COPY = 5
R_X86_64_GLOB_DAT = 6
R_X86_64_JUMP_SLOT = 7
R_X86_64_RELATIVE = 8
R_X86_64_DTPMOD64 = 16
R_X86_64_DTPOFF64 = 17
R_X86_64_TPOFF64 = 18
R_X86_64_IRELATIVE = 37
R_386_32 = 1
R_386_RELATIVE = 8
R_AARCH64_ABS64 = 257
R_AARCH64_COPY = 1024
R_AARCH64_GLOB_DAT = 1025
R_AARCH64_JUMP_SLOT = 1026
R_AARCH64_RELATIVE = 1027
R_AARCH64_TLS_DTPMOD = 1028
R_AARCH64_TLS_DTPREL = 1029
R_AARCH64_TLS_TPREL = 1030
R_AARCH64_TLSDESC = 1031
R_AARCH64_IRELATIVE = 1032
R_ARM_ABS32 = 2
R_ARM_RELATIVE = 23
R_PPC64_RELATIVE = 22
R_PPC64_ADDR64 = 38
R_390_RELATIVE = 12
R_390_64 = 22
R_RISCV_64 = 2
R_RISCV_RELATIVE = 3


@dataclass(frozen=True)
class MachineRelocations:
    """The relocation types of one machine that elfpatch tells apart."""

    relative: int  # base + addend: RELA's addend, or REL's slot bytes
    absolute: int  # a symbol's address, one word wide
    # Types that fill a GOT slot with a symbol's address or TLS offset (the
    # address index names such slots; machines without one name none).
    symbol_slots: frozenset[int] = frozenset()
    irelative: int | None = None  # filled by an IFUNC resolver: the target is unknown
    # A program's copy of a library's object, filled by the loader from the library's.
    copy: int | None = None


RELOCATIONS: dict[int, MachineRelocations] = {
    EM_X86_64: MachineRelocations(
        R_X86_64_RELATIVE, R_X86_64_64,
        frozenset({R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT, R_X86_64_DTPMOD64,
                   R_X86_64_DTPOFF64, R_X86_64_TPOFF64}),
        R_X86_64_IRELATIVE, R_X86_64_COPY),
    EM_386: MachineRelocations(R_386_RELATIVE, R_386_32),
    EM_AARCH64: MachineRelocations(
        R_AARCH64_RELATIVE, R_AARCH64_ABS64,
        frozenset({R_AARCH64_GLOB_DAT, R_AARCH64_JUMP_SLOT, R_AARCH64_TLS_DTPMOD,
                   R_AARCH64_TLS_DTPREL, R_AARCH64_TLS_TPREL, R_AARCH64_TLSDESC}),
        R_AARCH64_IRELATIVE, R_AARCH64_COPY),
    EM_ARM: MachineRelocations(R_ARM_RELATIVE, R_ARM_ABS32),
    EM_PPC64: MachineRelocations(R_PPC64_RELATIVE, R_PPC64_ADDR64),
    EM_S390: MachineRelocations(R_390_RELATIVE, R_390_64),
    EM_RISCV: MachineRelocations(R_RISCV_RELATIVE, R_RISCV_64),
}

# e_machine values with the names users know them by; others fall back to
# pyelftools' enum name, then to EM_<number>.
MACHINE_NAMES = {
    EM_386: "i386",
    EM_MIPS: "mips",
    EM_PPC: "ppc",
    EM_PPC64: "ppc64",
    EM_S390: "s390x",
    EM_ARM: "arm",
    EM_SPARCV9: "sparcv9",
    EM_X86_64: "x86_64",
    EM_AARCH64: "aarch64",
    EM_RISCV: "riscv",
    EM_LOONGARCH: "loongarch",
}

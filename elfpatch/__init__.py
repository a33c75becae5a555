"""elfpatch: find and fix STB_GNU_UNIQUE symbols and static-initializer hazards."""

__version__ = "0.1.0"

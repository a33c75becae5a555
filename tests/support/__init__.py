"""What the tests share, in one place.

``build`` compiles and runs (and runs the CLI in-process), ``readelf`` is
the one reader of readelf's and nm's output, ``fixlib`` holds the fix
tests' libraries and oracles, ``inits`` the ``inits`` scenario helpers,
``ldcache`` makes ld.so.cache images, ``record`` checks a wheel's RECORD
against its content (with the ``wheel`` package, not elfpatch's reader),
and ``zipcraft`` makes archives byte by byte.  Test modules import from
here, never from one another (``tests/test_layers.py`` checks both rules).
"""

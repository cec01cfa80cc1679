"""The compiled part of the build: everything else is declared in pyproject.toml.

``protocol._record_scan``, ``protocol._wire`` and ``storage._compiled_append`` are optional: where no C compiler
or Python headers are present (the slim container image), the install goes on without them;
``protocol.record_scan`` then uses its pure-Python scanner, ``protocol.compiled_wire`` the generated codec
and ``PartitionLog.append_as_leader`` the Python append.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("protocol._record_scan", ["protocol/_record_scan.c"], optional=True),
    Extension("protocol._wire", ["protocol/_wire.c"], optional=True),
    Extension("storage._compiled_append", ["storage/_compiled_append.c"], optional=True),
])

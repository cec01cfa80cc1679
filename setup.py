"""The compiled part of the build: everything else is declared in pyproject.toml.

``protocol._record_scan`` is optional: where no C compiler or Python headers are present (the slim
container image), the install goes on without it and ``protocol.record_scan`` uses its pure-Python scanner.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("protocol._record_scan", ["protocol/_record_scan.c"], optional=True)])

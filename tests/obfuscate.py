"""The seeded obfuscator now lives in the package (``gramopt.bench.obfuscate``); kept here
so tests that import ``obfuscate`` from the tests folder keep working."""

from gramopt.bench.obfuscate import obfuscate

__all__ = ["obfuscate"]

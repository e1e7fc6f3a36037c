"""The package version (one place: the facade, caches and reports read it)."""

__version__ = "0.1.0"

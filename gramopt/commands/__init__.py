"""Subcommands beyond analyze/convert/optimize, one module each (see ``gramopt.cli``)."""

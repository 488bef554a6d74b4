"""The package version (its own module so that any layer, the CLI included, can read it)."""

__version__ = "0.1.0"

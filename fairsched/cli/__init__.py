"""The ``fairsched`` command line."""

from fairsched.cli.app import build_parser, main

__all__ = ["build_parser", "main"]

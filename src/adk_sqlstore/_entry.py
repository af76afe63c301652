"""The ``adk-sqlstore`` command's entry point: imports the command line (SQLAlchemy,
typer, rich: most of the start-up time) inside the handler of Ctrl-C, so that an
interrupted start prints one line, not a traceback."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Run the command line; Ctrl-C at any point exits with status 130 and one line."""
    try:
        from .cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("adk-sqlstore: interrupted\n")
        raise SystemExit(130) from None

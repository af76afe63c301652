"""``python -m adk_sqlstore``: the same as the ``adk-sqlstore`` command."""

from .cli import main

main()

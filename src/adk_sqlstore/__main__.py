"""``python -m adk_sqlstore``: the same as the ``adk-sqlstore`` command."""

from ._entry import main

main()

"""``adk-sqlstore inspect``: serve the memory inspector (the ``inspector`` extra)."""

from __future__ import annotations

import getpass
import os
import socket
from typing import Annotated

import typer

from .common import UrlOption, app, consoles, database, error

__all__ = ["inspect"]


TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        metavar="TOKEN",
        envvar="ADK_SQLSTORE_INSPECTOR_TOKEN",
        help="Every request must carry this token (the sign-in page sets a cookie)."
        " Needed to listen on an address other than loopback.",
        show_envvar=True,
    ),
]

OperatorOption = Annotated[
    str | None,
    typer.Option(
        "--operator",
        metavar="NAME",
        help="Your name in the change log and in fact corrections (default: your login).",
    ),
]


@app.command("inspect")
def inspect(
    url: UrlOption = None,
    host: Annotated[
        str,
        typer.Option("--host", metavar="HOST", help="Address to listen on (loopback by default)."),
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option("--port", metavar="PORT", min=1, max=65535, help="Port to listen on."),
    ] = 8765,
    write: Annotated[
        bool,
        typer.Option(
            "--write",
            help="Allow changes: delete memories and facts, correct facts, run generation"
            " again, export and forget users. Read-only without it.",
        ),
    ] = False,
    token: TokenOption = None,
    operator: OperatorOption = None,
) -> None:
    """Serve the memory inspector over the store: apps, users, sessions, facts with
    their history, memory search with scores; changes only with --write."""
    try:
        import uvicorn

        from ..inspector import create_app
        from ..inspector.security import is_loopback
    except ImportError as missing:
        error(
            f"the inspector needs the inspector extra ({missing.name} is not installed):"
            ' pip install "adk-sqlstore[inspector]"'
        )
        raise typer.Exit(2) from None
    if not is_loopback(host) and not token:
        error(
            f"refusing to listen on {host}, which other machines can reach, without a token:"
            " give --token (or $ADK_SQLSTORE_INSPECTOR_TOKEN), or listen on 127.0.0.1"
        )
        raise typer.Exit(2)
    shown = f"[{host}]" if ":" in host else host
    why = _cannot_listen(host, port)
    if why is not None:
        error(f"cannot listen on {shown}:{port}: {why}")
        raise typer.Exit(1)
    name = operator or os.environ.get("USER") or getpass.getuser()
    inspector = create_app(database(url), write=write, token=token, operator=name)
    mode = "with changes allowed (--write)" if write else "read-only"
    consoles.out.print(f"memory inspector on http://{shown}:{port}/ ({mode}); Ctrl+C stops it")
    try:
        uvicorn.run(inspector, host=host, port=port, log_level="warning", access_log=False)
    except SystemExit as exc:  # uvicorn's exit on a failed start (its error logged)
        if exc.code not in (0, None):
            raise typer.Exit(1) from None
        raise


def _cannot_listen(host: str, port: int) -> str | None:
    """Why uvicorn could not listen on ``host:port`` (the port in use, not allowed, the
    address not this machine's), or ``None``: a socket is bound there as uvicorn binds
    it (``SO_REUSEADDR``), then closed. uvicorn itself would log the failure after the
    banner, then exit with 3."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:  # in use, a privileged port, an unknown host
        reason = exc.strerror or str(exc)
        return f"{reason[:1].lower()}{reason[1:]} (give another --port or --host)"
    return None

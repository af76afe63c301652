"""The memory inspector: a web page that shows what an agent remembers about a user,
why, and lets an operator correct it (``adk-sqlstore inspect``; the ``inspector``
extra: Starlette, Jinja2 and uvicorn).

- :mod:`.app`: :func:`create_app`, the ASGI application (run alone, or mounted in
  your FastAPI app beside an ADK agent), the token check and error pages;
- :mod:`.pages`: the read-only pages (apps, users, a user, a fact, a session, search);
- :mod:`.actions`: the changes, only with ``write=True``;
- :mod:`.rendering`: templates, links, cursors, the shown form of stored text;
- :mod:`.security`: tokens, CSRF, the Content-Security-Policy, loopback checks.

See ``docs/inspector.md``.
"""

from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]

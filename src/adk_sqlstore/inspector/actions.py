"""The inspector's changes (only with ``--write``; every form carries the CSRF token,
checked before these run): delete a memory or a fact, correct a fact, run
generation of a session again, export a user's data, forget a user.

Each change is one call of the public API (one transaction) and is logged on
``adk_sqlstore.inspector`` with the operator, the time (UTC) and the ids, never
content.
"""

from __future__ import annotations

import asyncio
import io
import logging
import tempfile
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..cli.sessions import export_to_folder
from ..errors import GenerationError
from .rendering import link, path_ids, render

if TYPE_CHECKING:
    from .app import Context

__all__ = [
    "correct_fact",
    "delete_fact",
    "delete_memory",
    "export_user",
    "forget_user",
    "generate",
]

log = logging.getLogger("adk_sqlstore.inspector")


def _context(request: Request) -> Context:
    return request.state.context  # type: ignore[no-any-return]


def _logged(context: Context, action: str, **ids: str) -> None:
    now = datetime.now(UTC).isoformat(timespec="seconds")
    shown = " ".join(f"{k}={v!r}" for k, v in ids.items())
    log.info("inspector: %s by %s at %s: %s", action, context.operator, now, shown)


def _back(request: Request, *parts: str, **query: Any) -> Response:
    return RedirectResponse(link(request, *parts, **query), status_code=303)


def _field(request: Request, name: str) -> str:
    value = request.state.form.get(name)
    return value if isinstance(value, str) else ""


async def delete_memory(request: Request) -> Response:
    """Delete one memory of the user (a fact's memory deletes the fact)."""
    context = _context(request)
    app_name, user_id, memory_id = path_ids(request, "app", "user", "memory")
    deleted = await context.memory.delete_memories(
        app_name=app_name, user_id=user_id, memory_ids=[memory_id]
    )
    if not deleted:
        raise HTTPException(404, f"User {user_id!r} has no memory {memory_id!r}.")
    _logged(context, "deleted memory", app_name=app_name, user_id=user_id, memory_id=memory_id)
    return _back(request, "apps", app_name, "users", user_id, tab="memories", done="deleted")


async def delete_fact(request: Request) -> Response:
    """Delete one fact with its revisions (the invalidations it made are undone)."""
    context = _context(request)
    app_name, user_id, fact_id = path_ids(request, "app", "user", "fact")
    found = await context.memory.fact_history(app_name=app_name, user_id=user_id, fact_id=fact_id)
    if found is None:
        raise HTTPException(404, f"User {user_id!r} has no fact {fact_id!r}.")
    await context.memory.delete_memories(app_name=app_name, user_id=user_id, memory_ids=[fact_id])
    _logged(context, "deleted fact", app_name=app_name, user_id=user_id, fact_id=fact_id)
    return _back(request, "apps", app_name, "users", user_id, tab="facts", done="deleted")


async def correct_fact(request: Request) -> Response:
    """Correct a current fact's text: a revision made by the operator."""
    context = _context(request)
    app_name, user_id, fact_id = path_ids(request, "app", "user", "fact")
    await context.memory.correct_fact(
        app_name=app_name, user_id=user_id, fact_id=fact_id, text=_field(request, "text"),
        operator=context.operator,
    )  # fmt: skip
    _logged(context, "corrected fact", app_name=app_name, user_id=user_id, fact_id=fact_id)
    return _back(request, "apps", app_name, "users", user_id, "facts", fact_id, done="corrected")


async def generate(request: Request) -> Response:
    """Run generation of a session again (its failed attempts included)."""
    context = _context(request)
    app_name, user_id, session_id = path_ids(request, "app", "user", "session")
    if context.memory.generator is None:
        raise HTTPException(
            409, "This inspector has no generator: start it with a URL that names one"
            " (?generator=...) to run generation.",
        )  # fmt: skip
    try:
        report = await context.memory.generate(
            app_name=app_name, user_id=user_id, session_id=session_id
        )
        done = f"generated: {report.created} created, {report.updated} updated"
    except GenerationError as error:
        done = f"generation failed again: {type(error.__cause__ or error).__name__}"
    _logged(context, "ran generation", app_name=app_name, user_id=user_id, session_id=session_id)
    return _back(request, "apps", app_name, "users", user_id, "sessions", session_id, done=done)


async def export_user(request: Request) -> Response:
    """The user's data as ``adk-sqlstore export --user`` writes it, in a zip file."""
    context = _context(request)
    app_name, user_id = path_ids(request, "app", "user")
    with tempfile.TemporaryDirectory(prefix="adk-sqlstore-export-") as folder:
        await export_to_folder(
            context.sessions, app_name=app_name, user=user_id, session_id=None, out=Path(folder)
        )
        body = await asyncio.to_thread(_zipped, Path(folder))
    _logged(context, "exported user", app_name=app_name, user_id=user_id)
    safe = (ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "_" for ch in user_id)
    name = "".join(safe)[:80]  # ASCII: a header's value is Latin-1
    return Response(
        body, media_type="application/zip",
        headers={"content-disposition": f'attachment; filename="export-{name}.zip"'},
    )  # fmt: skip


def _zipped(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


async def forget_user(request: Request) -> Response:
    """Forget a user (every session, event, state key, memory, fact and artifact),
    once the operator has typed the user's id to confirm."""
    context = _context(request)
    app_name, user_id = path_ids(request, "app", "user")
    if request.method == "GET":
        return render(
            request, context.env, "forget.html", app_name=app_name, user_id=user_id,
            wrong=False, title=f"forget {user_id}",
        )  # fmt: skip
    if _field(request, "confirm") != user_id:
        return render(
            request, context.env, "forget.html", status=400, app_name=app_name,
            user_id=user_id, wrong=True, title=f"forget {user_id}",
        )  # fmt: skip
    await context.sessions.forget_user(app_name=app_name, user_id=user_id)
    _logged(context, "forgot user", app_name=app_name, user_id=user_id)
    return _back(request, "apps", app_name, done="forgotten")

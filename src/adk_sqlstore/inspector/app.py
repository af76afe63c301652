"""The inspector as an ASGI application (Starlette): its routes, its services over one
store, the token check and the error pages."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment
from sqlalchemy.engine import URL
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..artifacts.service import ArtifactStorage
from ..errors import (
    AdkSqlStoreError,
    DatabaseUnavailableError,
    InvalidArgumentError,
    InvalidIdentifierError,
    SchemaNotMigratedError,
)
from ..memory.service import SqlMemoryService
from ..sessions.service import SqlSessionService
from ..store import Store
from . import actions, pages
from .rendering import environment, link, render
from .security import (
    TOKEN_COOKIE,
    SecurityHeaders,
    csrf_token,
    request_token,
    same_token,
    valid_csrf,
    valid_origin,
)

__all__ = ["Context", "create_app"]

log = logging.getLogger("adk_sqlstore.inspector")


@dataclass
class Context:
    """What every page uses: the services over the store, whether writes are on, the
    token (``None``: none needed) and the operator's name changes are logged with."""

    store: Store
    sessions: SqlSessionService
    memory: SqlMemoryService
    artifacts: ArtifactStorage
    write: bool
    token: str | None
    operator: str
    env: Environment
    owns_store: bool


def create_app(
    store: Store | str | URL | None = None,
    *,
    write: bool = False,
    token: str | None = None,
    operator: str = "operator",
    memory: SqlMemoryService | None = None,
) -> Starlette:
    """The memory inspector over ``store``, as an ASGI application.

    Run it alone (``adk-sqlstore inspect``) or mount it in your own app, e.g. beside
    an ADK agent in the FastAPI app of ``get_fast_api_app()``::

        app.mount("/inspector", create_app(store, token=os.environ["INSPECTOR_TOKEN"]))

    Args:
        store: a :class:`~adk_sqlstore.Store` (yours: left open), or a database URL
            (``None``: ``$ADK_SQLSTORE_DATABASE_URL``, else the embedded SQLite
            file), whose store the app opens on first use and closes on shutdown
            when it runs alone.
        write: allow changes (delete a memory or fact, correct a fact, run generation
            again, export and forget a user); read-only otherwise.
        token: every request must carry it (a bearer token or the sign-in cookie);
            ``None``: none (serve it on loopback only).
        operator: the name changes are logged and fact corrections recorded with
            (``operator:NAME`` as the revision's model).
        memory: the memory service to use (with your embedder or generator);
            default: one on ``store`` as its URL configures it.

    Raises:
        ConfigurationError: the URL is invalid or its driver is not installed.
    """
    context = _context(store, write=write, token=token, operator=operator, memory=memory)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if context.owns_store:
            await context.store.close()

    def page(handler: Callable[[Request], Awaitable[Response]]) -> Callable[..., Any]:
        async def endpoint(request: Request) -> Response:
            return await _guarded(context, request, handler)

        return endpoint

    routes = _routes(page)
    app = Starlette(routes=routes, middleware=[Middleware(SecurityHeaders)], lifespan=lifespan)
    app.state.context = context

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error_page(context, request, 404, "There is no such page.")

    app.add_exception_handler(404, not_found)
    return app


async def _guarded(
    context: Context, request: Request, handler: Callable[[Request], Awaitable[Response]]
) -> Response:
    """A page behind the token and the CSRF check, its errors as error pages."""
    request.state.context = context
    request.state.csrf, request.state.csrf_new = csrf_token(request)
    signing_in = request.url.path.endswith("/sign-in")
    needs_token = context.token is not None and not signing_in
    if needs_token and not same_token(request_token(request), context.token or ""):
        if request.method == "GET" and "authorization" not in request.headers:
            return RedirectResponse(link(request, "sign-in"), status_code=303)
        return _error_page(context, request, 401, "This inspector needs its token.")
    try:
        if request.method == "POST" and not signing_in:
            if not context.write and not getattr(handler, "reads_only", False):
                return _error_page(
                    context, request, 403,
                    "The inspector is read-only: start it with --write to change anything.",
                )  # fmt: skip
            form = await request.form()
            if not valid_origin(request) or not valid_csrf(request, form):
                return _error_page(
                    context, request, 403,
                    "The form's CSRF token is missing or wrong: reload the page and try again.",
                )  # fmt: skip
            request.state.form = form
        return await handler(request)
    except HTTPException as error:
        return _error_page(context, request, error.status_code, str(error.detail))
    except (InvalidIdentifierError, InvalidArgumentError) as error:
        return _error_page(context, request, 400, str(error))
    except (DatabaseUnavailableError, SchemaNotMigratedError) as error:
        return _error_page(context, request, 503, str(error))
    except AdkSqlStoreError as error:
        log.warning("inspector: %s on %s", type(error).__name__, request.url.path)
        return _error_page(context, request, 500, type(error).__name__)
    except Exception as error:  # a page never shows a traceback
        log.error("inspector: %s on %s", type(error).__name__, request.url.path)
        return _error_page(context, request, 500, "The inspector failed on this page.")


def _error_page(context: Context, request: Request, status: int, message: str) -> Response:
    if not hasattr(request.state, "context"):
        request.state.context = context
        request.state.csrf, request.state.csrf_new = csrf_token(request)
    return render(
        request, context.env, "error.html", status=status, message=message, status_code=status,
        title=f"{status}",
    )  # fmt: skip


async def _sign_in(request: Request) -> Response:
    """The sign-in form: a right token sets the token cookie."""
    context: Context = request.state.context
    if context.token is None:
        return RedirectResponse(link(request, ""), status_code=303)
    if request.method == "POST":
        form = await request.form()
        given = form.get("token")
        if valid_csrf(request, form) and same_token(
            given if isinstance(given, str) else None, context.token
        ):
            response = RedirectResponse(link(request, ""), status_code=303)
            response.set_cookie(
                TOKEN_COOKIE, context.token, httponly=True, samesite="strict",
                secure=request.url.scheme == "https",
                path=request.scope.get("root_path", "") or "/",
            )  # fmt: skip
            return response
        return render(
            request, context.env, "sign_in.html", status=401, failed=True, title="Sign in"
        )
    return render(request, context.env, "sign_in.html", failed=False, title="Sign in")


def _routes(page: Callable[[Callable[[Request], Awaitable[Response]]], Any]) -> list[Any]:
    """The pages and actions, each behind ``page`` (the token and CSRF checks)."""
    return [
        Route("/", page(pages.apps_page)),
        Route("/sign-in", page(_sign_in), methods=["GET", "POST"]),
        Route("/apps/{app}", page(pages.app_page)),
        Route("/apps/{app}/users/{user}", page(pages.user_page)),
        Route("/apps/{app}/users/{user}/search", page(pages.search_page), methods=["GET", "POST"]),
        Route("/apps/{app}/users/{user}/facts/{fact}", page(pages.fact_page)),
        Route("/apps/{app}/users/{user}/sessions/{session}", page(pages.session_page)),
        Route(
            "/apps/{app}/users/{user}/artifacts/{scope}/{filename:path}/{version:int}",
            page(pages.artifact_download),
        ),
        Route("/apps/{app}/users/{user}/memories/{memory}/delete", page(actions.delete_memory),
              methods=["POST"]),
        Route("/apps/{app}/users/{user}/facts/{fact}/delete", page(actions.delete_fact),
              methods=["POST"]),
        Route("/apps/{app}/users/{user}/facts/{fact}/correct", page(actions.correct_fact),
              methods=["POST"]),
        Route("/apps/{app}/users/{user}/sessions/{session}/generate", page(actions.generate),
              methods=["POST"]),
        Route("/apps/{app}/users/{user}/export", page(actions.export_user), methods=["POST"]),
        Route("/apps/{app}/users/{user}/forget", page(actions.forget_user),
              methods=["GET", "POST"]),
        Mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static"),
    ]  # fmt: skip


def _context(
    store: Store | str | URL | None,
    *,
    write: bool,
    token: str | None,
    operator: str,
    memory: SqlMemoryService | None,
) -> Context:
    opened = Store.from_url(store) if not isinstance(store, Store) else store
    return Context(
        store=opened,
        sessions=SqlSessionService(opened),
        memory=memory if memory is not None else SqlMemoryService(opened),
        artifacts=ArtifactStorage(opened),
        write=write,
        token=token or None,
        operator=operator,
        env=environment(),
        owns_store=not isinstance(store, Store),
    )

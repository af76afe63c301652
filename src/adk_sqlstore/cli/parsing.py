"""How the commands read and show their command line: the classes behind every Typer
app of :mod:`.common`.

- Help as a person writes a command line: ``import [OPTIONS] PATH...`` and
  ``SESSION_ID  The session id.``, not the parser's view of them (typer 0.2x writes
  ``{PATH...}...`` and ``PATH... <list[Path]>``), in the same plain text with every
  typer version (typer 0.12 drew rich panels with ``TEXT`` and ``[default: None]``).
- A mistyped option or command is answered with the visible one most like it
  (:func:`adk_sqlstore.suggestions.closest`, as database URL parameters are), never
  with a hidden one (``--model``, the deprecated spelling).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup

from ..suggestions import closest

__all__ = ["App", "Command", "Group"]

F = TypeVar("F", bound=Callable[..., Any])


def _argument(param: Any) -> str:
    """An argument as a command line shows it: its metavar (else its name in capitals),
    ``...`` after one that takes several values."""
    name = str(param.metavar or (param.name or "").upper())
    return name if param.nargs == 1 or name.endswith("...") else f"{name}..."


def _format_params(ctx: Any, formatter: Any) -> None:
    """The Arguments and Options sections of a command's help: each argument by
    :func:`_argument` (typer's help text kept, ``[required]`` included), each option
    as its record."""
    rows: dict[str, list[tuple[str, str]]] = {"argument": [], "option": []}
    for param in ctx.command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None or param.param_type_name not in rows:
            continue
        if param.param_type_name == "argument":
            record = (_argument(param), record[1])
        rows[param.param_type_name].append(record)
    for title, kind in (("Arguments", "argument"), ("Options", "option")):
        if rows[kind]:
            with formatter.section(title):
                formatter.write_dl(rows[kind])


def _suggest_option(ctx: Any, exc: Exception) -> None:
    """Word click's error for an option the command does not have (``NoSuchOption``)
    with the visible option most like it, if any."""
    if type(exc).__name__ != "NoSuchOption":
        return
    name = str(getattr(exc, "option_name", ""))
    visible = [
        spelling
        for param in ctx.command.get_params(ctx)
        if param.param_type_name == "option" and not param.hidden
        for spelling in (*param.opts, *param.secondary_opts)
    ]
    near = closest(name, visible)
    exc.possibilities = []  # type: ignore[attr-defined]
    exc.message = f"No such option: {name}" + (f"; did you mean {near}?" if near else "")  # type: ignore[attr-defined]


class _SuggestsOptions:
    """Answers a mistyped option with the visible option most like it
    (:func:`_suggest_option`), in commands and groups alike."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)  # type: ignore[misc, no-any-return]
        except Exception as exc:
            _suggest_option(ctx, exc)
            raise


class Command(_SuggestsOptions, TyperCommand):
    """A command whose help shows its arguments as a person writes them."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = _argument(param)
                pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_help(self, ctx: Any, formatter: Any) -> None:
        super(TyperCommand, self).format_help(ctx, formatter)  # click's plain help

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _format_params(ctx, formatter)


class Group(_SuggestsOptions, TyperGroup):
    """A group of commands with the same plain help, whose mistyped command is
    answered with the visible command most like it."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        super(TyperGroup, self).format_help(ctx, formatter)  # click's plain help

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _format_params(ctx, formatter)
        self.format_commands(ctx, formatter)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else ""
        missing = name[:1].isalnum() and self.get_command(ctx, name) is None
        if missing and not ctx.resilient_parsing:
            commands = {n: self.get_command(ctx, n) for n in self.list_commands(ctx)}
            near = closest(name, [n for n, c in commands.items() if c and not c.hidden])
            ctx.fail(f"No such command {name!r}" + (f"; did you mean {near!r}?" if near else "."))
        return super().resolve_command(ctx, args)


class App(typer.Typer):
    """A ``typer.Typer`` whose groups and commands are :class:`Group` and
    :class:`Command` (unless given another ``cls``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", Group)
        super().__init__(**kwargs)

    def command(
        self, name: str | None = None, *, cls: Any = None, **kwargs: Any
    ) -> Callable[[F], F]:
        return super().command(name, cls=cls or Command, **kwargs)

"""mkdocs hooks of the documentation site.

- The command line's reference, generated from the command itself: a page's
  ``<!-- cli-reference -->`` becomes the ``--help`` of ``adk-sqlstore`` and of each of
  its commands, as the installed package prints them.
- The docstrings' Sphinx roles (``:class:`~adk_sqlstore.Store```), which mkdocstrings
  shows as written, become code: the name, or with ``~`` its last part.
- ``404.html`` links relatively, as every other page does. mkdocs gives error pages
  absolute links (``/assets/...``, ``/index.html``: the server's root, as no
  ``site_url`` is set), which fail wherever the site is not at a server's root: read
  from disk, or served under a path (``https://host/adk-sqlstore/``). The page is at the
  site's root, so links relative to it work there; a server that shows it for a missing
  page in a subfolder (``reference/``) shows it unstyled, with links one level off."""

from __future__ import annotations

import re
from typing import Any

import typer
from mkdocs.utils import normalize_url

MARKER = "<!-- cli-reference -->"


def _help(command: Any, path: list[str]) -> list[str]:
    """The help of ``command`` (a click command, as typer makes it) and its commands'."""
    ctx = command.context_class(command, info_name=" ".join(path), terminal_width=88)
    text = command.get_help(ctx)
    heading = "#" * min(3 + len(path) - 1, 5)
    lines = [f"{heading} `{' '.join(path)}`", "", "```text", text, "```", ""]
    if hasattr(command, "list_commands"):
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                lines += _help(sub, [*path, name])
    return lines


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    from adk_sqlstore.cli import app

    return markdown.replace(MARKER, "\n".join(_help(typer.main.get_command(app), ["adk-sqlstore"])))


_ROLE = re.compile(r":(?:class|meth|func|mod|data|attr|exc|obj):<code>(~?)([^<]+)</code>")


def _name(match: re.Match[str]) -> str:
    name = match.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if match.group(1) else name}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub(_name, html)


def on_template_context(context: Any, template_name: str, **kwargs: Any) -> Any:
    if template_name == "404.html":  # see the module docstring
        context["base_url"] = "."
        config = kwargs["config"]
        context["extra_css"] = [normalize_url(str(p), None, ".") for p in config.extra_css]
        context["extra_javascript"] = [
            normalize_url(str(p), None, ".") for p in config.extra_javascript
        ]
    return context

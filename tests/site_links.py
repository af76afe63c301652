"""The links of the built documentation site (``make docs`` runs it after
``mkdocs build --strict``)::

    python -m tests.site_links site

Every ``<a href>``, ``<link href>``, ``<img src>`` and ``<script src>`` of every
``.html`` file under the folder is checked, theme pages such as ``404.html`` included:

- a relative link must name a file inside the site (a folder does not do: the site is
  also read from disk, where no server adds ``index.html``), and its ``#anchor`` an
  ``id`` (or ``<a name>``) of that page;
- a link that leaves the site is refused: one starting with ``/`` (it works only where
  the site is served at a server's root, never from disk), ``//host``, ``file:``, or
  ``../`` past the site's root;
- ``http(s)`` links are allowed and listed, not fetched (no network is needed);
  ``mailto:``, ``tel:`` and ``data:`` links are allowed.

Prints each problem as ``page: <tag attr="url">: why``, then the external links, and
exits with 1 if there was a problem. mkdocs's own ``validation`` settings (mkdocs.yml)
check the Markdown's links before this; this checks what the reader gets, the theme's
links and the generated API reference's included."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

# The elements and attributes checked: what a reader follows or the page loads.
CHECKED = {"a": "href", "link": "href", "img": "src", "script": "src"}
ALLOWED_SCHEMES = {"mailto", "tel", "data"}
EXTERNAL_SCHEMES = {"http", "https"}


@dataclass(frozen=True)
class Link:
    """One link of one page: the page (relative to the site), its tag and attribute,
    and the URL as written."""

    page: str
    tag: str
    attr: str
    url: str

    def __str__(self) -> str:
        return f'{self.page}: <{self.tag} {self.attr}="{self.url}">'


@dataclass
class Report:
    """What a check found: problems (the link and why) and the external links."""

    pages: int = 0
    links: int = 0
    problems: list[tuple[Link, str]] = field(default_factory=list)
    external: dict[str, list[str]] = field(default_factory=dict)  # URL -> pages

    @property
    def ok(self) -> bool:
        return not self.problems


class _Page(HTMLParser):
    """The links and the anchors (``id``, ``<a name>``) of one HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str, str]] = []  # (tag, attribute, URL)
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value for name, value in attrs if value is not None}
        if "id" in values:
            self.ids.add(values["id"])
        if tag == "a" and "name" in values:
            self.ids.add(values["name"])
        attr = CHECKED.get(tag)
        if attr is not None and attr in values:
            self.links.append((tag, attr, values[attr]))

    handle_startendtag = handle_starttag


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def _pages(site: Path) -> Iterator[Path]:
    yield from sorted(p for p in site.rglob("*.html") if p.is_file())


def check_site(site: Path) -> Report:
    """Check every link of every HTML page under ``site`` (see the module docstring)."""
    site = site.resolve()
    parsed = {path: _parse(path) for path in _pages(site)}
    report = Report(pages=len(parsed))
    for path, page in parsed.items():
        where = path.relative_to(site).as_posix()
        for tag, attr, url in page.links:
            report.links += 1
            link = Link(where, tag, attr, url)
            why = _problem(site, path, page, url, parsed, report, where)
            if why is not None:
                report.problems.append((link, why))
    return report


def _problem(
    site: Path,
    path: Path,
    page: _Page,
    url: str,
    parsed: dict[Path, _Page],
    report: Report,
    where: str,
) -> str | None:
    """Why ``url`` (on the page at ``path``) is broken, or None if it is not."""
    url = url.strip()
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in EXTERNAL_SCHEMES:
        if not parts.netloc:
            return "an http(s) link without a host"
        report.external.setdefault(url, []).append(where)
        return None
    if scheme in ALLOWED_SCHEMES:
        return None
    if scheme == "file":
        return "a file: link leaves the site (it names one machine's disk)"
    if scheme:
        return f"a {scheme}: link (neither part of the site nor http(s))"
    if url.startswith("//"):
        return "a protocol-relative link leaves the site"
    if url.startswith("/"):
        return "an absolute link: it works only at a server's root, never from disk"
    if not parts.path:  # "#anchor" (or "" / "?query"): this page
        target, anchors = path, page.ids
    else:
        target = (path.parent / unquote(parts.path)).resolve()
        if not target.is_relative_to(site):
            return "leaves the site (../ past its root)"
        if target.is_dir():
            return "a folder: from disk no index.html is added, link the file"
        if not target.is_file():
            return "no such file in the site"
        anchors = parsed[target].ids if target in parsed else set()
    fragment = unquote(parts.fragment)
    if fragment and target.suffix == ".html" and fragment not in anchors:
        return f"no id {fragment!r} in {target.relative_to(site).as_posix()}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.site_links",
        description="Check the links of a built documentation site (see the docstring).",
    )
    parser.add_argument("site", type=Path, help="the built site's folder (make docs: site)")
    args = parser.parse_args(argv)
    if not args.site.is_dir():
        print(f"error: {args.site} is not a folder", file=sys.stderr)
        return 2
    report = check_site(args.site)
    for link, why in report.problems:
        print(f"{link}: {why}")
    for url, pages in sorted(report.external.items()):
        print(f"external (not fetched): {url} ({len(pages)} page(s))")
    verdict = f"{len(report.problems)} broken" if report.problems else "none broken"
    print(
        f"site links: {report.links} links in {report.pages} pages, {verdict},"
        f" {len(report.external)} external"
    )
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

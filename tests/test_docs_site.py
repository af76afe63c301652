"""The documentation site as a reader gets it: built once for this module with
``mkdocs build --strict`` (as ``make docs`` builds it), its links checked by
``tests/site_links.py``, and its pages opened in Debian's headless Chromium.

- The link checker reports what it must (a missing file or anchor, an absolute link,
  one that leaves the site) on a small site made here, and nothing on the real one;
  mkdocs's own ``validation`` settings refuse such links in the Markdown.
- In the browser (marker ``browser``, as ``tests/test_inspector_browser.py``): the home
  page (the README's quick start), Getting started, Generated facts and the command
  line's page at 1280 and 390 px wide. At 1280 no code block of the first two nor of
  the command line's summary scrolls sideways; at 390 the page itself never does. The
  404 page keeps its styles and links served under a path and read from disk. Each
  page is saved as a screenshot (``$ADK_SQLSTORE_SITE_SCREENSHOTS``, else a temporary
  folder; the pages do not use them, so they are not kept in docs/).

Needs the ``docs`` extra (skipped without it: ``make test-lowest`` has none); the
browser tests need the ``playwright`` package and ``/usr/bin/chromium`` and skip
without them, except that under ``CI=true`` a missing Chromium fails.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import site_links
from .chromium import headless_chromium
from .conftest import REPO

WIDE = {"width": 1280, "height": 900}
NARROW = {"width": 390, "height": 844}

# The pages looked at in the browser, and those whose code blocks must fit at 1280 px.
PAGES = ["index", "getting-started", "facts", "cli"]
CODE_FITS = {"index", "getting-started", "cli"}


def _needs_the_docs_extra() -> None:
    for module in ("mkdocs", "material", "mkdocstrings", "yaml"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"the docs extra is not installed ({module} is missing)")


def _mkdocs(config: Path, site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    _needs_the_docs_extra()
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = ["build", "--strict", "-f", str(config), "--site-dir", str(site)]
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as ``make docs`` builds it (once for the module)."""
    folder = tmp_path_factory.mktemp("site")
    built = _mkdocs(REPO / "mkdocs.yml", folder, REPO)
    assert built.returncode == 0, built.stderr
    return folder


# -- the link checker ---------------------------------------------------------------------


def test_the_built_site_has_no_broken_link(site: Path) -> None:
    report = site_links.check_site(site)
    assert report.pages > 20 and report.links > 1000, (report.pages, report.links)
    assert report.problems == [], "\n".join(f"{link}: {why}" for link, why in report.problems)


def test_the_404_page_links_relatively(site: Path) -> None:
    """mkdocs gives error pages links from the server's root (``/index.html``), which
    fail from disk and under a path; the site's hook makes them relative."""
    page = (site / "404.html").read_text()
    assert 'href="./getting-started.html"' in page and 'href="./stylesheets/site.css"' in page
    assert 'href="/' not in page and 'src="/' not in page


def _fixture_site(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "page.html").write_text(
        '<html><body><h1 id="top">Page</h1><a name="old">old</a>'
        '<a href="../index.html#intro">home</a></body></html>'
    )
    (root / "style.css").write_text("")
    (root / "index.html").write_text(
        "<html><head>"
        '<link rel="stylesheet" href="style.css">'
        '<link rel="stylesheet" href="/style.css">'
        '<script src="missing.js"></script>'
        "</head><body>"
        '<h2 id="intro">Intro</h2>'
        '<a href="#intro">here</a> <a href="sub/page.html#top">top</a>'
        '<a href="sub/page.html#old">named</a> <a href="sub/page.html?x=1">query</a>'
        '<a href="sub/page.html#nowhere">bad anchor</a> <a href="#gone">bad here</a>'
        '<a href="nothing.html">missing</a> <a href="sub/">folder</a>'
        '<a href="/index.html">absolute</a> <a href="//example.com/x">no scheme</a>'
        '<a href="file:///etc/passwd">file</a> <a href="../outside.html">outside</a>'
        '<a href="https://example.com/a">external</a> <a href="mailto:a@example.com">mail</a>'
        '<img src="img/missing.png" alt=""> <a href="ftp://example.com/f">ftp</a>'
        "</body></html>"
    )
    return root


def test_the_checker_reports_every_kind_of_broken_link(tmp_path: Path) -> None:
    report = site_links.check_site(_fixture_site(tmp_path / "site"))
    found = {(link.page, link.url): why for link, why in report.problems}
    assert set(found) == {
        ("index.html", "/style.css"),
        ("index.html", "missing.js"),
        ("index.html", "sub/page.html#nowhere"),
        ("index.html", "#gone"),
        ("index.html", "nothing.html"),
        ("index.html", "sub/"),
        ("index.html", "/index.html"),
        ("index.html", "//example.com/x"),
        ("index.html", "file:///etc/passwd"),
        ("index.html", "../outside.html"),
        ("index.html", "img/missing.png"),
        ("index.html", "ftp://example.com/f"),
    }, found
    assert "absolute link" in found[("index.html", "/index.html")]
    assert "file:" in found[("index.html", "file:///etc/passwd")]
    assert "no id 'nowhere' in sub/page.html" in found[("index.html", "sub/page.html#nowhere")]
    assert "no such file" in found[("index.html", "nothing.html")]
    assert "leaves the site" in found[("index.html", "../outside.html")]
    assert report.external == {"https://example.com/a": ["index.html"]}


def test_the_checker_command_fails_on_a_problem_and_passes_a_clean_site(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = _fixture_site(tmp_path / "broken")
    assert site_links.main([str(broken)]) == 1
    out = capsys.readouterr().out
    assert 'index.html: <a href="/index.html">: an absolute link' in out
    assert "external (not fetched): https://example.com/a" in out
    assert "12 broken" in out
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "index.html").write_text('<a href="index.html#t" id="t">me</a>')
    assert site_links.main([str(clean)]) == 0
    assert "none broken" in capsys.readouterr().out


def test_make_docs_checks_the_links_after_the_build() -> None:
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile.split("\ndocs:", 1)[1].split("\n\n", 1)[0]
    build = recipe.index("mkdocs build --strict --site-dir site")
    assert recipe.index("-m tests.site_links site") > build, recipe


def test_mkdocs_refuses_an_absolute_or_broken_link_in_the_markdown(tmp_path: Path) -> None:
    """The Markdown's links, before the HTML's: the site's ``validation`` settings make
    ``--strict`` fail on a link to a missing page or anchor and on an absolute link."""
    _needs_the_docs_extra()
    import yaml

    validation = yaml.safe_load((REPO / "mkdocs.yml").read_text())["validation"]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[other](other.md)\n")
    (docs / "other.md").write_text("# Other\n\n[home](index.md#home)\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(yaml.safe_dump({"site_name": "t", "validation": validation}))
    assert _mkdocs(config, tmp_path / "ok", tmp_path).returncode == 0
    for link, says in (
        ("[x](/elsewhere.html)", "absolute link '/elsewhere.html'"),
        ("[x](missing.md)", "'missing.md', but the target is not found"),
        ("[x](other.md#nowhere)", "'#nowhere'"),
    ):
        (docs / "index.md").write_text(f"# Home\n\n{link}\n")
        built = _mkdocs(config, tmp_path / "bad", tmp_path)
        assert built.returncode != 0, link
        assert says in built.stderr, built.stderr


# -- in a real browser --------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with headless_chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    named = os.environ.get("ADK_SQLSTORE_SITE_SCREENSHOTS")
    folder = Path(named) if named else tmp_path_factory.mktemp("site-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class _Tab:
    """A browser tab, and what went wrong on its pages: script errors, console errors,
    requests that failed or were answered 4xx/5xx (but ``expected``)."""

    def __init__(self, browser: Any, viewport: dict[str, int]) -> None:
        self.context = browser.new_context(viewport=viewport)
        self.page = self.context.new_page()
        self.page.set_default_timeout(15_000)
        self.problems: list[str] = []
        self.expected: set[str] = set()
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url}"))
        self.page.on("console", self._console)
        self.page.on("response", self._response)

    def _console(self, message: Any) -> None:
        where = message.location.get("url", "")
        if message.type == "error" and where not in self.expected:
            self.problems.append(f"console: {message.text} ({where})")

    def _response(self, response: Any) -> None:
        if response.status >= 400 and response.url not in self.expected:
            self.problems.append(f"HTTP {response.status}: {response.url}")

    def open(self, url: str) -> Any:
        response = self.page.goto(url)
        self.page.wait_for_load_state("load")
        assert self.problems == [], self.problems
        return response

    def styled(self) -> bool:
        """Whether the theme's stylesheet applies (its header is fixed in place)."""
        header = self.page.locator("header.md-header")
        return bool(header.evaluate("e => getComputedStyle(e).position") == "sticky")


@pytest.fixture
def tab(browser: Any, request: pytest.FixtureRequest) -> Iterator[_Tab]:
    opened = _Tab(browser, getattr(request, "param", WIDE))
    yield opened
    opened.context.close()
    assert opened.problems == [], opened.problems


_OVERFLOWING = """() => [...document.querySelectorAll('.md-content pre > code')]
  .filter(e => e.scrollWidth > e.clientWidth)
  .map(e => `${e.scrollWidth} > ${e.clientWidth} px: ${e.textContent.split('\\n')[0]}`)"""


@pytest.mark.browser
@pytest.mark.parametrize("name", PAGES)
def test_a_page_reads_at_1280_px(tab: _Tab, site: Path, screenshots: Path, name: str) -> None:
    """Read from disk, as ``open site/index.html`` does: styled, no error, and the
    code blocks of the home page, Getting started and the command line's summary fit."""
    tab.open((site / f"{name}.html").as_uri())
    assert tab.styled()
    assert tab.page.evaluate("document.documentElement.scrollWidth") <= WIDE["width"]
    column = tab.page.locator(".md-content").evaluate("e => e.clientWidth")
    assert column >= 900, f"the text column is {column} px wide at 1280"
    if name in CODE_FITS:
        assert tab.page.evaluate(_OVERFLOWING) == [], name
    tab.page.screenshot(path=str(screenshots / f"{name}-1280.png"), full_page=False)


@pytest.mark.browser
@pytest.mark.parametrize("tab", [NARROW], indirect=True, ids=["390px"])
@pytest.mark.parametrize("name", PAGES)
def test_a_page_fits_a_phone(tab: _Tab, site: Path, screenshots: Path, name: str) -> None:
    """At 390 px the page never scrolls sideways (a wide code block or table may,
    inside itself)."""
    tab.open((site / f"{name}.html").as_uri())
    assert tab.styled()
    width = tab.page.evaluate("document.documentElement.scrollWidth")
    assert width <= NARROW["width"], (name, width)
    tab.page.screenshot(path=str(screenshots / f"{name}-390.png"), full_page=False)


class _UnderAPath(http.server.SimpleHTTPRequestHandler):
    """The site served under /adk-sqlstore/, 404.html answering every missing page, as
    a static host serves it."""

    PREFIX = "/adk-sqlstore/"

    def send_head(self) -> Any:
        if not self.path.startswith(self.PREFIX):
            self.send_error(404)
            return None
        self.path = "/" + self.path.removeprefix(self.PREFIX)
        if not Path(self.translate_path(self.path)).is_file():
            body = (Path(self.directory) / "404.html").read_bytes()
            self.send_response(404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return None
        return super().send_head()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(_UnderAPath, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{_UnderAPath.PREFIX}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.browser
def test_the_404_page_works_under_a_path_and_from_disk(
    tab: _Tab, site: Path, served: str, screenshots: Path
) -> None:
    missing = served + "no-such-page.html"
    tab.expected.add(missing)
    response = tab.open(missing)
    assert response.status == 404
    assert tab.styled()
    assert tab.page.locator(".md-content h1").inner_text() == "404 - Not found"
    tab.page.screenshot(path=str(screenshots / "404-under-a-path.png"))
    tab.page.locator("nav.md-nav--primary").get_by_role("link", name="Getting started").click()
    tab.page.wait_for_load_state("load")
    assert tab.page.url == served + "getting-started.html"
    assert tab.page.locator(".md-content h1").inner_text().startswith("Getting started")
    tab.open((site / "404.html").as_uri())
    assert tab.styled()

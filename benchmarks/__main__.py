"""``python -m benchmarks run --backend sqlite|postgres [--url URL] [--size small|full]``
(and ``python -m benchmarks consolidation [...]``: :mod:`.consolidation_recall`;
``python -m benchmarks inspector [...]``: :mod:`.inspector`)

Measures adk-sqlstore (core API and ADK classes) beside its peers (google-adk's own
DatabaseSessionService and SqliteMemoryService, and sqlspec's ADK extension) and the
raw-driver floor, in one run on one database, and prints one table per backend (medians
of repeated runs), with notes on where a peer's semantics differ. ``--markdown FILE``
also writes the tables as Markdown (benchmarks/RESULTS.md holds the latest full run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table
from sqlalchemy.engine import make_url

from adk_sqlstore.engine import create_engine
from adk_sqlstore.url_display import redact_url

from .artifact_bench import ARTIFACT_SIZES, run_artifacts
from .contenders import contenders
from .hybrid_bench import HYBRID_SIZES, run_hybrid
from .memory_bench import MEMORY_SIZES, run_memory
from .suite import SIZES, Figure, run_sessions

DEFAULT_ADMIN = os.environ.get(
    "ADK_SQLSTORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
COLUMNS = [
    "core",
    "adk classes",
    "ADK DatabaseSessionService",
    "raw",
    "ADK InMemoryMemoryService",
    "ADK SqliteMemoryService",
    "sqlspec",
    "ADK FileArtifactService",
]
# The peers a row's speedups are taken against (the best of those that did the figure),
# with the short name the ratio cells give. ADK's InMemoryMemoryService keeps nothing.
PEERS = {
    "ADK DatabaseSessionService": "ADK",
    "ADK SqliteMemoryService": "ADK SQLite",
    "sqlspec": "sqlspec",
    "ADK FileArtifactService": "ADK files",
}


async def _admin(admin_url: str, sql: str) -> str:
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            result = await conn.exec_driver_sql(sql)
            return str(result.scalar()) if result.returns_rows else ""
    finally:
        await engine.dispose()


@contextlib.asynccontextmanager
async def throwaway(backend: str, admin_url: str) -> AsyncIterator[str]:
    """A fresh empty database: a temporary SQLite file, or a PostgreSQL or MySQL
    database made through ``admin_url`` and dropped after."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{folder}/bench.db"
        return
    name = f"adk_sqlstore_bench_{uuid.uuid4().hex[:10]}"
    mysql = backend == "mysql"
    quoted = f"`{name}`" if mysql else f'"{name}"'
    await _admin(admin_url, f"CREATE DATABASE {quoted}")
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        drop = f"DROP DATABASE IF EXISTS {quoted}" + ("" if mysql else " WITH (FORCE)")
        await _admin(admin_url, drop)


def machine(backend: str, admin_url: str) -> list[str]:
    from importlib.metadata import version

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, ValueError):
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 2**20:.0f} GiB RAM"
    db = f"SQLite {sqlite3.sqlite_version}"
    if backend == "postgres":
        db = "PostgreSQL " + asyncio.run(_admin(admin_url, "SHOW server_version")).split()[0]
    return [
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {cpu}, {os.cpu_count()} CPUs{mem}",
        f"Python {platform.python_version()}, {db}, adk-sqlstore {version('adk-sqlstore')},"
        f" google-adk {version('google-adk')}, SQLAlchemy {version('sqlalchemy')}",
    ]


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "events/s":
        return f"{value:,.0f}"
    return f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


def _ratio(a: float | None, b: float | None, higher_is_better: bool) -> str:
    if not a or not b:
        return "-"
    return f"{(a / b if higher_is_better else b / a):.2f}x"


def best_peer(f: Figure) -> str | None:
    """The peer with the best value on the row (highest or lowest), if any did it."""
    done = [p for p in PEERS if f.values.get(p)]
    if not done:
        return None
    pick = max if f.higher_is_better else min
    return pick(done, key=lambda p: f.values[p])


def _vs_peer(value: float | None, f: Figure) -> str:
    peer = best_peer(f)
    if peer is None or not value:
        return "-"
    return f"{_ratio(value, f.values[peer], f.higher_is_better)} ({PEERS[peer]})"


def table(backend: str, figures: list[Figure], notes: list[str] | None = None) -> tuple[Table, str]:
    """The rich table and its Markdown twin. Ratios are speedups (>1 is better for
    adk-sqlstore): core and ADK classes against the row's best peer (named), and against
    raw. Under the table: the failures (grouped by contender and reason), then ``notes``."""
    present = [c for c in COLUMNS if any(c in f.values or c in f.extra for f in figures)]
    heads = [
        "figure",
        "unit",
        *present,
        "core vs best peer",
        "classes vs best peer",
        "core vs raw",
        "classes vs raw",
    ]
    rich = Table(
        title=f"{backend}: adk-sqlstore beside its peers and the raw driver",
        caption_justify="left",
    )
    for head in heads:
        rich.add_column(head, justify="left" if head == "figure" else "right")
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    failures: dict[tuple[str, str], list[str]] = {}
    for f in figures:
        v = f.values
        cells = [
            f.label,
            f.unit,
            *(_fmt(v.get(c), f.unit) for c in present),
            _vs_peer(v.get("core"), f),
            _vs_peer(v.get("adk classes"), f),
            _ratio(v.get("core"), v.get("raw"), f.higher_is_better),
            _ratio(v.get("adk classes"), v.get("raw"), f.higher_is_better),
        ]
        for name, error in f.extra.items():
            if name in present:
                cells[2 + present.index(name)] = "failed"
                failures.setdefault((name, error), []).append(f.label)
        rich.add_row(*cells)
        lines.append("| " + " | ".join(cells) + " |")
    below = [
        f"failed: {name} ({'; '.join(labels)}): {error}"
        for (name, error), labels in failures.items()
    ]
    below += [f"note: {note}" for note in notes or []]
    rich.caption = "\n".join(below) or None
    if below:
        lines += ["", *(f"- {line[0].upper()}{line[1:]}" for line in below)]
    return rich, "\n".join(lines)


async def measure(
    backend: str, args: argparse.Namespace, console: Console
) -> tuple[list[Figure], list[str]]:
    """Every figure of one backend, on a throwaway database unless ``--url``, and the
    notes on where the peers differ."""

    def progress(message: str) -> None:
        console.print(f"  {backend}: {message}", style="dim")

    @contextlib.asynccontextmanager
    async def database(_: int = 0) -> AsyncIterator[str]:
        if args.url:
            yield args.url
            return
        async with throwaway(backend, args.postgres_admin_url) as url:
            yield url

    notes: list[str] = []
    async with database() as url:
        progress(f"database {redact_url(url)}")
        figures = []
        if not args.skip_sessions:
            figures += await run_sessions(
                contenders(backend), url, SIZES[args.size], progress, notes
            )
        if not args.skip_memory:
            figures += await run_memory(database, url, MEMORY_SIZES[args.size], progress, notes)
        if not args.skip_artifacts:
            figures += await run_artifacts(url, ARTIFACT_SIZES[args.size], progress)
    if not args.skip_hybrid and not args.url:
        figures += await run_hybrid(
            backend, args.postgres_admin_url, HYBRID_SIZES[args.size], progress
        )
    return figures, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="measure and print the tables")
    run.add_argument(
        "--backend",
        choices=["sqlite", "postgres"],
        action="append",
        help="repeat for both (default: both)",
    )
    run.add_argument("--url", help="use this empty database instead of a throwaway one")
    run.add_argument("--size", choices=sorted(SIZES), default="small")
    run.add_argument("--postgres-admin-url", default=DEFAULT_ADMIN)
    run.add_argument("--markdown", type=Path, help="also write the tables to this file")
    run.add_argument("--skip-memory", action="store_true", help="session figures only")
    run.add_argument("--skip-sessions", action="store_true", help="memory figures only")
    run.add_argument("--skip-artifacts", action="store_true", help="no artifact figures")
    run.add_argument(
        "--skip-hybrid",
        action="store_true",
        help="no hybrid-search figures (vectors; on PostgreSQL they need pgvector, else"
        " pgserver's server is started)",
    )
    citus = sub.add_parser(
        "citus",
        help="the per-user calls on a throwaway Citus cluster beside the same coordinator"
        " undistributed (needs the citus extension installed)",
    )
    citus.add_argument("--size", choices=sorted(SIZES), default="small")
    sub.add_parser(
        "consolidation",
        help="the share of contradicted facts that reach the consolidation prompt"
        " (python -m benchmarks.consolidation_recall; its options follow, --help lists them)",
    )
    sub.add_parser(
        "inspector",
        help="the memory inspector's pages for a user of 100,000 memories, p50/p95/max"
        " (python -m benchmarks.inspector; its options follow, --help lists them)",
    )
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["consolidation"]:  # its own options, parsed by its own parser
        from .consolidation_recall import main as consolidation_main

        return consolidation_main(argv[1:])
    if argv[:1] == ["inspector"]:  # likewise
        from .inspector import main as inspector_main

        return inspector_main(argv[1:])
    args = parser.parse_args(argv)
    if args.command == "citus":
        from .citus_bench import run as run_citus

        started = time.perf_counter()
        console = Console(width=max(Console().width, 150))
        rich, _ = run_citus(args.size, console)
        console.print(rich)
        console.print(f"({time.perf_counter() - started:.0f} s)", style="dim")
        return 0
    backends = args.backend or ["sqlite", "postgres"]
    if args.url and len(backends) > 1:
        parser.error("--url needs exactly one --backend")
    console = Console(width=max(Console().width, 250))
    markdown = [f"# Benchmarks ({args.size} size)", ""]
    for backend in backends:
        header = machine(backend, args.postgres_admin_url)
        for line in header:
            console.print(line, style="dim")
        started = time.perf_counter()
        figures, notes = asyncio.run(measure(backend, args, console))
        rich, md = table(backend, figures, notes)
        console.print(rich)
        console.print(f"({time.perf_counter() - started:.0f} s)", style="dim")
        markdown += [f"## {backend}", "", *(f"- {line}" for line in header), "", md, ""]
    if args.markdown:
        args.markdown.write_text("\n".join(markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())

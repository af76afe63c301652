"""Commands on artifacts: ``artifacts list``, ``artifacts get``; and the artifacts
``export`` and ``import`` carry beside sessions."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, BinaryIO

import typer
from rich.table import Table

from ..artifacts import ArtifactStorage, StoredArtifact, artifact_key
from ..artifacts.files import artifact_records, record, version_paths
from ..store import Store
from .common import (
    AppOption,
    UrlOption,
    artifacts_app,
    consoles,
    database,
    error,
    run_command,
    when,
)

__all__ = ["artifacts_get", "artifacts_list", "export_artifacts", "import_artifacts"]

UserOption = Annotated[str, typer.Option("--user", metavar="USER", help="The user_id.")]
SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session",
        metavar="SESSION",
        help="A session id: its artifacts and the user's own (user:...); without it, the"
        " user's own only.",
    ),
]


def _size(stored_size: int | None) -> str:
    return "" if stored_size is None else f"{stored_size:,}"


@artifacts_app.command("list")
def artifacts_list(
    app_name: AppOption,
    user: UserOption,
    session: SessionOption = None,
    url: UrlOption = None,
) -> None:
    """List the artifacts a session sees (its own and the user's user:... ones), or
    with no --session the user's own: filename, versions, and the newest version's
    MIME type, size in bytes and time."""

    async def run() -> None:
        async with Store.from_url(database(url)) as store:
            storage = ArtifactStorage(store)
            names = await storage.filenames(app_name, user, session)
            table = Table()
            for column in ("filename", "versions", "MIME type", "bytes", "saved (UTC)"):
                table.add_column(column, justify="right" if column == "bytes" else "left")
            for name in names:
                versions = await storage.versions(artifact_key(app_name, user, name, session))
                newest = versions[-1]
                table.add_row(
                    name,
                    ", ".join(str(v.version) for v in versions),
                    newest.mime_type or "",
                    _size(newest.size),
                    when(newest.create_time),
                )
        where = f"{app_name} / {user}" + (f" / {session}" if session else "")
        consoles.out.print(f"artifacts of {where}", soft_wrap=True)
        consoles.out.print(table)
        consoles.out.print(f"{len(names)} artifact(s)")
        if not names and session is None:
            consoles.err.print(
                "(the user's own, user:..., only: pass --session SESSION for a session's)",
                soft_wrap=True,
            )

    run_command(run())


@artifacts_app.command("get")
def artifacts_get(
    filename: Annotated[str, typer.Argument(metavar="FILENAME", help="The artifact's name.")],
    app_name: AppOption,
    user: UserOption,
    session: SessionOption = None,
    version: Annotated[
        int | None, typer.Option(metavar="N", min=0, help="The version; default: the newest.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="FILE",
            help="Write it to FILE (default: standard output), a MiB at a time.",
        ),
    ] = None,
    url: UrlOption = None,
) -> None:
    """Write an artifact's bytes (or a text part's text, in UTF-8) as stored, streamed:
    a file of any size takes a few MiB of memory. A version that is a reference to a
    file elsewhere (file_data) is not fetched: its URI is printed."""
    if session is None and not filename.startswith("user:"):
        error(
            f"artifact {filename!r} belongs to a session: pass --session SESSION (a user's"
            " own artifacts are named user:...)"
        )
        raise typer.Exit(1)

    async def find() -> StoredArtifact:
        async with Store.from_url(database(url)) as store:
            key = artifact_key(app_name, user, filename, session)
            stored = await ArtifactStorage(store).version(key, version)
        if stored is None:
            raise ValueError(
                f"no artifact {filename!r}"
                + (f" version {version}" if version is not None else "")
                + f" of {app_name} / {user}"
                + (f" / {session}" if session else "")
            )
        if stored.sha256 is None and "text" not in stored.part:
            uri = stored.part.get("file_data", {}).get("file_uri")
            raise ValueError(f"version {stored.version} of {filename!r} refers to {uri}")
        return stored

    async def write(stored: StoredArtifact, target: BinaryIO) -> None:
        if stored.sha256 is None:
            target.write(str(stored.part["text"]).encode())
            return
        async with Store.from_url(database(url)) as store:
            key = artifact_key(app_name, user, filename, session)
            async for chunk in ArtifactStorage(store).read(key, stored):
                target.write(chunk)

    stored = run_command(find())
    if out is None:
        run_command(write(stored, sys.stdout.buffer))
        return
    with out.open("wb") as target:
        run_command(write(stored, target))
    consoles.err.print(f"wrote {out}")


async def export_artifacts(
    store: Store, *, app_name: str, user_id: str, session_ids: list[str], folder: Path
) -> int:
    """Write the user's own artifacts and those of ``session_ids`` under ``folder``
    (:mod:`adk_sqlstore.artifacts.files`), every version; how many versions."""
    storage, count = ArtifactStorage(store), 0
    for scope in [None, *session_ids]:
        for name in await storage.filenames(app_name, user_id, scope):
            if scope is not None and name.startswith("user:"):
                continue  # the user's own: written once, with scope None
            key = artifact_key(app_name, user_id, name, scope)
            for stored in await storage.versions(key):
                record_path, bytes_path = version_paths(folder, key, stored.version)
                record_path.parent.mkdir(parents=True, exist_ok=True)
                if stored.sha256 is not None:
                    with bytes_path.open("wb") as target:
                        async for chunk in storage.read(key, stored):
                            target.write(chunk)
                record_path.write_text(record(key, stored), encoding="utf-8")
                count += 1
    return count


async def import_artifacts(store: Store, paths: list[Path], *, replace: bool) -> tuple[int, int]:
    """Store every artifact version recorded under ``paths`` (folders, or record files);
    (imported, skipped: already there, kept unless ``replace``)."""
    storage, imported, skipped = ArtifactStorage(store), 0, 0
    for _file, key, stored, blob in artifact_records(paths):
        if blob is None:
            done = await storage.restore(key, stored, None, replace=replace)
        else:
            with blob.open("rb") as source:
                blocks = iter(lambda: source.read(1 << 20), b"")
                done = await storage.restore(key, stored, blocks, replace=replace)
        imported, skipped = imported + done, skipped + (not done)
    return imported, skipped

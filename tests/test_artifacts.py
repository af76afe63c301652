"""Artifacts (issue 17): ``adk_sqlstore.adk.SqlArtifactService`` against ADK's own
``InMemoryArtifactService``, call by call, on every backend; isolation; bytes stored
once per user; big artifacts streamed in and out."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

pytest.importorskip("google.adk")

from google.adk.artifacts import InMemoryArtifactService
from google.genai import types

from adk_sqlstore.adk import SqlArtifactService
from adk_sqlstore.errors import InvalidArtifactError
from adk_sqlstore.sql.artifacts import CHUNK_BYTES

from .conftest import examples

APP = "files"


@pytest.fixture
async def artifacts(db_url: str) -> AsyncIterator[SqlArtifactService]:
    async with SqlArtifactService.from_url(db_url) as service:
        yield service


def _blob(data: bytes, mime: str = "application/pdf") -> types.Part:
    return types.Part(inline_data=types.Blob(mime_type=mime, data=data))


def _ref(uri: str) -> types.Part:
    return types.Part(file_data=types.FileData(file_uri=uri))


async def _run(service: Any, step: tuple[str, dict[str, Any]]) -> Any:
    """One call's observable result: its value (metadata without the creation time and
    address, which differ by design) or the name of the error it raised."""
    name, kwargs = step
    try:
        result = await getattr(service, name)(**kwargs)
    except Exception as exc:  # the type is the observable outcome
        return f"raised {type(exc).__name__}"
    if name == "list_artifact_versions":
        return [(v.version, v.custom_metadata, v.mime_type) for v in result]
    if name == "get_artifact_version":
        return (
            None if result is None else (result.version, result.custom_metadata, result.mime_type)
        )
    if isinstance(result, types.Part):
        return result.model_dump(exclude_none=True)
    return result


def _script() -> list[tuple[str, dict[str, Any]]]:
    s1 = {"app_name": APP, "user_id": "u1", "session_id": "s1"}
    s2 = {"app_name": APP, "user_id": "u1", "session_id": "s2"}
    other = {"app_name": APP, "user_id": "u2", "session_id": "s1"}
    pdf, png = b"%PDF-1.7 report", b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    own = f"artifact://apps/{APP}/users/u1/sessions/s1/artifacts/report.pdf/versions/0"
    user_ref = f"artifact://apps/{APP}/users/u1/artifacts/user:avatar.png/versions/1"
    steps: list[tuple[str, dict[str, Any]]] = [
        ("save_artifact", {**s1, "filename": "report.pdf", "artifact": _blob(pdf)}),
        (
            "save_artifact",
            {
                **s1,
                "filename": "report.pdf",
                "artifact": _blob(pdf + b"v2"),
                "custom_metadata": {"pages": 3, "by": "tool"},
            },
        ),
        ("save_artifact", {**s1, "filename": "notes.txt", "artifact": types.Part(text="hi")}),
        (
            "save_artifact",
            {**s1, "filename": "user:avatar.png", "artifact": _blob(png, "image/png")},
        ),
        (
            "save_artifact",
            {
                **s2,
                "filename": "user:avatar.png",
                "artifact": {"inlineData": {"mimeType": "image/png", "data": "aGk="}},
            },
        ),
        ("save_artifact", {**s1, "filename": "link", "artifact": _ref(own)}),
        ("save_artifact", {**s2, "filename": "user-link", "artifact": _ref(user_ref)}),
        (
            "save_artifact",
            {
                **s1,
                "filename": "gcs",
                "artifact": types.Part(
                    file_data=types.FileData(file_uri="gs://b/x.csv", mime_type="text/csv")
                ),
            },
        ),
        ("save_artifact", {**s1, "filename": "empty", "artifact": types.Part()}),
        (
            "save_artifact",
            {**s1, "filename": "gone", "artifact": _blob(b"", "application/octet-stream")},
        ),
        (
            "save_artifact",
            {
                **s1,
                "filename": "escape",
                "artifact": _ref(
                    f"artifact://apps/{APP}/users/u2/sessions/s1/artifacts/x/versions/0"
                ),
            },
        ),
        ("save_artifact", {**s1, "filename": "bad-ref", "artifact": _ref("artifact://nonsense")}),
        (
            "save_artifact",
            {"app_name": APP, "user_id": "u1", "filename": "no-session", "artifact": _blob(pdf)},
        ),
        ("save_artifact", {**s1, "session_id": "user", "filename": "f", "artifact": _blob(pdf)}),
        ("save_artifact", {**s1, "user_id": "../etc", "filename": "f", "artifact": _blob(pdf)}),
        ("save_artifact", {**other, "filename": "report.pdf", "artifact": _blob(b"theirs")}),
    ]
    for session in (s1, s2, other, {"app_name": APP, "user_id": "u1"}):
        steps.append(("list_artifact_keys", session))
    for filename, where in [
        ("report.pdf", s1),
        ("report.pdf", s2),
        ("report.pdf", other),
        ("notes.txt", s1),
        ("user:avatar.png", s1),
        ("user:avatar.png", s2),
        ("link", s1),
        ("user-link", s2),
        ("gcs", s1),
        ("empty", s1),
        ("gone", s1),
        ("missing", s1),
    ]:
        steps.append(("load_artifact", {**where, "filename": filename}))
        for version in (0, 1, 2, -1):
            steps.append(("load_artifact", {**where, "filename": filename, "version": version}))
        steps.append(("list_versions", {**where, "filename": filename}))
        steps.append(("list_artifact_versions", {**where, "filename": filename}))
        steps.append(("get_artifact_version", {**where, "filename": filename}))
        steps.append(("get_artifact_version", {**where, "filename": filename, "version": 0}))
    steps += [
        ("delete_artifact", {**s1, "filename": "report.pdf"}),
        ("load_artifact", {**s1, "filename": "report.pdf"}),
        ("load_artifact", {**s1, "filename": "link"}),
        ("list_versions", {**s1, "filename": "report.pdf"}),
        ("save_artifact", {**s1, "filename": "report.pdf", "artifact": _blob(b"again")}),
        ("list_versions", {**s1, "filename": "report.pdf"}),
        ("load_artifact", {**s1, "filename": "report.pdf"}),
        ("delete_artifact", {**s1, "filename": "never-saved"}),
        ("delete_artifact", {"app_name": APP, "user_id": "u1", "filename": "no-session"}),
        ("list_artifact_keys", s1),
        ("load_artifact", {**other, "filename": "report.pdf"}),
    ]
    return steps


async def test_every_call_answers_as_adks_in_memory_service(
    artifacts: SqlArtifactService,
) -> None:
    """The same script of calls against ADK's ``InMemoryArtifactService`` and ours:
    the same versions, parts, filenames, metadata, MIME types and errors, call by call
    (issue 17: "match their observable behaviour call by call")."""
    theirs = InMemoryArtifactService()
    for step in _script():
        assert await _run(artifacts, step) == await _run(theirs, step), step


async def test_the_same_bytes_are_stored_once_per_user(
    artifacts: SqlArtifactService,
) -> None:
    """Saving the same bytes again, under another name or version, writes no chunk;
    deleting the last version holding them deletes them; other users' copies are
    theirs."""
    data = bytes(range(256)) * 10_000  # 2.5 MB: three chunks
    for user, name in [("u1", "a.bin"), ("u1", "a.bin"), ("u1", "b.bin"), ("u2", "a.bin")]:
        await artifacts.save_artifact(
            app_name=APP, user_id=user, session_id="s", filename=name, artifact=_blob(data)
        )

    async def stored() -> dict[str, int]:
        async with artifacts.store.engine.connect() as conn:
            rows = await conn.execute(
                text(
                    "SELECT user_id, count(*) FROM sqlstore_artifact_chunks"
                    " WHERE app_name = :a GROUP BY user_id"
                ),
                {"a": APP},
            )
            return {str(u): int(n) for u, n in rows.all()}

    assert await stored() == {"u1": 3, "u2": 3}
    await artifacts.delete_artifact(app_name=APP, user_id="u1", session_id="s", filename="a.bin")
    assert await stored() == {"u1": 3, "u2": 3}  # b.bin still holds them
    await artifacts.delete_artifact(app_name=APP, user_id="u1", session_id="s", filename="b.bin")
    assert await stored() == {"u2": 3}
    got = await artifacts.load_artifact(
        app_name=APP, user_id="u2", session_id="s", filename="a.bin"
    )
    assert got is not None and got.inline_data is not None and got.inline_data.data == data


async def test_streams_in_and_out_give_back_the_same_bytes(
    artifacts: SqlArtifactService,
) -> None:
    """A stream of uneven pieces is stored as any inline part (``load_artifact``
    returns it), read back in chunks, and a second stream of the same bytes is
    deduplicated; past ``max_artifact_bytes`` nothing is kept."""
    pieces = [bytes([n % 251]) * (n * 99_991 % 700_001) for n in range(1, 12)]  # 3.7 MB
    whole = b"".join(pieces)
    key: dict[str, Any] = {
        "app_name": APP,
        "user_id": "u1",
        "session_id": "s",
        "filename": "video.mp4",
    }
    assert await artifacts.save_artifact_stream(**key, stream=pieces, mime_type="video/mp4") == 0
    assert (
        await artifacts.save_artifact_stream(**key, stream=iter(pieces), mime_type="video/mp4") == 1
    )
    read = b"".join([chunk async for chunk in artifacts.read_artifact(**key, version=0)])
    assert hashlib.sha256(read).digest() == hashlib.sha256(whole).digest()
    part = await artifacts.load_artifact(**key)
    assert part is not None and part.inline_data is not None
    assert part.inline_data.data == whole and part.inline_data.mime_type == "video/mp4"
    small = SqlArtifactService(store=artifacts.store, max_artifact_bytes=1_000_000)
    with pytest.raises(InvalidArtifactError, match="max_artifact_bytes"):
        await small.save_artifact_stream(
            **{**key, "filename": "big"}, stream=pieces, mime_type="x/y"
        )
    with pytest.raises(InvalidArtifactError, match="max_artifact_bytes"):
        await small.save_artifact(**{**key, "filename": "big"}, artifact=_blob(whole))
    assert await artifacts.list_versions(**{**key, "filename": "big"}) == []
    async with artifacts.store.engine.connect() as conn:
        pending = await conn.execute(
            text("SELECT count(*) FROM sqlstore_artifact_chunks WHERE sha256 LIKE 'pending-%'")
        )
        assert pending.scalar() == 0


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    saves=st.lists(
        st.tuples(
            st.sampled_from(["u1", "u2"]),
            st.sampled_from(["s1", "s2"]),
            st.sampled_from(["a", "b", "user:c"]),
            st.binary(max_size=40),
        ),
        min_size=1,
        max_size=12,
    )
)
async def test_no_user_or_session_sees_anothers_artifacts(
    artifacts: SqlArtifactService, saves: list[tuple[str, str, str, bytes]]
) -> None:
    """Random saves by two users in two sessions: each (user, session) lists and loads
    exactly what a model of the scopes says (its own files and its user's ``user:``
    ones), never another user's or another session's."""
    app = f"iso-{hashlib.sha256(repr(saves).encode()).hexdigest()[:12]}"
    model: dict[tuple[str, str, str], list[bytes]] = {}
    for user, session, name, data in saves:
        scope = "" if name.startswith("user:") else session
        await artifacts.save_artifact(
            app_name=app, user_id=user, session_id=session, filename=name, artifact=_blob(data)
        )
        model.setdefault((user, scope, name), []).append(data)
    for user in ("u1", "u2"):
        for session in ("s1", "s2"):
            visible = sorted(n for (u, sc, n) in model if u == user and sc in ("", session))
            keys = await artifacts.list_artifact_keys(
                app_name=app, user_id=user, session_id=session
            )
            assert keys == visible
            for name in ("a", "b", "user:c"):
                scope = "" if name.startswith("user:") else session
                got = await artifacts.load_artifact(
                    app_name=app, user_id=user, session_id=session, filename=name
                )
                want = model.get((user, scope, name))
                assert (got.inline_data.data if got and got.inline_data else None) == (
                    want[-1] if want else None
                )


async def test_forget_user_and_prune_take_the_artifacts_with_them(db_url: str) -> None:
    """forget_user deletes every artifact of the user with its bytes; prune deletes the
    pruned sessions' artifacts (the bytes the user's own artifacts still hold stay);
    other users' artifacts stay (issue 17: "forget_user and prune cover artifacts")."""
    from adk_sqlstore.adk import SqlSessionService

    async with SqlSessionService.from_url(db_url) as sessions:
        files = SqlArtifactService(store=sessions.store)
        old = await sessions.create_session(app_name=APP, user_id="u1")
        kept = await sessions.create_session(app_name=APP, user_id="u2")
        shared, alone = b"shared" * 1000, b"only in the old session"
        for name, data in [("a.bin", shared), ("b.bin", alone)]:
            await files.save_artifact(
                app_name=APP, user_id="u1", session_id=old.id, filename=name, artifact=_blob(data)
            )
        await files.save_artifact(
            app_name=APP, user_id="u1", session_id=old.id, filename="user:c", artifact=_blob(shared)
        )
        await files.save_artifact(
            app_name=APP, user_id="u2", session_id=kept.id, filename="a.bin", artifact=_blob(shared)
        )
        report = await sessions.core.prune(older_than=0, app_name=APP, dry_run=True)
        assert (report.sessions, report.artifact_versions) == (2, 3)  # the sessions' own
        async with sessions.store.engine.begin() as conn:  # only the old session is old
            await conn.execute(
                text("UPDATE sqlstore_sessions SET update_time = 0 WHERE id = :s"), {"s": old.id}
            )
        report = await sessions.core.prune(older_than=3600, app_name=APP)
        assert (report.sessions, report.artifact_versions) == (1, 2)
        assert await files.list_artifact_keys(app_name=APP, user_id="u1", session_id=old.id) == [
            "user:c"
        ]
        got = await files.load_artifact(app_name=APP, user_id="u1", filename="user:c")
        assert got is not None and got.inline_data is not None and got.inline_data.data == shared
        counts = await sessions.core.forget_user(app_name=APP, user_id="u1")
        assert (counts["artifact_versions"], counts["artifact_contents"]) == (1, 1)
        assert await files.list_artifact_keys(app_name=APP, user_id="u1") == []
        async with sessions.store.engine.connect() as conn:
            left = await conn.execute(
                text(
                    "SELECT user_id, count(*) FROM sqlstore_artifact_chunks WHERE app_name = :a"
                    " GROUP BY user_id"
                ),
                {"a": APP},
            )
            assert {str(u): int(n) for u, n in left.all()} == {"u2": 1}
        theirs = await files.load_artifact(
            app_name=APP, user_id="u2", session_id=kept.id, filename="a.bin"
        )
        assert theirs is not None and theirs.inline_data is not None
        assert theirs.inline_data.data == shared


@pytest.mark.soak
def test_a_200_mb_artifact_goes_in_and_out_in_little_memory(
    db_url: str, tmp_path: Any, figures: Any
) -> None:
    """Issue 17: "A 200 MB artifact saved and loaded with peak process memory under
    64 MB above baseline": streamed from a file into the database and back out to a
    file, in a process of its own, whose anonymous memory (heap, not SQLite's mapped
    file) is sampled every 2 ms."""
    import multiprocessing
    import os

    from .workers import artifact_round_trip

    size = 200 * 1024 * 1024
    source, target = tmp_path / "in.bin", tmp_path / "out.bin"
    with open(source, "wb") as f:
        for n in range(size // (1 << 20)):
            f.write(hashlib.sha256(str(n).encode()).digest() * (1 << 15))
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    worker = ctx.Process(
        target=artifact_round_trip, args=(db_url, str(source), str(target), results)
    )
    worker.start()
    baseline, peak, saved, loaded = results.get(timeout=900)
    worker.join(timeout=60)
    assert worker.exitcode == 0
    assert os.path.getsize(target) == size

    def digest(path: Any) -> bytes:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.digest()

    assert digest(target) == digest(source)
    above = (peak - baseline) / 2**20
    figures.add(
        f"200 MiB artifact streamed in ({size / 2**20 / saved:.0f} MiB/s) and out"
        f" ({size / 2**20 / loaded:.0f} MiB/s): peak anonymous memory {above:.1f} MiB above"
        f" the baseline of {baseline / 2**20:.0f} MiB"
    )
    assert above < 64


def test_the_command_line_lists_artifacts_and_writes_them_out(db_url: str, tmp_path: Any) -> None:
    """``adk-sqlstore artifacts list`` shows a session's artifacts and the user's own
    with their versions; ``artifacts get`` writes a version's bytes to a file (or a
    text part's text), and says what is missing."""
    from .conftest import run_sync
    from .helpers import cli

    data = bytes(range(256)) * 5000  # 1.2 MiB: two chunks

    async def save() -> None:
        async with SqlArtifactService.from_url(db_url) as files:
            where: dict[str, Any] = {"app_name": APP, "user_id": "u1", "session_id": "s1"}
            await files.save_artifact(
                **where, filename="scan.png", artifact=_blob(b"v0", "image/png")
            )
            await files.save_artifact(
                **where, filename="scan.png", artifact=_blob(data, "image/png")
            )
            await files.save_artifact(
                **where, filename="user:notes", artifact=types.Part(text="hé")
            )

    run_sync(save())
    listed = cli(
        "artifacts", "list", "--app", APP, "--user", "u1", "--session", "s1", "--url", db_url
    )
    assert "scan.png" in listed and "0, 1" in listed and "image/png" in listed
    assert "1,280,000" in listed and "user:notes" in listed and "2 artifact(s)" in listed
    own = cli("artifacts", "list", "--app", APP, "--user", "u1", "--url", db_url)
    assert "user:notes" in own and "scan.png" not in own
    out = tmp_path / "scan.png"
    where = ["--app", APP, "--user", "u1", "--url", db_url]
    cli("artifacts", "get", "scan.png", "--session", "s1", "--out", str(out), *where)
    assert out.read_bytes() == data
    cli(
        "artifacts",
        "get",
        "scan.png",
        "--session",
        "s1",
        "--version",
        "0",
        "--out",
        str(out),
        *where,
    )
    assert out.read_bytes() == b"v0"
    notes = tmp_path / "notes.txt"
    cli("artifacts", "get", "user:notes", "--out", str(notes), *where)
    assert notes.read_text(encoding="utf-8") == "hé"
    missing = cli(
        "artifacts", "get", "nope", "--session", "s1", "--out", str(tmp_path / "x"), *where, code=1
    )
    assert "no artifact 'nope'" in missing and not (tmp_path / "x").exists()


def test_export_and_import_carry_artifacts(
    db_url: str, sqlite_template: Any, tmp_path: Any
) -> None:
    """``export`` writes the sessions' artifacts and the users' own beside the session
    JSON (every version, bytes and metadata, creation times); ``import`` into an empty
    database gives back the same versions, and a second import changes nothing."""
    import shutil

    from .conftest import run_sync
    from .helpers import cli

    data = bytes(range(256)) * 5000

    async def fill() -> None:
        from adk_sqlstore.adk import SqlSessionService

        async with SqlSessionService.from_url(db_url) as sessions:
            files = SqlArtifactService(store=sessions.store)
            for user in ("u1", "u2"):
                s = await sessions.create_session(app_name=APP, user_id=user, session_id="s1")
                where: dict[str, Any] = {"app_name": APP, "user_id": user, "session_id": s.id}
                await files.save_artifact(**where, filename="a.bin", artifact=_blob(b"first"))
                await files.save_artifact(
                    **where, filename="a.bin", artifact=_blob(data), custom_metadata={"n": 1}
                )
                await files.save_artifact(**where, filename="user:t", artifact=types.Part(text="t"))

    async def snapshot(url: str) -> list[Any]:
        async with SqlArtifactService.from_url(url) as files:
            seen = []
            for user in ("u1", "u2"):
                for name in await files.list_artifact_keys(
                    app_name=APP, user_id=user, session_id="s1"
                ):
                    where = {"app_name": APP, "user_id": user, "session_id": "s1", "filename": name}
                    for v in await files.list_artifact_versions(**where):
                        part = await files.load_artifact(**where, version=v.version)
                        assert part is not None
                        seen.append(
                            (
                                user,
                                name,
                                v.version,
                                v.create_time,
                                v.custom_metadata,
                                v.mime_type,
                                part.model_dump(exclude_none=True),
                            )
                        )
            return seen

    run_sync(fill())
    dump = tmp_path / "dump"
    exported = cli("export", "--app", APP, "--out", str(dump), "--url", db_url)
    assert "exported 2 session(s)" in exported and "exported 6 artifact version(s)" in exported
    target = tmp_path / "target.db"
    shutil.copyfile(sqlite_template, target)
    fresh = f"sqlite:///{target}"
    imported = cli("import", str(dump), "--url", fresh)
    assert "artifact versions: 6 imported, 0 skipped" in imported
    assert run_sync(snapshot(fresh)) == run_sync(snapshot(db_url))
    again = cli("import", str(dump), "--url", fresh)
    assert "artifact versions: 0 imported, 6 skipped" in again
    # A record whose bytes were changed is refused, with its name; what it would have
    # replaced stays as it was.
    record = next((dump / "u1" / "artifacts").rglob("1.artifact.json"))
    record.with_name("1.artifact.bin").write_bytes(b"tampered")
    refused = cli("import", str(dump), "--url", fresh, "--replace", code=1)
    assert "are not the ones it was saved with" in refused
    assert run_sync(snapshot(fresh)) == run_sync(snapshot(db_url))


async def test_saves_of_one_artifact_at_once_each_get_a_version(db_url: str) -> None:
    """Four services (four engines: four connections at once) saving one filename
    together, bytes of one chunk, of two chunks, the same bytes, and text: every save
    gets its own version (0 to 31, none lost or shared), each loading what it saved."""
    import asyncio

    services = [SqlArtifactService.from_url(db_url) for _ in range(4)]
    big = b"\x01" * (CHUNK_BYTES + 10)
    where: dict[str, Any] = {
        "app_name": APP,
        "user_id": "u1",
        "session_id": "s1",
        "filename": "race.bin",
    }

    def part(n: int) -> types.Part:
        kinds = [
            _blob(b"small %d" % n),
            _blob(big[:-4] + n.to_bytes(4, "big")),
            _blob(b"the same bytes"),
            types.Part(text=f"text {n}"),
        ]
        return kinds[n % 4]

    try:
        saved = await asyncio.gather(
            *(services[n % 4].save_artifact(**where, artifact=part(n)) for n in range(32)),
            return_exceptions=True,  # every save done before the services close
        )
        versions = [v for v in saved if isinstance(v, int)]
        assert len(versions) == len(saved), saved  # no save failed
        assert sorted(versions) == list(range(32))
        for n, version in enumerate(versions):
            got = await services[0].load_artifact(**where, version=version)
            assert got == part(n), (n, version)
    finally:
        for service in services:
            await service.close()

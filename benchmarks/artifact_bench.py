"""Artifact figures: save and load throughput (MiB/s) of ``SqlArtifactService`` beside
ADK's ``FileArtifactService`` (a folder on the same disk), for big parts and many small
ones; and a save of bytes the user already has (stored once: no chunk written)."""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .suite import Figure

APP = "bench-artifacts"


@dataclass(frozen=True)
class ArtifactSize:
    big: tuple[int, int]  # (parts, bytes each)
    small: tuple[int, int]


ARTIFACT_SIZES = {
    "small": ArtifactSize(big=(4, 2 << 20), small=(50, 16 << 10)),
    "full": ArtifactSize(big=(20, 8 << 20), small=(500, 64 << 10)),
}


def _payload(n: int, size: int) -> bytes:
    """``size`` bytes that differ per ``n`` (no two parts share their bytes)."""
    return (n.to_bytes(8, "big") + uuid.uuid4().bytes) * (size // 24) + b"\0" * (size % 24)


async def _throughput(service: Any, parts: list[bytes], session: str) -> tuple[float, float]:
    """MiB/s saving ``parts`` as artifacts of one session, then loading them back."""
    from google.genai import types

    total = sum(len(p) for p in parts) / 2**20
    start = time.perf_counter()
    for n, data in enumerate(parts):
        part = types.Part(inline_data=types.Blob(mime_type="application/octet-stream", data=data))
        await service.save_artifact(
            app_name=APP, user_id="u1", session_id=session, filename=f"f{n}.bin", artifact=part
        )
    saved = total / (time.perf_counter() - start)
    start = time.perf_counter()
    for n, data in enumerate(parts):
        got = await service.load_artifact(
            app_name=APP, user_id="u1", session_id=session, filename=f"f{n}.bin"
        )
        assert got is not None and got.inline_data is not None and got.inline_data.data == data
    return saved, total / (time.perf_counter() - start)


async def run_artifacts(
    url: str, size: ArtifactSize, progress: Callable[[str], None]
) -> list[Figure]:
    """The artifact figures on the run's database, ADK's file service in a temporary
    folder beside it."""
    from google.adk.artifacts import FileArtifactService

    from adk_sqlstore.adk import SqlArtifactService

    figures: list[Figure] = []
    for kind, (count, each) in (("big", size.big), ("small", size.small)):
        label = (
            f"{count} x {each / 2**20:g} MiB" if each >= 2**20 else f"{count} x {each >> 10} KiB"
        )
        save = Figure(f"artifact-save-{kind}", f"save_artifact, {label}", "MiB/s", True)
        load = Figure(f"artifact-load-{kind}", f"load_artifact, {label}", "MiB/s", True)
        parts = [_payload(n, each) for n in range(count)]
        progress(f"artifacts: {label}")
        async with SqlArtifactService.from_url(url, auto_migrate=True) as ours:
            await ours.store.ensure_schema()  # migrated before the clock starts
            await _throughput(ours, parts[:1], f"warm-{kind}")  # pools, caches
            saved, loaded = await _throughput(ours, parts, f"s-{kind}")
            save.values["adk classes"], load.values["adk classes"] = saved, loaded
            if kind == "big":
                again = Figure(
                    "artifact-resave",
                    f"save_artifact of bytes stored before, {label}",
                    "MiB/s",
                    True,
                )
                again.values["adk classes"] = (await _throughput(ours, parts, "s-again"))[0]
        with tempfile.TemporaryDirectory() as folder:
            theirs = FileArtifactService(root_dir=folder)
            await _throughput(theirs, parts[:1], f"warm-{kind}")
            saved, loaded = await _throughput(theirs, parts, f"s-{kind}")
            save.values["ADK FileArtifactService"] = saved
            load.values["ADK FileArtifactService"] = loaded
            if kind == "big":
                again.values["ADK FileArtifactService"] = (
                    await _throughput(theirs, parts, "s-again")
                )[0]
        figures += [save, load] + ([again] if kind == "big" else [])
    return figures

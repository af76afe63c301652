"""Artifacts as files: what ``adk-sqlstore export`` writes beside session JSON, and
``adk-sqlstore import`` reads back.

A version is two files: ``<version>.artifact.json`` (its address, MIME type, custom
metadata, creation time and the part without its bytes) and, when it has bytes,
``<version>.artifact.bin``. They go in a folder per artifact,
``artifacts/user/<filename>/`` for the user's own (``user:...``) and
``artifacts/session-<session id>/<filename>/`` for a session's (ids and names
percent-encoded, so nothing is written outside the export folder). The JSON file holds
the whole address: the folders are for people.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..sessions.json_files import path_component
from ..sql.artifacts import ArtifactKey
from .service import StoredArtifact

__all__ = ["RECORD_SUFFIX", "artifact_records", "record", "version_paths"]

RECORD_SUFFIX = ".artifact.json"
_BYTES_SUFFIX = ".artifact.bin"


def version_paths(folder: Path, key: ArtifactKey, version: int) -> tuple[Path, Path]:
    """Where a version's record and bytes go under an export ``folder``."""
    scope = "user" if not key.session_id else f"session-{path_component(key.session_id)}"
    home = folder / "artifacts" / scope / path_component(key.filename)
    return home / f"{version}{RECORD_SUFFIX}", home / f"{version}{_BYTES_SUFFIX}"


def record(key: ArtifactKey, stored: StoredArtifact) -> str:
    """A version's record, as JSON text."""
    return json.dumps(
        {
            "app_name": key.app_name,
            "user_id": key.user_id,
            "session_id": key.session_id or None,
            "filename": key.filename,
            "version": stored.version,
            "mime_type": stored.mime_type,
            "custom_metadata": stored.custom_metadata,
            "create_time": stored.create_time,
            "part": stored.part,
            "size": stored.size,
            "sha256": stored.sha256,
        },
        ensure_ascii=False,
        indent=1,
    )


def _order(file: Path) -> tuple[Path, int, str]:
    """Records by artifact, then version number."""
    number = file.name.removesuffix(RECORD_SUFFIX)
    return file.parent, int(number) if number.isdigit() else -1, number


def artifact_records(
    paths: list[Path],
) -> Iterator[tuple[Path, ArtifactKey, StoredArtifact, Path | None]]:
    """Every version record under ``paths`` (folders, searched at any depth, or record
    files): (its file, address, version, the file of its bytes or ``None``), each
    artifact's versions in order.

    Raises:
        ValueError: naming a record that is not one, or whose bytes are missing.
    """
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(path.rglob(f"*{RECORD_SUFFIX}"))
        elif path.name.endswith(RECORD_SUFFIX):
            files.append(path)
    for file in sorted(files, key=_order):
        try:
            data: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
            key = ArtifactKey(
                data["app_name"], data["user_id"], data["session_id"] or "", data["filename"]
            )
            stored = StoredArtifact(
                int(data["version"]),
                data["mime_type"],
                dict(data["custom_metadata"]),
                float(data["create_time"]),
                dict(data["part"]),
                data["size"],
                data["sha256"],
            )
            if stored.version < 0 or not key.filename:
                raise ValueError("a version number below 0 or an empty filename")
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{file} is not an artifact record: {exc}") from None
        blob = file.with_name(file.name.removesuffix(RECORD_SUFFIX) + _BYTES_SUFFIX)
        if stored.sha256 is not None and not blob.is_file():
            raise ValueError(f"{file}: its bytes ({blob.name}) are missing")
        yield file, key, stored, (blob if stored.sha256 is not None else None)

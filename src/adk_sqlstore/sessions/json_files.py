"""ADK session JSON: the form ``Session.model_dump_json()`` writes.

ADK's CLI saves a session this way (``<session id>.session.json``). ADK's models
serialise with snake_case field names or, ``by_alias=True``, camelCase ones; both are
read here. Keys inside user data (state, state deltas, function call arguments and
responses, custom metadata, ...) are never renamed.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError

from ..models import Session

__all__ = [
    "describe_invalid",
    "dump_session",
    "load_session",
    "load_sessions",
    "path_component",
    "session_files",
]

_CAMEL = re.compile(r"^[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+$")
_UPPER = re.compile(r"([A-Z])")

# Values of these fields are user data: their keys are kept as they are.
_OPAQUE = frozenset(
    {
        "state",
        "state_delta",
        "args",
        "response",
        "custom_metadata",
        "agent_state",
        "output",
        "artifact_delta",
        "set_model_response",
        "route",
    }
)


def _snake(key: str) -> str:
    return _UPPER.sub(lambda m: "_" + m.group(1).lower(), key) if _CAMEL.match(key) else key


def _normalize(value: Any, *, camel: bool) -> Any:
    """snake_case the field names of model objects (when ``camel``) and drop their
    ``null`` fields, which ADK's models read as unset; user data is left alone."""
    if isinstance(value, list):
        return [_normalize(v, camel=camel) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        name = _snake(key) if camel else key
        if item is None:
            continue
        out[name] = item if name in _OPAQUE else _normalize(item, camel=camel)
    return out


def load_session(text: str | bytes) -> Session:
    """Parse one session from ADK session JSON (snake_case or camelCase keys).

    Fields that are ``null`` are read as unset, as ADK's models do.

    Raises:
        pydantic.ValidationError: the JSON is not a session.
        json.JSONDecodeError: the text is not JSON.
    """
    data = json.loads(text)
    camel = isinstance(data, dict) and any(
        k in data for k in ("appName", "userId", "lastUpdateTime")
    )
    data = _normalize(data, camel=camel)
    # Through JSON again, so that bytes (inline data) are decoded from base64 as ADK does.
    return Session.model_validate_json(json.dumps(data, ensure_ascii=False))


_MAX_COMPONENT_BYTES = 200
"""The longest path component written (file systems allow 255 bytes; a suffix such as
``.session.json`` or ``.artifact.json`` comes after it)."""


def path_component(name: str) -> str:
    """An identifier or filename as one safe path component, for export folders:
    percent-encoded (nothing is written outside the folder), never ``.`` or ``..``,
    never hidden; a name whose encoding is longer than 200 bytes is cut, with the first
    16 hex digits of its SHA-256 after a ``~``, so that two long names stay apart (the
    files themselves hold the full names)."""
    quoted = quote(name, safe="")
    quoted = "%2E" + quoted[1:] if quoted.startswith(".") else quoted
    if len(quoted) <= _MAX_COMPONENT_BYTES:
        return quoted
    cut = quoted[: _MAX_COMPONENT_BYTES - 17]
    cut = cut[: cut.rfind("%")] if "%" in cut[-2:] else cut  # never half an escape
    return f"{cut}~{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def describe_invalid(exc: ValidationError) -> str:
    """What is wrong with a session document, one clause per problem: where (the field
    path as ``events[3].timestamp``), what pydantic says, and the value found."""
    clauses = []
    for problem in exc.errors(include_url=False):
        where = ""
        for part in problem["loc"]:
            where += f"[{part}]" if isinstance(part, int) else f".{part}" if where else str(part)
        found = repr(problem.get("input"))
        found = found if len(found) <= 60 else found[:57] + "..."
        clauses.append(f"{where or 'the document'}: {problem['msg']} (found {found})")
    return "; ".join(clauses)


def _parsed(document: str, where: str) -> Session:
    try:
        return load_session(document)
    except ValidationError as exc:
        raise ValueError(f"{where}{describe_invalid(exc)}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}not JSON: {exc}") from None


def load_sessions(data: str | bytes) -> list[Session]:
    """Parse sessions from ADK session JSON: one session, a JSON array of sessions, or
    JSON lines (one session per line, as ``adk-sqlstore export --out -`` writes).

    Raises:
        ValueError: the data is not JSON, not UTF-8, or a document is not a session;
            the message says which line (JSON lines) or item (an array), and which
            fields, with the values found (:func:`describe_invalid`).
    """
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        if not exc.msg.startswith("Extra data"):
            raise ValueError(f"not JSON: {exc}") from None
        return [
            _parsed(line, f"line {number}: ")
            for number, line in enumerate(text.splitlines(), 1)
            if line.strip()
        ]
    if not isinstance(document, list):
        return [_parsed(json.dumps(document, ensure_ascii=False), "")]
    return [
        _parsed(json.dumps(item, ensure_ascii=False), f"item {index}: ")
        for index, item in enumerate(document)
    ]


def dump_session(session: Session) -> str:
    """Serialise ``session`` as ADK session JSON: snake_case, 2-space indent, ``null``
    fields left out (as in the files ADK's CLI saves), without adk-sqlstore's
    ``revision``. ADK's ``Session.model_validate_json`` reads it."""
    return session.model_dump_json(indent=2, exclude={"revision"}, exclude_none=True)


def session_files(paths: list[Path]) -> list[Path]:
    """Expand folders to the ``*.session.json`` files in them and their subfolders (or,
    if there are none, their ``*.json`` files but an export's ``memories.json`` and
    ``*.artifact.json``), sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            files = sorted(path.rglob("*.session.json")) or sorted(
                p
                for p in path.rglob("*.json")
                if p.name != "memories.json" and not p.name.endswith(".artifact.json")
            )
            found.extend(files)
        else:
            found.append(path)
    return found

"""The google-adk names this package uses, imported once, with an error that names the
extra to install when google-adk is missing."""

from __future__ import annotations

try:
    from google.adk.artifacts import BaseArtifactService, artifact_util
    from google.adk.artifacts.base_artifact_service import ArtifactVersion as AdkArtifactVersion
    from google.adk.artifacts.base_artifact_service import ensure_part
    from google.adk.errors import StaleSessionError as AdkStaleSessionError
    from google.adk.errors.already_exists_error import AlreadyExistsError as AdkAlreadyExistsError
    from google.adk.errors.input_validation_error import (
        InputValidationError as AdkInputValidationError,
    )
    from google.adk.errors.session_not_found_error import (
        SessionNotFoundError as AdkSessionNotFoundError,
    )
    from google.adk.events import Event as AdkEvent
    from google.adk.memory import BaseMemoryService
    from google.adk.memory.base_memory_service import SearchMemoryResponse as AdkSearchResponse
    from google.adk.memory.memory_entry import MemoryEntry as AdkMemoryEntry
    from google.adk.sessions import BaseSessionService
    from google.adk.sessions import Session as AdkSession
    from google.adk.sessions.base_session_service import GetSessionConfig as AdkGetSessionConfig
    from google.adk.sessions.base_session_service import (
        ListSessionsResponse as AdkListSessionsResponse,
    )
    from google.genai import types as genai_types
except ImportError as exc:  # pragma: no cover - exercised in a process without google-adk
    raise ImportError(
        "adk_sqlstore.adk needs google-adk; install it with: pip install 'adk-sqlstore[adk]'"
    ) from exc

__all__ = [
    "AdkAlreadyExistsError",
    "AdkArtifactVersion",
    "AdkEvent",
    "AdkGetSessionConfig",
    "AdkInputValidationError",
    "AdkListSessionsResponse",
    "AdkMemoryEntry",
    "AdkSearchResponse",
    "AdkSession",
    "AdkSessionNotFoundError",
    "AdkStaleSessionError",
    "BaseArtifactService",
    "BaseMemoryService",
    "BaseSessionService",
    "artifact_util",
    "ensure_part",
    "genai_types",
]

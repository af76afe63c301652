"""Artifacts (ADK's ``BaseArtifactService``) in the store's database: versions, and
their bytes in chunks, once per user and SHA-256 (:mod:`.service`). The ADK class is
:class:`adk_sqlstore.adk.SqlArtifactService`."""

from .service import (
    DEFAULT_MAX_ARTIFACT_BYTES,
    ArtifactStorage,
    StoredArtifact,
    artifact_key,
    canonical_uri,
)

__all__ = [
    "DEFAULT_MAX_ARTIFACT_BYTES",
    "ArtifactStorage",
    "StoredArtifact",
    "artifact_key",
    "canonical_uri",
]

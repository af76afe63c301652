"""State scopes: splitting a delta by prefix and merging the scopes back.

Follows ADK's ``State`` conventions (``google.adk.sessions.state``): a key prefixed
``app:`` is shared by every user of the app, ``user:`` by every session of one user
of the app, ``temp:`` lives only for the current invocation and is never stored, and
an un-prefixed key belongs to the session. App and user state are stored without
their prefix and get it back when merged into a session's state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "APP_PREFIX",
    "TEMP_PREFIX",
    "USER_PREFIX",
    "ScopedDelta",
    "drop_temp",
    "merge_state",
    "split_delta",
]

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"


@dataclass
class ScopedDelta:
    """A state delta split by scope; keys are un-prefixed, ``temp:`` keys are gone."""

    app: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)
    session: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.app or self.user or self.session)


def split_delta(delta: Mapping[str, Any] | None) -> ScopedDelta:
    """Split ``delta`` by key prefix, dropping ``temp:`` keys.

    Args:
        delta: state keys (possibly prefixed) to new values.

    Returns:
        The app, user and session parts with their prefixes removed.
    """
    scoped = ScopedDelta()
    for key, value in (delta or {}).items():
        if key.startswith(APP_PREFIX):
            scoped.app[key[len(APP_PREFIX) :]] = value
        elif key.startswith(USER_PREFIX):
            scoped.user[key[len(USER_PREFIX) :]] = value
        elif not key.startswith(TEMP_PREFIX):
            scoped.session[key] = value
    return scoped


def drop_temp(delta: Mapping[str, Any]) -> dict[str, Any]:
    """``delta`` without its ``temp:`` keys (order kept)."""
    return {k: v for k, v in delta.items() if not k.startswith(TEMP_PREFIX)}


def merge_state(
    app: Mapping[str, Any], user: Mapping[str, Any], session: Mapping[str, Any]
) -> dict[str, Any]:
    """Merge the three scopes into one dict, restoring the ``app:``/``user:`` prefixes.

    Session keys come first, then app keys, then user keys (ADK's order).
    """
    merged = dict(session)
    for key, value in app.items():
        merged[APP_PREFIX + key] = value
    for key, value in user.items():
        merged[USER_PREFIX + key] = value
    return merged

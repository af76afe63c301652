"""Memory generation: facts extracted from conversations by a model of your choice,
consolidated with the user's facts already stored, with their history (a
self-hosted counterpart of Vertex AI Memory Bank).

- :mod:`.generator`: :class:`MemoryGenerator` (the model, topics, limits) and the
  report of a run;
- :mod:`.chat`: the chat model protocol; :mod:`.models`: the models that plug in
  (ADK models, :mod:`.adk_model`; OpenAI-compatible endpoints, :mod:`.openai_chat`;
  callables);
- :mod:`.topics`: what is worth remembering (Memory Bank's topics and yours);
- :mod:`.prompts`, :mod:`.replies`: what the model is asked, and its answers checked;
- :mod:`.running`, :mod:`.writing`: a run (lease, watermark, calls) and its write;
- :mod:`.service`: the methods ``SqlMemoryService`` gains (``generate``,
  ``list_facts``, ``fact_history``, ``retrieve_profiles``).
"""

# The memory package first: its service imports this package's (a mixin), and this
# package's modules import memory's rows and vectors.
from .. import memory as _memory  # noqa: F401  # isort: skip
from .chat import CallableModel, ChatModel, ModelReply, ModelRequest
from .facts import Fact, FactRevision
from .generator import GenerationReport, MemoryGenerator
from .models import resolve_model
from .topics import BUILTIN_TOPICS, Topic

__all__ = [
    "BUILTIN_TOPICS",
    "CallableModel",
    "ChatModel",
    "Fact",
    "FactRevision",
    "GenerationReport",
    "MemoryGenerator",
    "ModelReply",
    "ModelRequest",
    "Topic",
    "resolve_model",
]

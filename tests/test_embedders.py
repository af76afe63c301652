"""Embedders (issue 14, first part): the protocol's checks, the OpenAI-compatible
and Google GenAI embedders against a local fake HTTP server (never the internet), and
the local model where its extra is installed."""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from adk_sqlstore.embeddings import (
    Embedder,
    GoogleGenAIEmbedder,
    MiniLMEmbedder,
    OpenAICompatibleEmbedder,
    embed_texts,
)
from adk_sqlstore.errors import EmbeddingError


def vector_of(text: str, dimensions: int) -> list[float]:
    """The fake server's vector for a text: its length, then its index-free digest."""
    return [float(len(text))] + [
        float((ord(text[0]) if text else 0) + i) for i in range(dimensions - 1)
    ]


class FakeServer:
    """A local HTTP server speaking OpenAI's /embeddings and Gemini's
    :batchEmbedContents; it records every request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.shuffle = False
        self.dimensions = 4
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                if fake.status != 200:
                    self._answer(
                        fake.status, {"error": {"message": "overloaded", "code": fake.status}}
                    )
                elif self.path.endswith("/embeddings"):
                    data = [
                        {"index": i, "embedding": vector_of(t, fake.dimensions)}
                        for i, t in enumerate(body["input"])
                    ]
                    self._answer(200, {"data": data[::-1] if fake.shuffle else data})
                else:
                    texts = [r["content"]["parts"][0]["text"] for r in body["requests"]]
                    values = [{"values": vector_of(t, fake.dimensions)} for t in texts]
                    self._answer(200, {"embeddings": values})

            def _answer(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.close()


TEXTS = ["I play badminton every Sunday", "", "私はPythonを使う", "x" * 3, "café"]


async def test_openai_compatible_batches_orders_and_authenticates(server: FakeServer) -> None:
    pytest.importorskip("httpx")
    embedder = OpenAICompatibleEmbedder(
        "text-embedding-3-small",
        dimensions=4,
        base_url=server.url + "/v1",
        api_key="sk-test",
        batch_size=2,
    )
    server.shuffle = True  # answers in reverse: the index field orders them
    assert isinstance(embedder, Embedder)
    vectors = await embed_texts(embedder, TEXTS)
    assert vectors == [vector_of(t, 4) for t in TEXTS]
    assert [r["body"]["input"] for r in server.requests] == [TEXTS[0:2], TEXTS[2:4], TEXTS[4:]]
    assert {r["path"] for r in server.requests} == {"/v1/embeddings"}
    assert all(r["body"]["model"] == "text-embedding-3-small" for r in server.requests)
    assert all(r["headers"]["Authorization"] == "Bearer sk-test" for r in server.requests)
    assert all("dimensions" not in r["body"] for r in server.requests)


async def test_openai_compatible_without_a_key_sends_none(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("httpx")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    embedder = OpenAICompatibleEmbedder(
        "nomic", dimensions=4, base_url=server.url, send_dimensions=True
    )
    await embed_texts(embedder, ["a"])
    assert "Authorization" not in server.requests[0]["headers"]
    assert server.requests[0]["body"]["dimensions"] == 4


async def test_openai_compatible_failures_are_embedding_errors(server: FakeServer) -> None:
    pytest.importorskip("httpx")
    embedder = OpenAICompatibleEmbedder("m", dimensions=4, base_url=server.url)
    server.status = 503
    with pytest.raises(EmbeddingError, match=r"answered 503: .*overloaded"):
        await embed_texts(embedder, ["a"])
    server.status = 200
    wrong = OpenAICompatibleEmbedder("m", dimensions=8, base_url=server.url)
    with pytest.raises(EmbeddingError, match="4 dimensions, not 8"):
        await embed_texts(wrong, ["a"])
    closed = OpenAICompatibleEmbedder("m", dimensions=4, base_url="http://127.0.0.1:9", timeout=2)
    with pytest.raises(EmbeddingError, match="failed"):
        await embed_texts(closed, ["a"])


async def test_google_genai_embedder_through_google_genai(server: FakeServer) -> None:
    genai = pytest.importorskip("google.genai")
    client = genai.Client(
        api_key="test-key", http_options=genai.types.HttpOptions(base_url=server.url)
    )
    embedder = GoogleGenAIEmbedder(
        "gemini-embedding-001", dimensions=4, client=client, batch_size=3
    )
    vectors = await embed_texts(embedder, TEXTS)
    assert vectors == [vector_of(t, 4) for t in TEXTS]
    assert [len(r["body"]["requests"]) for r in server.requests] == [3, 2]
    assert all(
        r["path"].endswith("models/gemini-embedding-001:batchEmbedContents")
        for r in server.requests
    )
    request = server.requests[0]["body"]["requests"][0]
    assert request["outputDimensionality"] == 4
    server.status = 429
    with pytest.raises(EmbeddingError, match="embed_content failed"):
        await embed_texts(embedder, ["a"])


class Broken:
    model = "broken"
    dimensions = 2
    batch_size = 10

    def __init__(self, answer: list[list[float]]) -> None:
        self.answer = answer

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return self.answer


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ([[1.0, 2.0]], "1 vectors for 2 texts"),
        ([[1.0, 2.0], [1.0]], "1 dimensions, not 2"),
        ([[1.0, 2.0], [math.nan, 0.0]], "non-finite"),
        ([[1.0, 2.0], [math.inf, 0.0]], "non-finite"),
    ],
)
async def test_what_an_embedder_returns_is_checked(answer: list[list[float]], message: str) -> None:
    with pytest.raises(EmbeddingError, match=message):
        await embed_texts(Broken(answer), ["a", "b"])


async def test_the_local_model_embeds_offline() -> None:
    """Skipped without the embeddings extra, except where it must run
    (``make test-embeddings`` sets ADK_SQLSTORE_REQUIRE_EMBEDDINGS)."""
    if not os.environ.get("ADK_SQLSTORE_REQUIRE_EMBEDDINGS"):
        pytest.importorskip("sentence_transformers", reason="the embeddings extra is not installed")
    embedder = MiniLMEmbedder()
    sport, badminton, weather = await embed_texts(
        embedder, ["What sport do I like?", "I play badminton every Sunday", "It rained in Pune"]
    )
    assert len(sport) == 384
    assert abs(sum(x * x for x in sport) - 1) < 1e-4

    def cos(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cos(sport, badminton) > cos(sport, weather)


def test_the_demo_answers_a_question_sharing_no_word_with_the_local_model(tmp_path: Any) -> None:
    """The issue's example in ``adk-sqlstore demo``: "What sport do I like?" finds "I
    play badminton every Sunday" by hybrid search, where BM25 alone finds nothing."""
    if not os.environ.get("ADK_SQLSTORE_REQUIRE_EMBEDDINGS"):
        pytest.importorskip("sentence_transformers", reason="the embeddings extra is not installed")
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "adk_sqlstore", "demo", "--url", f"sqlite:///{tmp_path}/demo.db"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "BM25 alone: 0 result(s)" in done.stdout
    assert "hybrid search (all-MiniLM-L6-v2, local): 'I play badminton every Sunday'" in (
        done.stdout.replace("\n", " ")
    )


def test_embedders_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The names ?embedder= and --embedder take (adk_sqlstore.embeddings.registry)."""
    import importlib.util

    from adk_sqlstore.embeddings import embedder_named
    from adk_sqlstore.errors import ConfigurationError

    if importlib.util.find_spec("sentence_transformers") is not None:
        local = embedder_named("minilm")
        assert isinstance(local, MiniLMEmbedder) and local.dimensions == 384
    else:  # the extra is missing: said when the embedder is made, naming the extra
        with pytest.raises(ConfigurationError, match=r"adk-sqlstore\[embeddings\]"):
            embedder_named("minilm")
    pytest.importorskip("httpx")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    small = embedder_named("openai")
    assert isinstance(small, OpenAICompatibleEmbedder)
    assert (small.model, small.dimensions, small.base_url) == (
        "text-embedding-3-small",
        1536,
        "http://127.0.0.1:9/v1",
    )
    assert embedder_named("OpenAI:text-embedding-3-large").dimensions == 3072
    with pytest.raises(ConfigurationError, match="dimensions"):
        embedder_named("openai:nomic-embed-text")
    with pytest.raises(ConfigurationError, match="unknown embedder"):
        embedder_named("word2vec")
    custom = embedder_named("tests.embedders:Concepts")
    assert custom.model == "test-concepts"

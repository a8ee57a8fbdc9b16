"""The AMBER-Alert pipeline's stand-in inference (Faa$T §2.3): each stage reads its whole model, as a real network's
forward pass reads every weight, and runs one small dense layer with numpy. The models are seeded random bytes; what the
benchmark measures is where the bytes come from (storage, or the cache pre-warmed before the invocation), not accuracy."""
import hashlib

import numpy as np

FEATURES = 1024


def view(stream):
    """The input blob's bytes without a copy when the cache offers a zero-copy view (issue 8's getbuffer)."""
    return stream.getbuffer() if hasattr(stream, "getbuffer") else memoryview(stream.read())


def layer(model, features, outputs):
    """One dense layer: `outputs` × FEATURES weights taken from the model, plus a checksum over every 4 KiB page of it
    (the page touches make the whole model resident, as a forward pass would)."""
    weights = np.frombuffer(model, dtype=np.uint8)
    checksum = int(weights[::4096].astype(np.uint64).sum())
    w = weights[: outputs * FEATURES].astype(np.float32).reshape(outputs, FEATURES) / 255.0
    x = np.resize(np.frombuffer(features, dtype=np.uint8), FEATURES).astype(np.float32) / 255.0
    scores = w @ x
    return scores, checksum


def digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, (bytes, bytearray, memoryview)) else str(p).encode())
    return h.hexdigest()[:16]

"""The SHA-256 of the program's constants, computed in a thread while the release model compiles.

The manifest records every weight's digest (``contract.extract_constants``), serial at the end
of the build: a GPU-to-host copy and a hash of GBs at full size. On the H100 (docs/gpu-validation.md,
run 19) the package phase's part that holds these digests and the toolchain record took llama
9.8 s, deberta_v2 12.3 s of 12.3 s; with the digests taken here, run 20 measured the whole package
phase at 0.0-0.1 s (deberta_v2, llama_cache). The program's tensors are fixed once it is exported, so the
hashing can overlap the release compile instead.

A digest taken early is handed on only for a tensor that is still the one hashed: the same
storage, shape and strides, and an unchanged version counter (every in-place write through the
tensor bumps it: a model whose forward updates a buffer in place, run eagerly by validation, is
hashed again at the end, as before). A tensor without a version counter or storage (made under
``torch.inference_mode``; a wrapper subclass) is never hashed early. One write escapes the
counter: through ``.data`` (``buf.data.add_(1)``), which gets a counter of its own; such a tensor
keeps the digest taken during the compile, the value the compiled package took, where the old
order recorded the value after validation's eager runs. A failure of the thread costs time only.
The copy to the host and hashlib release the GIL.

How long the package phase spent here (the wait, and what it hashed again) is ``seconds`` in
``detail()``: the phase's "toolchain_and_constants" timing holds both this and the toolchain record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["ConstantDigests"]


def _stamp(t: Any) -> tuple[Any, ...] | None:
    """What must be unchanged for an early digest to stand; None when it cannot be told."""
    try:
        return (t._version, t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype, t.device)
    except (RuntimeError, AttributeError, NotImplementedError):  # inference tensors, tensor subclasses without storage
        return None


class ConstantDigests:
    """``digest(fqn, t)`` after the thread: the early digest when ``t`` is unchanged, else hashed then."""

    def __init__(self, tensors: Mapping[str, Any]) -> None:
        self._tensors = dict(tensors)
        self._early: dict[str, tuple[tuple[Any, ...], str]] = {}
        self.error: str | None = None
        self.hashed_bytes = 0
        self.waited_s: float | None = None
        self.used = 0  # early digests handed on
        self.again = 0  # tensors hashed at the end (changed since, or not hashed early)
        self.seconds = 0.0  # spent in digest(): the package phase's share of the hashing
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="aoti-guard-constant-digests", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from aoti_guard.builder.export.contract import tensor_sha256

        try:
            for fqn, t in self._tensors.items():
                if self._stop.is_set():
                    return
                before = _stamp(t)
                if before is None:
                    continue
                digest = tensor_sha256(t)
                if _stamp(t) == before:  # not written while it was read
                    self._early[fqn] = (before, digest)
                    self.hashed_bytes += int(t.numel() * t.element_size())
        except Exception as exc:  # noqa: BLE001 - a head start only: digest() hashes whatever is missing
            self.error = f"{type(exc).__name__}: {exc}"

    def wait(self) -> None:
        if self.waited_s is None:
            started = time.monotonic()
            self._thread.join()
            self.waited_s = round(time.monotonic() - started, 3)

    def cancel(self) -> None:
        """A build that ends before its package phase: stop after the tensor being hashed, and
        wait for that, so no thread is left inside torch while the interpreter shuts down."""
        self._stop.set()
        self._thread.join()

    def digest(self, fqn: str, t: Any) -> str:
        from aoti_guard.builder.export.contract import tensor_sha256

        started = time.monotonic()
        try:
            self.wait()
            early = self._early.get(fqn)
            stamp = _stamp(t)
            if early is not None and stamp is not None and early[0] == stamp:
                self.used += 1
                return early[1]
            self.again += 1
            return tensor_sha256(t)
        finally:
            self.seconds += time.monotonic() - started

    def detail(self) -> dict[str, object]:
        """For the package phase's report: how many digests came early, how many were taken again."""
        out: dict[str, object] = {
            "early": self.used,
            "again": self.again,
            "bytes": self.hashed_bytes,
            "waited_s": self.waited_s,
            "seconds": round(self.seconds, 3),
        }
        if self.error is not None:
            out["error"] = self.error[:200]
        return out

"""The program's constants hashed while the release model compiles (builder/compile/constant_digests.py):
an early digest is handed on only for a tensor that is still the one hashed."""

from __future__ import annotations

import pytest
import torch

from aoti_guard.builder.compile.constant_digests import ConstantDigests
from aoti_guard.builder.export.contract import extract_constants, tensor_sha256


def test_unchanged_tensors_take_the_early_digest_without_hashing_again(monkeypatch: pytest.MonkeyPatch) -> None:
    tensors = {"w": torch.randn(64, 64), "b": torch.arange(10, dtype=torch.int64)}
    digests = ConstantDigests(tensors)
    digests.wait()
    import aoti_guard.builder.export.contract as contract

    calls: list[object] = []
    original = contract.tensor_sha256
    monkeypatch.setattr(contract, "tensor_sha256", lambda t: calls.append(t) or original(t))
    assert digests.digest("w", tensors["w"]) == original(tensors["w"])
    assert digests.digest("b", tensors["b"]) == original(tensors["b"])
    assert calls == []  # both came from the thread
    detail = digests.detail()
    assert detail == {"early": 2, "again": 0, "bytes": 64 * 64 * 4 + 10 * 8, "waited_s": digests.waited_s, "seconds": detail["seconds"]}
    assert 0 <= detail["seconds"] < 1  # the package phase's share: nothing hashed again


def test_a_tensor_written_in_place_since_is_hashed_again_with_its_new_value() -> None:
    """A forward that updates a buffer in place (run eagerly by validation after the thread hashed
    it): the manifest must hold the value as it is when the package is written, as before."""
    buf = torch.zeros(8)
    digests = ConstantDigests({"running_mean": buf})
    digests.wait()
    buf.add_(1.0)  # bumps the version counter
    assert digests.digest("running_mean", buf) == tensor_sha256(torch.ones(8))
    assert digests.detail()["again"] == 1 and digests.detail()["early"] == 0


def test_a_replaced_or_reshaped_tensor_and_an_inference_tensor_are_hashed_at_the_end() -> None:
    with torch.inference_mode():
        frozen = torch.ones(4)  # no version counter: never hashed early
    w = torch.randn(6)
    digests = ConstantDigests({"frozen": frozen, "w": w})
    digests.wait()
    other = w.clone()  # the same values in another storage: not the tensor that was hashed
    assert digests.digest("w", other) == tensor_sha256(w)
    assert digests.digest("frozen", frozen) == tensor_sha256(frozen)
    assert digests.detail()["again"] == 2 and digests.detail()["early"] == 0
    assert digests.digest("w", w.view(2, 3)) == tensor_sha256(w.view(2, 3))  # another shape: again
    assert digests.detail()["again"] == 3


def test_extract_constants_records_the_digests_it_is_handed() -> None:
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)
            self.register_buffer("scale", torch.full((3,), 2.0))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x) * self.scale

    ep = torch.export.export(M().eval(), (torch.randn(2, 4),))
    tensors = {**ep.state_dict}
    digests = ConstantDigests(tensors)
    plain = {c.fqn: c.sha256 for c in extract_constants(ep, {})}
    early = {c.fqn: c.sha256 for c in extract_constants(ep, {}, digest_of=digests.digest)}
    assert early == plain and set(plain) == {"lin.weight", "lin.bias", "scale"}
    assert digests.detail()["early"] == 3


def test_cancel_stops_between_tensors_and_leaves_no_thread() -> None:
    """A build that fails before its package phase (a compile error) stops the thread, so it is
    not inside torch while the interpreter shuts down."""
    tensors = {f"w{i}": torch.randn(1 << 16) for i in range(200)}
    digests = ConstantDigests(tensors)
    digests.cancel()
    assert not digests._thread.is_alive()
    assert digests.detail()["early"] == 0  # nothing handed on yet
    digests.cancel()  # twice is harmless (the build's finally after a package phase)
    # what it did hash before stopping is still handed on for unchanged tensors
    assert digests.digest("w0", tensors["w0"]) == tensor_sha256(tensors["w0"])


def test_a_wrapper_subclass_is_hashed_at_the_end_as_before() -> None:
    """A tensor subclass without storage of its own (torchao-style wrappers): no stamp, so never
    an early digest; its digest is whatever the package phase computes, as before."""
    from torch.utils._pytree import tree_map

    class Wrapped(torch.Tensor):
        @staticmethod
        def __new__(cls, inner: torch.Tensor) -> Wrapped:
            return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype)  # type: ignore[attr-defined,no-any-return]

        def __init__(self, inner: torch.Tensor) -> None:
            self.inner = inner

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            def unwrap(x: object) -> object:
                return x.inner if isinstance(x, Wrapped) else x

            return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))

    w = Wrapped(torch.arange(6, dtype=torch.float32))
    digests = ConstantDigests({"w": w})
    digests.wait()
    assert digests.digest("w", w) == tensor_sha256(w) == tensor_sha256(torch.arange(6, dtype=torch.float32))
    assert digests.detail()["early"] == 0 and digests.detail()["again"] == 1


def test_a_write_through_data_keeps_the_value_hashed_during_the_compile() -> None:
    """``.data`` writes bypass the version counter: the digest stays that of the value as it was
    while the release model compiled (what its package holds), not a value made up."""
    buf = torch.zeros(5)
    digests = ConstantDigests({"buf": buf})
    digests.wait()
    buf.data.add_(1.0)
    assert digests.digest("buf", buf) == tensor_sha256(torch.zeros(5))

"""The golden input generator the build and the probe share (runtime_probe/golden/recipe.py), and
the compact form of an output (runtime_probe/golden/compact.py)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.formats.serde import to_jsonable
from runtime_probe.golden import cases
from runtime_probe.golden import compact as _compact
from runtime_probe.golden import recipe as R
from runtime_probe.package.manifest import Dim, InputRecipe, InputSpec, Symbol, TensorSpec

BATCH, SEQ = Dim("batch", 1, 8), Dim("seq", 2, 64)


def _spec(name: str, dtype: str, value_range: tuple[int, int] | None = None) -> InputSpec:
    return InputSpec(name, name, "tensor", 0, TensorSpec(dtype, (BATCH, SEQ), ("seq", 1), True, "cpu", value_range))


SPECS = [_spec("input_ids", "int64", (0, 999)), _spec("attention_mask", "int64"), _spec("position_ids", "int64", (0, 511))]
EXAMPLES = [torch.randint(0, 1000, (2, 12)), torch.ones(2, 12, dtype=torch.int64), torch.arange(12).expand(2, 12)]


def _recipes(shape: tuple[int, int], seed: int = 0) -> tuple[list[InputRecipe], dict[str, torch.Tensor]]:
    templates = R.plan(SPECS, EXAMPLES)
    recipes = [
        R.recipe(s.name, templates[s.name], None, R.Sized("int64", shape, (shape[1], 1)), R.input_seed(seed, "max", s.name)) for s in SPECS
    ]
    made = R.generate(recipes, {})
    return [dataclasses.replace(r, sha256=R.sha256_of(made[r.input])) for r in recipes], made


def test_an_all_ones_attention_mask_is_generated_with_left_and_right_padding() -> None:
    templates = R.plan(SPECS, EXAMPLES)
    assert {k: t.kind for k, t in templates.items()} == {"input_ids": "ids", "attention_mask": "mask", "position_ids": "positions"}
    _, made = _recipes((6, 10))
    mask = made["attention_mask"]
    assert set(mask.unique().tolist()) == {0, 1}
    right = [r for r in mask.tolist() if r[0] == 1 and r[-1] == 0]
    left = [r for r in mask.tolist() if r[0] == 0 and r[-1] == 1]
    whole = [r for r in mask.tolist() if all(r)]
    assert right and left and whole  # some rows padded on each side, some not
    assert all(sum(r) >= 1 for r in mask.tolist())  # never a row with nothing to attend to
    for row in mask.tolist():  # padding is contiguous: one run of kept positions
        kept = [i for i, v in enumerate(row) if v]
        assert kept == list(range(kept[0], kept[-1] + 1))


def test_a_bool_mask_that_is_mostly_false_keeps_false_and_pads_with_true() -> None:
    spec = InputSpec("mask", "mask", "tensor", 0, TensorSpec("bool", (BATCH, 8), (8, 1), True, "cpu"))
    example = torch.zeros(4, 8, dtype=torch.bool)
    example[1] = True
    t = R.plan([spec], [example])["mask"]
    assert (t.kind, t.keep, t.pad) == ("mask", 0, 1)
    made = R.generate([R.recipe("mask", t, None, R.Sized("bool", (3, 8), (8, 1)), 5)], {})["mask"]
    assert made.dtype == torch.bool and made[0].any() and made[1].any() and not made[2].any()


def test_ids_span_the_table_with_both_ends_and_positions_follow_the_mask() -> None:
    _, made = _recipes((8, 32))
    ids = made["input_ids"]
    assert int(ids.min()) == 0 and int(ids.max()) == 999
    assert len(ids.unique()) > 100
    mask, pos = made["attention_mask"], made["position_ids"]
    for m_row, p_row in zip(mask.tolist(), pos.tolist()):
        kept = [p for m, p in zip(m_row, p_row) if m]
        assert kept == list(range(len(kept)))  # 0, 1, 2... over the positions attended to


def test_a_mask_like_input_that_is_not_zero_one_is_drawn_from_its_values() -> None:
    spec = InputSpec("mask", "mask", "tensor", 0, TensorSpec("float32", (BATCH, 6), (6, 1), True, "cpu"))
    additive = torch.full((2, 6), float("-inf")).triu(1)
    assert R.plan([spec], [additive])["mask"].kind == "pool"


def test_the_recipe_regenerates_bit_exactly_in_a_fresh_process(tmp_path: Path) -> None:
    recipes, _ = _recipes((5, 17), seed=3)
    pool_spec = InputSpec("x", "x", "tensor", 0, TensorSpec("bfloat16", (BATCH, 4), (4, 1), True, "cpu"))
    t = R.plan([pool_spec], [torch.randn(3, 4).to(torch.bfloat16)])["x"]
    x = R.recipe("x", t, "pool.x", R.Sized("bfloat16", (7, 4), (1, 7)), 11)  # a transposed layout
    x = dataclasses.replace(x, sha256=R.sha256_of(R.generate([x], {"pool.x": t.pool})["x"]))
    recipes.append(x)
    _safetensors.dump({"pool.x": t.pool}, tmp_path / "pools.safetensors")
    (tmp_path / "recipes.json").write_text(json.dumps([to_jsonable(r) for r in recipes]))
    code = (
        "import json, sys\n"
        "from runtime_probe.golden import cases\n"
        "from runtime_probe.formats import safetensors\n"
        "d = sys.argv[1]\n"
        "sample = {'recipes': json.load(open(d + '/recipes.json'))}\n"
        "made, refused = cases.regenerate(sample, safetensors.load(d + '/pools.safetensors'))\n"
        "print(json.dumps({'refused': refused, 'strides': {k: list(v.stride()) for k, v in made.items()}}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True, timeout=120)
    reply = json.loads(out.stdout)
    assert reply["refused"] is None  # every input's SHA-256 matched the build's
    assert reply["strides"]["x"] == [1, 7]
    # and the same check says so when the values differ
    bad = [dataclasses.replace(recipes[0], seed=recipes[0].seed + 1), *recipes[1:]]
    _, refused = cases.regenerate({"recipes": [to_jsonable(r) for r in bad]}, {"pool.x": t.pool})
    assert refused is not None and refused["recipe_mismatch"][0]["input"] == "input_ids"


def test_a_tampered_recipe_with_huge_sizes_is_refused_before_anything_is_allocated() -> None:
    recipes, _ = _recipes((2, 4))
    huge = dataclasses.replace(recipes[0], shape=(1 << 30, 1 << 30), stride=(1 << 30, 1))
    with pytest.raises(R.RecipeError, match="byte cap"):
        R.generate([huge], {})  # a RuntimeError (or the OOM killer) would mean it tried
    strided = dataclasses.replace(recipes[0], shape=(2, 4), stride=(1 << 40, 1))  # a small shape over a huge storage
    with pytest.raises(R.RecipeError, match="byte cap"):
        R.generate([strided], {})
    # against the contract: a size outside the declared range, a shape the sizes do not give
    symbols = (Symbol("batch", 1, 8), Symbol("seq", 2, 64))
    assert "outside its declared range" in (R.contract_problem(huge, SPECS[0], {"batch": 1 << 30, "seq": 4}, symbols) or "")
    assert "the contract at these sizes says [2, 4]" in (R.contract_problem(huge, SPECS[0], {"batch": 2, "seq": 4}, symbols) or "")
    assert R.contract_problem(recipes[0], SPECS[0], {"batch": 2, "seq": 4}, symbols) is None


def _close(ref: torch.Tensor, out: torch.Tensor, atol: float, rtol: float) -> dict[str, object]:
    stats = _compact.reference_stats(ref)
    sum_tol, minmax_tol = _compact.tolerances(stats, atol, rtol)
    at = torch.tensor(_compact.positions(ref.numel()), dtype=torch.int64)
    digest = {"shape": list(ref.shape), "dtype": "float32", **stats, "sum_tol": sum_tol, "minmax_tol": minmax_tol}
    return _compact.check(out, digest, at, ref.reshape(-1)[at], _compact.Bound(atol, rtol), device=None)


def test_an_output_at_the_edge_of_its_elementwise_tolerance_passes_the_statistics() -> None:
    torch.manual_seed(0)
    ref = torch.randn(300, 1000) * 50
    atol, rtol = 1e-3, 1e-3
    worst = ref + (atol + rtol * ref.abs()) * 0.999  # every element just inside |out - ref| <= atol + rtol|ref|
    worst = worst.to(torch.float32)
    assert torch.all((worst.double() - ref.double()).abs() <= atol + rtol * ref.double().abs())
    result = _close(ref, worst, atol, rtol)
    assert result["passed"] is True, result["stats_failed"]


def test_an_error_between_the_stored_elements_is_caught_by_the_statistics() -> None:
    torch.manual_seed(0)
    ref = torch.randn(300, 1000)
    at = set(_compact.positions(ref.numel()))
    hidden = next(i for i in range(1, ref.numel()) if i not in at)
    out = ref.clone()
    out.view(-1)[hidden] += 100.0
    result = _close(ref, out, 1e-5, 1.3e-6)
    assert result["passed"] is False and result["mismatched"] == 0  # the subset alone missed it
    assert any(s.startswith("sum") for s in result["stats_failed"]) and any(s.startswith("max") for s in result["stats_failed"])
    nan = ref.clone()
    nan.view(-1)[hidden] = float("nan")
    assert any("NaN/Inf" in s for s in _close(ref, nan, 1e-5, 1.3e-6)["stats_failed"])


# SHA-256 of values the generator made before 2026-11-25 (night), when the hash went to chunks of
# 2**16 counters and in-place arithmetic: a package built by an earlier aoti-guard keeps only
# these recipes, and a probe that made other values would report every such sample unchecked.
PINNED = {
    "pool": "ef23b77e85586afd4a91faffe450d1bac171f8f811677c952ae5b7891a02dd03",
    "ids": "4ff62cbc2e1bebebeb263f51085e091db3ac74fbbf3b78659df70b6b5c9264d7",
}


@pytest.mark.parametrize("kind", sorted(PINNED))
def test_the_generator_makes_the_values_of_earlier_releases_across_many_chunks(kind: str) -> None:
    shape = (3, 5, 70001)  # 1.05 M values: one chunk (17 of the 2**16 generator of 2026-11-25 night)
    recipe = InputRecipe(
        input="k",
        kind=kind,
        dtype="float32" if kind == "pool" else "int64",
        shape=shape,
        stride=(5 * 70001, 70001, 1),
        seed=987654321,
        sha256="",
        pool="p" if kind == "pool" else None,
        low=3 if kind == "ids" else None,
        high=50256 if kind == "ids" else None,
        keep=None,
        pad=None,
        follows=None,
    )
    pool = torch.arange(4096, dtype=torch.float32) * 0.5 - 7.0
    assert R.sha256_of(R.generate([recipe], {"p": pool})["k"]) == PINNED[kind]


def test_the_generator_walks_a_large_input_in_few_large_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every op of the hash on a chunk opens a parallel region over torch's threads; at 2**16
    counters a chunk, a decoder's KV-cache samples opened ~100,000 of them, and on a busy GPU host
    the decoders' validation went from ~70 s to more than 300 s (docs/gpu-validation.md, run 20).
    2**22 values (32 MB of int64 temporaries) are one chunk."""
    calls: list[int] = []
    real = R._hash31

    def counting(start: int, count: int, seed: int) -> torch.Tensor:
        calls.append(count)
        return real(start, count, seed)

    n = (1 << 22) + 5
    recipe = InputRecipe(
        input="k", kind="pool", dtype="float32", shape=(n,), stride=(1,), seed=1, sha256="", pool="p",
        low=None, high=None, keep=None, pad=None, follows=None,
    )  # fmt: skip
    monkeypatch.setattr(R, "_hash31", counting)
    R.generate([recipe], {"p": torch.arange(10, dtype=torch.float32)})
    assert calls == [1 << 22, 5], calls

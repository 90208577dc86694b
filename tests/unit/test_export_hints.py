"""torch.export's messages (recorded from torch 2.13, and the older wording of 2.11) turned into the
exact fix for the sizes the user asked: aoti_guard/builder/export/hints.py.

The round trips (following the hint builds a package whose contract has the asked range) are in
tests/integration/test_export_hints.py."""

from __future__ import annotations

from aoti_guard.builder.export.hints import Declared, Tie, advise, library_type_hint, parse_fixes, pinned_by_a_tie, suggested_fixes
from aoti_guard.builder.export.ranges import example_outside_advice
from runtime_probe.reporting.findings import error
from runtime_probe.reporting.report import format_finding

_TAIL = (
    "The error above occurred when calling torch.export.export. If you would like to view some more information about this "
    "error, and get a list of all other errors that may occur in your export call, you can replace your `export()` call with "
    "`draft_export()`."
)

# models.py:groups8 (x.reshape(b, -1, 8)) exported with x:1 = Dim("seq", min=8, max=64)
MULTIPLE_OF_8 = f"""Constraints violated (seq)! For more information, run with TORCH_LOGS="+dynamic".
  - Not all values of seq = L['x'].size()[1] in the specified range 8 <= seq <= 64 satisfy the generated guard ((2*L['x'].size()[1]) % 16) == 0.
  - Not all values of seq = L['x'].size()[1] in the specified range 8 <= seq <= 64 satisfy the generated guard (L['x'].size()[1] // 8) != 1.
Suggested fixes:
  _seq = Dim('_seq', min=1, max=8)
  seq = 8*_seq
{_TAIL}"""

# the same model with min=8 and no maximum
MULTIPLE_OF_8_OPEN = MULTIPLE_OF_8.replace("min=1, max=8)", "min=1, max=oo)").replace("8 <= seq <= 64", "8 <= seq")

# a position_ids buffer of 128 sliced to the sequence length, ids:1 = Dim("seq", min=1, max=512)
POSITION_TABLE = f"""Constraints violated (seq)! For more information, run with TORCH_LOGS="+dynamic".
  - Not all values of seq = L['ids'].size()[1] in the specified range seq <= 512 satisfy the generated guard 2 <= L['ids'].size()[1] and L['ids'].size()[1] <= 128
Suggested fixes:
  seq = Dim('seq', max=128)
{_TAIL}"""

# an example batch of 1 with x:0 = Dim("batch", min=1, max=64); and x.reshape(4, 4) with a batch of 4
SPECIALIZED = """Constraints violated (batch)! For more information, run with TORCH_LOGS="+dynamic".
  - You marked batch as dynamic but your code specialized it to be a constant ({n}). If you're using mark_dynamic, either remove it or use maybe_mark_dynamic. If you're using Dim.DYNAMIC, replace it with either Dim.STATIC or Dim.AUTO.
Suggested fixes:
  batch = {n}
"""
# torch 2.11's sentence for the same thing (no "Suggested fixes:" block)
SPECIALIZED_OLD = (
    'Constraints violated (batch)! For more information, run with TORCH_LOGS="+dynamic".\n'
    "  - Not all values of batch = L['x'].size()[0] in the specified range batch <= 64 are valid because batch was inferred "
    "to be a constant (1).\n"
)

EQUAL = """Constraints violated (b)! For more information, run with TORCH_LOGS="+dynamic".
  - The values of b = L['y'].size()[1] and a = L['x'].size()[1] must always be equal.
Suggested fixes:
  b = a
"""
PLUS_ONE = """Constraints violated (a)! For more information, run with TORCH_LOGS="+dynamic".
  - The values of a = L['x'].size()[1] must always be related to the values of b = L['y'].size()[1] by a = b + 1.
Suggested fixes:
  a = b + 1
"""

DYNAMIC_CACHE = (
    "Found <class 'transformers.cache_utils.DynamicCache'> in output, which is not a known type. If this type holds tensors, "
    "you need to register a pytree for it. See https://github.com/pytorch/functorch/issues/475 for a brief explanation why. If "
    "you don't need to register a pytree, please leave a comment explaining your use case and we'll make this more ergonomic to deal with"
)


def test_the_suggested_fixes_block_is_read_as_torch_wrote_it() -> None:
    assert suggested_fixes(MULTIPLE_OF_8) == ["_seq = Dim('_seq', min=1, max=8)", "seq = 8*_seq"]
    assert suggested_fixes("Suggested fixes:\n\n  seq = Dim('seq', max=128)\nThe error") == ["seq = Dim('seq', max=128)"]  # a blank first
    assert suggested_fixes("Constraints violated (seq)! no suggestion here") == []
    fixes = parse_fixes(MULTIPLE_OF_8)
    assert fixes.ranges == {"_seq": (1, 8)} and fixes.relations == {"seq": (8, "_seq", 0)}
    assert fixes.sources == {"seq": ("x", 1)}
    assert parse_fixes(MULTIPLE_OF_8_OPEN).ranges == {"_seq": (1, None)}  # max=oo: no maximum
    assert parse_fixes(PLUS_ONE).relations == {"a": (1, "b", 1)}
    assert parse_fixes(SPECIALIZED.format(n=1)).constants == {"batch": 1}
    assert parse_fixes(SPECIALIZED_OLD).constants == {"batch": 1}
    # older torch wrote a specialisation as ``batch = None  # 10`` (its own test_export.py)
    assert parse_fixes("Suggested fixes:\n  batch = None  # 10\n").constants == {"batch": 10}


def test_a_multiple_of_8_gives_the_flag_for_the_asked_range_not_a_template() -> None:
    """Asked 8..64; torch: _seq in [1, 8], seq = 8*_seq. Today's template said 8*_seq:1..64 (8..512)."""
    advice = advise(MULTIPLE_OF_8, [Declared("x", 1, "seq", 8, 64, example=32)], from_flags=True)
    assert advice is not None
    assert advice.flags == ("x:1=8*_seq:1..8",)
    assert advice.code == "_seq = Dim('_seq', min=1, max=8); dynamic_shapes = {'x': {1: 8 * _seq}}"
    assert "--dynamic x:1=8*_seq:1..8" in advice.hint and "1..64" not in advice.hint
    assert "you asked 8..64; the model takes 8..64 in steps of 8" in advice.hint
    # asked 1..64 (torch gives the same _seq range): the hint says what the model takes instead
    wider = advise(MULTIPLE_OF_8, [Declared("x", 1, "seq", 1, 64)], from_flags=True)
    assert wider is not None and wider.flags == ("x:1=8*_seq:1..8",) and "you asked 1..64; the model takes 8..64" in wider.hint


def test_a_new_root_without_torchs_min_takes_it_from_the_asked_range() -> None:
    """torch leaves min=2 out of its suggestion: seq 16..64 gives _seq 2..8, and the other dims stay."""
    text = MULTIPLE_OF_8.replace("min=1, max=8)", "max=8)")
    dims = [Declared("x", 0, "batch", 1, 4), Declared("x", 1, "seq", 16, 64)]
    advice = advise(text, dims, from_flags=False)
    assert advice is not None and advice.flags == ("x:0=batch:1..4", "x:1=8*_seq:2..8")
    assert advice.hint.index("In the factory's dynamic_shapes:") < advice.hint.index("--dynamic")  # the factory's language first
    assert "batch = Dim('batch', min=1, max=4); _seq = Dim('_seq', min=2, max=8)" in (advice.code or "")
    open_max = advise(MULTIPLE_OF_8_OPEN, [Declared("x", 1, "seq", 8, None)], from_flags=True)
    assert open_max is not None and open_max.flags == ("x:1=8*_seq:1..",)


def test_a_range_beyond_the_position_table_is_narrowed_keeping_the_asked_minimum() -> None:
    dims = [Declared("ids", 0, "batch", 1, 8), Declared("ids", 1, "seq", 1, 512)]
    advice = advise(POSITION_TABLE, dims, from_flags=True)
    assert advice is not None and advice.flags == ("ids:0=batch:1..8", "ids:1=seq:1..128")
    assert "ids:1 (seq): you asked 1..512; the model takes 1..128" in advice.hint


def test_a_size_one_example_asks_for_an_example_of_two_and_keeps_the_range() -> None:
    advice = advise(SPECIALIZED.format(n=1), [Declared("x", 0, "batch", 1, 64, example=1)], from_flags=True)
    assert advice is not None
    assert "The example's x has size 1 at dim 0 (batch)" in advice.hint and "x.shape[0] >= 2" in advice.hint
    assert advice.flags == ("x:0=batch:1..64",)
    old = advise(SPECIALIZED_OLD, [Declared("x", 0, "batch", 1, 64, example=1)], from_flags=True)
    assert old is not None and "x.shape[0] >= 2" in old.hint


def test_a_size_the_code_fixes_is_made_static() -> None:
    advice = advise(SPECIALIZED.format(n=4), [Declared("x", 0, "batch", 1, 64, example=4)], from_flags=True)
    assert advice is not None and advice.flags == () and advice.code is None
    assert "The model's code fixes x:0 (batch) to 4" in advice.hint and "static" in advice.hint


def test_relations_tie_the_inputs_through_one_symbol() -> None:
    dims = [Declared("x", 1, "a", None, 64), Declared("y", 1, "b", None, 64)]
    equal = advise(EQUAL, dims, from_flags=True)
    assert equal is not None and equal.flags == ("x:1=a:..64", "y:1=a")
    assert "y:1 (b) is always a" in equal.hint
    dims = [Declared("x", 1, "a", None, 65), Declared("y", 1, "b", None, 64)]
    plus = advise(PLUS_ONE, dims, from_flags=True)
    assert plus is not None and plus.flags == ("x:1=b+1:..64", "y:1=b")  # the range is b's, the free symbol's
    assert plus.code == "b = Dim('b', max=64); dynamic_shapes = {'x': {1: b + 1}, 'y': {1: b}}"


def test_without_the_users_dims_the_message_names_the_input() -> None:
    text = MULTIPLE_OF_8.replace("min=1, max=8)", "min=1, max=64)")
    advice = advise(text)
    assert advice is not None and advice.flags == ("x:1=8*_seq:1..64",)  # torch's own range, on the input it names
    unplaced = advise(text.replace("seq = L['x'].size()[1]", "seq"))
    assert unplaced is not None and "--dynamic INPUT:DIM=8*_seq:1..64" in unplaced.hint
    assert advise("Constraints violated (seq)! For more information") is None


# a Mistral decoder with input_ids:0/1 declared and its attention_mask left static (torch 2.13)
MASK_PINS_SEQ = """Constraints violated (seq)! For more information, run with TORCH_LOGS="+dynamic".
  - You marked seq as dynamic but your code specialized it to be a constant (16). If you're using mark_dynamic, either remove it or use maybe_mark_dynamic. If you're using Dim.DYNAMIC, replace it with either Dim.STATIC or Dim.AUTO.
Suggested fixes:
  seq = 16
"""
IDS = [Declared("input_ids", 0, "batch", 1, 8, example=2), Declared("input_ids", 1, "seq", 1, 128, example=16)]


def test_a_dim_pinned_by_a_static_input_names_it_and_keeps_the_asked_range() -> None:
    """Issue 44, item 3: without the tie, the hint said to make input_ids:1 static."""
    assert pinned_by_a_tie(MASK_PINS_SEQ, IDS) == [IDS[1]]
    assert pinned_by_a_tie(SPECIALIZED.format(n=1), [Declared("x", 0, "batch", 1, 64, example=1)]) == []  # 0/1: torch's own rule
    ties = [Tie("attention_mask", 1, "seq", example=16), Tie("attention_mask", 0, "batch", example=2, proven=False)]
    advice = advise(MASK_PINS_SEQ, IDS, from_flags=True, ties=ties)
    assert advice is not None
    assert advice.flags == ("input_ids:0=batch:1..8", "input_ids:1=seq:1..128", "attention_mask:0=batch", "attention_mask:1=seq")
    assert (
        "torch.export pins input_ids:1 (seq) to 16 because the model's code ties it to attention_mask:1 (16 in the example), which "
        "you left static: declare it with the same symbol, --dynamic attention_mask:1=seq." in advice.hint
    )
    assert (
        "attention_mask:0 (2 in the example) has batch's example size" in advice.hint and "--dynamic attention_mask:0=batch" in advice.hint
    )
    assert "fixes input_ids:1" not in advice.hint and "static (no --dynamic" not in advice.hint
    assert advice.code == (
        "batch = Dim('batch', min=1, max=8); seq = Dim('seq', min=1, max=128); "
        "dynamic_shapes = {'input_ids': {0: batch, 1: seq}, 'attention_mask': {0: batch, 1: seq}}"
    )
    # a derived tie (labels = seq + 1) in the flag grammar; an unproven tie alone is not enough
    derived = advise(MASK_PINS_SEQ, IDS, from_flags=True, ties=[Tie("labels", 1, "seq", 1, 1, 17)])
    assert derived is not None and derived.flags[-1] == "labels:1=seq+1"
    alone = advise(MASK_PINS_SEQ, IDS, from_flags=True, ties=[Tie("attention_mask", 0, "batch", example=2, proven=False)])
    assert alone is not None and "The model's code fixes input_ids:1 (seq) to 16" in alone.hint


def test_an_example_outside_the_declared_range_gets_an_example_inside_and_a_range_around_it() -> None:
    """Issue 44, item 6: torch's "2 not in range [4, 8]" names neither the input nor the Dim."""
    text = "ConstraintViolationError: 2 not in range [4, 8]\n\nThe error above occurred when calling torch.export.export."
    dims = [
        Declared("x", 0, "batch", 4, 8, example=2),
        Declared("mask", 0, "batch", 4, 8, example=2),
        Declared("x", 1, "n", 1, 8, example=5),
    ]
    advice = example_outside_advice(text, dims, from_flags=True)
    assert advice is not None
    assert advice.hint.startswith("x:0 (batch): the example's size is 2, outside the range you declared, 4..8.")
    assert (
        "give an example inside it: x.shape[0] = 4, mask.shape[0] = 4 (the inputs that share batch); or widen the range to 2..8"
        in advice.hint
    )
    assert advice.flags == ("x:0=batch:2..8", "mask:0=batch", "x:1=n:1..8") and dict(advice.examples) == {"x:0": 4, "mask:0": 4}
    assert "build with: --dynamic x:0=batch:2..8 --dynamic mask:0=batch --dynamic x:1=n:1..8" in advice.hint
    # a derived size: 8*k with k in 1..4 and an example of 48 (k = 6): an example of 32, or k up to 6
    steps = example_outside_advice("48 not in range [8, 32]", [Declared("x", 1, "k", 1, 4, mul=8, example=48)])
    assert steps is not None and "outside the range you declared, 8..32 in steps of 8" in steps.hint and dict(steps.examples) == {"x:1": 32}
    assert steps.flags == ("x:1=8*k:1..6",) and steps.hint.index("in the factory") < steps.hint.index("--dynamic")
    # an example of 0 below a range from 0: the example asked is 2 (torch specializes 0 and 1)
    zero = example_outside_advice("0 not in range [2, 9]", [Declared("x", 0, "b", 2, 9, example=0)])
    assert zero is not None and dict(zero.examples) == {"x:0": 2}
    unplaced = example_outside_advice("3 not in range [4, 8]", [])
    assert unplaced is not None and "3, is outside the range 4..8" in unplaced.hint and not unplaced.flags
    assert example_outside_advice(MULTIPLE_OF_8, dims) is None


def test_library_types_get_their_recipe_or_their_name() -> None:
    cache = library_type_hint(DYNAMIC_CACHE)
    assert cache is not None
    assert "register_dynamic_cache_export_support()" in cache and "use_cache=False" in cache
    assert "transformers.cache_utils.DynamicCache" in cache
    old = library_type_hint(
        "It looks like one of the inputs with type `<class 'transformers.cache_utils.DynamicCache'>` is not supported or pytree-flattenable."
    )
    assert old is not None and "register_dynamic_cache_export_support()" in old and "use_cache" not in old
    other = library_type_hint("Found <class 'mylib.outputs.Detections'> in output, which is not a known type.")
    assert other is not None and "mylib.outputs.Detections" in other and "register_dynamic_cache" not in other
    assert library_type_hint("Unsupported: call_function") is None


def test_torchs_lines_are_shown_line_by_line_and_cannot_fake_a_report_line() -> None:
    f = error("build.export_failed", "export", "torch.export could not export M: UserError", found=MULTIPLE_OF_8, hint="h")
    text = format_finding(f)
    lines = text.splitlines()
    assert "\\x0a" not in text
    assert lines[1] == "        found:"
    assert "        | Suggested fixes:" in lines and "        |   seq = 8*_seq" in lines
    assert all(line.startswith("        | ") for line in lines[2:-1]) and lines[-1] == "        hint: h"
    single = format_finding(error("build.export_failed", "export", "m", expected="a", found="b"))
    assert single == "ERROR build.export_failed: m (expected a, found b)"

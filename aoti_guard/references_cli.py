"""``aoti-guard references``: the command line over aoti_guard/builder/weights_references.py.

Kept out of cli.py (already long); cli.py adds it to the group. Errors propagate to cli.main's one
handler (UsageError: exit 2, PackageRejected: 1, ToolError: 3).
"""

from __future__ import annotations

import click

from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.escaping import for_terminal

__all__ = ["references"]

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.command(context_settings=CONTEXT)
@click.argument("package", metavar="PACKAGE.pt2", type=click.Path(dir_okay=False))
@click.argument("target")
@click.option(
    "--weights",
    "weights",
    required=True,
    metavar="NEW.safetensors",
    type=click.Path(dir_okay=False),
    help="The new weights: a state_dict() or save_pretrained safetensors file (as probe --weights takes it).",
)
@click.option("-o", "--output", required=True, metavar="OUT.pt2", help="The package to write (must end in .pt2).")
def references(package: str, target: str, weights: str, output: str) -> None:
    """Make golden references for new weights against the same compiled PACKAGE, so that a weights
    rotation is validated, not just checked for NaN/Inf.

    \b
    TARGET is the factory PACKAGE was built from (file.py:func, module:func, or the saved program).
    Its model takes the new weights (checked as probe --weights checks them: names, dtypes,
    shapes, tied and non-persistent tensors), runs eager on PACKAGE's own golden inputs, on
    PACKAGE's device, and its outputs become the references of OUT.pt2: the same compiled code
    and entries, a new golden file, and a manifest with the new weights' digests and a record of
    where the references came from (golden.references). The tolerances stay the build's.

    \b
    A factory whose model is not PACKAGE's (a tensor missing or reshaped, other outputs) is
    refused (exit 2), as are weights that do not fit PACKAGE's constants. OUT.pt2 is unsigned:
    sign it with aoti-guard sign OUT.pt2 --key KEY.

    \b
      aoti-guard references model.pt2 model.py:make --weights new.safetensors -o model-new.pt2
      aoti-guard sign model-new.pt2 --key release.key
      aoti-guard probe model-new.pt2 --weights new.safetensors     (here, then on the target)

    \b
    The .so in OUT.pt2 still holds the build's weights: give the new ones at load (probe
    --weights, runtime_probe.load(..., weights=)); a probe without them says the outputs were not
    compared (constants.references_need_weights).
    """
    from aoti_guard.builder.weights_references import ReferencesRequest, make_references

    if not output.endswith(".pt2"):
        raise UsageError(f"output {output!r} does not end in .pt2", hint="torch's loader only opens files named *.pt2: use -o NAME.pt2")
    result = make_references(
        ReferencesRequest(package, target, weights, output), note=lambda step: click.echo(f"  {for_terminal(step)}", err=True)
    )
    click.echo(
        f"wrote {for_terminal(result.path)}: references for {for_terminal(result.references.weights)} on "
        f"{len(result.samples)} golden sample(s) ({', '.join(for_terminal(s) for s in result.samples)}), eager on "
        f"{result.device}; {result.constants} constant(s) take the new weights"
    )
    signed = (
        f" (PACKAGE was signed by {for_terminal(result.signed_by)}; its signature covers the old manifest only)" if result.signed_by else ""
    )
    click.echo(f"unsigned{signed}: sign it with aoti-guard sign {for_terminal(result.path)} --key KEY")
    click.echo(
        f"next: aoti-guard probe {for_terminal(result.path)} --weights {for_terminal(weights)} compares the outputs with these references"
    )

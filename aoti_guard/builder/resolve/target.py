"""Turning a TARGET string into a BuildSpec.

TARGET is ``path/to/file.py:func`` or ``package.module:func`` (``func()`` returns a BuildSpec or
``(model, args[, kwargs[, dynamic_shapes]])``), or a file saved with ``torch.export.save``.
"""

from __future__ import annotations

import os
import traceback
import zipfile
from typing import Any

from aoti_guard.spec import BuildSpec
from runtime_probe.reporting.errors import UsageError
from runtime_probe.runtime import user_modules

__all__ = ["FactoryError", "describe_exception", "factory_hint", "import_target_module", "resolve_target", "target_module"]


class FactoryError(Exception):
    """The user's factory (or the saved program) could not produce a model. Becomes a finding."""

    def __init__(self, message: str, detail: list[str], hint: str) -> None:
        super().__init__(message)
        self.detail = detail
        self.hint = hint


def describe_exception(exc: BaseException, *, limit: int = 12) -> list[str]:
    """The first useful lines of an exception: its message, then the innermost user frames."""
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    lines = [line for line in text if line.strip()][:limit]
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if "site-packages" not in f.filename and "/torch/" not in f.filename and "aoti_guard" not in f.filename]
    for f in own[-3:]:
        lines.append(f"  at {f.filename}:{f.lineno} in {f.name}")
    return lines


def _is_saved_program(path: str) -> bool:
    try:
        with zipfile.ZipFile(path) as zf:
            return any("/models/" in n or n.startswith("models/") for n in zf.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def resolve_target(target: str | None) -> BuildSpec:
    """Import/run the factory (or load the saved program) and return a BuildSpec.

    Raises:
        UsageError: the TARGET string is malformed or names something that does not exist.
        FactoryError: the factory raised or returned something unusable.
    """
    if target is None:
        from aoti_guard.builder.resolve.example import example_spec

        return example_spec()
    if os.path.isfile(target) and not target.endswith(".py"):
        return _load_saved_program(target)
    module_part, sep, func_name = target.rpartition(":")
    if not sep or not module_part or not func_name:
        if os.path.exists(target):
            raise UsageError(
                f"{target} is a Python file but names no function", hint=f"write {target}:FUNC, where FUNC() returns (model, args)"
            )
        raise UsageError(
            f"cannot read target {target!r}",
            hint="use path/to/file.py:func, package.module:func, or a file saved with torch.export.save",
        )
    module = import_target_module(module_part)
    factory = getattr(module, func_name, None)
    if factory is None:
        public = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
        raise UsageError(f"{module_part} has no function {func_name!r}", hint=f"callables there: {', '.join(public[:12]) or 'none'}")
    if not callable(factory):
        raise UsageError(f"{module_part}:{func_name} is not callable", hint="point TARGET at a function returning (model, args)")
    try:
        produced = factory()
    except Exception as exc:
        raise FactoryError(
            f"the factory {target} raised {type(exc).__name__}",
            describe_exception(exc),
            factory_hint(exc, "fix the factory; run it alone in Python to see the full traceback"),
        ) from exc
    return _to_spec(produced, target)


_DOWNLOAD_SIGNS = (
    "couldn't connect",
    "could not connect",
    "offline mode",
    "hf_hub_offline",
    "localentrynotfounderror",
    "cannot find the requested files in the local cache",
    "we couldn't connect",
    "failed to establish a new connection",
    "name or service not known",
    "temporary failure in name resolution",
    "urlopen error",
    "max retries exceeded",
    "is not a local folder and is not a valid model identifier",
)


def factory_hint(exc: BaseException, default: str) -> str:
    """What to do about a factory that raised: a download on an offline machine gets its own hint."""
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(chain) < 8:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    text = " ".join(f"{type(e).__name__}: {e}" for e in chain).lower()
    if any(sign in text for sign in _DOWNLOAD_SIGNS):
        return (
            "the factory tried to download weights or a config, and this machine cannot reach the hub: build the model from "
            "its config with random weights (transformers: Model(Config(...)) or AutoModel.from_config; timm: "
            "create_model(name, pretrained=False); torchvision: models.NAME(weights=None)), or load from a local folder "
            "(from_pretrained('/path/to/dir'), or HF_HUB_OFFLINE=1 with the files already in the cache)"
        )
    return default


def target_module(target: str | BuildSpec | None) -> str | None:
    """The module part of a factory TARGET, exactly as the user wrote it (``path/to/file.py`` or
    ``package.module``); None for the built-in example, a saved program or a BuildSpec."""
    if not isinstance(target, str) or (os.path.isfile(target) and not target.endswith(".py")):
        return None
    module_part, sep, func_name = target.rpartition(":")
    return module_part if sep and module_part and func_name else None


def import_target_module(module_part: str) -> Any:
    """Import a TARGET's module (a ``.py`` file or a dotted name) through the one rule the build's
    children and the probe's ``--import`` share (runtime_probe/runtime/user_modules.py).

    Raises:
        UsageError: no such file or module.
        FactoryError: importing it raised.
    """
    try:
        return user_modules.import_module(module_part)
    except FileNotFoundError:
        raise UsageError(f"no such file: {module_part}", hint="check the path before the ':'") from None
    except ModuleNotFoundError as exc:
        if not user_modules.is_file(module_part) and exc.name and module_part.startswith(exc.name):
            raise UsageError(f"no module named {module_part!r}", hint="install it, or give a file path (path/to/file.py:func)") from None
        raise FactoryError(
            f"importing {module_part} raised ModuleNotFoundError", describe_exception(exc), "install what the module imports"
        ) from exc
    except Exception as exc:
        raise FactoryError(
            f"importing {module_part} raised {type(exc).__name__}", describe_exception(exc), "fix the module so it imports cleanly"
        ) from exc


def _to_spec(produced: Any, target: str) -> BuildSpec:
    if isinstance(produced, BuildSpec):
        return produced
    if isinstance(produced, tuple) and 2 <= len(produced) <= 4:
        model, args, *rest = produced
        kwargs = rest[0] if rest else {}
        dynamic = rest[1] if len(rest) > 1 else None
        if not isinstance(args, tuple):
            args = (args,) if not isinstance(args, list) else tuple(args)
        if kwargs is None:
            kwargs = {}
        if not isinstance(kwargs, dict):
            raise FactoryError(
                f"{target} returned kwargs of type {type(kwargs).__name__}", [], "return (model, args, kwargs) with kwargs a dict"
            )
        return BuildSpec(model, args, kwargs, dynamic)
    raise FactoryError(
        f"{target} returned {type(produced).__name__}, not a model with example inputs",
        [repr(produced)[:200]],
        "return a BuildSpec, or (model, args), (model, args, kwargs) or (model, args, kwargs, dynamic_shapes)",
    )


def _load_saved_program(path: str) -> BuildSpec:
    if not _is_saved_program(path):
        raise UsageError(
            f"{path} is not a saved ExportedProgram",
            hint="an ExportedProgram file comes from torch.export.save; an AOTI package (.pt2 with data/aotinductor) cannot be rebuilt",
        )
    from aoti_guard.builder.resolve.saved_program import load_program

    try:
        ep = load_program(path)  # UnsafeProgram (a UsageError) for a file that holds code: it passes
    except UsageError:
        raise
    except Exception as exc:
        raise FactoryError(
            f"torch.export.load({path}) raised {type(exc).__name__}",
            describe_exception(exc),
            "save it again with the torch version you build with",
        ) from exc
    if ep.example_inputs is None:
        raise FactoryError(
            f"{path} has no example inputs", [], "export with example inputs (torch.export.export(model, args)) and save again"
        )
    args, kwargs = ep.example_inputs
    name = os.path.splitext(os.path.basename(path))[0]
    return BuildSpec(ep, tuple(args), dict(kwargs), None, name=name)

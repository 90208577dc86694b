"""torch's serialized pytree specs (``treespec_dumps``), read without the libraries that made them.

A package records its call structure as two JSON treespecs. A node's ``type`` is the name its
library registered (``transformers.modeling_outputs.BaseModelOutputWithPooling``,
``collections.namedtuple`` ...). ``torch.utils._pytree.treespec_loads`` refuses a spec whose types
are not registered in this process, i.e. whose library was never imported: the case of a serving
process (or a validation child) that does not import transformers. So:

- ``type_names`` lists the library types a spec names (standard library only);
- ``load`` imports the module of each such type, best effort, then calls ``treespec_loads``, and
  returns None when the spec still cannot be rebuilt: the caller then works on the flat leaves.
"""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

__all__ = ["load", "type_names"]

# Types torch itself registers (and ``None`` for a leaf): nothing to import for them.
_BUILTIN = {
    "builtins.tuple",
    "builtins.list",
    "builtins.dict",
    "collections.OrderedDict",
    "collections.defaultdict",
    "collections.deque",
    "collections.namedtuple",
    "torch.fx.immutable_collections.immutable_list",
    "torch.fx.immutable_collections.immutable_dict",
}
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_MAX_SPEC_CHARS = 4 * 1024 * 1024


def type_names(spec: str) -> list[str]:
    """The non-builtin node types named in a serialized treespec, in first-seen order.

    A spec that is not torch's JSON form gives an empty list (the caller's ``treespec_loads`` will
    say what is wrong with it).
    """
    if len(spec) > _MAX_SPEC_CHARS:
        return []
    try:
        protocol_and_root = json.loads(spec)
    except ValueError:
        return []
    if not (isinstance(protocol_and_root, list) and len(protocol_and_root) == 2):
        return []
    found: dict[str, None] = {}  # first-seen order; a list's ``in`` made 60,000 names take 40 s
    stack = [protocol_and_root[1]]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        name = node.get("type")
        if isinstance(name, str) and name not in _BUILTIN:
            found.setdefault(name)
        children = node.get("children_spec")
        if isinstance(children, list):
            stack.extend(reversed(children))
    return list(found)


def _import_owner(type_name: str) -> bool:
    """Import the longest importable module prefix of ``type_name`` (which registers the type)."""
    if not _DOTTED.match(type_name):
        return False
    parts = type_name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            importlib.import_module(".".join(parts[:cut]))
            return True
        except ImportError:
            continue
        except Exception:  # noqa: BLE001 - a library that fails to import is the same as one that is absent
            return False
    return False


def load(spec: str) -> Any:
    """``treespec_loads(spec)``, importing the libraries of its types first; None if it still fails."""
    from torch.utils import _pytree as pytree

    try:
        return pytree.treespec_loads(spec)
    except (NotImplementedError, KeyError, ValueError, TypeError):
        pass
    for name in type_names(spec):
        _import_owner(name)
    try:
        return pytree.treespec_loads(spec)
    except (NotImplementedError, KeyError, ValueError, TypeError):
        return None

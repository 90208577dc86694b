"""Where aoti-guard puts things inside a .pt2 (paths relative to the archive's root folder).

torch's loader scans ``data/aotinductor/<model>/`` and loads every model it finds there, and reads
``extra/*`` as UTF-8 text. So the manifest (text) lives under ``extra/`` (torch's ``load_pt2``
returns it in ``extra_files``), while binary payloads and the debug twin live under
``aoti_guard/``, which torch never opens: a plain ``aoti_load_package`` pays nothing for them
(measured: a 200 MB entry there adds 0.07 s and no memory to a load; a twin under
``data/aotinductor/`` would be loaded too, doubling the weights in memory).
"""

from __future__ import annotations

from collections.abc import Iterable

RELEASE_MODEL = "model"
TWIN_MODEL = "debug_twin"

MANIFEST = "extra/aoti_guard/manifest.json"
SIGNATURE = "extra/aoti_guard/manifest.sig"
GOLDEN = "aoti_guard/golden.safetensors"
# a package without weights (package_constants_in_so=False): the values of its constants that no
# checkpoint holds (non-persistent buffers, lifted tensor constants), so a state_dict() file completes it
KEPT_CONSTANTS = "aoti_guard/kept_constants.safetensors"
TWIN_DIR = "aoti_guard/twin/"
AOTI_DIR = "data/aotinductor/"

# Entries the manifest does not hash: the manifest itself and its detached signature.
UNHASHED = frozenset({MANIFEST, SIGNATURE})

# torch's archive markers; copied into the temporary package the twin is loaded from.
TORCH_MARKERS = ("archive_format", "archive_version", "byteorder", ".data/version", ".data/serialization_id")


def model_dir(model_name: str) -> str:
    return f"{AOTI_DIR}{model_name}/"


def model_library(names: Iterable[str]) -> str | None:
    """Which of a model folder's entries is its shared library: the ``.wrapper.so`` (AOTI's name
    for the model's .so) where there is one, else the first ``.so``; None without any."""
    libraries = [n for n in names if n.endswith(".so")]
    return next((n for n in libraries if n.endswith(".wrapper.so")), libraries[0] if libraries else None)

"""The weights files users have, for the tiny Qwen2 of tests/zoo/checkpoint_models.py (tied
embeddings, a rotary inv_freq buffer): state_dict() (cloned: safetensors refuses shared tensors),
save_pretrained's model.safetensors (no lm_head.weight, no inv_freq), and a NEW checkpoint (the
same names, other values). Used by scripts/gpu/checkpoint_weights.sh (issue 43).
    python scripts/gpu/checkpoint_files.py OUT_DIR"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from safetensors.torch import save_file

from tests.zoo.checkpoint_models import model

out = sys.argv[1]
m = model()
save_file({k: v.detach().clone().contiguous() for k, v in m.state_dict().items()}, os.path.join(out, "state_dict.safetensors"))
m.save_pretrained(os.path.join(out, "pretrained"))
new = {k: (v.detach().clone() * 1.01).contiguous() for k, v in m.state_dict().items()}
save_file(new, os.path.join(out, "new.safetensors"))
print("written:", sorted(os.listdir(out)))

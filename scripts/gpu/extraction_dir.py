"""Where this torch's loader extracts a package, and whether it removes it: a tiny model compiled
with torch alone, loaded in a child with TMPDIR set; the child lists TMPDIR and the new entries of
/tmp while the model is loaded and after it is deleted (tests/integration/test_worker.py assumes
TMPDIR/aotinductor_XXXXXX, removed when the model goes)."""

import os
import subprocess
import sys
import tempfile
import time

import torch


class Tiny(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.relu() + 1


CHILD = """
import glob, os, sys, time, torch
since = float(sys.argv[2])
def new_in_tmp():
    return sorted(p for p in glob.glob('/tmp/*') if os.stat(p).st_mtime >= since and 'extract-check' not in p)
m = torch._inductor.aoti_load_package(sys.argv[1])
print('loaded: TMPDIR holds', os.listdir(os.environ['TMPDIR']), '| new in /tmp:', new_in_tmp())
print('output', m(torch.ones(2, 3)).tolist())
del m
import gc; gc.collect()
print('deleted: TMPDIR holds', os.listdir(os.environ['TMPDIR']), '| new in /tmp:', new_in_tmp())
"""

work = tempfile.mkdtemp(prefix="extract-check-")
pkg = torch._inductor.aoti_compile_and_package(torch.export.export(Tiny(), (torch.randn(2, 3),)), package_path=f"{work}/m.pt2")
tmpdir = os.path.join(work, "tmp")
os.mkdir(tmpdir)
since = time.time()
proc = subprocess.run([sys.executable, "-c", CHILD, pkg, str(since)], env={**os.environ, "TMPDIR": tmpdir}, capture_output=True, text=True)
print(torch.__version__, "rc", proc.returncode)
print(proc.stdout)
print(proc.stderr[-2000:])

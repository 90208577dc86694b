"""What ``aoti-guard fleet report`` costs on the 1,000-node, 50-class plan of docs/fleet.md.

Writes N synthetic reports (a real probe report as the template: its size and shape, with the
host facts of 50 classes swapped in; 2 classes failing, 1% of the files cut off mid-write), then
times the command in a fresh process, as CI or a rollout gate would run it.

    python bench/fleet_report.py [--reports 1000] [--classes 50] TEMPLATE.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

GPUS = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA A10G", "NVIDIA H200"]
CAPS = {"NVIDIA H100 80GB HBM3": "90", "NVIDIA A100-SXM4-80GB": "80", "NVIDIA L40S": "89", "NVIDIA A10G": "86", "NVIDIA H200": "90"}


def make(template: dict, cls: int, node: str, fail: bool) -> dict:
    doc = copy.deepcopy(template)
    gpu = GPUS[cls % len(GPUS)]
    doc["host"].update(
        hostname=node,
        devices=[{"index": i, "name": gpu, "capability": CAPS[gpu], "total_memory": 80 << 30} for i in range(8)],
        driver={"version": f"{500 + 10 * (cls // len(GPUS))}.54.03", "cuda_version": "12.8"},  # 5 GPUs x 10 drivers: 50 classes
        torch=f"2.{9 + cls // 25}.0+cu128",
        libstdcxx=f"/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.{30 + cls // 10 % 2}",
    )
    doc["extra"]["device"] = "cuda"
    doc["extra"]["fleet"] = {"node": node}
    if fail:
        finding = {
            "code": "env.arch_mismatch",
            "severity": "error",
            "phase": "host",
            "message": "no kernel for sm_86",
            "expected": "sm_90",
            "found": "sm_86",
            "hint": "rebuild",
        }
        doc["phases"][1]["findings"] = [finding]
        doc["phases"][1]["status"] = "failed"
        doc["exit_code"], doc["passed"] = 1, False
    return doc


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("template", help="a probe's JSON report (python -m runtime_probe.node_check PKG > t.json)")
    p.add_argument("--reports", type=int, default=1000)
    p.add_argument("--classes", type=int, default=50)
    args = p.parse_args()
    with open(args.template, encoding="utf-8") as fh:
        template = json.load(fh)
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as d:
        folder = os.path.join(d, "reports")
        os.mkdir(folder)
        total = 0
        for i in range(args.reports):
            cls = i % args.classes
            text = json.dumps(make(template, cls, f"node{i:04d}", fail=cls in (3, 8)), indent=2)
            if i % 100 == 99:
                text = text[: len(text) // 2]  # a node died mid-write
            with open(os.path.join(folder, f"node{i:04d}.json"), "w", encoding="utf-8") as fh:
                fh.write(text)
            total += len(text)
        out = os.path.join(d, "fleet.json")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "aoti_guard", "fleet", "report", folder, "--json", out], capture_output=True, text=True
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(out, encoding="utf-8") as fh:
            counts = json.load(fh)["counts"]
    print(
        json.dumps(
            {
                "reports": args.reports,
                "classes": args.classes,
                "bytes_read": total,
                "exit_code": proc.returncode,
                "wall_s": round(wall, 2),
                "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
                "max_rss_mb": round(after.ru_maxrss / 1024, 1),
                "counts": counts,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

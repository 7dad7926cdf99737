"""Queue depth for sequential O_DIRECT reads on this host: 1 MiB reads through io_uring
(the catalog's disk_qd_read kernel) of a 32 MiB scratch file with 4, 8 and 16 in flight,
one thread, in adjacent 0.5 s windows: triples of the three depths, each triple in a rotated
order (4-8-16, 8-16-4, 16-4-8, ...), because on this virtio disk a variant's rate depended on
which one ran before it (two fixed orders gave opposite winners), so the disk's drift and the
order hit the three alike. The catalog's deep reader is `disk_seq_read_1m_qd16`.

Prints ONE JSON line: per depth the median / p10 / max GB/s, and in how many triples 8 beat
16 and 16 beat 4.

    python bench/reach_read_depth.py [--triples 12] [--scratch-dir /var/tmp]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mimesys.catalog import load_catalog  # noqa: E402
from mimesys.plan import Plan  # noqa: E402
from agentd.runner import RunnerConfig, WindowDone, start_runner  # noqa: E402

DEPTHS = (4, 8, 16)


def depth_catalog(path: Path):
    """The shipped catalog plus one experimental variant per depth (same kernel and file)."""
    text = (ROOT / "stressors" / "catalog.toml").read_text()
    for d in DEPTHS:
        text += (f'\n[[stressor]]\nname = "depth_read_qd{d}"\nkernel = "disk_qd_read"\nclass = "disk"\n'
                 f'description = "bench/reach_read_depth.py"\nparams = {{ file_bytes = 33554432, '
                 f'io_bytes = 1048576, depth = {d}, direct = true, random = false }}\n')
    path.write_text(text)
    return load_catalog(path)


async def run(triples: int, scratch: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        cat = depth_catalog(Path(d) / "catalog.toml")
    idx = [cat.index(f"depth_read_qd{d}") for d in DEPTHS]
    order = [idx[(i + j) % 3] for i in range(triples) for j in range(3)]
    a = np.zeros((len(order), len(cat), 2), np.float32)
    for t, m in enumerate(order):
        a[t, m, 0] = 1.0
    plan = Plan.from_catalog(a, cat, window_s=0.5)
    h = await start_runner(plan, RunnerConfig(cpus=(0, 1), scratch_dir=scratch), catalog=cat)
    rates = {m: [] for m in idx}
    async for ev in h.events():
        if isinstance(ev, WindowDone):
            m = order[ev.window]
            rates[m].append(ev.bytes[m, 0] / (ev.ran_ns[m, 0] / 1e9) / 1e9)
    ex = await h.wait()
    if not ex.ok:
        raise SystemExit(f"runner: {ex.status} {ex.detail}")
    out = {"bench": "reach_read_depth", "triples": triples, "window_s": 0.5}
    for d, m in zip(DEPTHS, idx):
        r = np.asarray(rates[m])
        out[f"qd{d}_GBps"] = {"median": round(float(np.median(r)), 3), "p10": round(float(np.percentile(r, 10)), 3),
                              "max": round(float(r.max()), 3)}
    r4, r8, r16 = (np.asarray(rates[m]) for m in idx)
    out["qd8_beats_qd16"] = f"{int((r8 > r16).sum())} of {len(r8)}"
    out["qd16_beats_qd4"] = f"{int((r16 > r4).sum())} of {len(r4)}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triples", type=int, default=12)
    ap.add_argument("--scratch-dir", default="/var/tmp")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(run(args.triples, args.scratch_dir))))


if __name__ == "__main__":
    main()

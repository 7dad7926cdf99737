"""Structure-aware fuzz of the trace importers (issue 41): seed files of every format (a CSV of each
time column, an Alibaba and a Bitbrains file, a Prometheus answer, the real tacc_stats file in
../shared/traces when present) mutated line- and byte-wise by Hypothesis, each given to its
importer's `load` in this process. A mutated file must import or raise the import error naming the
file (TraceImportError / ValidationError): any other exception is a failure (the traceback a user
would see). Prints one JSON line: cases per format, outcomes, failures, this process's peak RSS.

    python bench/importer_fuzz.py --minutes 30 --out bench/results/hardening/importer_fuzz.json
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.importers import get  # noqa: E402
from mimesys.errors import ValidationError  # noqa: E402

TACC = ROOT.parent / "shared" / "traces" / "stats-num_vms_1_7.txt"


def seeds() -> dict[str, bytes]:
    prom = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "node_cpu_seconds_total", "cpu": str(c), "mode": m, "instance": "h"},
         "values": [[1000 + i, str(i * (0.7 if m == "user" else 0.3))] for i in range(6)]}
        for c in range(2) for m in ("user", "idle")] + [
        {"metric": {"__name__": "node_disk_read_bytes_total", "device": "vda", "instance": "h"},
         "values": [[1000 + i, str(i * 4096)] for i in range(6)]}]}}
    out = {
        "csv": b"timestamp,cpu.util.core0,cpu.util,disk.read_Bps\n0,0.5,0.5,100\n1.5,0.25,0.3,\n3,nan,0.1,2e3\n4,1,1,0\n",
        "csv_window": b"window,start_s,cpu.util,net.lo.rx_Bps\n0,0,0.1,10\n1,1,0.2,20\n2,2,0.3,30\n",
        "alibaba": b"m_1,0,10,50,3,1.2,5,6,7\nm_1,10,20,51,3,1.1,5,6,8\nm_1,20,101,52,-1,1.0,5,6,9\nm_1,30,40,53,3,1.3,5,6,7\n",
        "bitbrains": (b"Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\tCPU usage [%];\t"
                      b"Memory capacity provisioned [KB];\tMemory usage [KB];\tDisk read throughput [KB/s];\t"
                      b"Disk write throughput [KB/s];\tNetwork received throughput [KB/s];\t"
                      b"Network transmitted throughput [KB/s]\n"
                      + b"".join(b"%d;\t2;\t5000;\t%d;\t%d;\t4194304;\t%d;\t1;\t2;\t3;\t4\n" % (1376314846 + 300 * i, 100 * i, i, 1000 * i)
                                 for i in range(5))),
        "prometheus": json.dumps(prom).encode(),
    }
    if TACC.is_file():
        # its header, schemas and the first 12 records (a record starts with a timestamp line)
        lines = TACC.read_bytes().splitlines(keepends=True)
        starts = [i for i, x in enumerate(lines) if x[:1].isdigit()]
        out["tacc_stats"] = b"".join(lines[:starts[12]] if len(starts) > 12 else lines)
    return out


FORMAT_OF = {"csv": "csv", "csv_window": "csv", "alibaba": "alibaba", "bitbrains": "bitbrains",
             "prometheus": "prometheus", "tacc_stats": "tacc_stats"}
TOKENS = [b"nan", b"-1", b"1e308", b"-1e308", b"inf", b"0", b"", b"\xff\xfe", b"\x00", b"9" * 40, b"1e-320",
          b"[", b"]", b"{", b"}", b'"', b",", b";", b"\n", b"\r", b"\t", b"\xc2\xb2", b"\\u0000", b"[[[[[[[[[["]


@st.composite
def mutated(draw, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        if not b:
            b += draw(st.sampled_from(TOKENS))
            continue
        i = draw(st.integers(0, len(b) - 1))
        op = draw(st.integers(0, 5))
        if op == 0:
            b[i] = draw(st.integers(0, 255))
        elif op == 1:
            b[i:i] = draw(st.sampled_from(TOKENS))
        elif op == 2:
            del b[i:i + draw(st.integers(1, 40))]
        elif op == 3:      # a line repeated (more rows, more columns)
            j = b.rfind(b"\n", 0, i) + 1
            k = b.find(b"\n", i)
            k = len(b) if k < 0 else k + 1
            b[k:k] = b[j:k] * draw(st.integers(1, 30))
        elif op == 4:      # a number replaced
            j = i
            while j < len(b) and chr(b[j]).isdigit():
                j += 1
            b[i:j] = draw(st.sampled_from(TOKENS))
        else:              # cut the file
            del b[i:]
    return bytes(b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--examples", type=int, default=200, help="per format and round")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    outcomes: Counter = Counter()
    failures: list[str] = []
    t0 = time.monotonic()
    rounds = 0
    with tempfile.TemporaryDirectory(prefix="mimesys-ifuzz-") as d:
        path = Path(d) / "input"
        for name, seed in seeds().items():        # every seed imports as it is
            path.write_bytes(seed)
            get(FORMAT_OF[name]).load(path)

        def one(name: str, data: bytes) -> None:
            path.write_bytes(data)
            try:
                get(FORMAT_OF[name]).load(path)
                outcomes[f"{name}:imported"] += 1
            except ValidationError:
                outcomes[f"{name}:refused"] += 1
            except Exception as e:  # noqa: BLE001 - what the fuzz looks for
                outcomes[f"{name}:FAILED"] += 1
                failures.append(f"{name}: {type(e).__name__}: {e}\n{traceback.format_exc()[-600:]}")

        common = settings(max_examples=args.examples, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))
        def fuzzer(name: str, seed: bytes):
            @common
            @given(mutated(seed))
            def fn(data):
                one(name, data)
            return fn
        fns = [fuzzer(name, seed) for name, seed in seeds().items()]
        while True:
            for fn in fns:
                fn()
            rounds += 1
            if time.monotonic() - t0 >= args.minutes * 60:
                break
    result = {"bench": "importer_fuzz", "minutes": round((time.monotonic() - t0) / 60, 2), "rounds": rounds,
              "cases": sum(outcomes.values()), "outcomes": dict(sorted(outcomes.items())),
              "tracebacks": len(failures), "first_failures": failures[:5],
              "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
              "tacc_seed": TACC.is_file()}
    line = json.dumps(result)
    print(line)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(line + "\n")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

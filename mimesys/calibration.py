"""The calibration file: what each stressor achieved on a host and the host's own peaks.

`mimesys-agent calibrate` measures it (agentd/calibrator.py) into <state_dir>/calibration.json; the
agent's /v1/info shows it and the controller reads it (importers' capacity normalisation,
the forward model's fit).

File (JSON)::

    {"format": "mimesys.calibration", "schema_version": 1, "created": ISO-8601,
     "catalog_hash": ..., "window_s": ..., "cpus": [...], "host": {...},
     "stressors": {name: {"class": ..., "one_thread": {"ops_per_s", "bytes_per_s", "ran_s",
                          "cpu_fraction"}, "all_threads": {... , "threads"} | null,
                          "segment": {"window_s", "short_s", "long_s", "short_bytes", "long_bytes",
                                      "bytes_per_s", "dead_s", "pairs"} (disk stressors),
                          "note": "...", "unavailable": "why (this host cannot run it)"}},
     "peaks": {"mem.bw_Bps", "cache.bw_Bps", "disk.read_Bps", "disk.write_Bps", "net.tx_Bps", "net.rx_Bps"},
     "notes": {name: text},
     # with probes (`calibrate` does them by default):
     "host_peaks": {"disk.read_Bps", "disk.write_Bps", "disk.read_iops", "disk.write_iops",
                    "net.lo_Bps", "mem.bw_Bps"},  # measured by code that is not a catalog kernel
     "host_peaks_method": {metric: how, or why it is missing},
     "reach": {metric: fraction}, "reach_pairs": {metric: [catalog best / probe peak, ...]},
     "catalog_best": {metric: {value, stressor, threads}}}

`peaks` is what the catalog reached (bounds of what plans can do); `host_peaks` is the
host's capacity (what foreign traces are scaled to: capacity_peaks). A gap in the catalog
shows as a reach well below 1 instead of hiding in a lower `peaks`.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import ValidationError
from .fsutil import atomic_write_text

FORMAT = "mimesys.calibration"
SCHEMA_VERSION = 1
# host_peaks keys → the metric names a trace carries, for capacity normalization
PEAK_METRICS = {"disk.read_Bps": ("disk.read_Bps",), "disk.write_Bps": ("disk.write_Bps",),
                "disk.read_iops": ("disk.read_iops",), "disk.write_iops": ("disk.write_iops",),
                "net.lo_Bps": ("net.lo.rx_Bps", "net.lo.tx_Bps"), "mem.bw_Bps": ("mem.bw_Bps",)}


def capacity_peaks(doc: dict) -> dict:
    """The host's capacity per metric name, for scaling foreign traces: the independent
    host peaks where measured, else what the catalog reached (older calibrations). Where a
    catalog stressor went past the probe (reach > 1) the probe understated the host, and the
    higher figure is the capacity: the host did reach it."""
    out = dict(doc.get("peaks") or {})
    best = doc.get("catalog_best") or {}
    for key, value in (doc.get("host_peaks") or {}).items():
        value = max(value, float((best.get(key) or {}).get("value") or 0.0))
        for metric in PEAK_METRICS.get(key, (key,)):
            out[metric] = value
    return out


def segment_dead_s(doc: dict) -> dict[str, float]:
    """Per stressor, the seconds each of its segments moves nothing (`segment.dead_s`, measured
    for the disk stressors: agentd/calibrator.py), where the file has a usable figure."""
    out = {}
    for name, entry in (doc.get("stressors") or {}).items():
        dead = ((entry or {}).get("segment") or {}).get("dead_s") if isinstance(entry, dict) else None
        if isinstance(dead, (int, float)) and not isinstance(dead, bool) and 0.0 <= dead < 1.0:
            out[name] = float(dead)
    return out


def write(doc: dict, path: Path | str) -> None:
    """Atomic write (temporary file + rename)."""
    # Unique temp + fsync (mimesys.fsutil): calibrate runs as root in a directory mimesys may own.
    atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")


def read(path: Path | str) -> dict:
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        raise ValidationError(f"{path}: cannot read calibration: {e}") from e
    except ValueError as e:
        raise ValidationError(f"{path}: not JSON: {e}") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValidationError(f"{path}: not a mimesys calibration file (format={doc.get('format') if isinstance(doc, dict) else None!r})")
    version = doc.get("schema_version")
    if not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
        raise ValidationError(f"{path}: calibration schema_version {version!r} not supported (1..{SCHEMA_VERSION})")
    for key in ("stressors", "peaks"):
        if not isinstance(doc.get(key), dict):
            raise ValidationError(f"{path}: missing or malformed {key!r}")
    return doc

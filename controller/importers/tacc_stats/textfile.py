"""A tacc_stats / hpcperfstats raw text file read into its header, schemas and records, with
the line of the first thing that is not what the format says.

File layout (both versions)::

    $tacc_stats 2.3.5                  header: `$key value` lines
    !cpu user,E,U=cs nice,E,U=cs ...   schema: one `!type` line per type; each field is
                                       `name[,attr...]`: E = event (cumulative counter),
                                       C = control register, W=<bits> = counter width
                                       (wraps at 2^W), U=<unit> (e.g. 512B, KB, cs)
    <blank>
    1764551783.244789 0 node12...      record: `timestamp jobid [hostname]`
    %begin -                           mark lines (ignored)
    cpu 11 3368187 2 178556 ...        data: `type device value...` in schema order
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..base import TraceImportError, read_maybe_gzip

_KNOWN_HEADERS = ("tacc_stats", "hpcperfstats")


@dataclass(frozen=True)
class SchemaField:
    name: str
    event: bool = False
    control: bool = False
    width: int | None = None
    unit: str | None = None

    @property
    def unit_bytes(self) -> int:
        """Bytes per count for byte-like units (512B, KB, 4B, B); 1 otherwise."""
        m = re.fullmatch(r"(\d*)([KMG]?)B", self.unit or "", flags=re.IGNORECASE)
        if not m:
            return 1
        mult = int(m.group(1) or 1)
        return mult * {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}[m.group(2).upper()]


@dataclass
class TypeSchema:
    name: str
    fields: list[SchemaField]
    line: int

    def index(self, key: str) -> int | None:
        for i, f in enumerate(self.fields):
            if f.name == key:
                return i
        return None


@dataclass
class Record:
    timestamp: float
    line: int
    host: str
    # type -> device -> (values, line number)
    data: dict[str, dict[str, tuple[list[int], int]]] = field(default_factory=lambda: defaultdict(dict))


@dataclass
class TaccStatsFile:
    path: str
    version: str
    header: dict[str, str]
    schemas: dict[str, TypeSchema]
    records: list[Record]


def parse_schema_line(text: str, path, lineno: int) -> TypeSchema:
    parts = text[1:].split()
    if len(parts) < 2:
        raise TraceImportError(path, f"schema line {text!r} declares no fields", line=lineno,
                               expected="`!type field[,attr...] ...`")
    fields = []
    for spec in parts[1:]:
        name, *attrs = spec.split(",")
        event = control = False
        width = unit = None
        for a in attrs:
            if a == "E":
                event = True
            elif a == "C":
                control = True
            elif a.startswith("W="):
                try:
                    width = int(a[2:])
                except ValueError:
                    raise TraceImportError(path, f"counter width {a!r} of field {name!r} is not a number",
                                           line=lineno, expected="W=<bits>") from None
                if not 1 <= width <= 64:
                    raise TraceImportError(path, f"counter width {width} of field {name!r} outside 1..64", line=lineno)
            elif a.startswith("U="):
                unit = a[2:]
            else:
                raise TraceImportError(path, f"unknown attribute {a!r} of field {name!r}", line=lineno,
                                       expected="E, C, W=<bits> or U=<unit>")
        fields.append(SchemaField(name, event, control, width, unit))
    return TypeSchema(parts[0], fields, lineno)


def parse_file(path: Path | str) -> TaccStatsFile:
    """Read the whole file into header, schemas and records; raise TraceImportError naming the
    line of the first thing that is not what the format says."""
    path = Path(path)
    raw = read_maybe_gzip(path)   # archived stats files are usually gzipped; bounded
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise TraceImportError(path, f"not a text file: {e}") from None
    except (OSError, EOFError) as e:
        raise TraceImportError(path, f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    header: dict[str, str] = {}
    schemas: dict[str, TypeSchema] = {}
    records: list[Record] = []
    version = ""
    cur: Record | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("%"):
            continue
        if lineno == 1 or not version:
            if not line.startswith("$") or line[1:].split()[0] not in _KNOWN_HEADERS:
                raise TraceImportError(path, f"first line is {line[:60]!r}", line=lineno,
                                       expected="a `$tacc_stats <version>` or `$hpcperfstats <version>` header")
        if line.startswith("$"):
            key, _, value = line[1:].partition(" ")
            header[key] = value.strip()
            if key in _KNOWN_HEADERS:
                version = f"{key} {value.strip()}"
            continue
        if line.startswith("!"):
            s = parse_schema_line(line, path, lineno)
            schemas[s.name] = s
            continue
        tokens = line.split()
        if re.fullmatch(r"\d+(\.\d*)?", tokens[0]):
            ts = float(tokens[0])
            if records and ts <= records[-1].timestamp:
                raise TraceImportError(path, f"record timestamp {tokens[0]} does not increase over "
                                       f"{records[-1].timestamp:.6f} (line {records[-1].line})", line=lineno,
                                       expected="records in time order")
            cur = Record(ts, lineno, tokens[2] if len(tokens) > 2 else "")
            records.append(cur)
            continue
        if cur is None:
            raise TraceImportError(path, f"data line {line[:60]!r} before any record", line=lineno,
                                   expected="a record line `timestamp jobid hostname` first")
        typ = tokens[0]
        schema = schemas.get(typ)
        if schema is None:
            raise TraceImportError(path, f"type {typ!r} has no schema line", line=lineno,
                                   expected=f"a `!{typ} ...` line in the header; declared: {', '.join(sorted(schemas))}")
        if len(tokens) < 2:
            raise TraceImportError(path, f"{typ} line has no device", line=lineno, expected="`type device value...`")
        dev, vals = tokens[1], tokens[2:]
        if len(vals) != len(schema.fields):
            raise TraceImportError(
                path, f"{typ} {dev}: {len(vals)} values", line=lineno,
                expected=f"{len(schema.fields)} values ({' '.join(f.name for f in schema.fields)}) as declared "
                         f"by the !{typ} schema line {schema.line}")
        try:
            ints = [int(v) for v in vals]
        except ValueError:
            bad = next(i for i, v in enumerate(vals) if not re.fullmatch(r"-?\d+", v))
            raise TraceImportError(path, f"{typ} {dev}: field {schema.fields[bad].name!r} is {vals[bad]!r}",
                                   line=lineno, expected="an integer") from None
        cur.data[typ][dev] = (ints, lineno)
    if not version:
        raise TraceImportError(path, "empty file", line=1, expected="a `$tacc_stats` or `$hpcperfstats` header")
    if len(records) < 2:
        raise TraceImportError(path, f"{len(records)} record(s); rates need at least two",
                               line=records[0].line if records else None)
    return TaccStatsFile(str(path), version, header, schemas, records)

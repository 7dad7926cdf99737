"""Every result a document cites is on the shelf (issue 44).

bench/results/<bench>/ keeps only what a document cites; this holds the other direction: each path
under bench/results/ that README.md, docs/, the bench READMEs, the results READMEs or a source
comment names exists, each relative link of those documents resolves, and each file a results
README names by its bare name (`fidelity.json`, `calibrate.png`) is there. A citation written as
`REV:bench/results/...` points into git history and is checked against git where there is one.
Also: no code under bench/results/ (experiments become benches under bench/ or leave the tree).
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

# An archive of superseded session READMEs: it names, on purpose, files that now live only in git
# history, and says so at its top with the revision that has them.
ARCHIVES = {"bench/results/fidelity/sessions.md"}

RESULT_EXT = r"(?:json|jsonl|png|csv|txt|md|h5|toml)"
PATH_RE = re.compile(r"(?:([0-9a-f]{7,40}):)?(bench/results/[A-Za-z0-9_./-]*)")
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
BARE_RE = re.compile(r"`([A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_.-]+)*\." + RESULT_EXT + r")`")
WRITES_RE = re.compile(r"(?:--out|--output|--png|-o|>)[ =]$")
CODE_EXT = {".py", ".sh", ".patch", ".c", ".h", ".ipynb"}


def _tracked(*pathspecs: str) -> list[Path]:
    if shutil.which("git") and (ROOT / ".git").exists():
        out = subprocess.run(["git", "ls-files", "-z", "--", *pathspecs], cwd=ROOT, capture_output=True)
        if out.returncode == 0:
            return [ROOT / p for p in out.stdout.decode().split("\0") if p and (ROOT / p).exists()]
    files = []
    for spec in pathspecs:
        files += [p for p in ROOT.glob(spec.replace(":(glob)", "")) if p.is_file()]
    return files


def _documents() -> list[Path]:
    return _tracked("README.md", ":(glob)docs/**/*.md", ":(glob)bench/**/*.md")


def _sources() -> list[Path]:
    specs = [f":(glob){d}/**/*{ext}" for d in ("mimesys", "agentd", "controller", "stressors", "packaging", "bench",
                                                 "tests") for ext in (".py", ".sh", ".c", ".h")]
    return _tracked(*specs, "Makefile")


def _in_git(rev: str, path: str) -> bool | None:
    if not (shutil.which("git") and (ROOT / ".git").exists()):
        return None
    out = subprocess.run(["git", "cat-file", "-e", f"{rev}:{path.rstrip('/')}"], cwd=ROOT, capture_output=True)
    return out.returncode == 0


def _ignored(paths: list[str]) -> set[str]:
    """Paths git ignores (`*.h5`: traces a README's commands record) are made locally, never shelved."""
    if not paths or not (shutil.which("git") and (ROOT / ".git").exists()):
        return set()
    out = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, input="\n".join(paths),
                         capture_output=True, text=True)
    return set(out.stdout.split())


def _cited_paths(path: Path) -> list[tuple[str | None, str]]:
    text = path.read_text(errors="replace")
    found = []
    for m in PATH_RE.finditer(text):
        rev, cited = m.group(1), m.group(2).rstrip(".,;:")
        nxt = text[m.end():m.end() + 1]
        if nxt and nxt in "<*{$":  # a pattern (`bench/results/model/quality_*.json`, `<name>.png`), not a file
            continue
        if WRITES_RE.search(text[max(0, m.start() - 12):m.start()]):  # where a command writes, not a citation
            continue
        found.append((rev, cited))
    return found


def test_every_cited_result_path_exists():
    missing = []
    for doc in _documents() + _sources():
        if doc.relative_to(ROOT).as_posix() in ARCHIVES:
            continue
        for rev, cited in _cited_paths(doc):
            if rev:
                if _in_git(rev, cited) is False:
                    missing.append(f"{doc.relative_to(ROOT)}: {rev}:{cited} (not in git)")
            elif not (ROOT / cited).exists():
                missing.append(f"{doc.relative_to(ROOT)}: {cited}")
    ignored = _ignored([m.split(": ", 1)[1] for m in missing])
    missing = [m for m in missing if m.split(": ", 1)[1] not in ignored]
    assert not missing, "cited but not on the shelf:\n" + "\n".join(missing)


def test_every_relative_link_of_the_documents_resolves():
    missing = []
    for doc in _documents():
        for target in LINK_RE.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (doc.parent / target.split("#", 1)[0]).exists():
                missing.append(f"{doc.relative_to(ROOT)}: {target}")
    assert not missing, "links that lead nowhere:\n" + "\n".join(missing)


def _resolves_from(readme: Path, name: str) -> bool:
    """A results README names a file relative to itself or to one of its parents up to bench/results/."""
    d = readme.parent
    while True:
        if (d / name).exists():
            return True
        if d == RESULTS or RESULTS not in d.parents:
            break
        d = d.parent
    return (ROOT / name).exists()


def test_every_file_a_results_readme_names_is_there():
    missing = []
    for doc in _documents():
        rel = doc.relative_to(ROOT).as_posix()
        if not rel.startswith("bench/results/") or rel in ARCHIVES:
            continue
        for name in BARE_RE.findall(doc.read_text()):
            if not _resolves_from(doc, name):
                missing.append(f"{rel}: {name}")
    assert not missing, "named by a results README but not there:\n" + "\n".join(missing)


def test_no_code_under_bench_results():
    if not RESULTS.is_dir():
        pytest.skip("no bench/results in this copy")
    code = [p.relative_to(ROOT).as_posix() for p in _tracked("bench/results") if p.suffix in CODE_EXT]
    assert not code, "code belongs under bench/ as a bench (or in git history), not beside results:\n" + "\n".join(code)

"""The shipping surface: Debian packaging metadata, the unit file, the README's two commands,
CI, and the demo's refusal to run with a part missing. The .deb itself is built and checked
by `make deb` + packaging/check-deb.sh (CI), installed by packaging/test-install.sh."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from importscan import absolute_imports

ROOT = Path(__file__).resolve().parent.parent
DEBIAN = ROOT / "packaging" / "debian"
UNIT = ROOT / "systemd" / "mimesys-agent.service"

# Third-party modules the agent imports -> how the package provides them.
DEBIAN_PROVIDES = {
    "numpy": "python3-numpy", "h5py": "python3-h5py", "msgpack": "python3-msgpack",
    "click": "python3-click", "pyroute2": "python3-pyroute2", "systemd": "python3-systemd",
    "tqdm": "python3-tqdm", "prometheus_client": "python3-prometheus-client",
    "cryptography": "python3-cryptography",
}
# Imported only inside a command that says what to install when it is missing (trace plot).
OPTIONAL = {"matplotlib": "python3-matplotlib"}
# Optional bindings Debian 12 main does not package: installed with pip where they matter (GPU
# hosts); the sampler reports the metric unsupported, naming the pip package, when it is missing.
OPTIONAL_PIP = {"pynvml": "nvidia-ml-py"}
VENDORED = {"onnxruntime": "onnxruntime", "aiohttp": "aiohttp"}


def deb822(path: Path) -> list[dict[str, str]]:
    """Paragraphs of a deb822 file (debian/control): fields, continuation lines joined."""
    paragraphs, cur, key = [], {}, None
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            if cur:
                paragraphs.append(cur)
            cur, key = {}, None
        elif line.startswith("#"):
            continue
        elif line[0] in " \t":
            assert key, f"{path}:{lineno}: continuation line before any field"
            cur[key] += "\n" + line.strip()
        else:
            m = re.match(r"([A-Za-z0-9][A-Za-z0-9-]*):\s*(.*)$", line)
            assert m, f"{path}:{lineno}: not a 'Field: value' line: {line!r}"
            key = m.group(1)
            assert key not in cur, f"{path}:{lineno}: field {key} repeated"
            cur[key] = m.group(2)
    if cur:
        paragraphs.append(cur)
    return paragraphs


def relations(value: str) -> set[str]:
    return {re.split(r"[\s(]", part.strip())[0] for part in value.split(",") if part.strip()}


def test_debian_control_parses_and_declares_the_agent_package():
    source, *binaries = deb822(DEBIAN / "control")
    assert source["Source"] == "mimesys"
    assert "debhelper-compat (= 13)" in source["Build-Depends"]
    assert {"dh-python", "pybuild-plugin-pyproject", "python3-all", "libzstd-dev"} <= relations(source["Build-Depends"])
    (agent,) = binaries
    assert agent["Package"] == "mimesys-agent"
    depends = relations(agent["Depends"])
    assert set(DEBIAN_PROVIDES.values()) | {"adduser"} <= depends
    assert not any("torch" in d or "onnxruntime" in d for d in depends), "no Debian package provides these"


def test_changelog_version_matches_the_agent_version():
    import mimesys

    first = (DEBIAN / "changelog").read_text().splitlines()[0]
    m = re.match(r"mimesys \(([^)]+)\) \S+; urgency=\w+$", first)
    assert m, f"debian/changelog first line malformed: {first!r}"
    assert m.group(1) == mimesys.__version__
    assert (DEBIAN / "source" / "format").read_text().strip() == "3.0 (native)"


def _third_party_imports(package: Path) -> dict[str, str]:
    """Top-level third-party module -> first file importing it (stdlib, agentd and mimesys excluded)."""
    found: dict[str, str] = {}
    for py, name in absolute_imports(package):
        top = name.split(".")[0]
        if top not in sys.stdlib_module_names and top not in ("agentd", "mimesys", "__future__"):
            found.setdefault(top, str(py.relative_to(ROOT)))
    return found


def test_every_agent_import_is_provided_by_the_package():
    """A module the agent imports that neither a Debian dependency nor a vendored wheel
    provides would make the installed agent fail at run time."""
    lock = (ROOT / "packaging" / "vendor-amd64.txt").read_text()
    vendored = {line.split("==")[0] for line in lock.splitlines() if line and not line.startswith("#")}
    depends = relations(deb822(DEBIAN / "control")[1]["Depends"])
    suggests = relations(deb822(DEBIAN / "control")[1].get("Suggests", ""))
    imports = {**_third_party_imports(ROOT / "mimesys"), **_third_party_imports(ROOT / "agentd")}   # the agent ships both
    for module, where in imports.items():
        if module in OPTIONAL:
            assert OPTIONAL[module] in suggests, f"{module} ({where}): {OPTIONAL[module]} not in Suggests"
            text = (ROOT / where).read_text()
            assert "except ImportError" in text, f"{where} must say what to install when {module} is missing"
        elif module in OPTIONAL_PIP:
            text = (ROOT / where).read_text()
            assert "except ImportError" in text and f"pip install {OPTIONAL_PIP[module]}" in text, \
                f"{where} must name `pip install {OPTIONAL_PIP[module]}` when {module} is missing"
        elif module in VENDORED:
            assert VENDORED[module] in vendored, f"{module} ({where}) is not in packaging/vendor-amd64.txt"
        else:
            assert module in DEBIAN_PROVIDES, f"{where} imports {module}: add it to debian/control and this map"
            assert DEBIAN_PROVIDES[module] in depends, f"{module} ({where}): {DEBIAN_PROVIDES[module]} not in Depends"


def test_vendor_lock_pins_every_wheel_by_version_and_hash():
    lines = [l for l in (ROOT / "packaging" / "vendor-amd64.txt").read_text().splitlines()
             if l.strip() and not l.startswith("#")]
    assert {"onnxruntime", "aiohttp"} <= {l.split("==")[0] for l in lines}
    for line in lines:
        assert re.fullmatch(r"[a-z0-9-]+==[\w.]+ --hash=sha256:[0-9a-f]{64}", line), line


def test_maintainer_scripts_are_valid_shell_with_the_debhelper_token():
    for name in ("mimesys-agent.postinst", "mimesys-agent.postrm"):
        script = DEBIAN / name
        assert "#DEBHELPER#" in script.read_text(), name
        out = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
        assert out.returncode == 0, f"{name}: {out.stderr}"
    postinst = (DEBIAN / "mimesys-agent.postinst").read_text()
    assert "adduser --quiet --system" in postinst and "chmod 0640" in postinst   # token: group mimesys reads it
    assert '"$STATE" 0750:runs 0750:scratch 0750:model 3770:replay' in postinst
    assert "rm -rf /var/lib/mimesys" in (DEBIAN / "mimesys-agent.postrm").read_text()
    for script in ("build-deb.sh", "check-deb.sh", "test-install.sh", "with-agent-bin.sh", "find-runner.sh"):
        out = subprocess.run(["bash", "-n", str(ROOT / "packaging" / script)], capture_output=True, text=True)
        assert out.returncode == 0, f"{script}: {out.stderr}"


def postinst_function(name: str) -> str:
    """One shell function of the postinst, to run alone (the rest of it changes the host)."""
    m = re.search(rf"^{name}\(\) {{.*?^}}$", (DEBIAN / "mimesys-agent.postinst").read_text(), re.S | re.M)
    assert m, f"no function {name} in the postinst"
    return m[0]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root (chown, setpriv)")
def test_postinst_state_dirs_follow_no_symlink_the_mimesys_user_planted():
    """Issue 41, finding 3: `ln -s /usr/lib/mimesys /var/lib/mimesys/model` by the mimesys user
    got root's runner directory chowned to mimesys at the next configure. Run here on a temporary
    state directory, a throwaway uid standing for mimesys."""
    import tempfile
    uid = gid = 64000 + os.getpid() % 1000
    top = Path(tempfile.mkdtemp(prefix="mimesys-postinst-"))   # root's, and mimesys may traverse it
    top.chmod(0o755)
    state, lib = top / "state", top / "lib"
    fn = postinst_function("state_dirs")

    def configure(state_dir=state):
        return subprocess.run(["sh", "-ec", fn + '\nstate_dirs "$@"', "sh", str(uid), str(gid), str(state_dir),
                               "0750:runs", "0750:scratch", "0750:model", "3770:replay"],
                              capture_output=True, text=True, timeout=30)

    def owner_mode(p: Path):
        st = p.lstat()
        return st.st_uid, st.st_gid, oct(st.st_mode & 0o7777)

    try:
        lib.mkdir(mode=0o755)
        (lib / "mimesys-runner").write_text("#!/bin/sh\n")
        r = configure()
        assert r.returncode == 0, r.stderr
        assert owner_mode(state) == (uid, gid, "0o750")
        for name, mode in (("runs", "0o750"), ("scratch", "0o750"), ("model", "0o750"), ("replay", "0o3770")):
            assert owner_mode(state / name) == (uid, gid, mode), name
        # the mimesys user plants a symlink to root's directory; root made runs/ by hand meanwhile
        (state / "model").rmdir()
        (state / "model").symlink_to(lib)
        os.lchown(state / "model", uid, gid)
        os.chown(state / "runs", 0, 0)
        r = configure()
        assert r.returncode == 0, r.stderr
        assert f"{state}/model is a symlink: left as it is, not followed" in r.stderr
        assert owner_mode(lib) == (0, 0, "0o755") and owner_mode(lib / "mimesys-runner")[:2] == (0, 0)
        assert owner_mode(state / "runs") == (uid, gid, "0o750")
        # the state directory itself: never through a symlink, nor in a parent root does not own
        state.rename(top / "moved")
        state.symlink_to(lib)
        r = configure()
        assert r.returncode != 0 and "is a symlink or its parent is not root's" in r.stderr
        os.chown(top / "moved", uid, gid)
        r = configure(top / "moved" / "state")
        assert r.returncode != 0 and "is a symlink or its parent is not root's" in r.stderr
        assert not (top / "moved" / "state").exists() and owner_mode(lib) == (0, 0, "0o755")
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed (make setup installs systemd)")
def test_unit_file_passes_systemd_analyze_verify():
    assert UNIT.is_file(), "systemd/mimesys-agent.service missing (agent daemon room)"
    if not Path("/usr/bin/mimesys-agent").exists() and os.geteuid() != 0:
        pytest.skip("needs root to overlay /usr/bin/mimesys-agent (or the package installed)")
    out = subprocess.run([str(ROOT / "packaging" / "with-agent-bin.sh"), "systemd-analyze", "verify", str(UNIT)],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    # verify prints warnings without failing; a hardened unit has none.
    assert "mimesys-agent.service" not in out.stderr, out.stderr


def test_readme_quickstart_is_exactly_the_two_make_targets():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```(?:sh|bash)?\n(.*?)```", quick, re.S).group(1)
    commands = [l.split("#")[0].strip() for l in block.splitlines() if l.split("#")[0].strip()]
    assert commands == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))
    assert {"demo", "test", "setup", "deb"} <= targets
    assert re.search(r"^demo: setup\n\t\$\(BIN\)/mimesys demo", makefile, re.M)
    # two phases over the whole of tests/ (issue 43): what does not measure the host in parallel,
    # then what does (marked serial) alone; both run, and the target fails if either fails
    recipe = re.search(r"^test: setup\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert re.search(r'\$\(BIN\)/python -m pytest .*-m "not serial" .*-n \$\(TEST_WORKERS\) .*tests \|\| rc=1', recipe)
    assert re.search(r"\$\(BIN\)/python -m pytest .*-m serial tests \|\| rc=1", recipe)
    assert recipe.rstrip().endswith("exit $$rc")


def test_ci_runs_the_readme_test_command_then_the_package_and_the_unit():
    lines = [l.strip() for l in (ROOT / ".ci" / "run").read_text().splitlines()
             if l.strip() and not l.lstrip().startswith(("#", "echo"))]
    steps = [l for l in lines if not l.startswith(("set ", "cd ", "export "))]
    assert steps == ["make test", "make deb", "packaging/check-deb.sh",
                     "packaging/with-agent-bin.sh systemd-analyze verify systemd/mimesys-agent.service",
                     "packaging/test-debian-python.sh",
                     "MIMESYS_BOOT_TEST=1 .venv/bin/python -m pytest -q tests/test_unit_boot.py"]
    out = subprocess.run(["bash", "-n", str(ROOT / "packaging" / "test-debian-python.sh")], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr


def test_demo_is_registered_and_refuses_to_run_with_a_part_missing():
    from click.testing import CliRunner

    from controller.cli import main
    from controller.commands import demo

    result = CliRunner().invoke(main, ["demo", "--help"])
    assert result.exit_code == 0, result.output
    missing = demo.missing_parts({**demo.REQUIRED_PARTS, "train": "controller.commands.no_such_module:train"})
    assert any("no_such_module" in m for m in missing)


def test_demo_never_replaces_a_directory_it_did_not_write(tmp_path):
    from controller.commands import demo

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(demo.DemoFailed, match="not a demo output"):
        demo._prepare_out(foreign, resume=False)
    assert (foreign / "notes.txt").read_text() == "keep me"

    out = tmp_path / "demo-out"
    demo._prepare_out(out, resume=False)
    (out / "campaign").mkdir()
    demo._prepare_out(out, resume=True)       # --resume keeps the previous output
    assert (out / "campaign").is_dir()
    demo._prepare_out(out, resume=False)      # a new demo replaces it
    assert not (out / "campaign").exists() and (out / demo.MARKER).is_file()


def test_demo_summary_reads_the_evaluation_csv(tmp_path, capsys):
    from controller.commands import demo

    (tmp_path / "results.csv").write_text(
        "trace,method,load_level,metric,dtw_normalized,scale,scale_from,reason\n"
        "app,model,low,cpu.util,0.100000,1,fraction,\n"
        "app,model,low,disk.write_Bps,0.300000,1e8,peak,\n"
        "app,nearest,low,cpu.util,0.500000,1,fraction,\n"
        "app,nearest,low,disk.write_Bps,,,,not measured\n")
    demo._print_results(tmp_path)
    out = capsys.readouterr().out
    model_line = next(l for l in out.splitlines() if l.strip().startswith("model"))
    assert model_line.split()[-1] == "0.200"            # mean over the scored metrics
    nearest_line = next(l for l in out.splitlines() if l.strip().startswith("nearest"))
    assert "nan" in nearest_line and nearest_line.split()[-1] == "0.500"
    with pytest.raises(demo.DemoFailed, match="results.csv"):
        demo._print_results(tmp_path / "missing")


@pytest.mark.skipif(not shutil.which("systemd-tmpfiles"), reason="systemd-tmpfiles not installed (make setup installs systemd)")
def test_tmpfiles_gives_group_mimesys_the_lock_and_the_replay_area(tmp_path):
    """systemd-tmpfiles applies the package's file under a throwaway root: root's /run/mimesys
    0755 (no member of the group can replace the lock in it), the lock root's 0660 of group
    mimesys, the replay area 3770 (setgid, sticky) (the group must exist: root's stands in if not)."""
    import grp
    text = (DEBIAN / "mimesys-agent.tmpfiles").read_text()
    try:
        grp.getgrnam("mimesys")
    except KeyError:
        text = text.replace("mimesys mimesys", "root root").replace("root mimesys", "root root")
    conf = tmp_path / "mimesys-agent.conf"
    conf.write_text(text)
    root = tmp_path / "root"
    (root / "var/lib/mimesys").mkdir(parents=True)
    (root / "run").mkdir()
    out = subprocess.run(["systemd-tmpfiles", "--create", f"--root={root}", str(conf)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert oct((root / "run/mimesys/run.lock").stat().st_mode & 0o7777) == "0o660"
    assert oct((root / "run/mimesys").stat().st_mode & 0o7777) == "0o755"
    assert (root / "run/mimesys").stat().st_uid == 0 and (root / "run/mimesys/run.lock").stat().st_uid == 0
    assert oct((root / "var/lib/mimesys/replay").stat().st_mode & 0o7777) == "0o3770"



def test_one_version_source():
    """mimesys/__init__.py holds the version; pyproject reads it, the controller re-exports it,
    and the Debian changelog's newest entry must name the same one."""
    import tomllib

    import controller
    import mimesys
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"] and "version" in meta["project"]["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "mimesys.__version__"}
    assert controller.__version__ is mimesys.__version__
    top = (DEBIAN / "changelog").read_text().splitlines()[0]
    assert re.match(r"mimesys \(([^)]+)\)", top)[1].split("-")[0] == mimesys.__version__, top


def test_lower_bounds_are_debian_12s():
    """The .deb runs on Debian 12's python3-* packages: pyproject may not ask for more."""
    import tomllib
    debian12 = {"numpy": "1.24", "h5py": "3.7", "msgpack": "1.0", "click": "8.1", "pyroute2": "0.7",
                "tqdm": "4.64", "prometheus-client": "0.16", "cryptography": "38"}
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = meta["project"]["dependencies"] + meta["project"]["optional-dependencies"]["controller"]
    for req in reqs:
        m = re.fullmatch(r"([A-Za-z0-9_-]+)>=([\d.]+)", req.strip())
        assert m, req
        if m[1] in debian12:
            have = tuple(int(x) for x in debian12[m[1]].split("."))
            want = tuple(int(x) for x in m[2].split("."))
            assert want <= have, f"{req}: Debian 12 has {m[1]} {debian12[m[1]]}"
    assert (ROOT / "constraints" / "controller.txt").read_text().count("==") > 20

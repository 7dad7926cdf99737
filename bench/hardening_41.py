"""Issue 41's findings, probed against a checkout: the agent and the CLIs run from `--checkout`
(default: this tree), so the same script gives the before (89c0562) and after columns. Prints one
JSON line (also written to --out): per probe what was sent, what came back, the agent's peak
resident memory over its idle level (VmHWM after clear_refs), /healthz latency during it.

The agent uses the simulated host backend (what is probed is the API, the readers and the run
journal, the same for every backend). Needs root (clear_refs, --run-as). The postinst finding is
checked by tests/test_packaging.py
(test_postinst_state_dirs_follow_no_symlink_the_mimesys_user_planted), not here.

    git worktree add /tmp/mimesys-89c0562 89c0562
    python bench/hardening_41.py --checkout /tmp/mimesys-89c0562 --journal-gib 1 --out before.json
    python bench/hardening_41.py --journal-gib 8 --out after.json
"""

from __future__ import annotations

import argparse
import http.server
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import h5py
import msgpack
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.hardening_agent import real_agent  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _catalog(root: Path) -> tuple[list[str], str]:
    out = subprocess.run([sys.executable, "-c", "import json; from mimesys.catalog import load_catalog; c = load_catalog(); "
                          "print(json.dumps([c.names, c.hash]))"], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                         capture_output=True, text=True, check=True)
    names, chash = json.loads(out.stdout)
    return names, chash


def _plan_file(names, chash, build, attrs=None) -> bytes:
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        build(f)
        f.attrs["format"] = "mimesys.plan"
        f.attrs["schema_version"] = 1
        f.attrs["catalog_hash"] = chash
        f.attrs["catalog_names"] = json.dumps(names)
        for k, v in (attrs or {}).items():
            f.attrs[k] = v
    return buf.getvalue()


def _hwm_reset(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")     # resets VmHWM to the current RSS


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return -1


class HealthProbe:
    """GET /healthz every 20 ms on a thread of its own while a probe runs: latencies in ms."""

    def __init__(self, url: str, token: str):
        self.url, self.token, self.ms, self._stop = url, token, [], threading.Event()

    def _run(self):
        req = urllib.request.Request(self.url + "/healthz", headers={"Authorization": f"Bearer {self.token}"})
        while not self._stop.is_set():
            t = time.perf_counter()
            try:
                urllib.request.urlopen(req, timeout=30).read()
                self.ms.append((time.perf_counter() - t) * 1e3)
            except Exception:
                self.ms.append(30_000.0)
            time.sleep(0.02)

    def __enter__(self):
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *a):
        self._stop.set()
        self._t.join()

    def summary(self) -> dict:
        a = np.asarray(self.ms or [np.nan])
        return {"healthz_n": len(self.ms), "healthz_p99_ms": round(float(np.percentile(a, 99)), 1),
                "healthz_max_ms": round(float(a.max()), 1)}


def _post(url: str, token: str, body: bytes, timeout: float = 300) -> tuple[int, str, float]:
    req = urllib.request.Request(url + "/v1/runs", data=body, method="POST",
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/msgpack"})
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    except Exception as e:  # noqa: BLE001 - a dead agent is a result too
        return -1, f"{type(e).__name__}: {e}", time.perf_counter() - t
    try:
        msg = str(msgpack.unpackb(raw).get("error") or msgpack.unpackb(raw))
    except Exception:
        msg = raw[:200].decode(errors="replace")
    return status, msg[:300], time.perf_counter() - t


def body_bombs(root: Path, work: Path) -> list[dict]:
    names, chash = _catalog(root)
    M = len(names)
    T = (32 << 20) // (M * 2)
    deep: dict = {}
    node = deep
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    good = np.zeros((1, M, 2), np.float32)
    bombs = {
        "u8_widening": msgpack.packb({"plan": _plan_file(names, chash, lambda f: f.create_dataset(
            "compositions", shape=(T, M, 2), dtype="u1", chunks=(min(T, 4096), M, 2)))}, use_bin_type=True),
        "chunk_bomb": msgpack.packb({"plan": _plan_file(names, chash, lambda f: f.create_dataset(
            "compositions", shape=(T // 4, M, 2), dtype="<f4", chunks=(1, 1, 1)))}, use_bin_type=True),
        "json_attribute": msgpack.packb({"plan": _plan_file(names, chash, lambda f: f.create_dataset(
            "compositions", data=good), attrs={"provenance": "[" + "[]," * 5_000_000 + "[]]"})}, use_bin_type=True),
        "deep_msgpack_provenance": msgpack.packb({"plan": {
            "compositions": {"shape": [1, M, 2], "dtype": "<f4", "bytes": good.tobytes()},
            "catalog_names": names, "catalog_hash": chash, "window_s": 0.05, "seed": 0, "provenance": deep},
            "options": {"record": True}}, use_bin_type=True),
    }
    out = []
    for name, body in bombs.items():      # an agent of its own each: one that a bomb kills stops no other probe
        with real_agent(work / f"bomb-{name}", speedup=0.0, root=root) as agent:
            time.sleep(1.0)
            idle = _status_kib(agent.proc.pid, "VmRSS")
            _hwm_reset(agent.proc.pid)
            with HealthProbe(agent.url, agent.token) as hp:
                time.sleep(0.2)
                status, msg, took = _post(agent.url, agent.token, body)
                time.sleep(0.5)
            alive = agent.proc.poll() is None
            row = {"probe": name, "body_bytes": len(body), "status": status, "answer": msg, "seconds": round(took, 3),
                   "agent_alive": alive, "rss_idle_mib": round(idle / 1024, 1),
                   "peak_over_idle_mib": round((_status_kib(agent.proc.pid, "VmHWM") - idle) / 1024, 1) if alive else None,
                   **hp.summary()}
            if not alive:
                row["agent_exit"] = agent.proc.returncode
                kern = subprocess.run(["dmesg"], capture_output=True, text=True).stdout.splitlines()
                row["oom_kill"] = next((x.strip() for x in reversed(kern) if f"Killed process {agent.proc.pid} " in x), None)
                row["agent_log_tail"] = (work / f"bomb-{name}" / "agent.log").read_text()[-300:]
            if alive and status == 201:     # accepted: how did the run it started end?
                run_id = re.search(r"\d{8}T\d{6}Z-[0-9a-f]{6}", msg).group(0)
                req = urllib.request.Request(agent.url + f"/v1/runs/{run_id}",
                                             headers={"Authorization": f"Bearer {agent.token}"})
                for _ in range(40):
                    st = msgpack.unpackb(urllib.request.urlopen(req, timeout=30).read())
                    if st.get("state") != "running":
                        break
                    time.sleep(0.5)
                row["run_end"] = {k: st.get(k) for k in ("state", "recorded", "error")}
            out.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return out


def planted_journal(root: Path, work: Path, gib: float) -> dict:
    """A sparse journal of `gib` GiB under a run the agent believes was interrupted."""
    w = work / "journal"
    with real_agent(w, speedup=0.0, root=root) as agent:
        req = urllib.request.Request(agent.url + "/v1/info", headers={"Authorization": f"Bearer {agent.token}"})
        n = len(msgpack.unpackb(urllib.request.urlopen(req, timeout=30).read())["schema"])
    rec = 8 + 4 * n
    windows = int(gib * (1 << 30)) // rec
    run_id = "20260101T000000Z-abcdef"
    d = w / "state" / "runs" / run_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "run.json").write_text(json.dumps({"run_id": run_id, "state": "running", "window_s": 1.0,
                                            "windows_total": windows, "windows_done": 0, "repetitions": 1}))
    with open(d / "windows.bin", "wb") as f:
        f.truncate(windows * rec)
    t0 = time.monotonic()
    row = {"probe": "planted_journal", "journal_bytes": windows * rec, "windows": windows}
    try:
        with real_agent(w, speedup=0.0, root=root) as agent:
            row["ready_s"] = round(time.monotonic() - t0, 2)
            peak, status = 0, {}
            req = urllib.request.Request(agent.url + f"/v1/runs/{run_id}", headers={"Authorization": f"Bearer {agent.token}"})
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline and agent.proc.poll() is None:
                peak = max(peak, _status_kib(agent.proc.pid, "VmHWM"))
                try:
                    status = msgpack.unpackb(urllib.request.urlopen(req, timeout=30).read())
                except Exception:  # noqa: BLE001
                    status = {}
                if status and not status.get("recovering") and status.get("state") != "running":
                    break
                time.sleep(0.5)
            peak = max(peak, _status_kib(agent.proc.pid, "VmHWM")) if agent.proc.poll() is None else peak
            row.update(recovered_s=round(time.monotonic() - t0, 1), peak_rss_mib=round(peak / 1024, 1),
                       windows_done=status.get("windows_done"), state=status.get("state"),
                       agent_alive=agent.proc.poll() is None)
    except Exception as e:  # noqa: BLE001 - an agent that never becomes ready is the finding
        row.update(error=f"{type(e).__name__}: {str(e)[-300:]}", ready_s=None)
    finally:
        for p in (d / "windows.bin", d / "trace.h5"):
            p.unlink(missing_ok=True)
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


WRAP = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
        "print('MAXRSS_KIB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
        "sys.exit(r.returncode)")


def _cli(root: Path, args: list[str]) -> dict:
    """A CLI of the checkout, its exit, its last line on stderr, and its peak RSS (from a wrapper
    process whose only child it is)."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", WRAP, sys.executable, "-m", *args], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=900)
    lines = [x for x in proc.stderr.strip().splitlines() if x.strip()]
    rss = next((int(x.split()[1]) for x in lines if x.startswith("MAXRSS_KIB")), -1)
    lines = [x for x in lines if not x.startswith("MAXRSS_KIB")]
    return {"rc": proc.returncode, "seconds": round(time.perf_counter() - t, 2), "stderr_lines": len(lines),
            "traceback": "Traceback" in proc.stderr, "last_line": lines[-1][:300] if lines else "",
            "peak_rss_mib": round(rss / 1024, 1)}


def import_bombs(root: Path, work: Path) -> list[dict]:
    rows = []
    csv = work / "bomb.csv"
    csv.write_text("timestamp," + ",".join(f"cpu.util.core{i}" for i in range(1000)) + "\n"
                   + "0," + ",".join(["0.5"] * 1000) + "\n" + "1000000," + ",".join(["0.5"] * 1000) + "\n")
    rows.append({"probe": "csv_two_rows_1000_columns", **_cli(root, ["controller.cli", "import", str(csv), "--format", "csv",
                                                                     "-o", str(work / "csv.h5")])})

    # A hostile Prometheus: 200 CPU series, each at sample times of its own, so the union grid
    # is 200 × 10,000 long (a 40 MB answer; 400 M cells as columns).
    class H(http.server.BaseHTTPRequestHandler):
        body = None

        def do_GET(self):  # noqa: N802
            if H.body is None:
                res = [{"metric": {"__name__": "node_cpu_seconds_total", "cpu": str(c), "mode": "user",
                                   "instance": "x"},
                        "values": [[1000.0 + i + c / 200.0, str(float(i))] for i in range(10_000)]} for c in range(200)]
                H.body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": res}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(H.body)

        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        rows.append({"probe": "prometheus_disjoint_grids", **_cli(root, [
            "controller.cli", "import", "--url", url, "--start", "1000", "--end", "10999", "--step", "1",
            "-o", str(work / "prom.h5")])})
    finally:
        srv.shutdown()
    for r in rows:
        print(json.dumps(r), file=sys.stderr, flush=True)
    return rows


CHILD = ("import json, os, sys\n"
         "try:\n    os.close(os.open('/dev/tty', os.O_RDWR)); tty = True\nexcept OSError:\n    tty = False\n"
         "print('CHILD ' + json.dumps({'pid': os.getpid(), 'sid': os.getsid(0), 'ctty': tty, "
         "'env': sorted(os.environ)}), flush=True)\n")


def run_as(root: Path, work: Path) -> dict:
    """replay --run-as nobody from a terminal (script(1) gives it one), with root's secrets in its
    environment: what the command started as nobody receives."""
    names, chash = _catalog(root)
    w = work / "runas"
    w.mkdir(parents=True, exist_ok=True)
    plan = w / "p.h5"
    plan.write_bytes(_plan_file(names, chash, lambda f: f.create_dataset(
        "compositions", data=np.full((3, len(names), 1), 0.0, np.float32))))
    (w / "child.py").write_text(CHILD)
    for p in (w, plan, w / "child.py"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    cfg = w / "agent.toml"
    cfg.write_text(f'[agent]\nbackend = "sim"\nstate_dir = "{w}/state"\nscratch_dir = "{w}/scratch"\n'
                   f'run_lock = "{w}/run.lock"\n')
    cmd = (f"env PYTHONPATH={root} MIMESYS_TOKEN=s3cret SSH_AUTH_SOCK=/tmp/agent.sock KRB5CCNAME=/tmp/krb "
           f"SUDO_USER=root MIMESYS_SIM_SPEEDUP=0 {sys.executable} -m agentd.cli replay --config {cfg} {plan} "
           f"--no-record --run-as nobody -- /usr/bin/python3 {w / 'child.py'}")   # a Python nobody may run
    out = subprocess.run(["script", "-qec", cmd, "/dev/null"], cwd=root, capture_output=True, text=True, timeout=300)
    row = {"probe": "run_as_child", "rc": out.returncode}
    child = next((json.loads(x.split("CHILD ", 1)[1]) for x in out.stdout.splitlines() if "CHILD " in x), None)
    if child is None:
        row["error"] = (out.stdout + out.stderr)[-300:]
    else:
        allowed = {"PATH", "LANG", "TERM", "HOME", "USER", "LOGNAME", "SHELL"}
        row.update(own_session=child["sid"] == child["pid"], controlling_terminal=child["ctty"],
                   env=child["env"], env_beyond_allow_list=sorted(k for k in child["env"] if k not in allowed
                                                                  and not k.startswith("LC_")))
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def small_findings(root: Path, work: Path) -> list[dict]:
    """Findings 7-10, each in the way its review described it."""
    w = work / "small"
    w.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(root)}
    rows = []

    # 7: a dataset handed to the controller keeps a dataset's data in an external file (a secret of
    # the operator's): is the secret file read (its atime moves) before anything refuses it?
    secret = w / "secret.txt"
    secret.write_bytes(b"SECRET" * 100)
    os.utime(secret, (0, secret.stat().st_mtime))             # relatime updates an atime older than a day
    ds = w / "dataset.h5"
    with h5py.File(ds, "w") as f:
        for i, name in enumerate(("obs", "prev_obs", "action", "prev_action", "obs_spread")):   # one external
            kw = {"external": [(str(secret), 0, 600)]} if i == 0 else {"data": np.zeros((10, 60), "u1")}
            f.create_dataset(name, shape=(10, 60), dtype="u1", **kw)
        f.attrs["format"] = "mimesys.dataset"
        f.attrs["schema_version"] = 1
    r = _cli(root, ["controller.cli", "dataset", "info", str(ds)])
    rows.append({"probe": "7_dataset_external_storage", **r, "secret_file_read": secret.stat().st_atime > 1})

    # 8: a fleet file names a token_file outside its directory and an agent URL: is the secret sent?
    got: list[str] = []

    class Capture(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            got.append(self.headers.get("Authorization", ""))
            self.send_response(401)
            self.end_headers()

        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    key = w / "keys" / "operator-secret"
    key.parent.mkdir()
    key.write_text("operator-private-token\n")
    key.chmod(0o600)
    (w / "fleet").mkdir()
    fleet = w / "fleet" / "fleet.toml"
    fleet.write_text(f'[[agent]]\nname = "a"\nurl = "http://127.0.0.1:{srv.server_address[1]}"\n'
                     f'token_file = "{key}"\n')
    r = _cli(root, ["controller.cli", "fleet", "probe", "--fleet", str(fleet)])
    srv.shutdown()
    rows.append({"probe": "8_fleet_token_file_outside", **r,
                 "secret_sent": any("operator-private-token" in h for h in got)})

    # 9: the run lock's directory as the package's tmpfiles.d makes it
    tmpfiles = root / "packaging" / "debian" / "mimesys-agent.tmpfiles"
    text = tmpfiles.read_text()
    try:
        import grp
        grp.getgrnam("mimesys")
    except KeyError:
        text = text.replace("mimesys mimesys", "root root").replace("root mimesys", "root root")
    conf = w / "mimesys-agent.conf"
    conf.write_text(text)
    troot = w / "troot"
    (troot / "var/lib/mimesys").mkdir(parents=True)
    (troot / "run").mkdir()
    subprocess.run(["systemd-tmpfiles", "--create", f"--root={troot}", str(conf)], capture_output=True, timeout=60)
    st = (troot / "run/mimesys").stat()
    rows.append({"probe": "9_run_lock_directory", "mode": oct(st.st_mode & 0o7777), "owner_uid": st.st_uid,
                 "group_may_replace_the_lock": bool(st.st_mode & 0o020) or st.st_uid != 0})

    # 10: a plan whose provenance carries a terminal escape (retitle the window, clear the screen)
    names, chash = _catalog(root)
    plan = w / "esc.h5"
    plan.write_bytes(_plan_file(names, chash, lambda f: f.create_dataset(
        "compositions", data=np.zeros((2, len(names), 1), np.float32)),
        attrs={"provenance": json.dumps({"generator": "x\x1b]0;pwned\x07\x1b[2J"})}))
    out = subprocess.run([sys.executable, "-m", "agentd.cli", "plan", "show", str(plan)], cwd=root, env=env,
                         capture_output=True, timeout=120)
    rows.append({"probe": "10_terminal_escape_in_a_plan", "rc": out.returncode,
                 "raw_escape_printed": b"\x1b" in out.stdout + out.stderr})
    for r in rows:
        print(json.dumps(r), file=sys.stderr, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", type=Path, default=ROOT)
    ap.add_argument("--journal-gib", type=float, default=8.0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--probes", default="bombs,journal,imports,runas,small",
                    help="which probes, comma-separated (each takes minutes on a vulnerable checkout)")
    args = ap.parse_args()
    root = args.checkout.resolve()
    rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="mimesys-h41-") as d:
        work = Path(d)
        os.chmod(work, 0o755)
        want = set(args.probes.split(","))
        result = {"bench": "hardening_41", "checkout": rev, "simulated_backend": True,
                  "body_bombs": body_bombs(root, work) if "bombs" in want else None,
                  "planted_journal": planted_journal(root, work, args.journal_gib) if "journal" in want else None,
                  "imports": import_bombs(root, work) if "imports" in want else None,
                  "run_as": run_as(root, work) if "runas" in want else None,
                  "findings_7_to_10": small_findings(root, work) if "small" in want else None}
    line = json.dumps(result)
    print(line)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(line + "\n")


if __name__ == "__main__":
    main()

"""The host's one solo measurement: `mimesys-agent calibrate` records the solo profile beside the
calibration (real runner, real samplers, a three-stressor catalog), a real agent serves it on
GET /v1/profile only while it still stands for the host, and a campaign takes it instead of
profiling again."""

import asyncio
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from mimesys.solo_profile import windows_of
from mimesys.trace import Trace
from test_daemon import ROOT, TOKEN, start_agent, write_config

pytestmark = pytest.mark.skipif(not (ROOT / "stressors" / "build" / "mimesys-runner").exists(),
                                reason="mimesys-runner not built (make -C stressors)")

NAMES = ("cpu_int_crc32", "disk_seq_read_direct", "net_tcp_loopback", "net_tcp_loopback_pace50")


def small_catalog(path: Path) -> Path:
    """The shipped catalog's entries for NAMES, in its order, as a catalog file of their own."""
    doc = tomllib.loads((ROOT / "stressors" / "catalog.toml").read_text())
    lines = [f"schema_version = {doc['schema_version']}"]
    for e in doc["stressor"]:
        if e["name"] in NAMES:
            lines.append("[[stressor]]")
            for key in ("name", "kernel", "class", "description"):
                lines.append(f"{key} = {json.dumps(e[key])}")
            params = ", ".join(f"{k} = {json.dumps(v)}" for k, v in e.get("params", {}).items())
            lines.append(f"params = {{ {params} }}")
            if "pace" in e:
                lines.append(f'pace = {{ base = "{e["pace"]["base"]}", fraction = {e["pace"]["fraction"]} }}')
    path.write_text("\n".join(lines) + "\n")
    return path


def calibrate(cfg: Path, *more: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "agentd.cli", "calibrate", "--config", str(cfg), "--probe-seconds", "0",
                        "--reach-repeats", "0", "--segment-pairs", "1", "--json", *more],
                       capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_calibrate_records_the_profile_the_agent_serves_and_a_campaign_takes(tmp_path):
    from controller.campaign.campaign import Campaign
    from controller.campaign.solo import profile_host
    from controller.fleet import AgentClient, AgentError, hardware_identity

    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("[agent]\n", f'[agent]\ncatalog = "{small_catalog(tmp_path / "cat.toml")}"\n'))
    state = tmp_path / "state"

    out = calibrate(cfg, "--profile-hold", "1")
    profile = Trace.read(state / "profile.h5")
    cal = json.loads((state / "calibration.json").read_text())
    assert out["profile"] == str(state / "profile.h5")
    assert not (tmp_path / "state" / ".profile.h5.tmp").exists()
    prov = profile.provenance
    assert prov["catalog_names"] == list(NAMES) and prov["hold"] == 1
    assert prov["calibration_created"] == cal["created"]
    K = len(prov["thread_cores"])
    rows = windows_of(len(NAMES), prov["layout"], hold=1)
    assert profile.T == rows["all"][-1] + 2                  # a window per step, an idle one per stressor and at the end
    busy = lambda r, core: float(profile.values[r, profile.names.index(f"cpu.util.core{core}")])  # noqa: E731
    crc = NAMES.index("cpu_int_crc32")
    # the CPU stressor alone on thread 0 keeps the first plan core busy (what the idle windows
    # show is the shared host's other work, not asserted)
    assert busy(rows["solo"][crc], prov["thread_cores"][0]) > 0.8
    if K >= 2:
        assert busy(rows["solo1"][crc], prov["thread_cores"][1]) > 0.8
    disk = NAMES.index("disk_seq_read_direct")
    assert float(profile.values[rows["solo"][disk], profile.names.index("disk.read_Bps")]) > 1e6
    # one measurement: the calibration's rates are the runner's counts in the profile's windows
    assert cal["solo_profile"] == {"hold": 1, "windows": profile.T, "window_s": 1.0} and cal["window_s"] == 1.0
    one = {n: cal["stressors"][n]["one_thread"] for n in NAMES}
    assert one["cpu_int_crc32"]["ran_s"] == pytest.approx(1.0, abs=0.15)
    assert one["disk_seq_read_direct"]["bytes_per_s"] > 1e6
    if K >= 2:
        assert cal["stressors"]["net_tcp_loopback"]["all_threads"]["threads"] == K
    # the paced variant ran in the profile at most at half its base's rate (the base measured just
    # before it; other work on a shared host can only slow it)
    paced = cal["stressors"]["net_tcp_loopback_pace50"]
    assert paced["pace_Bps"] > 0
    assert 0 < one["net_tcp_loopback_pace50"]["bytes_per_s"] < 1.2 * paced["pace_Bps"]

    async def main(url):
        client = AgentClient(url, TOKEN)
        try:
            served = await client.solo_profile()
            np.testing.assert_array_equal(served.values, profile.values)
            assert served.provenance["calibration_created"] == cal["created"]
            info = await client.info()
            camp = Campaign.open(tmp_path / "camp", {"round_size": 4, "repetitions": 1})
            camp.bind([info], hardware_identity(info["fingerprint"]))
            await profile_host(camp, client, progress=False)
            taken = Trace.read(camp.profile_path)
            np.testing.assert_array_equal(taken.values, profile.values)
            camp.close()

            # a new calibration without a profile: the stored one no longer stands for the host
            calibrate(cfg, "--no-profile")
            with pytest.raises(AgentError) as err:
                await client.solo_profile()
            assert err.value.status == 404 and "another calibration" in str(err.value)
        finally:
            await client.close()

    kept = tmp_path / "kept"                 # as the demo keeps them, before the next calibration
    kept.mkdir()
    for name in ("calibration.json", "profile.h5"):
        (kept / name).write_bytes((state / name).read_bytes())
    with start_agent(tmp_path, cfg) as agent:
        asyncio.run(main(agent.url))

    # another agent on this host takes the kept measurement instead of measuring again ...
    other = tmp_path / "other"
    other.mkdir()
    cfg2 = write_config(other)
    cfg2.write_text(cfg2.read_text().replace("[agent]\n", f'[agent]\ncatalog = "{tmp_path / "cat.toml"}"\n'))
    r = subprocess.run([sys.executable, "-m", "agentd.cli", "calibrate", "--config", str(cfg2), "--import", str(kept)],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(Trace.read(other / "state" / "profile.h5").values, profile.values)
    assert json.loads((other / "state" / "calibration.json").read_text())["created"] == cal["created"]
    # ... but not a pair that does not belong together, nor one for another catalog
    doc = json.loads((kept / "calibration.json").read_text())
    (kept / "calibration.json").write_text(json.dumps({**doc, "created": "2020-01-01T00:00:00+00:00"}))
    r = subprocess.run([sys.executable, "-m", "agentd.cli", "calibrate", "--config", str(cfg2), "--import", str(kept)],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode != 0 and "recorded with another calibration" in r.stderr, r.stderr
    cfg2.write_text(cfg2.read_text().replace(f'catalog = "{tmp_path / "cat.toml"}"\n', ""))
    (kept / "calibration.json").write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, "-m", "agentd.cli", "calibrate", "--config", str(cfg2), "--import", str(kept)],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode != 0 and "another stressor catalog" in r.stderr, r.stderr

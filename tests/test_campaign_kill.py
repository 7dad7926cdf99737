"""A campaign's controller killed with SIGKILL mid-round, twice, then resumed: nothing
acknowledged is lost and nothing is written twice (simulated agents on 127.0.0.1). Apart from
test_campaign.py so that `make test`'s parallel phase runs these two long tests beside it."""

import json
import re
import signal
import subprocess
import time

import numpy as np
import pytest

from campaign_helpers import COLLECT, ROOT, SMALL, agents, small_campaign  # noqa: F401 (agents: a fixture)
from controller.campaign.store import RecordLog


def _acked(camp):
    text = (camp / "logs" / "collect.log").read_text() if (camp / "logs" / "collect.log").exists() else ""
    return re.findall(r"acknowledged (r\d+/(?:c\d+|profile))", text)


def _kill_when(camp, agents, pred, timeout=90):
    proc = subprocess.Popen(COLLECT + [str(camp), "--rounds", "2", "--fleet", str(agents)] + SMALL,
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    try:
        while not pred(_acked(camp)):
            assert proc.poll() is None, "collect ended before it could be killed"
            assert time.monotonic() - t0 < timeout
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    return set(_acked(camp))


@pytest.mark.slow
@pytest.mark.parametrize("round0", ["profile", "sweep"])
def test_sigkill_mid_round_then_resume_loses_and_duplicates_nothing(tmp_path, agents, round0):
    camp = small_campaign(tmp_path / "camp", round0=round0)
    # kill 1: in round 0, once its samples from the solo profile, or three of its sweep chains,
    # were acknowledged
    acked1 = _kill_when(camp, agents, lambda a: "r0/profile" in a if round0 == "profile" else len(a) >= 3)
    # kill 2: in round 1, once one of its chains was acknowledged (its proposals are on disk)
    acked2 = _kill_when(camp, agents, lambda a: any(k.startswith("r1/") for k in a))
    assert (camp / "rounds" / "round_0001.npz").exists()
    out = subprocess.run(COLLECT + [str(camp), "--rounds", "2", "--fleet", str(agents)] + SMALL,
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr

    log = RecordLog(camp / "samples.log")
    keys = [r["key"] for r in log if r["type"] == "chain"]
    assert log.duplicates == 0 and len(keys) == len(set(keys))          # nothing written twice
    assert acked1 | acked2 <= set(keys)                                  # nothing acknowledged lost
    log.close()                                                          # one opener at a time
    from controller.campaign.campaign import Campaign
    from controller.campaign.run import chains
    c = Campaign.open(camp, create=False)
    for r in range(3):
        with np.load(c.round_path(r)) as z:
            proposed, info = z["compositions"], json.loads(str(z["info"]))
        if r == 0:
            assert ("from_profile" in info) == (round0 == "profile") and ("sweep" in info) == (round0 == "sweep")
        if "from_profile" in info:                                       # one record: the profile, once
            assert [k for k in keys if k.startswith("r0/")] == ["r0/profile"]
            [rec] = [rec for rec in c.chain_records() if rec["round"] == 0]
            assert rec["shape"][:2] == [1, len(proposed)]
            assert np.array_equal(np.frombuffer(rec["comps"], "<f4"), proposed.ravel())
            continue
        expected = chains(proposed, c.config.chain_len)
        got = sorted(int(k.split("/c")[1]) for k in keys if k.startswith(f"r{r}/"))
        assert got == list(range(len(expected))), f"round {r}"          # every chain exactly once
        for rec in c.chain_records():                                    # and it ran what was proposed
            if rec["round"] == r:
                comps = np.frombuffer(rec["comps"], "<f4").reshape(rec["shape"][1], -1)
                assert np.array_equal(comps, expected[rec["chain"]].reshape(len(comps), -1))
    assert c.next_round() == 3
    started = [r for r in c.store if r["type"] == "run_started"]
    ran = [k for k in keys if k != "r0/profile"]                         # the profile's record ran nothing
    assert len(started) >= len(ran) and c.orphan_runs() == set()        # every run noted; none left over
    total = sum(r["shape"][1] - 1 for r in c.chain_records())
    s = c.samples(filtered=False)
    assert len(s["action"]) == total
    c.close()

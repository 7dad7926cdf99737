"""Simulated tick accounting (not a measurement): why a held tail must follow its reading even
where the correction is under one counter unit.

This host's kernel counts CPU by ticks (CONFIG_TICK_CPU_ACCOUNTING, HZ=250): every 4 ms the
whole tick goes to what the core runs at that instant, and /proc/stat shows the running sum
floored to 10 ms. The agent's per-core busy for a window is the difference of two floored
sums. The sketch models one core per 1 s window:

- single: one compute segment of exactly the target's time (no reading);
- held: IO first (busy in short bursts, 30 % of 400 ms: ticks sample it, so its count is
  binomially noisy), then the runner reads the floored busy count and sizes the compute tail
  to reach the target; the tail as compiled carries the planner's error (sd `model_err`).
  With the deadband (the runner up to this commit) a correction under one unit is dropped;
- open: the tail as compiled, no reading.
- `post`: CPU after the reading that the reading cannot see (writeback, softirqs), learned
  as the runner does (post_frac, weight 0.2 per window).

Prints mean |sampler's busy fraction - target| and its mean, per variant.
Run: python3 sim_ticks.py > sim_ticks.txt   (about 15 s)
"""
import numpy as np

TICK, UNIT, W = 4.0, 10.0, 1000.0     # ms


def busy_ticks(intervals, phase):
    t = phase + TICK * np.arange(int(W / TICK))
    b = np.zeros_like(t, bool)
    for a, e in intervals:
        b |= (t >= a) & (t < e)
    return t, b


def run(mode, *, deadband, post_mu=0.0, post_sd=0.0, learn=0.2, n=3000, io_len=400.0, r_io=0.3,
        model_err=10.0, seed=1):
    rng = np.random.default_rng(seed)
    errs, post_frac, B = [], 0.0, TICK * 12345
    for _ in range(n):
        target = rng.uniform(0.2, 0.7) * W
        phase = rng.uniform(0, TICK)
        Bs = B
        if mode == "single":
            iv = [(0.0, target)]
            sized = None
        else:
            iv, t = [], 0.0
            while t < io_len:
                burst = rng.exponential(0.5)
                gap = burst * (1 - r_io) / r_io * rng.exponential(1)
                iv.append((t, min(t + burst, io_len)))
                t += burst + gap
            tk, b = busy_ticks(iv, phase)
            R = (np.floor((Bs + TICK * b[tk < io_len].sum()) / UNIT) - np.floor(Bs / UNIT)) * UNIT
            planned = target - r_io * io_len + rng.normal(0, model_err)
            want = min(max((target / W - post_frac) * W - R, 0.0), W - io_len - 30)
            if mode == "open":
                tail = planned
            else:
                tail = planned if deadband and abs(want - planned) < UNIT else want
            sized = (R + tail) / W
            iv.append((io_len, io_len + tail))
        if post_sd or post_mu:
            p = max(0.0, rng.normal(post_mu, post_sd))
            end = iv[-1][1] + 1
            iv.append((end, end + p))
        tk, b = busy_ticks(iv, phase)
        B = Bs + TICK * b.sum()
        S = (np.floor(B / UNIT) - np.floor(Bs / UNIT)) * UNIT
        errs.append((S - target) / W)
        if sized is not None and mode != "open":
            post_frac += learn * ((S / W - sized) - post_frac)
    e = np.asarray(errs)
    return float(np.abs(e).mean()), float(e.mean())


if __name__ == "__main__":
    for post in ((0.0, 0.0), (5.0, 3.0)):
        print(f"CPU after the reading: mean {post[0]} ms, sd {post[1]} ms")
        for mode, db in (("single", False), ("held", True), ("held", False), ("open", False)):
            m, bias = run(mode, deadband=db, post_mu=post[0], post_sd=post[1])
            label = mode + (" (deadband: corrections under a unit dropped)" if db else "")
            print(f"  {label:52s} mean |error| {m:.4f}  mean error {bias:+.4f}")

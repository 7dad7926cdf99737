"""Alignment building blocks: config, reward, per-window advantages, the PPO/KL loss."""

import math

import numpy as np
import pytest
import torch

from mimesys.errors import ConfigError
from controller.align.advantages import WindowStatTracker
from controller.align.config import AlignConfig, preset
from controller.align.ppo import clipped_surrogate, ddpo_step_loss, gaussian_kl_same_std
from controller.align.reward import RewardFunction, min_max_normalizer, resolve_weights

# -- config ---------------------------------------------------------------------------------


def test_config_defaults_follow_the_paper():
    c = AlignConfig().validate()
    assert c.eta > 0 and c.lr == 3e-6 and c.adv_clip == 3.0 and c.kl_coef == 0.05


def test_config_rejects_deterministic_ddim_and_unknown_fields():
    with pytest.raises(ConfigError, match="eta"):
        AlignConfig(eta=0.0).validate()
    with pytest.raises(ConfigError, match="unknown field.*'lerning_rate'.*valid:.*lr"):
        AlignConfig.from_overrides({"lerning_rate": 1.0})
    with pytest.raises(ConfigError, match="stat_min_count"):
        AlignConfig.from_overrides({"stat_min_count": 64, "stat_buffer": 8})
    with pytest.raises(ConfigError, match="unknown align preset 'nope'"):
        preset("nope")


def test_config_round_trips_through_dict():
    c = AlignConfig.from_overrides({"lr": 1e-4, "reward_weights": [("disk.*", 0.5)]})
    assert AlignConfig.from_dict(c.to_dict()) == c


# -- reward ---------------------------------------------------------------------------------

NAMES = ["cpu.util.core0", "cpu.util.core1", "mem.bw_Bps", "disk.read_Bps"]


def test_default_weights_are_equal_per_resource_type():
    w = resolve_weights(NAMES)
    assert w.tolist() == [0.5, 0.5, 1.0, 1.0]
    w = resolve_weights(NAMES, (("disk.*", 0.0), ("cpu.util.core1", 2.0)))
    assert w.tolist() == [0.5, 2.0, 1.0, 0.0]
    with pytest.raises(ConfigError, match="'net.\\*' matches none"):
        resolve_weights(NAMES, (("net.*", 1.0),))


def _reward():
    lo, hi = np.array([0, 0, 0, 0.0]), np.array([1, 1, 1e10, 1e8])
    return RewardFunction.build(NAMES, min_max_normalizer(lo, hi))


def test_reward_is_minus_weighted_l1_in_normalized_space():
    r = _reward()
    target = np.array([0.5, 0.5, 5e9, 0.0])
    assert r(target, target) == 0.0
    executed = np.array([0.7, 0.5, 6e9, 5e7])   # normalized diffs 0.2, 0, 0.1, 0.5
    expected = -(0.5 * 0.2 + 0.5 * 0 + 1.0 * 0.1 + 1.0 * 0.5) / 3.0
    assert r(executed, target) == pytest.approx(expected)
    # batched over leading dims
    out = r(np.stack([executed, target]), np.stack([target, target]))
    assert out.shape == (2,) and out[1] == 0.0


def test_reward_skips_unmeasured_metrics_and_renormalizes():
    r = _reward()
    target = np.array([0.5, 0.5, np.nan, 0.0])          # memory bandwidth not in the trace
    executed = np.array([0.7, 0.5, 6e9, np.nan])        # disk not measured on the host
    assert r(executed, target) == pytest.approx(-(0.5 * 0.2) / 1.0)
    assert np.isnan(r(np.full(4, np.nan), target))
    with pytest.raises(ValueError, match="expected \\[..., 4\\]"):
        r(np.zeros(3), target)


# -- advantages -----------------------------------------------------------------------------


def test_advantages_use_batch_stats_until_a_window_has_min_count():
    t = WindowStatTracker(buffer_size=8, min_count=3, clip=3.0)
    keys = [("a", 0), ("b", 0)]
    adv, st = t.update(keys, np.array([-1.0, -3.0]))
    # each window seen once (< 3): scored against the batch (mean −2, std 1)
    np.testing.assert_allclose(adv, [1.0, -1.0], atol=1e-5)
    assert st.from_batch_stats == 2 and st.from_window_stats == 0 and st.windows_tracked == 2


def test_advantages_use_each_windows_running_stats():
    t = WindowStatTracker(buffer_size=4, min_count=2, clip=10.0)
    # a hard window (rewards near −3) and an easy one (near −1): per-window scoring removes the
    # difficulty offset, so the better rollout of each window gets the positive advantage
    keys = [("hard", 5), ("hard", 5), ("easy", 1), ("easy", 1)]
    adv, st = t.update(keys, np.array([-3.1, -2.9, -1.1, -0.9]))
    np.testing.assert_allclose(adv, [-1, 1, -1, 1], atol=1e-4)
    assert st.from_window_stats == 4
    # running: the buffer keeps the last 4 rewards of the window
    adv, _ = t.update([("hard", 5), ("hard", 5)], np.array([-3.0, -2.0]))
    buf = np.array([-3.1, -2.9, -3.0, -2.0])
    np.testing.assert_allclose(adv, (np.array([-3.0, -2.0]) - buf.mean()) / (buf.std() + 1e-6), rtol=1e-5)
    adv, _ = t.update([("hard", 5)] * 4, np.array([0.0, 0.0, 0.0, 1.0]))   # evicts the old ones
    np.testing.assert_allclose(adv, (np.array([0, 0, 0, 1.0]) - 0.25) / (np.std([0, 0, 0, 1.0]) + 1e-6), rtol=1e-5)


def test_advantages_are_clipped_and_state_round_trips():
    t = WindowStatTracker(buffer_size=16, min_count=2, clip=3.0)
    keys = [("w", 0)] * 16
    rewards = np.zeros(16)
    rewards[0] = 100.0                                  # one outlier: z = sqrt(15) ≈ 3.87 > 3
    adv, st = t.update(keys, rewards)
    assert adv[0] == pytest.approx(3.0) and st.clipped == 1 and np.all(np.abs(adv) <= 3.0)
    t2 = WindowStatTracker(buffer_size=16, min_count=2, clip=3.0)
    t2.load_state_dict(t.state_dict())
    a1, _ = t.update([("w", 0)], np.array([1.0]))
    a2, _ = t2.update([("w", 0)], np.array([1.0]))
    assert a1.tolist() == a2.tolist()
    with pytest.raises(ValueError, match="finite"):
        t.update([("w", 0)], np.array([np.nan]))


# -- PPO clipped ratio + KL -----------------------------------------------------------------


def _grad_of_surrogate(log_ratio: float, adv: float, clip: float):
    lp = torch.tensor([log_ratio], requires_grad=True)
    loss = clipped_surrogate(lp, torch.zeros(1), torch.tensor([adv]), clip)
    loss.backward()
    return float(loss.detach()), float(lp.grad[0])


def test_clipped_surrogate_inside_the_trust_region_is_the_plain_ratio_loss():
    loss, grad = _grad_of_surrogate(math.log(1.05), adv=2.0, clip=0.2)
    assert loss == pytest.approx(-2.0 * 1.05)
    assert grad == pytest.approx(-2.0 * 1.05)         # d(−A·e^x)/dx = −A·r


def test_clipped_surrogate_stops_the_incentive_past_the_clip():
    # positive advantage, ratio already above 1 + ε: loss is the clipped value, gradient 0
    loss, grad = _grad_of_surrogate(math.log(1.5), adv=2.0, clip=0.2)
    assert loss == pytest.approx(-2.0 * 1.2) and grad == 0.0
    # negative advantage, ratio already below 1 − ε: clipped, gradient 0
    loss, grad = _grad_of_surrogate(math.log(0.5), adv=-1.0, clip=0.2)
    assert loss == pytest.approx(1.0 * 0.8) and grad == 0.0


def test_clipped_surrogate_keeps_the_pessimistic_side_unclipped():
    # positive advantage but ratio fell below 1 − ε: max() keeps the unclipped (worse) term,
    # so the gradient still pushes the probability back up
    loss, grad = _grad_of_surrogate(math.log(0.5), adv=2.0, clip=0.2)
    assert loss == pytest.approx(-2.0 * 0.5) and grad == pytest.approx(-2.0 * 0.5)
    # negative advantage and ratio above 1 + ε: unclipped, gradient pushes it down
    loss, grad = _grad_of_surrogate(math.log(1.5), adv=-1.0, clip=0.2)
    assert loss == pytest.approx(1.5) and grad == pytest.approx(1.5)


def test_gaussian_kl_matches_torch_distributions():
    g = torch.Generator().manual_seed(0)
    mean, ref, std = torch.randn(3, 4, 2, generator=g), torch.randn(3, 4, 2, generator=g), torch.tensor(0.3)
    kl = gaussian_kl_same_std(mean, ref, std)
    p, q = torch.distributions.Normal(mean, std), torch.distributions.Normal(ref, std)
    expected = torch.distributions.kl_divergence(p, q).reshape(3, -1).mean(1)
    torch.testing.assert_close(kl, expected)


def test_step_loss_adds_the_kl_penalty_and_reports_clipfrac():
    lp = torch.tensor([0.0, math.log(2.0)])
    mean, ref = torch.zeros(2, 3), torch.ones(2, 3)
    loss, st = ddpo_step_loss(lp, torch.zeros(2), torch.tensor([1.0, 1.0]), mean, ref, torch.tensor(1.0),
                              clip_range=0.1, kl_coef=0.05)
    policy = -(1.0 + 1.1) / 2
    assert float(loss) == pytest.approx(policy + 0.05 * 0.5)
    assert st.clipfrac == 0.5 and st.kl == pytest.approx(0.5)
    assert st.approx_kl == pytest.approx(0.5 * (math.log(2.0) ** 2) / 2)


"""The training dataset format: round trip, validation errors that name the field, atomicity."""

import h5py
import numpy as np
import pytest

from controller.dataset import Dataset, DatasetError, samples_from_chain, simulated_dataset


@pytest.fixture(scope="module")
def small(catalog):
    return simulated_dataset(4, 6, repetitions=3, seed=5, catalog=catalog)


def test_simulated_dataset_shapes_and_label(small, catalog):
    assert small.S == 4 * 5
    assert small.action.shape == (20, len(catalog), 4)
    assert small.obs.shape == (20, len(small.metrics)) == small.prev_obs.shape == small.obs_spread.shape
    assert small.simulated and small.host_fingerprint["simulated"]
    # consecutive samples of one chain: this window's action is the next sample's previous action
    assert np.array_equal(small.action[0], small.prev_action[1])
    assert np.array_equal(small.obs[0], small.prev_obs[1])
    assert (small.obs_spread >= 0).all() and (small.obs_spread > 0).any()


def test_round_trip(small, tmp_path):
    p = tmp_path / "d.h5"
    small.round = np.zeros(small.S, np.int32)
    small.write(p)
    back = Dataset.read(p)
    for name in ("prev_action", "action", "prev_obs", "obs", "obs_spread"):
        assert np.array_equal(getattr(back, name), getattr(small, name), equal_nan=True)
    assert back.names == small.names and back.catalog_hash == small.catalog_hash
    assert back.simulated and back.host_fingerprint == small.host_fingerprint
    assert back.summary()["samples"] == small.S
    with h5py.File(p) as f:
        assert f.attrs["format"] == "mimesys.dataset"
        assert f["action"].dtype == np.float32


def test_samples_from_chain_mean_and_spread():
    comps = np.random.default_rng(0).random((3, 2, 1)).astype(np.float32) / 2
    obs = np.array([[[1.0], [2.0], [3.0]], [[3.0], [4.0], [np.nan]]], np.float32)  # [R=2, L=3, N=1]
    pa, a, po, o, sp = samples_from_chain(comps, obs)
    assert pa.shape == (2, 2, 1) and np.array_equal(a, comps[1:])
    assert po[:, 0].tolist() == [2.0, 3.0] and o[:, 0].tolist() == [3.0, 3.0]
    assert sp[:, 0].tolist() == [2.0, 0.0]


def test_bad_files_named(tmp_path, small):
    p = tmp_path / "x.h5"
    with h5py.File(p, "w") as f:
        f.attrs["format"] = "mimesys.trace"
    with pytest.raises(DatasetError, match="x.h5: attribute format='mimesys.trace'"):
        Dataset.read(p)
    (tmp_path / "junk.h5").write_bytes(b"not hdf5")
    with pytest.raises(DatasetError, match="junk.h5: not a readable mimesys dataset"):
        Dataset.read(tmp_path / "junk.h5")
    bad = Dataset(**{k: getattr(small, k).copy() for k in ("prev_action", "action", "prev_obs", "obs",
                                                           "obs_spread")},
                  metrics=small.metrics, catalog_names=small.catalog_names, catalog_hash=small.catalog_hash)
    bad.action[3, 2, 1] = 1.5
    with pytest.raises(DatasetError, match=r"/action\[3\] stressor 'cpu_simd_dist_128' thread 1"):
        bad.write(tmp_path / "bad.h5")
    assert not (tmp_path / "bad.h5").exists()
    assert not list(tmp_path.glob(".bad.h5.*"))

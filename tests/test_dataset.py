"""The training dataset format: round trip, validation errors that name the field, atomicity."""

from pathlib import Path

import h5py
import numpy as np
import pytest

from controller.dataset import Dataset, DatasetError, samples_from_chain, simulated_dataset
from mimesys.errors import ValidationError


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


SECRET = b"TOPSECRET-KEY-MATERIAL\n"


def _hostile(tmp_path, small, build) -> Path:
    """A valid dataset file with one array replaced by `build(f, name, shape)` (issue 41, finding 7)."""
    p = tmp_path / "handed-over.h5"
    small.write(p)
    with h5py.File(p, "a") as f:
        shape = f["obs_spread"].shape
        del f["obs_spread"]
        build(f, "obs_spread", shape)
        shape = f["obs"].shape
        del f["obs"]
        build(f, "obs", shape)
    return p


def _readers():
    from controller.model.data import load_training_data
    return [(Dataset.read, DatasetError), (load_training_data, ValidationError)]


def test_a_dataset_keeping_its_data_in_a_local_file_is_refused_not_read(tmp_path, small):
    # Datasets are handed between operators like plans and traces: an /obs whose bytes live in an
    # external file (the reader's TLS key, /etc/hostname) must be refused before a byte is read.
    secret = tmp_path / "secret.key"
    secret.write_bytes(SECRET * 4096)
    for target in (secret, Path("/etc/hostname")):
        if not target.exists():
            continue
        p = _hostile(tmp_path, small, lambda f, name, shape: f.create_dataset(
            name, shape=shape, dtype="<f4", external=[(str(target), 0, h5py.h5f.UNLIMITED)]))
        for read, error in _readers():
            with pytest.raises(error, match=r"handed-over\.h5: dataset /obs.* external file") as e:
                read(p)
            assert "TOPSECRET" not in str(e.value)


def test_a_dataset_with_soft_links_or_declared_bombs_is_refused(tmp_path, small):
    p = _hostile(tmp_path, small, lambda f, name, shape: f.__setitem__(name, h5py.SoftLink("/action")))
    for read, error in _readers():
        with pytest.raises(error, match=r"handed-over\.h5: /obs.* only hard links"):
            read(p)
    # A few KiB of file declaring 2^31 unwritten uint8 values (2 GiB as stored, within the bound),
    # 8 GiB once read as float32: counted as read (the gate counts an integer at the int64 a reader
    # may make of it, so it refuses first).
    p = _hostile(tmp_path, small, lambda f, name, shape: f.create_dataset(
        name, shape=(1 << 15, 1 << 16), dtype="|u1", chunks=(1 << 10, 1 << 10)))
    assert p.stat().st_size < 1 << 20
    for read, error in _readers():
        with pytest.raises(error, match=r"handed-over\.h5: dataset /obs of shape \(32768, 65536\) declares 17179869184 bytes "
                                        r"\(as read\); at most 4294967296"):
            read(p)

"""What hardware a host fingerprint names: the fingerprint less what differs between machines of
the same hardware, or between two calibrations of one machine. A campaign is bound to one such
identity, and a stored solo profile is used only on the hardware it was measured on."""

from __future__ import annotations

# Fingerprint keys that differ between machines of the same hardware (or between two
# calibrations of one machine); everything else must match for a dataset to mix hosts.
VOLATILE_FINGERPRINT_KEYS = frozenset({"calibrated_peaks", "hostname", "boot_id", "uptime_s", "collected_at",
                                       "catalog_hash", "online_cpus"})


def hardware_identity(fingerprint: dict) -> dict:
    """The part of a fingerprint that says what hardware this is (volatile keys removed)."""
    return {k: v for k, v in (fingerprint or {}).items() if k not in VOLATILE_FINGERPRINT_KEYS}


def identity_diff(a: dict, b: dict) -> list[str]:
    """The keys on which two fingerprints name different hardware."""
    ia, ib = hardware_identity(a), hardware_identity(b)
    return sorted(k for k in set(ia) | set(ib) if ia.get(k) != ib.get(k))

"""The agent's TLS identity: a self-signed key + certificate pair, and its SHA-256 pin.

`mimesys-agent tls init` writes both (the key 0600, created exclusively so a key is never
half-written or replaced by accident) and prints the certificate's SHA-256 fingerprint,
which a fleet file pins (`tls_sha256`), or hands the certificate itself to the controller
(`ca_file`). The certificate names this host, localhost and the loopback addresses, plus
whatever --san adds, so `ca_file` verification (which checks the name) works too.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import socket
import ssl
from pathlib import Path

from .errors import ConfigError
from .fsutil import atomic_write_bytes

def fingerprint_of_der(der: bytes) -> str:
    """SHA-256 of a DER certificate as colon-separated upper-case hex (openssl's spelling)."""
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def cert_sha256(cert_path: Path | str) -> str:
    """The SHA-256 fingerprint of the first certificate in a PEM file."""
    try:
        pem = Path(cert_path).read_text()
    except OSError as e:
        raise ConfigError(f"{cert_path}: cannot read certificate: {e.strerror or e}") from None
    start = pem.find("-----BEGIN CERTIFICATE-----")
    end = pem.find("-----END CERTIFICATE-----", start)
    if start < 0 or end < 0:
        raise ConfigError(f"{cert_path}: no PEM certificate in the file")
    return fingerprint_of_der(ssl.PEM_cert_to_DER_cert(pem[start:end + len("-----END CERTIFICATE-----")]))


def normalize_sha256(text: str, where: str) -> bytes:
    """A pinned fingerprint as 32 bytes: 64 hex digits, colons and case optional."""
    digits = text.replace(":", "").strip().lower()
    try:
        raw = bytes.fromhex(digits)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise ConfigError(f"{where}: tls_sha256 must be a SHA-256 fingerprint (64 hex digits, colons allowed, "
                          f"as `mimesys-agent tls init` prints it), got {text!r}")
    return raw


def default_names() -> list[str]:
    names = ["localhost", "127.0.0.1", "::1"]
    host = socket.gethostname()
    fqdn = socket.getfqdn()
    return list(dict.fromkeys([host, fqdn, *names]))


def init_pair(cert_path: Path, key_path: Path, *, names: list[str], days: int = 3650,
              force: bool = False) -> str:
    """Write a new EC P-256 key and a self-signed certificate for `names`; return its fingerprint."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    if not force:
        for p in (cert_path, key_path):
            if p.exists():
                raise ConfigError(f"{p} exists; pass --force to replace the agent's TLS identity "
                                  f"(every fleet file pinning the old one must then be updated)")
    if days < 1:
        raise ConfigError(f"--days must be >= 1, got {days}")
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for n in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            sans.append(x509.DNSName(n))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0] if names else "mimesys-agent"),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, "mimesys-agent")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            # Its own CA, so a controller may also trust it as `ca_file`.
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    for p in (cert_path, key_path):
        p.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(key_path, key_pem, 0o600)
    _write_atomic(cert_path, cert_pem, 0o644)
    return fingerprint_of_der(cert.public_bytes(serialization.Encoding.DER))


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    atomic_write_bytes(path, data, mode=mode)   # the mode from birth, not chmod after

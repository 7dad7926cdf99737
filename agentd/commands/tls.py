"""`mimesys-agent tls init|fingerprint`: the agent's self-signed TLS identity."""

from __future__ import annotations

import json
from pathlib import Path

import click

from mimesys.cliopts import json_option

from ._common import friendly_errors

DEFAULT_CERT = "/etc/mimesys/tls/agent.crt"
DEFAULT_KEY = "/etc/mimesys/tls/agent.key"


@click.group()
def tls():
    """Create or inspect the agent's TLS key and certificate."""


@tls.command("init")
@click.option("--cert", "cert_path", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_CERT,
              show_default=True, help="Certificate to write (PEM); api.tls_cert.")
@click.option("--key", "key_path", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_KEY,
              show_default=True, help="Private key to write (PEM, mode 0600); api.tls_key.")
@click.option("--san", "names", multiple=True, metavar="NAME|IP",
              help="A name or address the certificate is valid for (repeat; default: this host's names, "
                   "localhost, 127.0.0.1, ::1).")
@click.option("--days", type=int, default=3650, show_default=True, help="Validity.")
@click.option("--force", is_flag=True, help="Replace an existing pair.")
@click.option("--owner", default=None, metavar="USER[:GROUP]",
              help="Give the pair to this user (the packaged service runs as `mimesys`); the key stays 0600.")
@json_option(help="Print only one JSON object on stdout: cert, key, sha256 and names.")
@friendly_errors
def init(cert_path, key_path, names, days, force, owner, as_json):
    """Write a self-signed key + certificate pair and print its SHA-256 fingerprint.

    Put the fingerprint in the fleet file (`tls_sha256 = "..."`) to pin this agent, and set
    api.tls_cert / api.tls_key in agent.toml to serve HTTPS."""
    from mimesys.tls import default_names, init_pair

    sans = list(names) or default_names()
    uid_gid = _owner(owner) if owner else None     # checked before anything is written
    fp = init_pair(cert_path, key_path, names=sans, days=days, force=force)
    if uid_gid is not None:
        import os
        for p in (key_path, cert_path):
            os.chown(p, *uid_gid)
    if as_json:
        click.echo(json.dumps({"cert": str(cert_path), "key": str(key_path), "sha256": fp, "names": sans}))
        return
    click.echo(f"wrote {key_path} (0600) and {cert_path} for {', '.join(sans)}", err=True)
    click.echo(f"SHA-256 fingerprint (fleet file: tls_sha256):", err=True)
    click.echo(fp)


@tls.command("fingerprint")
@click.argument("cert_path", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_CERT)
@json_option(help="Print only one JSON object on stdout: the certificate's path and its SHA-256 fingerprint.")
@friendly_errors
def fingerprint(cert_path, as_json):
    """Print the SHA-256 fingerprint of CERT (default: the agent's)."""
    from mimesys.tls import cert_sha256
    fp = cert_sha256(cert_path)
    click.echo(json.dumps({"cert": str(cert_path), "sha256": fp}) if as_json else fp)


def _owner(spec: str) -> tuple[int, int]:
    import grp
    import pwd

    from mimesys.errors import ConfigError
    user, _, group = spec.partition(":")
    try:
        pw = pwd.getpwnam(user)
        gid = grp.getgrnam(group).gr_gid if group else pw.pw_gid
    except KeyError:
        raise ConfigError(f"--owner {spec!r}: no such user or group on this host") from None
    return pw.pw_uid, gid

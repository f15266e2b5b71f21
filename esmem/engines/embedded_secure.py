"""The secured embedded engine: the OpenSearch security plugin, TLS everywhere, a generated admin password.

Why a module of its own: the open engine (embedded.py) stays exactly as it was; this one only adds the
files the plugin reads (certificates, opensearch.yml, config/opensearch-security/*.yml) and the classpath.
Everything secret lives under ESMEM_HOME/engine/secure (directory 0700, files 0600) and is made once, at
the first secured start, so later starts reuse the same CA and password (callers keep trusting them).
Certificates come from `cryptography` and the password hash from `bcrypt` (the `secure` extra), both
pyca-maintained, rather than from shelling out to openssl or the plugin's hash.sh.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from esmem.errors import EsmemError

PLUGIN_CLASS = "org.opensearch.security.OpenSearchSecurityPlugin"
# esmem's guard for what DLS does not cover (engine/src/opensearch-2/.../DlsGuardPlugin.java)
GUARD_CLASS = "dev.esmem.engine.DlsGuardPlugin"
ADMIN_USER = "admin"
NODE_DN = "CN=esmem-node,O=esmem"
ADMIN_DN = "CN=esmem-admin,O=esmem"
_JAR_VERSION = re.compile(r"^(?P<name>.+?)-\d[\w.\-]*\.jar$")


@dataclass(frozen=True)
class SecureFiles:
    """Where the secured engine's secrets are: hand `ca` and the password file to callers, never the text."""

    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def password_file(self) -> Path:
        return self.dir / "admin-password"

    def password(self) -> str:
        return self.password_file.read_text().strip()


def files(home: Path) -> SecureFiles:
    return SecureFiles(home / "secure")


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def _private_write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def _need(module: str) -> ModuleType:
    try:
        return __import__(module)
    except ImportError:
        raise EsmemError(f"the secured engine needs the '{module}' package: pip install 'esmem[secure]'") from None


def _certificates(sec: SecureFiles) -> None:
    """A CA, a node certificate (127.0.0.1/localhost) and an admin client certificate, PKCS#8 keys."""
    _need("cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    import ipaddress

    def key() -> rsa.RSAPrivateKey:
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "esmem")])

    now = _dt.datetime.now(_dt.timezone.utc) - _dt.timedelta(minutes=5)
    ca_key = key()
    ca = (x509.CertificateBuilder().subject_name(name("esmem-embedded-ca")).issuer_name(name("esmem-embedded-ca"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(now + _dt.timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))

    def leaf(cn: str, usages: list[x509.ObjectIdentifier], san: bool) -> tuple[bytes, bytes]:
        k = key()
        b = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(ca.subject).public_key(k.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now)
             .not_valid_after(now + _dt.timedelta(days=825))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if san:
            b = b.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        cert = b.sign(ca_key, hashes.SHA256())
        pem_key = k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
        return cert.public_bytes(serialization.Encoding.PEM), pem_key

    node_cert, node_key = leaf("esmem-node", [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH], True)
    admin_cert, admin_key = leaf("esmem-admin", [ExtendedKeyUsageOID.CLIENT_AUTH], False)
    _private_write(sec.dir / "ca-key.pem", ca_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                                serialization.NoEncryption()))
    _private_write(sec.dir / "node.pem", node_cert)
    _private_write(sec.dir / "node-key.pem", node_key)
    _private_write(sec.dir / "admin.pem", admin_cert)
    _private_write(sec.dir / "admin-key.pem", admin_key)
    _private_write(sec.ca, ca.public_bytes(serialization.Encoding.PEM))  # last: its presence means "all made"


def ensure_secrets(home: Path) -> SecureFiles:
    """Make the CA, certificates and admin password once; later calls reuse them."""
    sec = files(home)
    _private_dir(sec.dir)
    if not sec.password_file.exists():
        _private_write(sec.password_file, (secrets.token_urlsafe(24) + "\n").encode())
    if not sec.ca.exists():
        _certificates(sec)
    return sec


def plugin_dir(target: Path) -> Path:
    return target / "security-plugin"


def classpath(target: Path) -> list[str]:
    """The plugin's jars that target/lib does not already hold (by artifact name: the node's versions win)."""
    have = {m.group("name") for p in (target / "lib").glob("*.jar") if (m := _JAR_VERSION.match(p.name))}
    extra = []
    for jar in sorted(plugin_dir(target).glob("*.jar")):
        m = _JAR_VERSION.match(jar.name)
        if not m or m.group("name") not in have:
            extra.append(str(jar))
    return extra


def _yaml(path: Path, data: dict[str, Any]) -> None:
    # JSON is YAML: no YAML writer needed for the few files the plugin reads.
    _private_write(path, json.dumps(data, indent=1).encode())


# The node logs the first bytes of a plain-HTTP request sent to its TLS port as hex, Authorization header
# included: the secured node's log layout replaces that dump (the rest of the log is unchanged).
LOG4J = """status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.alwaysWriteExceptions = false
appender.console.layout.pattern = [%d{ISO8601}][%-5p][%c{1.}] %replace{%m%n%throwable}{record: [0-9a-fA-F]+}{record: (redacted)}
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
"""


def log_config(node_home: Path) -> Path:
    return node_home / "config" / "log4j2-esmem-secure.properties"


def configure(home: Path, node_home: Path, target: Path) -> SecureFiles:
    """Write node_home/config/opensearch.yml and the security plugin's initial configuration."""
    sec = ensure_secrets(home)
    bcrypt = _need("bcrypt")
    config = node_home / "config"
    _private_dir(node_home)
    _private_dir(config)
    tls = {}
    for layer in ("transport", "http"):
        tls.update({f"plugins.security.ssl.{layer}.pemcert_filepath": str(sec.dir / "node.pem"),
                    f"plugins.security.ssl.{layer}.pemkey_filepath": str(sec.dir / "node-key.pem"),
                    f"plugins.security.ssl.{layer}.pemtrustedcas_filepath": str(sec.ca)})
    _yaml(config / "opensearch.yml", {
        **tls,
        "plugins.security.ssl.transport.enforce_hostname_verification": False,
        "plugins.security.ssl.http.enabled": True,
        "plugins.security.ssl.http.clientauth_mode": "OPTIONAL",
        "plugins.security.allow_default_init_securityindex": True,
        "plugins.security.authcz.admin_dn": [ADMIN_DN],
        "plugins.security.nodes_dn": [NODE_DN],
        "plugins.security.restapi.roles_enabled": ["all_access", "security_rest_api_access"],
        "plugins.security.audit.type": "noop",
        "plugins.security.system_indices.enabled": True,
    })
    _private_write(log_config(node_home), LOG4J.encode())
    sec_config = config / "opensearch-security"
    _private_dir(sec_config)
    shipped = plugin_dir(target) / "config"
    for name in ("action_groups.yml", "allowlist.yml", "audit.yml", "nodes_dn.yml", "roles.yml", "tenants.yml"):
        if (shipped / name).exists():
            shutil.copyfile(shipped / name, sec_config / name)
            os.chmod(sec_config / name, 0o600)
    pw_hash = bcrypt.hashpw(sec.password().encode(), bcrypt.gensalt(rounds=12)).decode()
    _yaml(sec_config / "internal_users.yml", {
        "_meta": {"type": "internalusers", "config_version": 2},
        ADMIN_USER: {"hash": pw_hash, "reserved": True, "backend_roles": ["admin"],
                     "description": "esmem embedded admin (password in ESMEM_HOME/engine/secure/admin-password)"}})
    _yaml(sec_config / "roles_mapping.yml", {
        "_meta": {"type": "rolesmapping", "config_version": 2},
        "all_access": {"reserved": False, "backend_roles": ["admin"], "users": ["esmem-admin"],
                       "description": "the esmem admin (password or the admin client certificate)"}})
    # Client certificates first (CN = user name, no challenge), then HTTP basic against internal users.
    _yaml(sec_config / "config.yml", {
        "_meta": {"type": "config", "config_version": 2},
        "config": {"dynamic": {"http": {"anonymous_auth_enabled": False}, "authc": {
            "clientcert_auth_domain": {
                "http_enabled": True, "transport_enabled": False, "order": 0,
                "http_authenticator": {"type": "clientcert", "config": {"username_attribute": "cn"}, "challenge": False},
                "authentication_backend": {"type": "noop"}},
            "basic_internal_auth_domain": {
                "http_enabled": True, "transport_enabled": True, "order": 1,
                "http_authenticator": {"type": "basic", "challenge": True},
                "authentication_backend": {"type": "intern"}}}}}})
    return sec

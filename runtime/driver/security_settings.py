"""Whether a job encrypts its internal connections, and with which key material: decided once per job, on the
driver, before Spark runs anything.

Every internal connection is authenticated whatever these say (:mod:`runtime.network.security`); they only add TLS:

- ``spark.chandy.network.encryption`` (or Flink's ``security.ssl.internal.enabled``): ``true`` encrypts control
  and data connections, and the driver's REST server (the jobs' control plane) speaks HTTPS if this job starts
  it (:meth:`EncryptionSettings.web_material`); ``false`` does not. Unset, Chandy follows Spark: when
  ``spark.network.crypto.enabled`` or ``spark.ssl.enabled`` is true, the user wants encrypted traffic, and Chandy
  encrypts its own too, saying so in the log.
- ``spark.chandy.network.tls.certificate`` and ``spark.chandy.network.tls.privateKey`` (PEM files on the driver;
  the key unencrypted), with ``spark.chandy.network.tls.trustedCertificates`` (PEM, default: the certificate):
  the user's own material. Without them each job makes its own key and self-signed certificate.

>>> from runtime.settings import resolve
>>> settings = resolve_encryption(resolve({}, {"spark.network.crypto.enabled": "true"}))
>>> settings.encrypt, settings.reason
(True, 'spark.network.crypto.enabled=true (Spark encrypts its RPC): Chandy encrypts its own connections too; set spark.chandy.network.encryption=false to leave them unencrypted')
>>> resolve_encryption(resolve({}, {})).encrypt
False
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass

from runtime.errors import AuthenticationError, ConfigurationError
from runtime.network.security import ConnectionSecurity
from runtime.network.tls import TlsMaterial, job_certificate, material_from_files
from runtime.settings.options import SPARK_SIGNALS, option_named
from runtime.settings.resolve import Settings

__all__ = ["EncryptionSettings", "resolve_encryption", "ENCRYPTION_CONF", "TLS_CERTIFICATE_CONF", "TLS_KEY_CONF",
           "TLS_TRUSTED_CONF", "FLINK_INTERNAL_SSL"]

ENCRYPTION_CONF = option_named("network_encryption").spark_key
FLINK_INTERNAL_SSL = option_named("network_encryption").flink_keys[0]
TLS_CERTIFICATE_CONF = option_named("tls_certificate").spark_key
TLS_KEY_CONF = option_named("tls_private_key").spark_key
TLS_TRUSTED_CONF = option_named("tls_trusted_certificates").spark_key
NOT_ASKED = "not asked for"
_ENCRYPTION_SIGNALS = tuple((key, why) for key, why in SPARK_SIGNALS if key != "spark.acls.enable")


@dataclass(frozen=True)
class EncryptionSettings:
    """``encrypt``; the user's PEM files (certificate, key, trusted) or None for a certificate per job; and what
    decided it, for the log."""

    encrypt: bool
    files: tuple[str, str, str | None] | None
    reason: str

    @property
    def asked(self) -> bool:
        """Whether any setting spoke about encryption (then the log says what Chandy did)."""
        return self.reason != NOT_ASKED

    def material(self, job_id: str) -> TlsMaterial | None:
        """The TLS material of job ``job_id``, or None when it does not encrypt."""
        if not self.encrypt:
            return None
        if self.files is None:
            return job_certificate(job_id)
        material = material_from_files(*self.files, keys=(TLS_CERTIFICATE_CONF, TLS_KEY_CONF, TLS_TRUSTED_CONF))
        _check_handshake(material, self.files)
        return material

    def web_material(self, job_material: TlsMaterial | None) -> TlsMaterial | None:
        """What the driver's REST server presents in HTTPS when this job starts it: the user's certificate
        (``job_material``, read from the files), else a key and self-signed certificate made for the server (not
        the job's own, whose key travels to the executors); None when the job does not encrypt."""
        if not self.encrypt or job_material is None:
            return None
        return job_material if self.files is not None else job_certificate("", "chandy driver REST API")


def resolve_encryption(settings: Settings) -> EncryptionSettings:
    """Decide from the job's resolved settings: ``spark.chandy.network.encryption``, else Flink's
    ``security.ssl.internal.enabled``, else Spark's own encryption settings. ConfigurationError for half of the
    user's key material."""
    signals = [(key, why) for key, why in _ENCRYPTION_SIGNALS if settings.spark_says(key)]
    source = settings.source("network_encryption")
    if source is not None:
        encrypt = settings.network_encryption
        reason = f"{source}={str(encrypt).lower()}"
        if source == ENCRYPTION_CONF and not encrypt and signals:
            reason += (f" although {signals[0][0]}=true ({signals[0][1]}): Chandy's own connections are "
                       "authenticated but not encrypted")
    elif signals:
        encrypt = True
        key, why = signals[0]
        reason = (f"{key}=true ({why}): Chandy encrypts its own connections too; set {ENCRYPTION_CONF}=false to "
                  "leave them unencrypted")
    else:
        encrypt, reason = False, NOT_ASKED
    certificate, key_file = settings.tls_certificate, settings.tls_private_key
    trusted = settings.tls_trusted_certificates
    files = None
    if certificate or key_file:
        if not (certificate and key_file):
            missing, given = (TLS_KEY_CONF, TLS_CERTIFICATE_CONF) if certificate else (TLS_CERTIFICATE_CONF,
                                                                                      TLS_KEY_CONF)
            raise ConfigurationError(f"{given} is set but {missing} is not: give both PEM files, or neither (then "
                                     "each job makes its own certificate).")
        files = (certificate, key_file, trusted)
    elif trusted:
        raise ConfigurationError(f"{TLS_TRUSTED_CONF} is set without {TLS_CERTIFICATE_CONF} and {TLS_KEY_CONF}: "
                                 "trusted certificates only make sense with a certificate of your own.")
    return EncryptionSettings(encrypt, files, reason)


def _check_handshake(material: TlsMaterial, files: tuple[str, str, str | None]) -> None:
    """Both ends of a connection with ``material``, here on the driver: files that load but do not trust each
    other (a certificate signed by a CA the trusted file lacks) would fail every connection of the job, attempt
    after attempt; they fail it now, once, naming the files."""
    security = ConnectionSecurity.new(material)
    ours, theirs = socket.socketpair()
    failures: list[BaseException] = []

    def accept() -> None:
        try:
            security.accept(ours, "tls-check")
        except BaseException as exc:  # reported below, with the connecting end's view
            failures.append(exc)
            ours.close()

    thread = threading.Thread(target=accept, name="chandy-tls-check", daemon=True)
    thread.start()
    try:
        security.open(theirs, "tls-check", "this driver").close()
    except AuthenticationError as exc:
        failures.insert(0, exc)
    finally:
        theirs.close()  # the accepting end, if still waiting, sees the end at once
        thread.join(security.handshake_timeout_s + 5)
        ours.close()
    if failures:
        certificate, key, trusted = files
        raise ConfigurationError(
            f"The TLS files {certificate!r} ({TLS_CERTIFICATE_CONF}) and {key!r} ({TLS_KEY_CONF}) do not make a "
            f"connection with each other under the certificates trusted in {trusted or certificate!r} "
            f"({TLS_TRUSTED_CONF}): {failures[0]}. Every end of a Chandy job presents this certificate and must "
            "trust it: put its CA (or itself) in the trusted file.")


"""TLS for guarded fetches: which certificate authorities are trusted, and TLS failures as one line.

`client_context` trusts certifi's CA store plus, when `L4_FETCH_CA_BUNDLE` names a PEM file, the
CAs in it (an internal CA of a report server). Environment variables such as SSL_CERT_FILE are not
consulted. Certificate and hostname verification are always on: `GuardedBackend` connects the
socket to the vetted address, and httpcore then runs the handshake with SNI and hostname checking
on the URL's hostname (see netguard).
"""
from __future__ import annotations

import ssl

import certifi

from bot.config import ConfigError
from bot.sources.jobids import shorten

# OpenSSL verify codes that mean "signed by a CA L4 does not know" (an internal CA, usually)
_UNKNOWN_ISSUER = frozenset({2, 18, 19, 20, 21})


def client_context(ca_bundle: str | None = None) -> ssl.SSLContext:
    """A verifying client context: certifi's CAs, plus those of the PEM file `ca_bundle`."""
    ctx = ssl.create_default_context(cafile=certifi.where())
    ctx.set_alpn_protocols(["http/1.1"])
    if ca_bundle:
        shown = ca_bundle[:120]
        try:
            ctx.load_verify_locations(cafile=ca_bundle)
        except ssl.SSLError:
            raise ConfigError(f"L4_FETCH_CA_BUNDLE: no PEM certificates in {shown}") from None
        except OSError as exc:
            why = exc.strerror or "unreadable"
            raise ConfigError(f"L4_FETCH_CA_BUNDLE: cannot read {shown}: {why}") from None
    return ctx


def tls_problem(exc: BaseException) -> str | None:
    """Why a fetch failed, when the cause (anywhere in `exc`'s chain) is TLS; else None.

    One line, without addresses: the certificate's verification message, or the handshake's reason.
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLCertVerificationError):
            why = _one_line(cause.verify_message or cause.reason or "verification failed").rstrip(".")
            unknown = cause.verify_code in _UNKNOWN_ISSUER
            hint = " (an internal CA? add it with L4_FETCH_CA_BUNDLE)" if unknown else ""
            return f"the server's TLS certificate was not accepted: {why}{hint}"
        if isinstance(cause, ssl.SSLError):
            reason = (cause.reason or "").replace("_", " ").lower()
            hint = "; is it an http:// server?" if cause.reason == "WRONG_VERSION_NUMBER" else ""
            return f"TLS handshake failed ({_one_line(reason) or 'no reason given'}{hint})"
        cause = cause.__cause__ or cause.__context__
    return None


def _one_line(text: str, limit: int = 160) -> str:
    return shorten(" ".join(str(text).split()), limit)

"""Where a job's logs come from: job IDs, failure-report links and log stores, fetched safely.

`bot.resolve.resolve()` is the entry point; the modules here are its parts:
`jobids` (validation), `netguard` (host allowlist, address checks, DNS pinning), `fetch` (guarded
streaming HTTP with limits), `decompress` (bomb caps), `cache` (URL+ETag keyed, size-capped),
`reports` (failure-report documents and URL rules), `listing` (a remote job's files),
`logroot` (log roots: local, file://, fsspec, http(s)).
"""
from __future__ import annotations

import typing

if typing.TYPE_CHECKING:
    from bot.config import Settings


def validate_settings(settings: Settings) -> None:
    """Check the fetch settings once, at start (`l4 bot`), so a mistake is not first met on a
    user's link: L4_REPORT_NETWORKS/L4_REPORT_HOSTS (the address policy), L4_REPORT_RULES (the
    report rules file), L4_FETCH_CA_BUNDLE (a readable PEM file), the L4_LOG_ROOT storage backend
    (installed; nothing is contacted) and the cache folder (L4_CACHE_DIR, created when missing).
    Raises bot.config.ConfigError (one line)."""
    import os

    from bot.config import ConfigError
    from bot.sources.cache import cache_root
    from bot.sources.logroot import FSSPEC_EXTRAS, root_kind
    from bot.sources.netguard import AddressPolicy
    from bot.sources.reports import load_rules
    from bot.sources.tls import client_context

    AddressPolicy(settings)
    load_rules(settings.report_rules)
    client_context(settings.fetch_ca_bundle)
    if root_kind(settings.log_root) == "fsspec":
        import fsspec

        scheme = settings.log_root.split("://", 1)[0].lower()
        try:
            fsspec.get_filesystem_class(scheme)
        except ImportError:
            extra = FSSPEC_EXTRAS.get(scheme)
            hint = f"pip install 'l4[{extra}]'" if extra else "install its fsspec backend"
            raise ConfigError(f"L4_LOG_ROOT: reading {scheme}:// needs more packages: {hint}") from None
        except ValueError:
            raise ConfigError(f"L4_LOG_ROOT: unknown storage protocol {scheme[:20]}://") from None
    cache = cache_root(settings)
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = exc.strerror or exc.__class__.__name__
        raise ConfigError(f"L4_CACHE_DIR: cannot create {str(cache)[:120]}: {why}") from None
    if not os.access(cache, os.W_OK | os.X_OK):
        raise ConfigError(f"L4_CACHE_DIR: {str(cache)[:120]} is not writable")

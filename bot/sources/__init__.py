"""Where a job's logs come from: job IDs, failure-report links and log stores, fetched safely.

`bot.resolve.resolve()` is the entry point; the modules here are its parts:
`jobids` (validation), `netguard` (host allowlist, address checks, DNS pinning), `fetch` (guarded
streaming HTTP with limits), `decompress` (bomb caps), `cache` (URL+ETag keyed, size-capped),
`reports` (failure-report documents and URL rules), `listing` (a remote job's files),
`logroot` (log roots: local, file://, fsspec, http(s)).
"""

"""Which hosts and addresses L4 may fetch from, and connections pinned to the address it checked.

A pasted link is attacker-controlled input, so every fetch goes through three gates:

1. `host_allowed`: the URL's host must be in `L4_REPORT_HOSTS` (checked for the link and for every
   redirect hop, by `fetch.Fetcher`).
2. `AddressPolicy.check`: the host is resolved once (`resolve_addresses`, the one resolver L4 uses;
   tests replace it) and every address must be public. Loopback, private, link-local, CGNAT,
   reserved, multicast and cloud-metadata addresses are refused unless explicitly allowlisted: an
   IP literal in `L4_REPORT_HOSTS`, or a network in `L4_REPORT_NETWORKS`. Metadata addresses
   (169.254.169.254...) only by their exact address, never through a wider network. An IPv6
   address that carries an IPv4 address it reaches (IPv4-mapped/-translated/-compatible, NAT64
   64:ff9b::/96, 6to4 2002::/16) is judged as that IPv4 address; the local-use NAT64 prefix
   64:ff9b:1::/48 only when allowlisted; Teredo (2001::/32) is not public.
3. `GuardedBackend`: httpcore's network backend whose `connect_tcp` runs gate 2 and connects to
   the address it just vetted, so there is no window between check and connect (no DNS rebinding).
   TLS still verifies the certificate and sends SNI for the URL's hostname, and the Host header
   is the URL's, because httpcore passes those separately from the socket address.
"""
from __future__ import annotations

import ipaddress
import socket
import ssl
import typing
from urllib.parse import urlsplit

import httpcore
import httpx

from bot.config import ConfigError, Settings
from bot.sources.tls import client_context
from engine.ingest import JobError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# cloud instance-metadata endpoints: AWS/GCP/Azure/OpenStack, AWS ECS, AWS IPv6, Alibaba, Oracle
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "192.0.0.192")
)


class Refused(JobError):
    """A fetch L4 will not make (host not allowlisted, address not public...). One safe line."""


def normalize_host(host: str) -> str:
    """Lowercase, without a trailing dot or IPv6 brackets."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


def _ip(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(normalize_host(text))
    except ValueError:
        return None


def host_allowed(host: str, settings: Settings) -> bool:
    """True when `host` may be fetched from, by `settings.report_hosts` (L4_REPORT_HOSTS).

    Matching is case-insensitive and ignores a trailing dot; ports are not considered.
    An entry `name.example.com` matches exactly that name. An entry `*.example.com` matches every
    name below example.com (`a.example.com`, `a.b.example.com`) but not `example.com` itself.
    An IP-literal entry (`10.1.2.3`, `::1` or `[::1]`) matches the same address written any way.
    An empty list allows nothing. This says nothing about where the name resolves: fetches also
    pass `AddressPolicy`.
    """
    name = normalize_host(host)
    if not name:
        return False
    ip = _ip(name)
    for raw in settings.report_hosts:
        entry = normalize_host(raw)
        if not entry:
            continue
        if ip is not None:
            if _ip(entry) == ip:
                return True
        elif entry.startswith("*."):
            if name.endswith(entry[1:]) and len(name) > len(entry) - 1:
                return True
        elif entry == name:
            return True
    return False


def safe_url(url: str | httpx.URL, limit: int = 120) -> str:
    """`url` fit for messages and logs: no user/password, no query string, no fragment."""
    try:
        parts = urlsplit(str(url))
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(malformed URL)"
    if ":" in host:
        host = f"[{host}]"
    text = f"{parts.scheme}://{host}{port}{parts.path}" if parts.scheme else parts.path
    if parts.query:
        text += "?…"
    text = text.replace("\n", " ").replace("\r", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def resolve_addresses(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, in the resolver's order (the only DNS lookup L4 makes)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[str] = []
    for info in infos:
        addr = str(info[4][0]).split("%", 1)[0]
        if addr not in seen:
            seen.append(addr)
    return seen


# IPv6 prefixes whose last 32 bits are the IPv4 address reached: IPv4-mapped, IPv4-translated
# (SIIT), NAT64 well-known prefix, IPv4-compatible (deprecated; :: and ::1 excepted)
_EMBED_LAST_32 = tuple(ipaddress.ip_network(n) for n in ("::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96",
                                                         "::/96"))
_NOT_EMBEDDING = tuple(ipaddress.ip_network(n) for n in ("::/127",))
# local-use NAT64 (RFC 8215): operator-specific layout, never public
LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")


def _unmapped(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address reaches when it embeds one (::ffff:a.b.c.d, 64:ff9b::a.b.c.d,
    2002:AABB:CCDD::/48 6to4, ::a.b.c.d...); else `ip`."""
    if not isinstance(ip, ipaddress.IPv6Address) or any(ip in n for n in _NOT_EMBEDDING):
        return ip
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in n for n in _EMBED_LAST_32):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def _kind(ip: IPAddress) -> str:
    if ip in METADATA_ADDRESSES:
        return "cloud-metadata"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_private:
        return "private"
    if ip.is_multicast:
        return "multicast"
    return "non-public"


class AddressPolicy:
    """Which resolved addresses may be connected to (public ones, plus explicit exceptions)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.networks: list[IPNetwork] = []
        for raw in settings.report_networks:
            try:
                self.networks.append(ipaddress.ip_network(raw.strip(), strict=False))
            except ValueError:
                raise ConfigError(f"L4_REPORT_NETWORKS: not a network: {raw.strip()[:60]!r}") from None
        for raw in settings.report_hosts:
            ip = _ip(raw)
            if ip is not None:
                self.networks.append(ipaddress.ip_network(ip))

    def address_ok(self, ip: IPAddress) -> bool:
        """True for a public address, or one allowlisted (as written, or as the IPv4 it embeds)."""
        target = _unmapped(ip)
        forms = (ip, target)

        def listed(exact: bool = False) -> bool:
            return any((net.num_addresses == 1 or not exact) and any(a in net for a in forms)
                       for net in self.networks)

        if target in METADATA_ADDRESSES:  # only by its exact address
            return listed(exact=True)
        if target in LOCAL_NAT64:
            return listed()
        if target.is_global and not target.is_multicast:
            return True
        return listed()

    def check(self, host: str, port: int) -> str:
        """The address to connect to for `host`, or Refused. Every resolved address must pass."""
        name = normalize_host(host)
        if not host_allowed(name, self.settings):
            raise Refused(f"refused: host {name[:80]} is not in L4_REPORT_HOSTS")
        literal = _ip(name)
        if literal is not None:
            addresses = [str(literal)]
        else:
            try:
                addresses = resolve_addresses(name, port)
            except (OSError, UnicodeError):
                raise JobError(f"cannot resolve host {name[:80]}") from None
            if not addresses:
                raise JobError(f"cannot resolve host {name[:80]}")
        for text in addresses:
            ip = _unmapped(ipaddress.ip_address(text))
            if not self.address_ok(ip):
                # name the address only when the user wrote it; never leak what DNS said
                where = f"{name} is a" if literal is not None else f"{name[:80]} resolves to a"
                raise Refused(
                    f"refused: {where} {_kind(ip)} address (allow it with L4_REPORT_NETWORKS if intended)"
                )
        return addresses[0]


class DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every read, write and TLS handshake waits at most until a deadline
    (`remaining()` seconds from now): a server sending one byte a second is cut at the deadline."""

    def __init__(self, stream: httpcore.NetworkStream, remaining: typing.Callable[[], float]) -> None:
        self.stream = stream
        self.remaining = remaining

    def _timeout(self, timeout: float | None, kind: type[Exception]) -> float:
        left = self.remaining()
        if left <= 0:
            raise kind("the fetch time limit has passed")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.stream.read(max_bytes, self._timeout(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.stream.write(buffer, self._timeout(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self.stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        left = self._timeout(timeout, httpcore.ConnectTimeout)
        tls = self.stream.start_tls(ssl_context, server_hostname, left)
        return DeadlineStream(tls, self.remaining)

    def get_extra_info(self, info: str) -> typing.Any:
        return self.stream.get_extra_info(info)


class GuardedBackend(httpcore.SyncBackend):
    """httpcore network backend: vet the host, then connect to exactly the vetted address. With
    `remaining` (seconds left of the fetch's time limit), no socket operation waits past it."""

    def __init__(self, policy: AddressPolicy, remaining: typing.Callable[[], float] | None = None) -> None:
        self.policy = policy
        self.remaining = remaining

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        address = self.policy.check(host, port)
        if self.remaining is None:
            return super().connect_tcp(address, port, timeout, local_address, socket_options)
        left = self.remaining()
        if left <= 0:
            raise httpcore.ConnectTimeout("the fetch time limit has passed")
        stream = super().connect_tcp(address, port, left if timeout is None else min(timeout, left),
                                     local_address, socket_options)
        return DeadlineStream(stream, self.remaining)

    def connect_unix_socket(self, *args: typing.Any, **kwargs: typing.Any) -> httpcore.NetworkStream:
        raise Refused("refused: unix sockets are not fetched from")


class PinnedTransport(httpx.HTTPTransport):
    """httpx's transport with L4's guarded backend; no proxies (a proxy would do its own DNS).

    Its TLS context is built once, here: certifi's CAs plus `L4_FETCH_CA_BUNDLE` (`tls.client_context`)
    unless `ssl_context` is given."""

    def __init__(self, policy: AddressPolicy, ssl_context: ssl.SSLContext | None = None,
                 remaining: typing.Callable[[], float] | None = None) -> None:
        self.ssl_context = ssl_context or client_context(policy.settings.fetch_ca_bundle)
        super().__init__(verify=self.ssl_context, trust_env=False)
        if not hasattr(self, "_pool"):  # httpx changed its internals: fail loudly, never unguarded
            raise RuntimeError("httpx.HTTPTransport has no _pool; the guarded transport needs updating")
        self._pool = httpcore.ConnectionPool(
            ssl_context=self.ssl_context,
            max_connections=10,
            max_keepalive_connections=5,
            network_backend=GuardedBackend(policy, remaining),
        )

"""Which vLLM server addresses a user of a shared dashboard may name: this machine, or hosts the admin lists.

A run given `vllm_server_base_url` is checked before launch by a GET of the
address's /health, from the server, and the run then talks to it. On a
dashboard with accounts that would let any user make the server reach any
address its network does (an internal service, a cloud metadata address), so
the address must be loopback (127.0.0.0/8, ::1, localhost) or one of the
hosts in WORKBENCH_VLLM_HOSTS (`host1,host2`, names or addresses as they are
written in the URL). It is refused before any request is made. Pure standard
library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from workbench.access.users import is_loopback
from workbench.errors import WorkbenchError

VLLM_HOSTS_ENV = "WORKBENCH_VLLM_HOSTS"


def listed_hosts(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The hosts the admin allows besides loopback: WORKBENCH_VLLM_HOSTS, comma-separated (lower case)."""
    text = (os.environ if environ is None else environ).get(VLLM_HOSTS_ENV) or ""
    return frozenset(host.strip().strip("[]").lower() for host in text.split(",") if host.strip())


def check_server_url(url: str, hosts: frozenset[str] = frozenset()) -> None:
    """Refuse (WorkbenchError naming vllm_server_base_url) an address that is neither loopback nor in `hosts`.

    "" (the run starts its own server, on loopback) passes.
    """
    url = (url or "").strip()
    if not url:
        return
    try:
        host = urlsplit(url).hostname or ""  # what urllib connects to: `user@`, case and brackets taken off
    except ValueError:
        host = ""
    if host and (is_loopback(host) or host in hosts):
        return
    listed = f" ({', '.join(sorted(hosts))})" if hosts else ""
    raise WorkbenchError(
        field="vllm_server_base_url",
        rule=f"{url[:80]!r} is not on this machine (loopback) nor a vLLM host the admin lists{listed}",
        fix=f"leave it empty so the run starts its own server, use http://127.0.0.1:PORT, or ask "
        f"the admin to add the host to {VLLM_HOSTS_ENV}",
    )

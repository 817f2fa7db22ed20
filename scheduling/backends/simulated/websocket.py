"""RFC 6455 websockets for the simulated cluster's stand-alone servers (standard library only): the answer to
the handshake and a server's side of the frames (a client's are masked, ours are not). Fragmented messages
are put back together; no extension (compression) is agreed, so frames with reserved bits are refused."""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from collections.abc import Mapping
from typing import BinaryIO, NoReturn

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
NORMAL, PROTOCOL_ERROR, NO_STATUS, ABNORMAL, INVALID_DATA, TOO_BIG = 1000, 1002, 1005, 1006, 1007, 1009


class Closed(Exception):
    """The connection is over: the peer closed it (its code), broke the protocol, or went away (1006)."""

    def __init__(self, code: int, reason: str = ""):
        super().__init__(f"{code} {reason}".strip())
        self.code = code


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key."""
    return base64.b64encode(hashlib.sha1((key + GUID).encode(), usedforsecurity=False).digest()).decode()


def handshake_problem(method: str, headers: Mapping[str, str]) -> str | None:
    """Why a request is not a websocket handshake (a 400 with this), None when it is one."""
    connection = {token.strip().lower() for token in headers.get("Connection", "").split(",")}
    if method != "GET" or headers.get("Upgrade", "").lower() != "websocket" or "upgrade" not in connection:
        return "a websocket (GET with Upgrade: websocket) is required here"
    if headers.get("Sec-WebSocket-Version") != "13":
        return "only websocket version 13 is spoken here"
    try:
        if len(base64.b64decode(headers.get("Sec-WebSocket-Key", ""), validate=True)) == 16:
            return None
    except binascii.Error:
        pass
    return "Sec-WebSocket-Key must be 16 bytes in base64"


def unmask(payload: bytes, mask: bytes) -> bytes:
    if not payload:
        return payload
    key = (mask * (len(payload) // 4 + 1))[: len(payload)]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(len(payload), "big")


def frame(opcode: int, payload: bytes) -> bytes:
    """One final, unmasked frame (a server's)."""
    size = len(payload)
    if size < 126:
        length = bytes([size])
    elif size < 1 << 16:
        length = bytes([126]) + size.to_bytes(2, "big")
    else:
        length = bytes([127]) + size.to_bytes(8, "big")
    return bytes([0x80 | opcode]) + length + payload


class Connection:
    """The server's side of an accepted websocket over a handler's rfile and wfile."""

    def __init__(self, rfile: BinaryIO, wfile: BinaryIO, *, max_message: int):
        self.rfile, self.wfile, self.max_message = rfile, wfile, max_message
        self.closed = False
        self._write_lock = threading.Lock()

    def receive(self) -> str | bytes:
        """The next message (text or binary); pings are answered on the way. Closed when it is over (a
        close from the peer is answered first)."""
        kind, parts, size = None, [], 0
        while True:
            fin, opcode, payload = self._frame()
            if opcode == PING:
                self._write(PONG, payload)
            elif opcode == PONG:
                pass
            elif opcode == CLOSE:
                code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else NO_STATUS
                self.close(code if len(payload) >= 2 else NORMAL)
                raise Closed(code, "closed by the peer")
            elif opcode not in (CONTINUATION, TEXT, BINARY):
                self._fail(PROTOCOL_ERROR, f"unknown opcode {opcode}")
            elif (opcode == CONTINUATION) != (kind is not None):
                self._fail(PROTOCOL_ERROR, "a continuation frame must follow a fragment, and only then")
            else:
                kind = kind or opcode
                size += len(payload)
                if size > self.max_message:
                    self._fail(TOO_BIG, f"a message is at most {self.max_message} bytes")
                parts.append(payload)
                if fin:
                    return self._message(kind, b"".join(parts))

    def send(self, data: str | bytes) -> None:
        self._write(TEXT, data.encode()) if isinstance(data, str) else self._write(BINARY, data)

    def close(self, code: int = NORMAL, reason: str = "") -> None:
        if not self.closed:
            try:
                self._write(CLOSE, code.to_bytes(2, "big") + reason.encode()[:123])
            except Closed:
                pass
            self.closed = True

    def _message(self, kind: int, data: bytes) -> str | bytes:
        if kind == BINARY:
            return data
        try:
            return data.decode()
        except UnicodeDecodeError:
            self._fail(INVALID_DATA, "a text message must be UTF-8")

    def _frame(self) -> tuple[bool, int, bytes]:
        first, second = self._read(2)
        fin, opcode, length = bool(first & 0x80), first & 0x0F, second & 0x7F
        if first & 0x70:
            self._fail(PROTOCOL_ERROR, "reserved bits are set but no extension was agreed")
        if not second & 0x80:
            self._fail(PROTOCOL_ERROR, "a client's frames must be masked")
        if length == 126:
            length = int.from_bytes(self._read(2), "big")
        elif length == 127:
            length = int.from_bytes(self._read(8), "big")
        if opcode >= CLOSE and (length > 125 or not fin):
            self._fail(PROTOCOL_ERROR, "a control frame is at most 125 bytes and never fragmented")
        if length > self.max_message:
            self._fail(TOO_BIG, f"a message is at most {self.max_message} bytes")
        mask = self._read(4)
        return fin, opcode, unmask(self._read(length), mask)

    def _read(self, size: int) -> bytes:
        try:
            data = self.rfile.read(size) if size else b""
        except OSError:
            data = b""
        if len(data) < size:
            self.closed = True
            raise Closed(ABNORMAL, "the connection was dropped")
        return data

    def _write(self, opcode: int, payload: bytes) -> None:
        if self.closed:
            raise Closed(ABNORMAL, "already closed")
        try:
            with self._write_lock:
                self.wfile.write(frame(opcode, payload))
                self.wfile.flush()
        except OSError:
            self.closed = True
            raise Closed(ABNORMAL, "the connection was dropped") from None

    def _fail(self, code: int, reason: str) -> NoReturn:
        self.close(code, reason)
        raise Closed(code, reason)

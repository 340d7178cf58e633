"""RemotingCommand: the frame every RocketMQ 4.x peer exchanges, and its sans-I/O codec.

Mirrors RocketMQ's ``RemotingCommand`` / ``RocketMQSerializable`` / ``NettyDecoder``.

Frame layout (all integers big-endian)::

    0    4  L = length of everything after this field (= 4 + H + B)
    4    4  W = high byte: serialize type (0 JSON, 1 ROCKETMQ), low 24 bits: header length H
    8    H  header (JSON text, or ROCKETMQ binary)
    8+H  B  body (opaque bytes, B = L - 4 - H)

We always *emit* JSON headers with type byte 0 (the C++ client and ali-ons read ``W`` unmasked).
We *accept* both JSON and ROCKETMQ binary headers, ext-field values that are strings, numbers or
booleans (normalised to Java's ``toString()`` form), and the C++ client's trailing newline.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field
from typing import Any

import orjson

from tidemq.errors import LocalProtocolError, RemotingCommandError
from tidemq.protocol.codes import TIDEMQ_VERSION, LanguageCode, SerializeType

MAX_FRAME_SIZE = 16 * 1024 * 1024
"""Largest accepted value of ``L`` (RocketMQ's ``com.rocketmq.remoting.frameMaxLength``)."""

RPC_TYPE_RESPONSE = 0x1
RPC_ONEWAY = 0x2

_INT = struct.Struct(">i")
_UINT = struct.Struct(">I")
_TWO_INTS = struct.Struct(">iI")
_LANG_BY_ORDINAL = {int(lc): lc.name for lc in LanguageCode}
_opaque_counter = itertools.count(1)


def next_opaque() -> int:
    """Return a fresh request id (positive, wraps below 2**31; never 0, which ali-ons mistreats)."""
    return next(_opaque_counter) % 0x7FFFFFFF or next(_opaque_counter)


def ext_value_to_str(value: Any) -> str | None:
    """Normalise one ext-field value to Java's ``toString()`` form.

    ``4`` -> ``"4"``, ``True`` -> ``"true"``, ``None`` -> ``None`` (the field is absent),
    a float with an integral value (``4.0``) -> ``"4"``; strings are kept as they are.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return orjson.dumps(value).decode()


@dataclass(slots=True)
class RemotingCommand:
    """One request or response.

    Attributes:
        code: request code (request) or response code (response); a plain int.
        language: sender's LanguageCode name, e.g. ``"JAVA"``, ``"CPP"``.
        version: sender's MQVersion ordinal.
        opaque: request id, copied into the response.
        flag: bit 0 = response, bit 1 = oneway.
        remark: free text; error text in error responses.
        ext_fields: the custom header, always ``str -> str``.
        body: opaque payload bytes.
    """

    code: int
    language: str = "JAVA"
    version: int = TIDEMQ_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: int = SerializeType.JSON

    @classmethod
    def create_request(
        cls, code: int, ext_fields: dict[str, str] | None = None, body: bytes = b"", *, oneway: bool = False
    ) -> RemotingCommand:
        """Build a request with a fresh opaque. Mirrors ``RemotingCommand.createRequestCommand``."""
        return cls(
            code=int(code),
            opaque=next_opaque(),
            flag=RPC_ONEWAY if oneway else 0,
            ext_fields=dict(ext_fields or {}),
            body=body,
        )

    @classmethod
    def create_response(
        cls,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        opaque: int = 0,
    ) -> RemotingCommand:
        """Build a response. ``opaque`` is usually set with :meth:`response_to`."""
        return cls(
            code=int(code),
            opaque=opaque,
            flag=RPC_TYPE_RESPONSE,
            remark=remark,
            ext_fields=dict(ext_fields or {}),
            body=body,
        )

    def response_to(self, request: RemotingCommand) -> RemotingCommand:
        """Mark this command as the response to ``request`` (copy opaque, set the response bit)."""
        self.opaque = request.opaque
        self.flag |= RPC_TYPE_RESPONSE
        return self

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def mark_oneway(self) -> None:
        self.flag |= RPC_ONEWAY

    def header_dict(self) -> dict[str, Any]:
        """The JSON header as Java's fastjson writes it (fields alphabetical, nulls omitted)."""
        header: dict[str, Any] = {"code": self.code}
        if self.ext_fields:
            header["extFields"] = self.ext_fields
        header["flag"] = self.flag
        header["language"] = self.language
        header["opaque"] = self.opaque
        if self.remark is not None:
            header["remark"] = self.remark
        header["serializeTypeCurrentRPC"] = "JSON"
        header["version"] = self.version
        return header


def encode_command(cmd: RemotingCommand, max_frame_size: int = MAX_FRAME_SIZE) -> bytes:
    """Encode ``cmd`` as one frame with a JSON header (type byte 0), length prefix included.

    Raises:
        LocalProtocolError: the frame would exceed ``max_frame_size`` or an ext-field is not a str.
    """
    try:
        header = orjson.dumps(cmd.header_dict())
    except TypeError as exc:
        raise LocalProtocolError(f"cannot encode header of code {cmd.code}: {exc}") from exc
    length = 4 + len(header) + len(cmd.body)
    if length > max_frame_size:
        raise LocalProtocolError(f"frame of {length} bytes exceeds the {max_frame_size}-byte limit")
    return b"".join((_TWO_INTS.pack(length, len(header)), header, cmd.body))


def encode_command_rocketmq(cmd: RemotingCommand) -> bytes:
    """Encode ``cmd`` with a ROCKETMQ binary header (type byte 1). Used by tests and Java peers."""
    remark = (cmd.remark or "").encode()
    ext = b"".join(
        struct.pack(">h", len(k.encode())) + k.encode() + _INT.pack(len(v.encode())) + v.encode()
        for k, v in cmd.ext_fields.items()
    )
    lang = LanguageCode[cmd.language] if cmd.language in LanguageCode.__members__ else LanguageCode.OTHER
    header = (
        struct.pack(">hbhii", cmd.code, int(lang), cmd.version, cmd.opaque, cmd.flag)
        + _INT.pack(len(remark))
        + remark
        + _INT.pack(len(ext))
        + ext
    )
    length = 4 + len(header) + len(cmd.body)
    return _TWO_INTS.pack(length, (SerializeType.ROCKETMQ << 24) | len(header)) + header + cmd.body


def _language_name(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return _LANG_BY_ORDINAL.get(value, "OTHER")
    if isinstance(value, str):
        return value
    raise RemotingCommandError(f"header field 'language' must be a name or ordinal, got {value!r}")


def _int_field(header: dict[str, Any], name: str, default: int | None = None) -> int:
    value = header.get(name, default)
    if type(value) is int and -0x80000000 <= value <= 0x7FFFFFFF:
        return value
    if isinstance(value, bool) or value is None:
        raise RemotingCommandError(f"header field {name!r} missing or not an integer: {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise RemotingCommandError(f"header field {name!r} is not an integer: {value!r}") from None
    if not -0x80000000 <= number <= 0x7FFFFFFF:  # Java int: an echoed opaque must stay encodable
        raise RemotingCommandError(f"header field {name!r} is outside the 32-bit range: {number}")
    return number


_STR_ONLY = frozenset((str,))
_INT_MIN, _INT_MAX = -0x80000000, 0x7FFFFFFF


def decode_json_header(raw: bytes | memoryview, body: bytes) -> RemotingCommand:
    """Decode a JSON header (trailing whitespace such as C++'s newline is fine)."""
    try:
        header = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RemotingCommandError(f"header is not valid JSON: {exc}") from exc
    if type(header) is not dict:
        raise RemotingCommandError(f"header must be a JSON object, got {type(header).__name__}")
    get = header.get
    ext_raw = get("extFields") or {}
    if type(ext_raw) is not dict:
        raise RemotingCommandError("header field 'extFields' must be an object")
    ext: dict[str, str]
    if _STR_ONLY.issuperset(map(type, ext_raw.values())):
        ext = ext_raw  # what every client sends: JSON keys are str already
    else:
        ext = {}
        for key, value in ext_raw.items():
            text = ext_value_to_str(value)
            if text is not None:
                ext[key] = text
    # the four ints as every client sends them (plain 32-bit JSON numbers) without a call each
    code, version, opaque, flag = get("code"), get("version", 0), get("opaque", 0), get("flag", 0)
    if not (
        type(code) is int
        and type(version) is int
        and type(opaque) is int
        and type(flag) is int
        and _INT_MIN <= code <= _INT_MAX
        and _INT_MIN <= version <= _INT_MAX
        and _INT_MIN <= opaque <= _INT_MAX
        and _INT_MIN <= flag <= _INT_MAX
    ):
        code = _int_field(header, "code")
        version = _int_field(header, "version", 0)
        opaque = _int_field(header, "opaque", 0)
        flag = _int_field(header, "flag", 0)
    language = get("language", "JAVA")
    if type(language) is not str:
        language = _language_name(language)
    remark = get("remark")
    return RemotingCommand(
        code,
        language,
        version,
        opaque,
        flag,
        None if remark is None else str(remark),
        ext,
        body,
        SerializeType.JSON,
    )


def decode_rocketmq_header(raw: bytes | memoryview, body: bytes) -> RemotingCommand:
    """Decode a ROCKETMQ binary header (``RocketMQSerializable.rocketMQProtocolDecode``)."""
    view = memoryview(raw)
    try:
        code, lang, version, opaque, flag = struct.unpack_from(">hbhii", view, 0)
        pos = 13
        (remark_len,) = _INT.unpack_from(view, pos)
        pos += 4
        if remark_len < 0 or pos + remark_len > len(view):
            raise RemotingCommandError(f"ROCKETMQ header remark length {remark_len} runs past the header")
        remark = bytes(view[pos : pos + remark_len]).decode() if remark_len > 0 else None
        pos += remark_len
        (ext_len,) = _INT.unpack_from(view, pos)
        pos += 4
        end = pos + ext_len
        if ext_len < 0 or end > len(view):
            raise RemotingCommandError(f"ROCKETMQ header ext length {ext_len} runs past the header")
        ext: dict[str, str] = {}
        while pos < end:
            # Lengths are checked before use: a negative one would move pos backwards forever.
            (klen,) = struct.unpack_from(">h", view, pos)
            pos += 2
            if klen < 0 or pos + klen + 4 > end:
                raise RemotingCommandError(f"ROCKETMQ header ext key length {klen} is invalid")
            key = bytes(view[pos : pos + klen]).decode()
            pos += klen
            (vlen,) = _INT.unpack_from(view, pos)
            pos += 4
            if vlen < 0 or pos + vlen > end:
                raise RemotingCommandError(f"ROCKETMQ header ext value length {vlen} is invalid")
            ext[key] = bytes(view[pos : pos + vlen]).decode()
            pos += vlen
    except (struct.error, UnicodeDecodeError) as exc:
        raise RemotingCommandError(f"malformed ROCKETMQ header: {exc}") from exc
    return RemotingCommand(
        code=code,
        language=_LANG_BY_ORDINAL.get(lang, "OTHER"),
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        body=body,
        serialize_type=SerializeType.ROCKETMQ,
    )


def decode_frame(frame: bytes | memoryview) -> RemotingCommand:
    """Decode one frame *without* its 4-byte length prefix (``W`` + header + body)."""
    if len(frame) < 4:
        raise RemotingCommandError(f"frame of {len(frame)} bytes is shorter than its header-length word")
    cmd, body_at = decode_frame_head(frame, 0, len(frame))
    cmd.body = frame[body_at:] if isinstance(frame, bytes) else bytes(frame[body_at:])
    return cmd


def frame_length_error(length: int, max_frame_size: int) -> RemotingCommandError:
    """The error for a length prefix ``L`` outside ``[4, max_frame_size]`` (every frame reader's check)."""
    return RemotingCommandError(f"frame length {length} outside [4, {max_frame_size}] bytes")


def decode_frame_head(
    buf: bytes | bytearray | memoryview, start: int, end: int
) -> tuple[RemotingCommand, int]:
    """Decode the header of the frame (without its length prefix) in ``buf[start:end]``, at least 4
    bytes: the command with an empty ``body``, and where its body starts in ``buf`` (the body is
    ``buf[body_at:end]``). The header of a ``bytes`` buffer is its slice, of a memoryview a view (no
    copy), of a bytearray a copy (the buffer may be resized meanwhile).

    Raises:
        RemotingCommandError: the header length runs past ``end``, an unknown serialize type, or a
            malformed header.
    """
    (word,) = _UINT.unpack_from(buf, start)
    stype, hlen = word >> 24, word & 0xFFFFFF
    body_at = start + 4 + hlen
    if body_at > end:
        raise RemotingCommandError(f"header length {hlen} exceeds frame length {end - start}")
    raw = bytes(buf[start + 4 : body_at]) if isinstance(buf, bytearray) else buf[start + 4 : body_at]
    if stype == SerializeType.JSON:
        return decode_json_header(raw, b""), body_at
    if stype == SerializeType.ROCKETMQ:
        return decode_rocketmq_header(raw, b""), body_at
    raise RemotingCommandError(f"unknown serialize type {stype}")


class FrameDecoder:
    """Incremental decoder: feed bytes as they arrive, get whole commands back.

    Mirrors ``NettyDecoder`` (a ``LengthFieldBasedFrameDecoder``). Sans-I/O: no sockets here.

    Args:
        max_frame_size: largest accepted ``L`` in bytes (default 16 MiB).

    Raises (from :meth:`feed`):
        RemotingCommandError: a frame is oversized, truncated inside, or its header is malformed.
            The decoder is then poisoned: the caller must close the connection.
    """

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._failed: RemotingCommandError | None = None
        self.clean = True
        """No bytes buffered and no frame failed: the next bytes fed start a frame (a reader may take a
        whole frame itself, as the channel's fast path does, without the decoder)."""

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a whole frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """Add ``data`` and return every command it completes (possibly none)."""
        if self._failed is not None:
            raise self._failed
        buf: bytes | bytearray
        if self._buf:
            self._buf += data
            buf = self._buf
        else:
            buf = data  # the usual case: decoded where it arrived, only an incomplete tail is kept
        out: list[RemotingCommand] = []
        pos = 0
        size = len(buf)
        try:
            while size - pos >= 4:
                (length,) = _INT.unpack_from(buf, pos)
                if length < 4 or length > self.max_frame_size:
                    raise frame_length_error(length, self.max_frame_size)
                end = pos + 4 + length
                if end > size:
                    break
                cmd, body_at = decode_frame_head(buf, pos + 4, end)
                cmd.body = buf[body_at:end] if isinstance(buf, bytes) else bytes(buf[body_at:end])
                out.append(cmd)
                pos = end
        except RemotingCommandError as exc:
            self._failed = exc
            raise
        finally:
            if buf is self._buf:
                if pos:
                    del self._buf[:pos]
            elif pos < size:
                self._buf += memoryview(buf)[pos:]
            self.clean = not self._buf and self._failed is None
        return out

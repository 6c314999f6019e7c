"""How ``slipstream consume`` prints a record: ``--output value|text|json``.

- ``value`` (default): the value alone (``--print-key``: key SEP value), as before;
- ``text``: one line per record, ``partition offset key value headers`` labelled
  (``p=0 o=42 key=k1 value=hello headers=[h1=v1]``);
- ``json``: one JSON object per line with topic, partition, offset, timestamp, key,
  value and headers. Bytes that are valid UTF-8 appear as strings; others as
  ``{"base64": "..."}``, so no byte is lost. A null key or value is ``null``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from ..protocol.records import MessageFields

OUTPUTS = ("value", "text", "json")


def _text(data: bytes | None) -> str:
    return "null" if data is None else bytes(data).decode(errors="replace")


def _json_bytes(data: bytes | None) -> Any:
    if data is None:
        return None
    raw = bytes(data)
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode()}


def format_record(msg: MessageFields, output: str, *, print_key: bool = False, key_separator: str = "\t") -> str:
    if output == "json":
        return json.dumps(
            {
                "topic": msg.topic,
                "partition": msg.partition,
                "offset": msg.offset,
                "timestamp": msg.timestamp,
                "key": _json_bytes(msg.key),
                "value": _json_bytes(msg.value),
                "headers": [[k, _json_bytes(v)] for k, v in msg.headers],
            },
            ensure_ascii=False,
        )
    if output == "text":
        headers = ",".join(f"{k}={_text(v)}" for k, v in msg.headers)
        return f"p={msg.partition} o={msg.offset} key={_text(msg.key)} value={_text(msg.value)} headers=[{headers}]"
    value = (msg.value or b"").decode(errors="replace")
    if print_key:
        return f"{(msg.key or b'').decode(errors='replace')}{key_separator}{value}"
    return value

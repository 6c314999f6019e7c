"""Regex subscriptions: which topic names a member's regex selects.

Kafka compiles the regex with RE2/J and keeps a topic when the whole name matches.
We use RE2 through the ``google-re2`` package (module ``re2``), which shares RE2/J's
syntax: no backreferences or lookaround, linear-time matching. It is imported on
first use, so the rest of the package works where it is not installed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from .errors import InvalidRegularExpressionError


@functools.cache
def _re2() -> tuple[Any, Any]:
    """The ``re2`` module and the compile options we use."""
    try:
        import re2
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("regex subscriptions need the google-re2 package") from e
    options = re2.Options()
    options.log_errors = False  # a bad client regex is an answer, not a log line
    return re2, options


@functools.lru_cache(maxsize=256)
def compile_subscription_regex(regex: str) -> Any:
    """The compiled pattern; ``InvalidRegularExpressionError`` when RE2 rejects it."""
    if regex == "":
        raise InvalidRegularExpressionError("the subscribed topic regex is empty")
    re2, options = _re2()
    try:
        return re2.compile(regex, options)
    except re2.error as e:
        reason = e.args[0] if e.args else ""
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise InvalidRegularExpressionError(
            f"invalid regular expression {regex!r}: {reason}"
        ) from None


def validate_subscription_regex(regex: str) -> None:
    compile_subscription_regex(regex)


def matching_topics(regex: str, topic_names: Iterable[str]) -> frozenset[str]:
    """The names in ``topic_names`` that ``regex`` matches in full."""
    pattern = compile_subscription_regex(regex)
    return frozenset(name for name in topic_names if pattern.fullmatch(name) is not None)

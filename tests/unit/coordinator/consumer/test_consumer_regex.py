"""Regex subscriptions: RE2 syntax, full-name matches, invalid regexes."""

from __future__ import annotations

import pytest

from slipstream.coordinator.consumer import (
    InvalidRegularExpressionError,
    matching_topics,
    validate_subscription_regex,
)

TOPICS = ["orders", "orders-eu", "payments", "order", "xorders", "__consumer_offsets"]


def test_the_whole_name_must_match() -> None:
    assert matching_topics("orders", TOPICS) == frozenset({"orders"})
    assert matching_topics("orders.*", TOPICS) == frozenset({"orders", "orders-eu"})
    assert matching_topics(".*orders", TOPICS) == frozenset({"orders", "xorders"})


def test_alternation_classes_and_repetition() -> None:
    assert matching_topics("(orders|payments)", TOPICS) == frozenset({"orders", "payments"})
    assert matching_topics("order[s]?", TOPICS) == frozenset({"order", "orders"})
    assert matching_topics("[[:alpha:]]+", TOPICS) == frozenset(
        {"orders", "payments", "order", "xorders"}
    )


def test_internal_topics_match_like_any_name() -> None:
    # Filtering internal topics is the caller's decision, not the matcher's.
    assert matching_topics("__.*", TOPICS) == frozenset({"__consumer_offsets"})


def test_no_match_is_an_empty_set() -> None:
    assert matching_topics("nothing.*", TOPICS) == frozenset()
    assert matching_topics(".*", []) == frozenset()


@pytest.mark.parametrize(
    "regex",
    ["(", "[z-a]", "*", "a**", r"(a)\1", "(?=a)", "(?<!a)b", ""],
    ids=["unbalanced", "bad-range", "bare-star", "double-star", "backreference",
         "lookahead", "lookbehind", "empty"],
)
def test_invalid_or_non_re2_regex_is_rejected_with_its_error_code(regex: str) -> None:
    with pytest.raises(InvalidRegularExpressionError) as info:
        validate_subscription_regex(regex)
    assert info.value.code == 128
    assert repr(regex) in str(info.value) or regex == ""
    with pytest.raises(InvalidRegularExpressionError):
        matching_topics(regex, TOPICS)


def test_error_message_names_the_reason() -> None:
    with pytest.raises(InvalidRegularExpressionError, match="missing \\)"):
        validate_subscription_regex("(")

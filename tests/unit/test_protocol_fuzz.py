"""Property-based fuzz of every request decoder and the record-batch decoder (small budget).

No input may make a decoder raise anything but its protocol error. The long run is
``bench/fuzz_protocol.py --examples 100000``; this one keeps ``make test`` quick.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from slipstream.protocol.api import ApiSpec
from slipstream.testing import fuzz_strategies as strategies
from slipstream.testing import protocol_fuzz as fuzz

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_every_api_has_a_seed_for_every_version() -> None:
    cases = fuzz.request_cases()
    assert len({spec.key for spec, _ in cases}) >= 30
    for spec, version in cases:
        fuzz.check_request(spec, version, fuzz.request_seed(spec, version))
        fuzz.check_request_frame(fuzz.request_frame_seed(spec, version))


@FAST
@given(strategies.request_inputs())
def test_request_decoders_raise_only_decode_errors(case: tuple[ApiSpec, int, bytes]) -> None:
    fuzz.check_request(*case)


@FAST
@given(strategies.request_frames())
def test_request_frames_raise_only_decode_errors(data: bytes) -> None:
    fuzz.check_request_frame(data)


@FAST
@given(strategies.batch_inputs())
def test_batch_decoders_raise_only_batch_errors(data: bytes) -> None:
    fuzz.check_batch(data)

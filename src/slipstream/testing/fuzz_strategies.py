"""Hypothesis strategies for the protocol fuzz (imports hypothesis: tests and bench only)."""

from __future__ import annotations

import struct

from hypothesis import strategies as st

from slipstream.protocol.api import ApiSpec
from slipstream.protocol.record_batch import CRC_OFFSET, HEADER_SIZE, compute_crc

from . import protocol_fuzz as fuzz

edits = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=1 << 16),
        st.integers(min_value=0, max_value=8),
        st.one_of(st.sampled_from(fuzz.INTERESTING), st.binary(max_size=12)),
    ),
    min_size=1,
    max_size=6,
)


@st.composite
def request_inputs(draw: st.DrawFn) -> tuple[ApiSpec, int, bytes]:
    """(api, version, body): random bytes, or edits of the API's default request."""
    spec, version = draw(st.sampled_from(fuzz.request_cases()))
    if draw(st.booleans()):
        return spec, version, draw(st.binary(max_size=200))
    return spec, version, fuzz.apply_edits(fuzz.request_seed(spec, version), draw(edits))


@st.composite
def request_frames(draw: st.DrawFn) -> bytes:
    """Whole request frames (header + body): random bytes, or edits of a real frame."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    spec, version = draw(st.sampled_from(fuzz.request_cases()))
    frame = fuzz.request_frame_seed(spec, version)
    return fuzz.apply_edits(frame, draw(edits))


@st.composite
def batch_inputs(draw: st.DrawFn) -> bytes:
    """Edits of a small valid batch (each codec); often with the length and CRC repaired,
    so the damage is found past the header checks."""
    seed = draw(st.sampled_from(fuzz.batch_seeds()))
    data = bytearray(fuzz.apply_edits(seed, draw(edits)))
    if len(data) >= HEADER_SIZE and draw(st.booleans()):
        struct.pack_into(">i", data, 8, len(data) - 12)
        struct.pack_into(">I", data, CRC_OFFSET, compute_crc(bytes(data)))
    return bytes(data)

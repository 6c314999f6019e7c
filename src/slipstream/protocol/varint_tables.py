"""Lookup tables for the per-record loops that read zigzag varints inline.

``records.py``'s decoder and ``record_framing.py``'s produce check read every record's
varints in place; the lengths, deltas and sizes of typical records are one or two bytes,
so one list lookup replaces shift/xor/negate per field. Built once here (about 2 ms)
for both loops. The tables are built by C-level iterators, not Python loops: they are
made at every broker start (about half the time).
"""

from __future__ import annotations

import itertools

# Zigzag payloads below this fit in one or two varint bytes.
TABLE_LIMIT = 1 << 14

# Zigzag-decoded values of every 1- and 2-byte varint payload (below TABLE_LIMIT):
# z -> (z >> 1) ^ -(z & 1), that is 0, -1, 1, -2, 2, ... (even z to z/2, odd z to -(z+1)/2).
UNZIGZAG: list[int] = list(
    itertools.chain.from_iterable(zip(range(TABLE_LIMIT // 2), range(-1, -TABLE_LIMIT // 2 - 1, -1), strict=True))
)

# The same values indexed by ``b + c * 128`` for a varint whose first byte b has the
# continuation bit set and whose second byte is c: two bytecode ops (both specialized
# int add/multiply) instead of mask/shift/or, and the "second byte also continues" test
# folded in as None (any c >= 128 lands past the 2-byte entries).
UNZIGZAG_2: list[int | None] = (
    [None] * 0x80 + list(UNZIGZAG) + [None] * (0xFF + 0xFF * 0x80 + 1 - 0x80 - TABLE_LIMIT)
)

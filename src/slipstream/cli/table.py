"""Aligned text tables for the CLI's describe commands."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

EMPTY_CELL = "-"


def format_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """Lines of a table whose columns are left-aligned and two spaces apart
    (None and "" show as "-", so every cell splits as one word)."""
    cells = [list(headers)] + [[EMPTY_CELL if v is None or v == "" else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]

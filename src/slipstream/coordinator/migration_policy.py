"""The group.consumer.migration.policy setting (migration.py carries the conversions out)."""

from __future__ import annotations

import enum


class MigrationPolicy(enum.Enum):
    """``group.consumer.migration.policy``: which online conversions between the classic
    and the consumer group protocols are allowed (Kafka 4's default: bidirectional)."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"

    @classmethod
    def parse(cls, text: str) -> MigrationPolicy:
        """Case-insensitive, as Kafka reads it."""
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(
                f"group.consumer.migration.policy must be one of {', '.join(p.value for p in cls)}; got {text!r}"
            ) from None

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)

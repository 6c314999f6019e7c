"""Long-budget protocol fuzz: every request decoder, whole request frames, record batches.

    python bench/fuzz_protocol.py --examples 100000

Runs the properties of tests/unit/test_protocol_fuzz.py with many more examples each;
exits non-zero with the failing input on the first decoder that raises anything but
its protocol error.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings

from slipstream.testing import fuzz_strategies as strategies
from slipstream.testing import protocol_fuzz as fuzz


def run(name: str, strategy: Any, check: Callable[..., None], examples: int, star: bool) -> None:
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def prop(case: Any) -> None:
        if star:
            check(*case)
        else:
            check(case)

    started = time.perf_counter()
    prop()
    print(f"{name}: {examples} examples passed in {time.perf_counter() - started:.1f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=100_000, help="examples per property")
    args = parser.parse_args(argv)
    try:
        run("request bodies", strategies.request_inputs(), fuzz.check_request, args.examples, True)
        run("request frames", strategies.request_frames(), fuzz.check_request_frame, args.examples, False)
        run("record batches", strategies.batch_inputs(), fuzz.check_batch, args.examples, False)
    except fuzz.UnexpectedError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

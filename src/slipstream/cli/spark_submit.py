"""Entry script for ``spark-submit``: the same arguments as ``slipstream pipeline``.

    spark-submit --master spark://host:7077 "$(slipstream pipeline script)" \\
        run pageview-stats --bootstrap-server broker:9092

Every Spark node needs slipstream installed (``pip install 'slipstream[spark]'``)
in the Python that runs its workers (``PYSPARK_PYTHON``).
"""

import sys

from slipstream.cli import main

if __name__ == "__main__":
    sys.exit(main(["pipeline", *sys.argv[1:]]))

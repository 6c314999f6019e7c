"""ApiVersions advertises the admin handlers with exactly the ranges they serve."""

from __future__ import annotations

import pytest
from broker_helpers import raw_request

from slipstream.broker.broker import Broker
from slipstream.protocol.apis.api_versions import SPEC, ApiVersionsRequest

pytestmark = pytest.mark.timeout(30)

EXPECTED = {
    17: (0, 1),  # SaslHandshake
    21: (0, 2),  # DeleteRecords
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    37: (0, 3),  # CreatePartitions
    44: (0, 1),  # IncrementalAlterConfigs
    60: (0, 1),  # DescribeCluster
    75: (0, 0),  # DescribeTopicPartitions
    36: (0, 2),  # SaslAuthenticate
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
}


def test_admin_apis_advertised(broker: Broker) -> None:
    response = raw_request(broker, SPEC, 3, ApiVersionsRequest(
        client_software_name="slipstream-tests", client_software_version="0"
    ))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {key: advertised.get(key) for key in EXPECTED} == EXPECTED

"""The SageMaker backend's tests share AWS-as-moto behind the gateway with tests/aws (the
fixtures live there, next to the gateway they serve)."""

from tests.aws.conftest import _close_ledgers, cloud, gateway_server, gw  # noqa: F401

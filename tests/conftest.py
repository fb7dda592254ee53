"""Shared pytest options: ``--quick`` samples fewer points per case (``make test-quick``)."""

import pytest


def pytest_addoption(parser):
    parser.addoption("--quick", action="store_true", default=False,
                     help="fewer sample points per derivative check")


@pytest.fixture
def quick(request) -> bool:
    return request.config.getoption("--quick")

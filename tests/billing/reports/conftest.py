"""The `usage` fixture: see tests_reports_helpers.make_usage."""

import pytest
from tests_reports_helpers import Usage, make_usage


@pytest.fixture
def usage(cluster) -> Usage:
    return make_usage(cluster)

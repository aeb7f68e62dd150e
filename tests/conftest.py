"""Shared fixtures."""

import pytest

from afa import options as settings


@pytest.fixture
def active_options():
    """Make options active for the rest of a test that calls engine modules directly (accountants install
    their own): ``active_options(exact=afa.ExactOptions(max_atoms=5))``."""
    blocks = []

    def activate(**groups):
        block = settings.using(settings.current().replace(**groups))
        block.__enter__()
        blocks.append(block)

    yield activate
    for block in reversed(blocks):
        block.__exit__(None, None, None)

"""The end-to-end tests' browser: Debian's Chromium driven by Playwright, one per test process.

Every browser module (the console's pages, its views, its workflow, the programme at scale)
opens its own contexts in this one browser: launching Chromium and Playwright's driver again
for each module cost each a second or more of a loaded core, for nothing a test checks.
The browser's start also starts what later browser modules will serve (tests/support/ahead.py).
Without Chromium the browser tests skip with the reason; under CI=true they fail instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unavailable
from tests.support import ahead

CHROMIUM = Path("/usr/bin/chromium")
HAVE_CHROMIUM = CHROMIUM.exists()
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.fixture(scope="session")
async def browser(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Any]:
    if not HAVE_CHROMIUM:
        unavailable("Chromium", FileNotFoundError(f"{CHROMIUM} (apt-get install -y chromium)"))
    try:
        from playwright.async_api import async_playwright
    except ImportError as error:
        unavailable("Playwright", error)
    # The browser modules' slow data, built while the first modules run (tests/support/ahead).
    ahead.start_planned(
        {
            item.module.__name__
            for item in request.session.items
            if isinstance(item, pytest.Function)
        },
        tmp_path_factory,
    )
    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as driver:
        launched = await driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        await launched.close()

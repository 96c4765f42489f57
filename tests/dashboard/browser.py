"""Ray's dashboard in headless Chromium, logged in with the cluster's token, for the
browser tests (tests/dashboard/test_dashboard_browser.py, tests/tune/test_job_submit.py).
Debian's Chromium (``.ci/run`` installs it); nothing is downloaded."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]  # a container's small /dev/shm


@contextmanager
def dashboard_page(playwright_sync: Any, profile: Path, dashboard: str, token: str, *,
                   height: int, timeout_ms: int) -> Iterator[Any]:
    """A page of the dashboard at ``dashboard`` (its Jobs page), past the dashboard's
    token dialog (``token``: the cluster's), in a browser whose profile is
    ``profile``; the browser is closed after the block."""
    with playwright_sync.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1500, "height": height})
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(timeout_ms)
            page.goto(f"{dashboard}/#/jobs")
            page.get_by_role("textbox", name="Authentication Token").fill(token)
            with page.expect_response(lambda r: r.url.endswith("/api/authenticate")) as auth:
                page.get_by_role("button", name="Submit").click()
            assert auth.value.status == 200, auth.value.text()
            yield page
        finally:
            context.close()

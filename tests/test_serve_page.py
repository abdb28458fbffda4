"""The search page in a real headless browser: Chromium from the distribution's packages (.ci/run
installs it), driven by Playwright. The test types a query as a user would and reads the hits from
the page."""

from __future__ import annotations

import os
import shutil

import pytest

pytest.importorskip("fastapi")
sync_api = pytest.importorskip("playwright.sync_api")
import httpx  # noqa: E402

from hmde.cli.main import main  # noqa: E402
from serve_helpers import ThreadServer  # noqa: E402
from test_serve import LANGS, TEXTS, write_docs  # noqa: E402

CHROMIUM = os.environ.get("HMDE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine (.ci/run installs the distribution's `chromium` package)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                              args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def served_index(tmp_path_factory, hmde_dir):
    from hmde.serve.options import ServeOptions
    from hmde.serve.served import load_served

    root = tmp_path_factory.mktemp("page")
    docs = write_docs(root / "docs.jsonl", [{"doc_id": f"d{i}", "text": t, "lang": lang}
                                            for i, (t, lang) in enumerate(zip(TEXTS, LANGS))])
    assert main(["index", "build", str(hmde_dir), str(docs), "-o", str(root / "library"), "--no-progress"]) == 0
    # a server closes what it served when it stops: each test loads its own
    return lambda: load_served(str(hmde_dir), [str(root / "library")], "cpu"), ServeOptions


def test_the_page_searches_and_shows_hits_with_highlighted_sentences(browser, served_index):
    load, options = served_index
    with ThreadServer(load(), options()) as running:
        page = browser.new_page()
        page.goto(running.url + "/")
        page.wait_for_selector("#index option", state="attached")
        assert page.locator("#index option").first.inner_text().startswith("library (12 documents)")
        page.fill("#query", "Die Katze saß auf der Matte")
        page.fill("#top-k", "3")
        page.click("#go")
        page.wait_for_selector(".hit")
        shown = page.locator(".hit .doc").all_inner_texts()
        api = httpx.post(running.url + "/search", json={"index": "library", "query": "Die Katze saß auf der Matte",
                                                         "top_k": 3}).json()["results"][0]["hits"]
        assert shown == [f"{h['rank']}. {h['doc_id']}" for h in api]
        assert page.locator(".hit .lang").all_inner_texts() == [h["lang"] for h in api]
        marked = page.locator(".hit").first.locator("mark").all_inner_texts()
        assert marked and marked[0] == api[0]["sentences"][0]["text"]
        assert "3 hits" in page.locator("#status").inner_text()
        page.close()


def test_the_page_asks_for_the_key_and_shows_errors(browser, served_index):
    load, options = served_index
    with ThreadServer(load(), options(api_key="k3y", max_top_k=5)) as running:
        page = browser.new_page()
        page.goto(running.url + "/")
        page.wait_for_selector("#key-row", state="visible")
        page.fill("#key", "k3y")
        page.press("#key", "Enter")
        page.wait_for_selector("#index option", state="attached")
        page.fill("#query", "猫")
        page.fill("#top-k", "4")
        page.click("#go")
        page.wait_for_selector(".hit")
        assert page.locator(".hit").count() == 4
        page.fill("#top-k", "8")  # over this server's limit of 5 hits: its error message, on the page
        page.click("#go")
        page.wait_for_function("document.getElementById('status').textContent.includes('top_k')")
        page.close()


def test_a_shared_link_shows_its_results_and_a_search_updates_the_address(browser, served_index):
    """Issue 57: the page took no query from its address, so a shared link could not show results."""
    from urllib.parse import parse_qs, urlparse

    load, options = served_index
    with ThreadServer(load(), options()) as running:
        page = browser.new_page()
        page.goto(running.url + "/?q=Die%20Katze%20sa%C3%9F%20auf%20der%20Matte&index=library&k=2")
        page.wait_for_selector(".hit")
        api = httpx.post(running.url + "/search", json={"index": "library", "query": "Die Katze saß auf der Matte",
                                                         "top_k": 2}).json()["results"][0]["hits"]
        assert page.locator(".hit .doc").all_inner_texts() == [f"{h['rank']}. {h['doc_id']}" for h in api]
        assert page.input_value("#query") == "Die Katze saß auf der Matte"
        page.fill("#query", "猫")
        page.click("#go")
        page.wait_for_function("new URLSearchParams(window.location.search).get('q') === '猫'")
        assert parse_qs(urlparse(page.url).query) == {"q": ["猫"], "index": ["library"], "k": ["2"]}
        page.close()

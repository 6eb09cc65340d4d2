"""The docs say which of WAFFLE's readings is the default, and it is the one the registry builds.

`waffle-wavg` has two readings of the paper (targets/waffle_wavg.py): `literal`, Algorithm 1 and
eq. (1) as written, and `stabilised`, three readings of what it leaves open. Which one a user
gets without `--set reading=...` is stated on the pages that report them; a change of the
default in the code that leaves a page saying the other fails here, and so does a page that
stops naming the other reading as the option it is.
"""

from __future__ import annotations

import re

import pytest

from fedattack.registry import TARGETS
from fedattack.targets.waffle_wavg import READINGS
from tests.docs.markdown import ROOT

PAGES = ("docs/lab/reproduction-waffle-cgau.md", "docs/findings.md", "README.md")
DEFAULT = re.compile(r"default reading is `(?:--set )?reading=(\w+)`")
OPTION = re.compile(r"`(?:--set )?reading=(\w+)`")


def registry_default() -> str:
    return str(TARGETS.get("waffle-wavg").Hyper().reading)


@pytest.mark.parametrize("page", PAGES)
def test_the_page_names_the_registrys_default_reading_and_the_other_as_an_option(page: str) -> None:
    text = " ".join((ROOT / page).read_text(encoding="utf-8").split())  # sentences across line breaks
    stated = set(DEFAULT.findall(text))
    assert stated == {registry_default()}, f"{page} says the default reading is {stated or 'nothing'}"
    assert set(READINGS) <= set(OPTION.findall(text)), f"{page} does not name every reading"


def test_the_default_reading_sets_its_three_settings() -> None:
    hyper = TARGETS.get("waffle-wavg").Hyper()
    assert {k: getattr(hyper, k) for k in READINGS[hyper.reading]} == READINGS[hyper.reading]

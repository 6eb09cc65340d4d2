"""The HTML report renders the inline Markdown its sentences use: a verdict line naming a file
in backticks showed the backticks (the DP audit's line), as `*italic*` once showed its asterisks."""

from __future__ import annotations

from fedattack.reports.document import Bullets, to_html


def test_bold_italic_and_code_render_and_stay_escaped() -> None:
    page = to_html([Bullets(["**DP claim consistent** (*one run*; `dp.audit-whitebox.json`, <b>)"])], "t")
    assert "<strong>DP claim consistent</strong>" in page and "<em>one run</em>" in page
    assert "<code>dp.audit-whitebox.json</code>" in page and "`" not in page.split("<body>")[-1]
    assert "&lt;b&gt;" in page  # the text is still escaped

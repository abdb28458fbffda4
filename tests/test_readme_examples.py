"""The README's marked examples run as written (on the bundled default model)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
MARK = "<!-- README example: tests/test_readme_examples.py runs this block as written -->"


def marked_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [m.group(1) for m in re.finditer(re.escape(MARK) + r"\s*```python\n(.*?)```", text, re.S)]


def test_the_sentence_transformers_example_runs(capsys):
    blocks = marked_blocks()
    assert len(blocks) == 1
    namespace: dict = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)  # noqa: S102 - the project's own README
    out = capsys.readouterr().out
    # the example's two queries each find their own document: the match report and the budget
    assert "The team won the final" in out and "Le gouvernement" in out
    assert namespace["doc_vectors"].shape == (3, 512)

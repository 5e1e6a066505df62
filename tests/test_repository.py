"""What the repository says of itself (tests for the docs' and the code's house rules).

- It speaks of the project only: no lab-log round numbers, no path outside the repository, no
  absolute path of a build machine, in any tracked text file.
- docs/: every relative link resolves; the pages a user reads to learn (index, quick start,
  concepts, guides, reference) stay under a size a newcomer can read; each results page stays
  under 400 lines and every table there says the command that produced it and the commit it
  ran on.
- No module of the package over 500 lines.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# written in two parts so that this file does not match itself
LAB_ROUND = re.compile("ses" + r"sion\s+[0-9]|\.\./sha" + "red", re.I)
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|root|home|Users)/\w")
TEXT = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".json", ".cfg", ".ini", ".sh", ""}
LEARN_BYTES = 120 * 1024  # concepts, guides and the written reference together
CLI_BYTES = 40 * 1024  # the generated command-line reference (one table row per option)
RESULTS_LINES = 400
MODULE_LINES = 500


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = [ROOT / p for p in out.decode().split("\0") if p]
    return [f for f in files if f.is_file() and (f.suffix in TEXT or f.name in {"Makefile", "run"})]


def test_no_lab_rounds_and_nothing_outside_the_repository() -> None:
    bad = []
    for f in tracked():
        text = f.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            if LAB_ROUND.search(line) or MACHINE_PATH.search(line):
                bad.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not bad, "the repository speaks of itself only:\n" + "\n".join(bad[:40])


def test_docs_name_no_temporary_paths() -> None:
    bad = [f"{p.relative_to(ROOT)}:{n}" for p in DOCS.rglob("*.md")
           for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "/tmp/" in line]
    assert not bad, "docs name a temporary path: " + ", ".join(bad)


LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


@pytest.mark.parametrize("page", [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    bad = []
    for m in LINK.finditer(page.read_text(encoding="utf-8")):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path = (page.parent / target).resolve()
        if not path.exists() or (ROOT not in path.parents and path != ROOT):
            bad.append(target)
    assert not bad, f"{page.relative_to(ROOT)}: links that do not resolve inside the repository: {bad}"


def learning_pages() -> list[Path]:
    """What the docs' budget counts: concepts, guides and the written reference (index and quick
    start are the way in, required but not counted; the generated cli.md has its own budget, as
    it grows by a row per option, not by prose)."""
    pages = [DOCS / "concepts.md"]
    reference = [p for p in sorted((DOCS / "reference").rglob("*.md")) if p.name != "cli.md"]
    return pages + sorted((DOCS / "guides").rglob("*.md")) + reference


def test_the_pages_a_newcomer_reads_are_short_enough() -> None:
    for page in ("index.md", "quickstart.md", "concepts.md"):
        assert (DOCS / page).is_file(), f"docs/{page} exists"
    total = sum(p.stat().st_size for p in learning_pages())
    assert total <= LEARN_BYTES, f"concepts, guides and reference: {total} bytes > {LEARN_BYTES}"
    cli = (DOCS / "reference" / "cli.md").stat().st_size
    assert cli <= CLI_BYTES, f"docs/reference/cli.md: {cli} bytes > {CLI_BYTES}"


TABLE_ROW = re.compile(r"^\|.*\|\s*$", re.M)
COMMIT = re.compile(r"\b[0-9a-f]{7,40}\b")
COMMAND = re.compile(r"`[^`]*(omniplane |python|make |scripts/|bench/|pytest)[^`]*`")


@pytest.mark.parametrize("page", sorted((DOCS / "results").glob("*.md")), ids=lambda p: p.name)
def test_results_pages_are_short_and_every_table_has_its_command_and_commit(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert text.count("\n") < RESULTS_LINES, f"{page.name}: {text.count(chr(10))} lines"
    sections = re.split(r"^#{1,6} ", text, flags=re.M)
    for sec in sections:
        if TABLE_ROW.search(sec):
            title = sec.splitlines()[0] if sec else ""
            assert COMMIT.search(sec), f"{page.name}, '{title}': a table without the commit it ran on"
            assert COMMAND.search(sec), f"{page.name}, '{title}': a table without its command"


def test_no_module_over_the_limit() -> None:
    big = {str(p.relative_to(ROOT)): n for p in (ROOT / "src").rglob("*.py")
           if (n := p.read_text(encoding="utf-8").count("\n")) > MODULE_LINES}
    assert not big, f"modules over {MODULE_LINES} lines: {big}"

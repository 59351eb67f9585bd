"""Every relative link and image of README.md leads somewhere: the file exists, and an anchor into a markdown
page names one of its headings (as MkDocs makes them: lower case, punctuation dropped, spaces to hyphens). The
docs site's own links are checked by ``mkdocs build --strict`` (.ci/run)."""

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """The anchor MkDocs gives a heading (Python-Markdown's toc ``slugify`` of its text, markup removed)."""
    text = unicodedata.normalize("NFKD", re.sub(r"`|\*", "", heading)).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)  # no headings inside code blocks
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+?)\s*$", text, re.MULTILINE)}


def broken_links(page: Path, root: Path) -> list[str]:
    """The relative links and images of ``page`` (paths from ``root``) whose file or heading does not exist."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    broken = []
    for link in LINK.findall(text):
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        target = root / path if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {path or page.name}")
    return broken


def test_the_slug_is_mkdocs():
    assert slug("Errors and limits") == "errors-and-limits"
    assert slug("Atari: Pong-v5 with PPO (`configs/pong_5min.toml`)") == "atari-pong-v5-with-ppo-configspong_5mintoml"
    assert slug("**Speed**, side by side (2 cores)") == "speed-side-by-side-2-cores"


def test_the_readme_links_somewhere():
    readme = (ROOT / "README.md").read_text()
    assert len(LINK.findall(readme)) > 20  # the parse finds them
    assert not broken_links(ROOT / "README.md", ROOT)


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "api.md").write_text("# Python API\n\n## Errors and limits\n")
    (tmp_path / "README.md").write_text(
        "[a](docs/api.md) [b](docs/api.md#errors-and-limits) [c](docs/api.md#nothing) [d](docs/gone.md) "
        "![e](results/gone.png) [f](https://example.org/x) [g](#top)\n\n# Top\n"
    )
    assert broken_links(tmp_path / "README.md", tmp_path) == [
        "docs/api.md#nothing: no heading #nothing in docs/api.md", "docs/gone.md: no such file",
        "results/gone.png: no such file",
    ]

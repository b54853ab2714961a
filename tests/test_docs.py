"""The docs stay true to the repository: every relative link reaches a file (and a heading, for `#anchor`
links), every `make <target>` is a target of the Makefile, every `python -m flower_federation <subcommand>`
is a subcommand of the command line, every code path they name exists, the README stays short, and no doc
names the package's old modules.
Each check is a function over text, run on the real docs and, as a negative control, on a doc broken on
purpose."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from flower_federation.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
# docs/reference/ is a verbatim copy of Flower's chart documentation, not ours.
DOCS = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md")])
README_MAX_LINES = 250

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
MAKE = re.compile(r"(?:^|[\s;&|(])make((?:\s+[^\s;&|)`]+)+)")
CLI = re.compile(r"python -m flower_federation\s+([a-z][\w-]*)")
OLD_CLI = "python -m federation "
REPO_PATH = re.compile(r"(?<![\w./-])((?:flower_federation|tests|bench)/[\w./-]*[\w/])")
# A module path of the package before it moved: a `federation/` or `components/` folder, or a module in one,
# not inside another path or name (`flower_federation/`, `acme/flower-federation/hub`, "roles federation/hub").
OLD_PATH = re.compile(r"(?<![\w./-])(?:federation|components)/(?:[\w/]*\.py\b|(?=[\s`'\")\],.;:]|$))")


def prose_and_code(text: str) -> tuple[list[str], list[str]]:
    """(lines outside fenced code blocks, the code: fenced blocks' lines and inline code spans)."""
    prose, code, fenced = [], [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            code.append(line)
        else:
            prose.append(line)
            code += [m.group(2) for m in INLINE_CODE.finditer(line)]
    return prose, code


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (links and code marks dropped), lowercased, punctuation
    removed, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose_and_code(text)[0]:
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    """Relative links of `path` that reach no file, or no heading of the file they name."""
    text = path.read_text(encoding="utf-8")
    found = []
    for line in prose_and_code(text)[0]:
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                found.append(f"{path.name}: {target}: no such file")
            elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest.read_text(encoding="utf-8"))):
                found.append(f"{path.name}: {target}: no heading #{anchor} in {dest.name}")
    return found


def makefile_targets(makefile: Path = ROOT / "Makefile") -> set[str]:
    text = makefile.read_text(encoding="utf-8")
    targets = set()
    for match in re.finditer(r"^([A-Za-z][\w .%-]*?)\s*:(?!=)", text, re.MULTILINE):
        targets |= {t for t in match.group(1).split() if "%" not in t}
    return targets


def unknown_make_targets(text: str, targets: set[str]) -> list[str]:
    """`make X` written in code (fenced or inline) where X is no target: the first word after `make` that is
    neither a flag nor a VAR=value setting."""
    found = []
    for code in prose_and_code(text)[1]:
        for match in MAKE.finditer(code):
            words = [w for w in match.group(1).split() if not w.startswith("-") and "=" not in w]
            if words and re.fullmatch(r"[a-z][\w-]*", words[0]) and words[0] not in targets:
                found.append(f"make {words[0]}")
    return found


def missing_paths(text: str, root: Path = ROOT) -> list[str]:
    """Paths of the repository's code (`flower_federation/...`, `tests/...`, `bench/...`) that the text names and
    the repository does not hold; patterns (`tests/golden/*.urns.txt`, `Pulumi.{hub,site}.yaml`) are left alone."""
    found = []
    for match in REPO_PATH.finditer(text):
        if re.match(r"\.?[*{<]", text[match.end() :]):
            continue
        if not (root / match.group(1)).exists():
            found.append(match.group(1))
    return found


def cli_subcommands() -> set[str]:
    """The subcommands `python -m flower_federation --help` lists."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["--help"])
    listed = re.search(r"\{([a-z,-]+)\}", out.getvalue())
    assert listed, out.getvalue()
    return set(listed.group(1).split(","))


def unknown_subcommands(text: str, subcommands: set[str]) -> list[str]:
    return [f"python -m flower_federation {s}" for s in CLI.findall(text) if s not in subcommands]


def readme_length_problems(text: str) -> list[str]:
    lines = len(text.splitlines())
    if lines <= README_MAX_LINES:
        return []
    return [f"README.md has {lines} lines (at most {README_MAX_LINES}): move detail to docs/"]


def old_names(text: str) -> list[str]:
    """The package's names before it moved: the old command, and bare `federation/` or `components/` paths."""
    found = [OLD_CLI.strip()] if OLD_CLI in text else []
    return found + [m.group(0) for m in OLD_PATH.finditer(text)]


# --- the real docs --------------------------------------------------------------------------------------------


def test_the_docs_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in DOCS}
    assert {"README.md", "CONTRIBUTING.md", "docs/troubleshooting.md", "docs/config-reference.md"} <= names


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_reaches_a_file_and_heading(path: Path) -> None:
    assert broken_links(path) == []


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_make_target_exists(path: Path) -> None:
    assert unknown_make_targets(path.read_text(encoding="utf-8"), makefile_targets()) == []


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_command_names_a_real_subcommand(path: Path) -> None:
    assert unknown_subcommands(path.read_text(encoding="utf-8"), cli_subcommands()) == []


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_code_path_exists(path: Path) -> None:
    assert missing_paths(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_doc_names_the_old_package(path: Path) -> None:
    assert old_names(path.read_text(encoding="utf-8")) == []


def test_the_readme_is_short() -> None:
    assert readme_length_problems((ROOT / "README.md").read_text(encoding="utf-8")) == []


def test_the_readme_maps_every_doc() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {target.partition("#")[0] for target in LINK.findall(readme)}
    assert {p.relative_to(ROOT).as_posix() for p in DOCS} - {"README.md"} <= linked


# --- negative controls ---------------------------------------------------------------------------------------


def test_a_broken_link_or_anchor_is_reported(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Its `make docs` part (new)\n\n## Its `make docs` part (new)\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Doc\n\n## A section\n\n"
        "[fine](other.md) [fine](other.md#its-make-docs-part-new) [fine](other.md#its-make-docs-part-new-1) "
        "[fine](#a-section) [web](https://example.org/x.md)\n\n"
        "[gone](missing.md) [no heading](other.md#nowhere) [no own heading](#elsewhere)\n\n"
        "```\n[in code](missing-too.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(doc) == [
        "doc.md: missing.md: no such file",
        "doc.md: other.md#nowhere: no heading #nowhere in other.md",
        "doc.md: #elsewhere: no heading #elsewhere in doc.md",
    ]


def test_a_missing_code_path_is_reported() -> None:
    text = (
        "`flower_federation/cli/main.py`, `tests/test_docs.py`, `bench/run.py`, `tests/golden/*.urns.txt`, "
        "`tests/golden/Pulumi.{hub,dev}.yaml`, `tests/e2e/harness/`; gone: `flower_federation/cli/gone.py`, "
        "`tests/support/nowhere/`."
    )
    assert missing_paths(text) == ["flower_federation/cli/gone.py", "tests/support/nowhere/"]


def test_slugs_are_githubs() -> None:
    assert slug("Across eras (1.26.1 to 1.41/1.42)") == "across-eras-1261-to-141142"
    assert slug("How it is proven (`make test`)") == "how-it-is-proven-make-test"
    assert slug("e2e repeatability (issue 11 §3)") == "e2e-repeatability-issue-11-3"
    assert slug("`superlink.gateway.parentRefs[]`") == "superlinkgatewayparentrefs"


def test_an_unknown_make_target_is_reported() -> None:
    targets = makefile_targets()
    assert {"render", "test", "docs", "golden", "bench", "e2e"} <= targets
    text = (
        "Run `make render STACK=prod`, `make -j4 --output-sync=target test`.\n\n"
        "```sh\nmake golden && make rendr\n```\n\nWe make sure prose is not read as a command.\n"
    )
    assert unknown_make_targets(text, targets) == ["make rendr"]


def test_an_unknown_subcommand_is_reported() -> None:
    subcommands = cli_subcommands()
    assert subcommands == {"validate", "render", "schema", "docs", "import", "check", "diff"}
    text = "`.venv/bin/python -m flower_federation render` and `python -m flower_federation deploy --stack x`"
    assert unknown_subcommands(text, subcommands) == ["python -m flower_federation deploy"]


def test_old_names_and_a_long_readme_are_reported() -> None:
    assert old_names("run `python -m federation render` over federation/manifests.py and components/tls.py") == [
        "python -m federation",
        "federation/manifests.py",
        "components/tls.py",
    ]
    assert old_names("the `federation/` folder, `components/`.") == ["federation/", "components/"]
    fine = "flower_federation/build/manifests.py, acme/flower-federation/hub, roles federation/hub/site, docs/x.md"
    assert old_names(fine) == []
    assert readme_length_problems("line\n" * README_MAX_LINES) == []
    assert readme_length_problems("line\n" * (README_MAX_LINES + 1)) == [
        f"README.md has {README_MAX_LINES + 1} lines (at most {README_MAX_LINES}): move detail to docs/"
    ]

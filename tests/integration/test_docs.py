"""The documentation stays true to the tree: the references generated from
the config table are the committed ones, and every relative link in the
Markdown documents names a file (and a heading) that exists."""
import os
import re
import subprocess

import pytest

from harness import ROOT, SANITIZED

# the documents and config_reference (the release build) are the same under
# ASan: checked once, by make integration
pytestmark = pytest.mark.skipif(SANITIZED, reason="no tickd here: the release run checks it")

REFERENCE_TOOL = os.path.join(ROOT, "build", "tools", "config_reference")

# the Markdown documents a reader browses: the README, doc/ and the READMEs
# of the folders
DOCS = sorted(["README.md"] +
              [os.path.join("doc", f) for f in os.listdir(os.path.join(ROOT, "doc"))
               if f.endswith(".md")] +
              [os.path.relpath(os.path.join(d, "README.md"), ROOT)
               for d, _, files in os.walk(ROOT)
               if "README.md" in files and d != ROOT
               and not os.path.relpath(d, ROOT).split(os.sep)[0] in ("build", ".git")
               and "node_modules" not in d.split(os.sep)])

INLINE = re.compile(r"\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
REFDEF = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def committed(path, root=ROOT):
    with open(os.path.join(root, path), "rb") as f:
        return f.read()


def test_configuration_reference_is_generated():
    assert os.access(REFERENCE_TOOL, os.X_OK), \
        f"{REFERENCE_TOOL} missing: make build/tools/config_reference"
    out = subprocess.run([REFERENCE_TOOL], capture_output=True, check=True, timeout=10).stdout
    assert out == committed("doc/configuration.md"), \
        "doc/configuration.md is out of date: run `make config-reference`"


def test_configuration_reference_names_every_key():
    """Each key of the commented default file has its entry in the reference,
    with its environment variable."""
    ini = committed("conf/tickd.ini").decode()
    ref = committed("doc/configuration.md").decode()
    section, n = None, 0
    for line in ini.splitlines():
        if line.startswith("; [host:"):
            break  # the commented example of a [host:NAME] section
        m = re.match(r"^\[(\w+)\]$", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^(?:; )?(\w+) = ", line)
        if m and section:
            key = f"{section}.{m.group(1)}"
            assert f"### `{key}`" in ref, key
            assert f"`TICKD_{key.replace('.', '_').upper()}`" in ref, key
            n += 1
    assert n >= 40, n


def slug(heading):
    """The anchor a Markdown renderer (GitHub's) gives a heading."""
    text = re.sub(r"[`*_]", lambda m: "_" if m.group(0) == "_" else "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, root=ROOT):
    text = FENCE.sub("", committed(path, root).decode())
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*?)\s*#*$", text, re.M)}


def links(path, root=ROOT):
    text = FENCE.sub("", committed(path, root).decode())
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans hold no links
    return INLINE.findall(text) + REFDEF.findall(text)


def test_docs_found():
    for d in ("README.md", "doc/operations.md", "doc/configuration.md", "tests/README.md",
              "bench/README.md", "src/README.md"):
        assert d in DOCS, d


def broken_links(doc, root=ROOT):
    """The relative links of doc (a path under root) that name no file, or
    no heading of a Markdown file."""
    broken = []
    for target in links(doc, root):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, frag = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
        if not os.path.exists(os.path.join(root, dest)):
            broken.append(f"{target}: no {dest}")
        elif frag and dest.endswith(".md") and frag not in anchors(dest, root):
            broken.append(f"{target}: no heading #{frag} in {dest}")
    return broken


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc):
    broken = broken_links(doc)
    assert not broken, f"{doc}: " + "; ".join(broken)


def test_link_check_sees_a_broken_link(tmp_path):
    """The check itself, on a tree of its own: inline and reference links,
    headings as anchors, and nothing taken from code."""
    (tmp_path / "doc").mkdir()
    (tmp_path / "doc" / "a.md").write_text("# A title\n\n## `server.api_token`\n")
    (tmp_path / "README.md").write_text(
        "see [a](doc/a.md), [t](doc/a.md#a-title \"title\"), [k](doc/a.md#serverapi_token)\n"
        "[gone](doc/gone.md), [h](doc/a.md#no-such), [web](https://example.com)\n"
        "`[code](code.md)`\n```\n[fenced](fenced.md)\n```\n"
        "[ref]: doc/missing.md\n")
    assert broken_links("README.md", str(tmp_path)) == [
        "doc/gone.md: no doc/gone.md", "doc/a.md#no-such: no heading #no-such in doc/a.md",
        "doc/missing.md: no doc/missing.md"]

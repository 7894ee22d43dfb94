"""The install commands the docs give keep the development install editable (issue 41 item 3).

``tools/dev.sh`` and ``tools/test.sh`` install the checkout editable (``pip install -e``), so
that edits take effect at once. The README then told ``pip install '.[spark]'`` for Spark,
which replaces the editable install with a copy: from then on the checkout's edits were not
what ran. Every command in README.md and docs/ that installs the checkout (``.`` or
``'.[extras]'``) must keep ``-e``; and the environment the tests run in must itself be the
editable install (it fails when someone followed the old advice in it).
"""

from __future__ import annotations

import json
import re
from importlib import metadata

from tests.support.doc_blocks import REPO, documents

#: ``pip install`` of the checkout: the argument is ``.`` or ``.[extras]``, quoted or not
_CHECKOUT = re.compile(r"pip install((?:\s+-{1,2}[\w-]+)*)\s+['\"]?\.(?:\[[\w,]+\])?['\"]?(?=[\s`)]|$)")


def test_every_install_of_the_checkout_is_editable() -> None:
    found = []
    for doc in [*documents(), REPO / "tools" / "_venv.sh"]:
        for m in _CHECKOUT.finditer(doc.read_text()):
            found.append((doc.name, m.group(0)))
    assert any("spark" in cmd for _, cmd in found), found  # the README's Spark install is seen
    not_editable = [(d, cmd) for d, cmd in found if not re.search(r"\s-e\b|--editable", cmd)]
    # docs/operations.md's plain `pip install .` installs a release-like copy on purpose; the
    # line after it gives the editable form for a clone one develops in
    assert [c for c in not_editable if c != ("operations.md", "pip install .")] == [], not_editable


def test_the_environment_is_the_editable_install() -> None:
    """kraftnode in this venv is installed editable from a checkout (pip's direct_url.json).

    The installed distribution is the one pip wrote (with ``direct_url.json``), not the
    ``kraftnode.egg-info`` setuptools leaves in the checkout, which comes first on ``sys.path``
    when the tests run from the checkout and has no such file."""
    urls = [d.read_text("direct_url.json") for d in metadata.distributions(name="kraftnode")]
    installed = [json.loads(u) for u in urls if u]
    assert installed, "kraftnode is not installed by pip in this environment"
    assert installed[0].get("dir_info", {}).get("editable") is True, installed[0]

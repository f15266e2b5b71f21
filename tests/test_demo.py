"""`esmem demo`, the quickstart's main job, against the test engine."""
from __future__ import annotations

from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.domain.installation import artifacts


def test_demo_installs_remembers_and_prints_explained_recalls(engine, prefix) -> None:
    res = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", prefix, "demo"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    created = len(artifacts(engine, "count")) + 1  # the template, scripts and search templates, and the index
    assert f"install: {created} created, 0 updated" in out
    assert "remembered 12 demo memories: 11 added, 1 merged" in out
    assert out.count("recall '") == 4 and out.count("#1 terms:") == 4
    # the update of the 429 rule wins and the superseded version is gone
    section = out.split("recall '429 怎么重试'")[1].split("recall '")[0]
    assert "指数退避" in section and "固定等 1 秒" not in section
    again = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", prefix, "demo"])
    assert "install: nothing to do" in again.stdout  # re-running adds nothing active
    assert "0 added, 0 merged (an update superseded an older rule), 0 duplicate (already there), 0 outdated " \
        "(older than what is there: kept as history), 0 uncertain (may update an older one: both kept), " \
        "12 written by an earlier run" in again.stdout

"""The CLI describes itself: every option has help text, every argument is named in its command's help
(Click arguments take no help of their own), and one concept has one spelling across commands, because
the CLI reference in the docs is generated from these definitions."""
from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from esmem.cli.main import cli


def _commands(cmd: click.Command = cli, path: tuple[str, ...] = ("esmem",)) -> list[tuple[str, click.Command]]:
    found = [(" ".join(path), cmd)]
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            found += _commands(sub, (*path, name))
    return found


COMMANDS = _commands()


def test_the_walk_finds_every_command() -> None:
    names = {name for name, _ in COMMANDS}
    assert {"esmem recall", "esmem engine up", "esmem config", "esmem mcp", "esmem grant"} <= names
    assert len(names) >= 25


@pytest.mark.parametrize("name,cmd", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_option_has_help_and_every_argument_is_described(name: str, cmd: click.Command) -> None:
    assert (cmd.help or "").strip(), f"{name} has no help text"
    for param in cmd.params:
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"{name} {'/'.join(param.opts)} has no help text"
        else:
            assert param.human_readable_name.upper() in (cmd.help or ""), \
                f"{name}: argument {param.human_readable_name} is not named in the command's help"


def _options(opt: str) -> list[tuple[str, click.Option]]:
    return [(name, p) for name, cmd in COMMANDS for p in cmd.params
            if isinstance(p, click.Option) and opt in p.opts + p.secondary_opts]


def test_k_is_spelled_dash_k_and_double_dash_k_everywhere() -> None:
    found = _options("-k") + _options("--k")
    assert len(found) >= 5
    for name, p in found:
        assert set(p.opts) == {"-k", "--k"}, f"{name}: {p.opts}"


def test_namespace_is_dash_n_everywhere() -> None:
    for name, p in _options("--namespace"):
        assert "-n" in p.opts, f"{name}: {p.opts}"


def test_a_policy_file_is_always_given_with_policy() -> None:
    visible = [(name, p) for name, p in _options("--file") if not p.hidden]
    assert not visible, f"--file where --policy names the same thing: {[n for n, _ in visible]}"
    assert {name for name, _ in _options("--policy")} >= {"esmem install", "esmem check", "esmem config",
                                                          "esmem context", "esmem mcp"}


def test_plot_options_take_a_file_path() -> None:
    for name, p in _options("--plot"):
        assert isinstance(p.type, click.Path) and not p.type.dir_okay, f"{name}: --plot is {p.type!r}"


def test_config_keeps_file_as_a_hidden_alias_of_policy(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[recall]\nmode = "multiply"\n', encoding="utf-8")
    runner = CliRunner(env={"ESMEM_URL": None})
    new = runner.invoke(cli, ["config", "--policy", str(policy)])
    old = runner.invoke(cli, ["config", "--file", str(policy)])
    assert new.exit_code == old.exit_code == 0, new.output + old.output
    assert new.output == old.output and "multiply" in new.output
    assert "--file" not in runner.invoke(cli, ["config", "--help"]).output


def test_remember_kind_lists_the_kinds() -> None:
    out = CliRunner().invoke(cli, ["remember", "--help"]).output
    for kind in ("fact", "preference", "intent", "rule", "event", "note"):
        assert kind in out

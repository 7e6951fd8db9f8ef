"""``loopware worker`` configuration files: what they build, and every malformed value refused
up front with a message naming it (a typo must never pass silently)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopware_cli import main
from loopware_cli._worker_config import build_runner_options, read_worker_config
from pipeline.durable import DurableConfigError, DurableTurnRunner
from pipeline.stores import FileSpoolStore, MemoryStore, SqliteStore

APP = "tests.pipeline.durable.app"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "worker.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_full_file_builds_a_durable_runner_with_paths_relative_to_the_file(
    tmp_path: Path,
) -> None:
    path = _write(
        tmp_path,
        'system_database = "sqlite:///sys.sqlite"\nqueue = "q1"\nconcurrency = 3\n'
        'executor_id = "w1"\nrecover = ["w0"]\npoll_interval = 0.5\n[runner]\n'
        f'model_from = "{APP}:model"\ntools = ["{APP}:TOOLS"]\nmiddleware = ["{APP}:chaos"]\n'
        'store = "sqlite:agent.db"\nspool = "bodies"\nsystem_prompt = "Be brief."\n'
        'max_iterations = 7\nrerun_interrupted = ["crash_*"]\n',
    )
    config = read_worker_config(path)
    assert config.system_database == f"sqlite:///{tmp_path / 'sys.sqlite'}"
    assert (config.queue, config.concurrency, config.executor_id) == ("q1", 3, "w1")
    assert config.recover == ("w0",)
    options = build_runner_options(config)
    assert isinstance(options["store"], SqliteStore)
    assert isinstance(options["spool"], FileSpoolStore)
    assert (tmp_path / "bodies").is_dir()
    assert options["rerun_interrupted"] == ("crash_*",)
    runner = DurableTurnRunner(**options)
    names = [t.name for t in runner.runner.tools.all()]
    assert names == ["record", "refund", "crash_once", "block"]
    assert runner.runner.describe_pipelines()["tool_call"] == ["chaos.stamp"]
    options["store"].close()


def test_defaults_are_one_local_worker_on_sqlite_with_a_memory_store(tmp_path: Path) -> None:
    config = read_worker_config(_write(tmp_path, '[runner]\nmodel = "openai:gpt-4.1-mini"\n'))
    assert config.system_database == f"sqlite:///{tmp_path / 'loopware-system.sqlite'}"
    assert (config.queue, config.concurrency, config.executor_id) == ("loopware-turns", 8, None)
    options = build_runner_options(config)
    assert isinstance(options["store"], MemoryStore)
    assert options["spool"] is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('concurrancy = 3\n[runner]\nmodel = "x:y"\n', "unknown keys ['concurrancy']"),
        ('[runner]\nmodel = "x"\ntool = ["a:b"]\n', "unknown [runner] keys ['tool']"),
        ("concurrency = 0\n", "concurrency must be an int >= 1"),
        ("concurrency = true\n", "concurrency must be an int >= 1"),
        ("poll_interval = 0\n", "poll_interval must be a number of seconds in (0, 60]"),
        ('executor_id = ""\n', "executor_id must be a non-empty string"),
        ("recover = [1]\n", "recover must be a string or a list of strings"),
        ("runner = 3\n", "[runner] must be a table"),
        ("system_database = [\n", "is not valid TOML"),
    ],
    ids=["typo", "runner-typo", "zero", "bool", "poll", "executor", "recover", "table", "toml"],
)
def test_a_malformed_file_is_refused_naming_the_problem(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(DurableConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        read_worker_config(_write(tmp_path, text))


@pytest.mark.parametrize(
    ("runner", "message"),
    [
        ("", "needs exactly one of model"),
        ('model = "openai:x"\nmodel_from = "a:b"\n', "needs exactly one of model"),
        ('model_from = "nomodule_xyz:thing"\n', "cannot import 'nomodule_xyz:thing'"),
        ('model_from = "no-colon"\n', "is not of the form module:attr"),
        ('model = "openai:x"\nstore = "redis://x"\n', "store must be 'memory', 'sqlite:PATH'"),
        ('model = "openai:x"\nmax_iterations = 0\n', "max_iterations must be an int >= 1"),
        (f'model = "openai:x"\nstore_from = "{APP}:TOOLS"\n', "not a TurnStore"),
    ],
    ids=["no-model", "two-models", "no-module", "no-colon", "store", "iterations", "store-from"],
)
def test_a_bad_runner_table_is_refused_before_any_worker_starts(
    tmp_path: Path, runner: str, message: str
) -> None:
    config = read_worker_config(_write(tmp_path, "[runner]\n" + runner))
    with pytest.raises(DurableConfigError, match=message.replace("(", r"\(")):
        build_runner_options(config)


def test_the_worker_command_reports_a_bad_file_with_exit_status_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", "--config", str(tmp_path / "missing.toml")]) == 3
    assert "cannot be read" in capsys.readouterr().err
    assert main(["worker"]) == 2  # --config is required


def test_a_durable_runner_refuses_bad_options_up_front() -> None:
    model = "openai-compatible:m@http://localhost:1/v1"
    for kwargs, message in [
        ({"system_database": "mysql://x"}, "system_database must be"),
        ({"concurrency": 0}, "concurrency must be"),
        ({"queue": "_dbos_internal"}, "queue must be"),
        ({"poll_interval": 0}, "poll_interval must be"),
        ({"executor_id": ""}, "executor_id must be"),
        ({"rerun_interrupted": "fetch_*"}, "rerun_interrupted must be a list"),
        ({"store": object()}, "store must implement TurnStore"),
    ]:
        with pytest.raises(DurableConfigError, match=message):
            DurableTurnRunner(model=model, **kwargs)  # type: ignore[arg-type]

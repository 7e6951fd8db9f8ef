"""A durable worker runs sync tool handlers in worker threads: ``concurrency`` turns overlap."""

from __future__ import annotations

from pipeline.durable import DurableClient

from .conftest import Workers


def test_four_turns_with_a_one_second_sync_tool_overlap_on_a_worker_of_concurrency_4(
    workers: Workers,
) -> None:
    workers.write_config(concurrency=4, middleware=())
    worker = workers.start()
    client = DurableClient(workers.system_database)
    try:
        turns = [client.enqueue("block", conversation_id=f"conv-{i}") for i in range(4)]
        outcomes = [client.result(t, timeout=60) for t in turns]
    finally:
        client.close()
    workers.stop(worker)

    assert [o["output"] for o in outcomes] == [f"block: blocked {t}" for t in turns]
    spans = [
        (float(started), float(ended))
        for kind, _, started, ended in (
            line.split() for line in workers.log.read_text(encoding="utf-8").splitlines()
        )
        if kind == "block"
    ]
    assert len(spans) == 4
    # One after another they would take 4 s; in threads they run side by side.
    assert max(start for start, _ in spans) < min(end for _, end in spans)
    assert max(end for _, end in spans) - min(start for start, _ in spans) < 1.5

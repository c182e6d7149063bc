"""ttft_breakdown.join: server access lines matched to client rows, the parts of TTFT in ms."""

import pytest

from benchmarks.ttft_breakdown import join

T0 = 1_000_000.0  # the server's clock at the client's zero


def _client(rid, p, out, sent, first, end):
    return dict(id=rid, prompt_tokens=p, output_tokens=out, sent=sent, first_byte=first, end=end)


def _access(p, out, arrive, ttft, queue, end):
    return dict(logger="tachyon.serving.access", prompt_tokens=p, completion_tokens=out, ttft=ttft,
                queue_time=queue, ts=T0 + end, duration=end - arrive)


def test_parts_and_same_size_requests_told_apart_by_end_time():
    client = [_client("0", 100, 10, 0.0, 0.050, 1.0), _client("1", 100, 10, 0.5, 0.600, 2.0),
              _client("2", 8192, 10, 0.7, 1.000, 3.0)]
    server = [dict(logger="uvicorn.error", msg="Started"),
              _access(8192, 10, 0.702, 0.290, 0.001, 3.0005),
              _access(100, 10, 0.503, 0.090, 0.040, 2.0002),  # request 1 (ends at 2.0), listed first
              _access(100, 10, 0.001, 0.045, 0.002, 0.9998)]
    rows = {r["id"]: r for r in join(client, server)}
    assert rows["1"]["client_ms"] == pytest.approx(100.0)
    assert rows["1"]["server_ms"] == pytest.approx(90.0) and rows["1"]["queue_ms"] == pytest.approx(40.0)
    assert rows["1"]["lag_ms"] == pytest.approx(3.0, abs=0.5)
    assert rows["0"]["server_ms"] == pytest.approx(45.0) and rows["2"]["server_ms"] == pytest.approx(290.0)


def test_a_client_request_without_a_server_line_is_an_error():
    client = [_client("0", 100, 10, 0.0, 0.05, 1.0), _client("1", 200, 10, 0.1, 0.2, 1.5)]
    with pytest.raises(ValueError, match="client request 1"):
        join(client, [_access(100, 10, 0.0, 0.045, 0.0, 1.0)])


def test_server_log_read_past_stray_lines(tmp_path):
    """A server log holds non-JSON lines (warnings, the ready banner) between its JSON records: read_jsonl keeps
    only the records, plain or gzipped."""
    import gzip

    from tachyon.bench.schema import read_jsonl

    text = 'WARNING: something\n{"logger": "a", "n": 1}\nREADY http://127.0.0.1:8000\n{"logger": "b", "n": 2}\n'
    (tmp_path / "server.log").write_text(text)
    with gzip.open(tmp_path / "server.log.gz", "wt") as f:
        f.write(text)
    for name in ("server.log", "server.log.gz"):
        assert [r["n"] for r in read_jsonl(tmp_path / name)] == [1, 2]

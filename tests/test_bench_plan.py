"""`tachyon plan`: weights, KV bytes per token, concurrency x context."""

import argparse
import json

import pytest

from tachyon.bench import cli as bench_cli
from tachyon.bench.plan import GiB, make_plan, parse_bytes


def test_parse_bytes():
    assert parse_bytes("80GiB") == 80 * GiB
    assert parse_bytes("141GB") == 141e9
    assert parse_bytes("80") == 80 * GiB
    with pytest.raises(ValueError):
        parse_bytes("lots")


def test_qwen7b_numbers():
    p = make_plan("qwen2.5-7b", "141GB", max_model_len=32768)
    assert p.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2  # 57,344 B
    assert round(p.weights_gib * GiB / 1e9, 1) == 15.2
    assert p.kv_tokens > 1_500_000 and p.max_seqs_at_full_context == p.kv_tokens // 32768
    fp8 = make_plan("qwen2.5-7b", "141GB", kv_dtype="fp8", max_model_len=32768)
    assert fp8.kv_bytes_per_token == p.kv_bytes_per_token / 2 and fp8.kv_tokens > 1.9 * p.kv_tokens
    tp2 = make_plan("qwen2.5-7b", "141GB", tp=2)
    assert tp2.kv_bytes_per_token == p.kv_bytes_per_token / 2 and tp2.weights_gib == pytest.approx(p.weights_gib / 2)
    assert "do not fit" in make_plan("qwen2.5-7b", "16GiB").recommendation


def test_plan_cli_json(capsys, tiny_llama):
    p = argparse.ArgumentParser()
    bench_cli.register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["plan", "--model", tiny_llama, "--gpu-mem", "8GiB", "--max-model-len", "2048", "--json"])
    assert args.func(args) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kv_bytes_per_token"] == 2 * 2 * 2 * 16 * 2 and d["max_seqs_at_full_context"] >= 1

"""Unit tests of the server's parts that need no live server: timeouts, readiness, auth, limits, config."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import time
from types import SimpleNamespace

import pytest

from tachyon.sampling import CompletionOutput, RequestOutput, SamplingParams
from tachyon.serving.admission import Admission
from tachyon.serving.auth import KeyStore
from tachyon.serving.cli import build_config, register
from tachyon.serving.config import ModelEntry, ServerConfig, load_models_yaml
from tachyon.serving.errors import APIError
from tachyon.serving.generation import Generation
from tachyon.serving.health import Readiness
from tachyon.serving.metrics import ServerMetrics
from tachyon.serving.ratelimit import RateLimiter
from tachyon.serving.registry import ModelRegistry, ServedModel


class HangingEngine:
    """Accepts requests and never produces a token; records aborts."""

    def __init__(self, healthy: bool = True) -> None:
        self.aborted: list[str] = []
        self.healthy = healthy

    async def generate(self, prompt, params, request_id):
        await asyncio.Event().wait()
        yield  # pragma: no cover

    def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)

    def is_healthy(self) -> bool:
        return self.healthy

    def stats(self):
        return {"num_running": 0}


class OneTokenEngine(HangingEngine):
    async def generate(self, prompt, params, request_id):
        yield RequestOutput(
            request_id, None, list(prompt), None, [CompletionOutput(0, "x", [5], None, None, "length")], True
        )


def _model(engine) -> ServedModel:
    return ServedModel(names=["m"], engine=engine, tokenizer=None, max_model_len=64, created=0)


def test_generation_timeout_aborts():
    eng = HangingEngine()
    gen = Generation(
        _model(eng), [[1, 2]], SamplingParams(max_tokens=4), "req-1", ServerMetrics([("m", eng)]), timeout=0.2
    )

    async def run():
        async for _ in gen.updates():
            pass

    with pytest.raises(APIError) as e:
        asyncio.run(run())
    assert e.value.status == 504 and e.value.headers["x-should-retry"] == "false"
    assert eng.aborted == ["req-1"]


def test_readiness_detects_stuck_and_dead_engines():
    async def check(engine, draining=False):
        adm = Admission(4)
        adm.draining = draining
        return await Readiness(ModelRegistry([_model(engine)]), adm, interval=5, timeout=0.2).ready()

    assert asyncio.run(check(OneTokenEngine())) == (True, "ok")
    ok, why = asyncio.run(check(HangingEngine()))
    assert not ok and "did not generate" in why
    ok, why = asyncio.run(check(OneTokenEngine(healthy=False)))
    assert not ok and "not running" in why
    assert asyncio.run(check(OneTokenEngine(), draining=True)) == (False, "draining")


class BusyEngine(HangingEngine):
    """Holds requests (a probe would wait behind them) and last finished a step `ago` seconds back."""

    def __init__(self, ago: float) -> None:
        super().__init__()
        self.last_step_time = time.monotonic() - ago
        self._stats = SimpleNamespace(num_running=8, num_waiting=4)

    def stats(self):
        return self._stats


def test_readiness_of_a_busy_engine():
    """A loaded engine that is still stepping is ready without a probe; one whose last step is older than the probe
    timeout is probed, and a probe that never answers makes it unready."""
    async def check(engine):
        return await Readiness(ModelRegistry([_model(engine)]), Admission(4), interval=5, timeout=0.2).ready()

    assert asyncio.run(check(BusyEngine(ago=0.0))) == (True, "ok")
    ok, why = asyncio.run(check(BusyEngine(ago=5.0)))
    assert not ok and "did not generate" in why


def test_decode_ids_runs_long_lists_off_the_event_loop():
    """/detokenize's decode_ids: a short list is checked and decoded on the caller's thread, a long one in the thread
    pool (so a multi-megabyte body does not stall /health); an out-of-range id is a 400 naming the field either way."""
    import threading

    from tachyon.serving.preprocess import decode_ids

    threads = []

    def decode(ids, skip_special_tokens=False):
        threads.append(threading.current_thread())
        return "x" * len(ids)

    model = SimpleNamespace(tokenizer=SimpleNamespace(decode=decode), vocab_size=100)
    assert asyncio.run(decode_ids(model, [1] * 10, "tokens")) == "x" * 10
    assert asyncio.run(decode_ids(model, [1] * 5000, "tokens")) == "x" * 5000
    assert threads[0] is threading.main_thread() and threads[1] is not threading.main_thread()
    for ids in ([7, 100], [7] * 5000 + [100]):
        with pytest.raises(APIError) as e:
            asyncio.run(decode_ids(model, ids, "tokens"))
        assert e.value.status == 400 and e.value.param == "tokens"


def test_readiness_caches_probe():
    eng = OneTokenEngine()
    calls = []
    orig = eng.generate

    def counting(*a):
        calls.append(1)
        return orig(*a)

    eng.generate = counting

    async def run():
        r = Readiness(ModelRegistry([_model(eng)]), Admission(4), interval=60, timeout=1)
        return [await r.ready() for _ in range(5)]

    assert all(ok for ok, _ in asyncio.run(run())) and len(calls) == 1


def test_keystore_constant_shape():
    key = "sk-secret-value"
    store = KeyStore([hashlib.sha256(key.encode()).hexdigest()])
    kid = store.check(f"Bearer {key}")
    assert kid.startswith("key-") and key not in kid
    for bad in (None, "", "Bearer", "Bearer nope", f"Basic {key}", f"Bearer {key}x"):
        with pytest.raises(APIError) as e:
            store.check(bad)
        assert e.value.status == 401 and key not in e.value.message
    assert KeyStore([]).check(None) is None


def test_admission_bounds_and_drain():
    adm = Admission(3)
    a, b = adm.acquire(2), adm.acquire(1)
    with pytest.raises(APIError) as e:
        adm.acquire(1)
    assert e.value.status == 429 and e.value.headers["Retry-After"] == "1"
    a.release()
    a.release()  # idempotent
    assert adm.in_flight == 1
    adm.draining = True
    with pytest.raises(APIError) as e:
        adm.acquire(1)
    assert e.value.status == 503
    b.release()
    assert asyncio.run(adm.wait_idle(0.1))


def test_token_rate_limit():
    rl = RateLimiter(None, "100/minute")
    rl.check_tokens("k", 60)
    rl.charge_tokens("k", 60)
    rl.check_tokens("k", 30)
    rl.charge_tokens("k", 55)  # more than is left: the window fills up
    with pytest.raises(APIError) as e:
        rl.check_tokens("k", 1)
    assert e.value.status == 429 and int(e.value.headers["Retry-After"]) >= 1
    rl.check_tokens("other", 50)
    with pytest.raises(APIError):
        rl.check_tokens("k2", 101)


def test_request_rate_limit():
    rl = RateLimiter("3/minute", None)
    for _ in range(3):
        rl.hit_request("k")
    with pytest.raises(APIError) as e:
        rl.hit_request("k")
    assert e.value.status == 429 and e.value.code == "rate_limit_exceeded"
    rl.hit_request("k2")


def test_config_validation(tmp_path):
    entry = ModelEntry(["a"], {"model": "x"})
    with pytest.raises(ValueError):
        ServerConfig(models=[entry], rate_limit="lots")
    with pytest.raises(ValueError):
        ServerConfig(models=[entry, ModelEntry(["a"], {"model": "y"})])
    with pytest.raises(ValueError, match="tool_call_parser"):
        ServerConfig(models=[entry], tool_call_parser="granite")
    assert ServerConfig(models=[entry], tool_call_parser="llama3_json").tool_call_parser == "llama3_json"
    yml = tmp_path / "models.yaml"
    yml.write_text(
        "models:\n  - name: a\n    model: /m/a\n    memory_share: 0.3\n    dtype: float32\n"
        "  - names: [b, c]\n    model: /m/b\n    max_model_len: 128\n"
    )
    a, b = load_models_yaml(str(yml), {"device": "cpu"})
    assert a.names == ["a"] and a.engine_args["gpu_memory_utilization"] == 0.3
    assert a.engine_args["device"] == "cpu" and a.engine_args["dtype"] == "float32"
    assert b.names == ["b", "c"] and b.engine_args["max_model_len"] == 128


def test_cli_flags(tmp_path):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["serve", "--model", "/m", "--api-key", "k1", "--api-key", "k2"])
    assert args.host == "127.0.0.1" and args.port == 8000
    keyfile = tmp_path / "keys"
    keyfile.write_text(hashlib.sha256(b"k3").hexdigest() + "  # ops key\n\n")
    args = parser.parse_args(
        [
            "serve",
            "/m",
            "--api-key",
            "k1",
            "--api-key-file",
            str(keyfile),
            "--rate-limit",
            "60/minute",
            "--max-num-seqs",
            "8",
            "--served-model-name",
            "x",
            "y",
            "--quantization",
            "fp8",
            "--enable-prefix-caching",
        ]
    )
    cfg = build_config(args)
    assert cfg.models[0].engine_args["enable_prefix_caching"] is True
    assert "enable_prefix_caching" not in build_config(parser.parse_args(["serve", "/m"])).models[0].engine_args
    off = build_config(parser.parse_args(["serve", "/m", "--no-enable-prefix-caching"]))
    assert off.models[0].engine_args["enable_prefix_caching"] is False
    assert len(cfg.api_key_hashes) == 2 and "k1" not in cfg.api_key_hashes
    assert cfg.models[0].names == ["x", "y"] and cfg.models[0].engine_args["max_num_seqs"] == 8
    assert cfg.models[0].engine_args["quantization"] == "fp8"
    assert cfg.models[0].engine_args["model"] == "/m" and cfg.rate_limit == "60/minute"


def test_overlap_switch_on_both_clis():
    """--overlap-scheduling off / on / auto reaches EngineConfig as False / True / None (auto: the device decides),
    from `tachyon serve` and from generate / chat / demo."""
    from tachyon.config import EngineConfig
    from tachyon.engine.cli import add_engine_args, engine_kwargs

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    serve = {v: build_config(parser.parse_args(["serve", "/m", "--overlap-scheduling", v])).models[0].engine_args
             for v in ("off", "on", "auto")}
    assert serve["off"]["overlap_scheduling"] is False and serve["on"]["overlap_scheduling"] is True
    assert "overlap_scheduling" not in serve["auto"]
    assert "overlap_scheduling" not in build_config(parser.parse_args(["serve", "/m"])).models[0].engine_args
    offline = argparse.ArgumentParser()
    add_engine_args(offline)
    for value, want in (("off", False), ("on", True), ("auto", None)):
        kw = engine_kwargs(offline.parse_args(["--overlap-scheduling", value]))
        assert EngineConfig.from_kwargs(**kw).overlap_scheduling is want
    assert engine_kwargs(offline.parse_args([]))["overlap_scheduling"] is None
    with pytest.raises(SystemExit):
        offline.parse_args(["--overlap-scheduling", "maybe"])


def test_serve_freezes_the_heap_once_its_models_are_loaded(monkeypatch):
    """`tachyon serve` loads every model, then freezes the heap, then serves: the engines' objects are out of the
    collector's scans while requests run."""
    import gc

    from tachyon.serving import cli, registry, server

    engines: list[HangingEngine] = []
    seen: dict = {}

    def fake_build(entry, created):
        engines.append(HangingEngine())
        return _model(engines[-1])

    def fake_serve(state, sock):
        sock.close()  # serve owns the listening socket run() bound
        seen["frozen"] = gc.get_freeze_count()
        seen["engine_scanned"] = any(o is engines[0] for o in gc.get_objects())
        return 0

    monkeypatch.setattr(registry, "build_served_model", fake_build)
    monkeypatch.setattr(server, "serve", fake_serve)
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    try:
        assert cli.run(parser.parse_args(["serve", "/m", "--port", "0"])) == 0
    finally:
        gc.unfreeze()
    assert seen["frozen"] > 0 and not seen["engine_scanned"]


def test_a_taken_port_fails_before_any_model_loads(monkeypatch):
    """`tachyon serve` binds its port before loading models: a taken port (or one past 65535) is a one-line error
    naming the address before any model loads, not a uvicorn error after the model's whole start-up."""
    import socket

    import tachyon.serving.registry as registry
    from tachyon.cli import main

    def no_load(*_a, **_k):
        raise AssertionError("a model was loaded before the port was checked")

    monkeypatch.setattr(registry, "build_served_model", no_load)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ValueError, match=rf"cannot listen on 127\.0\.0\.1:{port}"):
            run_serve(["serve", "/m", "--port", str(port)])  # no_load: it fails before any model loads
    assert main(["serve", "/m", "--port", "99999"]) == 2  # the CLI's one-line error, exit 2


def run_serve(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)

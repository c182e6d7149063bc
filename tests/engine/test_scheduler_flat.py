"""The `flat` scheduling policy (engine/scheduler.py): lpt's admission order, each step filled to R rows (every
running decode plus prompt tokens, at most two prompts a step, rounded by the runner's `chunk_fit`); through LLM
with the mixed step path (two-chunk steps, chunks short of their prompt's end, launched without waiting), the same
greedy tokens as transformers."""

import math

import pytest

from tachyon import LLM, SamplingParams
from tachyon.engine.kv_cache import BlockPool, KVCacheManager
from tachyon.engine.request import Request, RequestStatus
from tachyon.engine.scheduler import FLAT_MAX_CHUNKS, FLAT_MIN_ROWS, FLAT_ROW_QUANTUM, Scheduler, remaining_output
from tests.engine.test_mixed_graph import _Counting, _install, _prompts
from tests.hf_oracle import assert_greedy_parity, hf_greedy, hf_model


def _scheduler(blocks: int = 8192, budget: int = 8192, max_seqs: int = 512, rows: int | None = None,
               monkeypatch=None, quantum: int = 1) -> Scheduler:
    """A flat scheduler; with `rows` R is that many rows and steps are filled to multiples of `quantum` (1: to R)."""
    if rows is not None:
        monkeypatch.setenv("TACHYON_FLAT_ROWS", str(rows))
        monkeypatch.setenv("TACHYON_FLAT_QUANTUM", str(quantum))
    return Scheduler(KVCacheManager(BlockPool(blocks, 16)), max_num_seqs=max_seqs, max_num_batched_tokens=budget,
                     policy="flat")


def _req(rid: str, max_tokens: int, prompt_len: int) -> Request:
    return Request(rid, [3] * prompt_len, SamplingParams(max_tokens=max_tokens, ignore_eos=True), eos_token_ids=[],
                   max_model_len=8192, sample_seed=0)


def _advance(s: Scheduler, out) -> None:
    """What the engine does after a step: chunks that reach their request's last token sample one, and requests at
    max_tokens finish."""
    for r, n in zip(out.requests, out.num_new_tokens):
        r.num_computed_tokens += n
        if r.num_computed_tokens >= r.num_tokens:
            r.append_token(7)
            if r.num_output_tokens >= r.max_tokens:
                s.finish(r, RequestStatus.FINISHED_LENGTH)


def _expected_rows(s: Scheduler) -> int:
    """R before a step without deadlines: max(flat rows, ceil((prompt left + output left) / longest output left))."""
    reqs = list(s.running) + list(s.waiting)
    prompt = sum(r.num_tokens - r.num_computed_tokens for r in reqs if r.num_tokens - r.num_computed_tokens > 1)
    output = sum(remaining_output(r) for r in reqs)
    return max(s.flat_rows, math.ceil((prompt + output) / max(remaining_output(r) for r in reqs)))


def test_flat_fills_each_step_to_its_rows_with_at_most_two_prompts(monkeypatch):
    monkeypatch.setenv("TACHYON_FLAT_DEADLINE", "0")  # the rule without deadlines
    lens = [(37 + 13 * i % 50, 10 + (i * 7) % 40) for i in range(24)]  # (prompt, output)
    s = _scheduler(rows=40, monkeypatch=monkeypatch)
    for i, (p, o) in enumerate(lens):
        s.add(_req(str(i), o, p))
    first_seen, steps, full = [], 0, 0
    while s.num_unfinished:
        prompt_left = sum(r.num_tokens - r.num_computed_tokens for r in list(s.running) + list(s.waiting)
                          if r.num_computed_tokens < r.num_prompt_tokens)
        rows = _expected_rows(s)
        out = s.schedule()
        steps += 1
        chunks = [(r, n) for r, n in zip(out.requests, out.num_new_tokens)
                  if n > 1 or r.num_computed_tokens + n < r.num_tokens]
        decodes = len(out.requests) - len(chunks)
        assert len(chunks) <= FLAT_MAX_CHUNKS or not decodes, "two prompts at most beside decodes"
        prompt = out.total_tokens - decodes
        if prompt_left:
            # every decode runs, and prompt tokens fill the rest of R unless the step's two prompts or the prompts
            # left run out first
            assert out.total_tokens <= max(rows, decodes), (steps, out.total_tokens, rows)
            assert (out.total_tokens == rows or prompt == prompt_left or (decodes and len(chunks) == FLAT_MAX_CHUNKS)
                    or decodes >= rows), (steps, out.total_tokens, rows, decodes)
            full += out.total_tokens == rows
        first_seen += [r.request_id for r, _ in chunks if r.num_computed_tokens == 0]
        _advance(s, out)
        assert s._waiting_prompt == sum(r.num_tokens for r in s.waiting)
        assert steps < 2000
    assert full > 10, "no step was filled to its rows"
    # admission is longest output first, ties in arrival order
    assert first_seen == [str(i) for i in sorted(range(len(lens)), key=lambda i: -lens[i][1])]
    # no more steps than the longest request needs (its prefill, then one a token) plus the prefill's spill
    longest = max(range(len(lens)), key=lambda i: lens[i][1])
    assert steps <= lens[longest][1] + math.ceil(sum(p for p, _ in lens) / 40) + 2
    s.kv.pool.check_integrity()


def test_flat_step_without_decodes_takes_every_prompt_that_fits():
    """seed8's form: eight short prompts reach an idle engine. They fit one step's rows, and a step without decodes
    is a prefill step, so all eight start at once, as under fcfs; beside decodes, two prompts at most."""
    s = _scheduler()
    for i in range(8):
        s.add(_req(str(i), 256, 22))
    out = s.schedule()
    assert out.num_new_tokens == [22] * 8 and not s.waiting
    _advance(s, out)
    for i in range(8, 12):
        s.add(_req(str(i), 256, 22))
    out = s.schedule()
    prompts = [n for n in out.num_new_tokens if n > 1]
    assert out.num_new_tokens[:8] == [1] * 8 and prompts == [22] * FLAT_MAX_CHUNKS and len(s.waiting) == 2


def test_flat_rows_follow_the_work_left_over_the_horizon(monkeypatch):
    """Long prompts and short outputs: R = ceil((prompt + output) / horizon) is above the minimum."""
    monkeypatch.setenv("TACHYON_FLAT_DEADLINE", "0")  # the rule without deadlines
    s = _scheduler(rows=8, monkeypatch=monkeypatch)
    for i in range(4):
        s.add(_req(str(i), 5, 100))
    out = s.schedule()
    assert out.total_tokens == math.ceil((400 + 20) / 5) == 84
    assert [n for n in out.num_new_tokens] == [84], "one prompt's first chunk"
    _advance(s, out)
    out = s.schedule()
    assert out.num_new_tokens == [16, 52], "R = ceil((316 + 20) / 5) = 68: the first prompt's rest, the next's start"


def test_flat_rounds_prompt_tokens_through_chunk_fit(monkeypatch):
    s = _scheduler(rows=64, monkeypatch=monkeypatch)
    seen = []

    def fit(decodes: int, want: int) -> int:
        seen.append((decodes, want))
        return want // 16 * 16 + 16  # "the graph holds multiples of 16"

    s.chunk_fit = fit
    for i in range(6):
        s.add(_req(str(i), 30 - i, 200))  # two prompts always fill a step
    for _ in range(12):
        out = s.schedule()
        decodes = sum(1 for r, n in zip(out.requests, out.num_new_tokens)
                      if n == 1 and r.num_computed_tokens + 1 == r.num_tokens)
        prompt = out.total_tokens - decodes
        if decodes and s.waiting:
            assert seen[-1][0] == decodes and prompt == seen[-1][1] // 16 * 16 + 16
        _advance(s, out)
    assert any(d for d, _ in seen), "chunk_fit was never asked beside decodes"


def test_flat_bookkeeping_through_preemption_and_abort(monkeypatch):
    s = _scheduler(blocks=8, budget=64, rows=24, monkeypatch=monkeypatch)  # 128 slots: the running set outgrows it
    for i, n in enumerate([40, 40, 40, 30]):
        s.add(_req(str(i), n, prompt_len=16))
    preempted = 0
    for _ in range(400):
        if not s.num_unfinished:
            break
        out = s.schedule()
        preempted += len(out.preempted)
        _advance(s, out)
        assert s._waiting_prompt == sum(r.num_tokens - r.num_computed_tokens for r in s.waiting)
        assert s._waiting_output == sum(remaining_output(r) for r in s.waiting)
        if s.waiting and s.num_unfinished == 3:
            s.finish(s.waiting[-1], RequestStatus.FINISHED_ABORTED)
    assert preempted > 0 and not s.num_unfinished
    s.kv.pool.check_integrity()


def test_flat_quantum_fills_multiples_of_q_that_follow_r(monkeypatch):
    """TACHYON_FLAT_QUANTUM=q: while prompts are plentiful every step totals a multiple of q rows, rounding up or
    down so that the rows taken so far stay within q of the R's asked so far."""
    monkeypatch.setenv("TACHYON_FLAT_DEADLINE", "0")  # the rule without deadlines
    q = 16
    s = _scheduler(rows=40, monkeypatch=monkeypatch, quantum=q)  # R = 40 = 2.5 q: steps of 32 and 48 rows
    for i in range(12):
        s.add(_req(str(i), 60 - i, 300))
    totals, asked, taken = set(), 0, 0
    for _ in range(60):
        rows = _expected_rows(s)
        out = s.schedule()
        asked, taken = asked + rows, taken + out.total_tokens
        totals.add(out.total_tokens)
        assert out.total_tokens % q == 0, out.total_tokens
        assert abs(asked - taken) <= q, (asked, taken)
        _advance(s, out)
    assert {32, 48} <= totals, totals


@pytest.mark.parametrize("decodes", [100, 140])
def test_flat_quantum_fills_the_next_multiple_when_a_step_lands_past_one(decodes, monkeypatch):
    """q = R = 128 beside the mixed graphs' keys (decode buckets every 32 rows, chunks every 32 tokens): 100 decodes
    pad to 128, so the smallest chunk makes 160 rows; 140 decodes alone are past 128. Either step is filled to 256
    rows, which its graph holds unpadded, not left just past the 128-row stair."""
    from tachyon.engine.mixed_graph import MixedGraphRunner

    mixed = MixedGraphRunner.__new__(MixedGraphRunner)
    mixed.decode_buckets, mixed.chunk_buckets = [32, 64, 96, 128, 160, 192], list(range(32, 513, 32))
    mixed.max_decodes, mixed.max_chunk = 192, 512
    s = _scheduler(rows=256, monkeypatch=monkeypatch, quantum=128)  # room for every decode while they start
    s.chunk_fit = mixed.tight_chunk
    for i in range(decodes):
        s.add(_req(str(i), 400, 2))
    while s.waiting or any(r.num_computed_tokens < r.num_prompt_tokens for r in s.running):
        _advance(s, s.schedule())
    s.add(_req("long", 50, 1000))
    s.flat_rows, s._flat_owed = 128, 0  # aim at exactly 128 rows
    out = s.schedule()
    assert out.num_new_tokens[:decodes] == [1] * decodes
    assert out.total_tokens == 256, out.num_new_tokens[decodes:]


def test_flat_rows_knob(monkeypatch):
    assert _scheduler().flat_rows == FLAT_MIN_ROWS
    assert _scheduler(rows=96, monkeypatch=monkeypatch).flat_rows == 96
    with pytest.raises(ValueError, match="TACHYON_FLAT_ROWS"):
        _scheduler(rows=0, monkeypatch=monkeypatch)
    monkeypatch.delenv("TACHYON_FLAT_ROWS")
    monkeypatch.delenv("TACHYON_FLAT_QUANTUM")
    assert _scheduler().flat_quantum == FLAT_ROW_QUANTUM
    monkeypatch.setenv("TACHYON_FLAT_QUANTUM", "0")
    with pytest.raises(ValueError, match="TACHYON_FLAT_QUANTUM must be >= 1, got 0"):
        _scheduler()


def _run_steps(s: Scheduler) -> list[tuple[int, int]]:
    """(decode rows, prompt tokens) of every step until the scheduler's requests are done."""
    steps = []
    while s.num_unfinished:
        out = s.schedule()
        decodes = sum(1 for r, n in zip(out.requests, out.num_new_tokens)
                      if n == 1 and r.num_computed_tokens + 1 >= r.num_tokens)
        steps.append((decodes, out.total_tokens - decodes))
        _advance(s, out)
    return steps


def test_flat_deadline_rate_is_the_tightest_prompt_deadline(monkeypatch):
    """Horizon 1,000: the longest request (1,000 outputs) must be prefilled now, the next (990) within 11 steps
    with the first's prompt before it, the last (500) within 501."""
    monkeypatch.setenv("TACHYON_FLAT_DEADLINE", "1")
    s = _scheduler()
    for rid, out, prompt in (("a", 1000, 100), ("b", 990, 300), ("c", 500, 50)):
        s.add(_req(rid, out, prompt))
    s._sort_waiting()
    assert s._flat_deadline_rate(1000, 450) == 100  # a: 100 / 1; b: 400 / 11 = 37; c: 450 / 501 = 1
    s.waiting[1].max_tokens = 999  # b now has 2 steps: (100 + 300) / 2
    assert s._flat_deadline_rate(1000, 450) == 200


def test_flat_deadline_scan_stops_at_the_step_budget(monkeypatch):
    """10,000 waiting prompts with one output length (every deadline is now): the rate is the step budget, found
    after the few prompts that fill it, not after the whole queue."""
    monkeypatch.setenv("TACHYON_FLAT_DEADLINE", "1")
    s = _scheduler(budget=2048)
    for i in range(10_000):
        s.add(_req(str(i), 64, 100))
    s._sort_waiting()
    seen = []
    queue = s._flat_prompt_queue
    monkeypatch.setattr(s, "_flat_prompt_queue", lambda: (seen.append(r) or r for r in queue()))
    assert s._flat_deadline_rate(64, 1_000_000) == 2100  # 21 prompts of 100 tokens, all due now
    assert len(seen) == 21


def test_flat_deadline_ends_every_request_with_the_longest(monkeypatch):
    """Under the deadline R every prompt is admitted late enough to end with the longest request and no later: the
    run takes as many steps as the longest output (its prompt is prefilled in the first step, each later step
    samples one token), and its last steps still hold most of the requests. The old R (the remaining work over the
    horizon, at least 300 rows) admits the prompts early: the run ends in a drain of few decodes, and takes
    longer."""
    lens = [(100 + (i * 37) % 900, 100 + (i * 53) % 900) for i in range(64)]  # (prompt, output)

    def run(deadline: str, rows: int, quantum: int) -> list[tuple[int, int]]:
        monkeypatch.setenv("TACHYON_FLAT_DEADLINE", deadline)
        s = _scheduler(rows=rows, monkeypatch=monkeypatch, quantum=quantum)
        for i, (p, o) in enumerate(lens):
            s.add(_req(str(i), o, p))
        return _run_steps(s)

    longest = max(o for _, o in lens)
    steps = run("1", 1, 1)  # no floor: 64 requests ask for ~72 rows a step, under any useful floor
    assert len(steps) == longest
    tail = steps[-longest // 10:]
    assert sum(d for d, _ in tail) / len(tail) > len(lens) / 2
    old = run("0", FLAT_MIN_ROWS, FLAT_ROW_QUANTUM)
    assert len(old) > longest
    assert sum(d for d, _ in old[-longest // 10:]) < sum(d for d, _ in tail) / 2


@pytest.mark.parametrize("lens", [[(128, 256)], [(15 + 3 * i, 256) for i in range(8)]], ids=["bs1", "seed8"])
def test_flat_deadline_leaves_bs1_and_seed8_schedules_alone(lens, monkeypatch):
    """bs1 (one request) and seed8 (eight prompts, one output length): every prompt is due at once, so the deadline
    fill makes the same steps as the fill before it (one prefill step, then decodes) and their figures carry over."""
    def run(deadline: str, rows: int) -> list[tuple[int, int]]:
        monkeypatch.setenv("TACHYON_FLAT_DEADLINE", deadline)
        s = _scheduler(rows=rows, monkeypatch=monkeypatch, quantum=FLAT_ROW_QUANTUM)
        for i, (p, o) in enumerate(lens):
            s.add(_req(str(i), o, p))
        return _run_steps(s)

    steps = run("1", FLAT_MIN_ROWS)
    assert steps == run("0", 300)
    assert steps[0] == (0, sum(p for p, _ in lens)) and steps[1:] == [(len(lens), 0)] * 255


def test_flat_deadline_knob(monkeypatch):
    assert _scheduler().flat_deadline is True
    monkeypatch.setenv("TACHYON_FLAT_DEADLINE", "0")
    assert _scheduler().flat_deadline is False
    monkeypatch.setenv("TACHYON_FLAT_DEADLINE", "yes")
    with pytest.raises(ValueError, match="TACHYON_FLAT_DEADLINE must be 0 or 1, got 'yes'"):
        _scheduler()


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_flat_through_mixed_steps_greedy_matches_transformers(arch, monkeypatch):
    """Flat at 20 rows over the padded mixed step (run eagerly on CPU, as the graphs would): steps with two prompt
    chunks and steps whose chunk stops short of its prompt's end are launched without waiting (overlap), and every
    request's tokens are transformers' greedy ones."""
    from tests.tiny_models import tiny_model_dir

    monkeypatch.setenv("TACHYON_FLAT_ROWS", "20")
    monkeypatch.setenv("TACHYON_FLAT_QUANTUM", "1")
    path = tiny_model_dir(arch)
    prompts = _prompts(8, seed=11, lo=4, hi=26)
    lengths = [3 + (i * 5) % 11 for i in range(8)]
    hf = hf_model(path)
    expected = [hf_greedy(hf, p, m) for p, m in zip(prompts, lengths)]
    llm = LLM(path, device="cpu", dtype="float32", max_num_batched_tokens=64, max_num_seqs=8, block_size=4,
              scheduling_policy="flat", overlap_scheduling=True)
    mixed = _install(llm, max_decodes=7, max_chunk=16)
    mixed.decode_buckets, mixed.chunk_buckets = [2, 4, 7], [4, 8, 12, 16]
    llm.engine.scheduler.chunk_fit = mixed.tight_chunk
    _Counting.runs = 0
    shapes = []  # each fitting step's chunks: (tokens, reaches its prompt's end)
    fits = mixed.fits

    def recording_fits(sched) -> bool:
        ok = fits(sched)
        if ok:
            shapes.append([(n, r.num_computed_tokens + n == r.num_tokens)
                           for r, n in zip(sched.requests, sched.num_new_tokens) if mixed.is_chunk(r, n)])
        return ok

    mixed.fits = recording_fits
    sps = [SamplingParams(temperature=0.0, max_tokens=m, ignore_eos=True) for m in lengths]
    outs = llm.generate(prompts, sps, use_tqdm=False)
    assert_greedy_parity(hf, prompts, [o.outputs[0].token_ids for o in outs], expected)
    assert _Counting.runs > 0 and llm.engine.runner.num_mixed_launched > 0
    assert any(len(c) == 2 for c in shapes), "no step carried two prompts"
    assert any(not done for c in shapes for _, done in c), "no chunk stopped short of its prompt's end"
    llm.engine.check_integrity()

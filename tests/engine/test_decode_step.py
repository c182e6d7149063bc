"""DecodeGraphRunner's step body on CPU (uncaptured; reference kernels): rows with src >= 0 take their input
from last_tokens, the others from input_ids; the tokens are written into last_tokens[:bs] itself."""

import torch

from tachyon.engine.batch import AttentionMetadata
from tachyon.engine.cuda_graph import DecodeGraphRunner
from tachyon.models.loader import load_model, resolve_model


def test_decode_step_feeds_from_last_tokens(tiny_llama):
    model, spec = load_model(resolve_model(tiny_llama), dtype=torch.float32, device=torch.device("cpu"))
    bs, block = 3, 16
    model.bind_kv_cache([torch.zeros(2, 4, block, spec.num_kv_heads, spec.head_dim) for _ in range(spec.num_layers)])
    last_tokens = torch.tensor([11, 22, 33, 44], dtype=torch.int64)
    runner = DecodeGraphRunner(model, max_batch=4, max_model_len=64, block_size=block, vocab_size=spec.vocab_size,
                               device=torch.device("cpu"), last_tokens=last_tokens)
    h = runner.staging.host()
    runner._fill_padding(h, 0, 4)
    src = [2, -1, 0]
    h["input_ids"][:bs] = [5, 6, 7]
    h["src"][:bs] = src
    h["slots"][:bs] = [0, block, 2 * block]  # one block each, position 0
    h["block_tables"][:bs, 0] = [0, 1, 2]
    runner._upload(4)
    ids = torch.tensor([33, 6, 11])  # src >= 0: last_tokens[src]; else input_ids
    meta = AttentionMetadata(torch.arange(bs + 1, dtype=torch.int32), torch.ones(bs, dtype=torch.int32),
                             torch.tensor([0, block, 2 * block]), torch.arange(bs, dtype=torch.int32)[:, None], 1, 1,
                             True)
    with torch.inference_mode():
        want = model.compute_logits(model(ids, torch.zeros(bs, dtype=torch.int64), meta)).float()
        logits, tokens = runner._step(bs)
    torch.testing.assert_close(logits, want)
    assert tokens.data_ptr() == last_tokens.data_ptr() and tokens.shape == (bs,), "tokens are last_tokens[:bs]"
    assert torch.equal(tokens, want.argmax(-1))  # padding-style rows are greedy
    assert last_tokens[bs] == 44, "rows past the batch untouched"

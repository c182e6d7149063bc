"""The KV block pool: the one owner of KV-cache blocks.

Blocks are integers in [0, num_blocks). A block is either free (in the free list, ref count 0) or
in use (ref count >= 1). Only `BlockPool.free` returns blocks to the free list; a double free
raises. `check_integrity()` asserts free + in_use == total. Prefix caching will add a third state
(cached: ref count 0 but hashed and reusable) behind the same interface.
"""

from __future__ import annotations

from collections import deque

from tachyon.engine.request import Request


class BlockPool:
    def __init__(self, num_blocks: int, block_size: int):
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._free: deque[int] = deque(range(num_blocks))
        self._ref = [0] * num_blocks

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_in_use(self) -> int:
        return self.num_blocks - len(self._free)

    def usage(self) -> float:
        return self.num_in_use / self.num_blocks

    def allocate(self, n: int) -> list[int]:
        if n > len(self._free):
            raise RuntimeError(f"cannot allocate {n} blocks: only {len(self._free)} free")
        out = [self._free.popleft() for _ in range(n)]
        for b in out:
            self._ref[b] = 1
        return out

    def free(self, blocks: list[int]) -> None:
        for b in reversed(blocks):  # freed tail first: LIFO reuse keeps recently-used blocks warm
            if self._ref[b] <= 0:
                raise RuntimeError(f"double free of KV block {b}")
            self._ref[b] -= 1
            if self._ref[b] == 0:
                self._free.appendleft(b)

    def check_integrity(self) -> None:
        free = set(self._free)
        assert len(free) == len(self._free), "a block appears twice in the free list"
        assert all(self._ref[b] == 0 for b in free), "a free block has a non-zero ref count"
        in_use = sum(1 for r in self._ref if r > 0)
        assert len(free) + in_use == self.num_blocks, (
            f"block accounting broken: free {len(free)} + in use {in_use} != total {self.num_blocks}")


class KVCacheManager:
    """Maps requests to blocks. Requests hold block ids; the pool holds the blocks."""

    def __init__(self, pool: BlockPool):
        self.pool = pool
        self.block_size = pool.block_size

    def blocks_needed(self, req: Request, num_new_tokens: int) -> int:
        total = req.num_computed_tokens + num_new_tokens
        return max(0, -(-total // self.block_size) - len(req.block_ids))

    def allocate_slots(self, req: Request, num_new_tokens: int) -> bool:
        """Grow req's block list to hold num_computed + num_new tokens; False (nothing taken) if short."""
        need = self.blocks_needed(req, num_new_tokens)
        if need > self.pool.num_free:
            return False
        if need:
            req.block_ids.extend(self.pool.allocate(need))
        return True

    def free(self, req: Request) -> None:
        if req.block_ids:
            self.pool.free(req.block_ids)
            req.block_ids = []

"""The KV block pool: the one owner of KV-cache blocks; and prefix caching.

Blocks are integers in [0, num_blocks). A block is free (in the free list, ref count 0), cached (ref count 0, but
it holds the KV of a full block of known tokens, findable by its hash, and reusable until evicted) or in use (ref
count >= 1; an in-use block may be hashed too, and shared by several requests). Only `BlockPool.free` drops a
reference; a double free raises. `allocate` takes free blocks first, then evicts cached ones, least recently freed
first. `check_integrity()` asserts free + cached + in use == total.

Prefix caching (`KVCacheManager(enable_caching=True)`): a full block's hash chains the hash of the block before it
with its token ids, so equal hashes mean equal prefixes (the token ids are kept and compared too, so a hash
collision cannot hand out a wrong block). When a request is admitted its longest run of cached leading blocks is
shared instead of recomputed, always leaving at least its last known token to compute (the step that computes it
draws the next token). Blocks are registered once their tokens are all known and their KV is computed (or launched:
a later reader runs after the writer on the same stream). A full hashed block is never written again: a request
writes only positions past its shared blocks. A request's chain of block hashes is computed once per block
(`Request.block_hashes`, over known tokens only) and kept across preemptions; `num_registered_blocks` counts how
many of its current blocks are registered.

Without `enable_caching`, the children of one n > 1 request still share their prompt's blocks with one another
(the prompt is computed once, not n times): their chains start from the group's own salt (`Request.prefix_salt`),
so no other request's lookup can find their blocks.

In-flight prefixes: the blocks a running request's prompt will still compute (`inflight_blocks`) are not cached
yet; the scheduler holds back a waiting request whose next uncached block is one of them (`next_block_hash`)
until that block is registered, so requests arriving together with a shared head compute it once.
"""

from __future__ import annotations

from collections import OrderedDict, deque

from tachyon.engine.request import Request


def chain_hash(prev: int, tokens: tuple[int, ...]) -> int:
    """A full block's hash: the hash of the blocks before it (0 for the first) chained with its token ids."""
    return hash((prev, tokens))


class BlockPool:
    def __init__(self, num_blocks: int, block_size: int):
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._free: deque[int] = deque(range(num_blocks))
        self._ref = [0] * num_blocks
        self._hash: list[int | None] = [None] * num_blocks  # a registered block's chained hash (in use or cached)
        self._by_hash: dict[int, tuple[int, tuple[int, ...]]] = {}  # chained hash -> (block, its token ids)
        self._cached: OrderedDict[int, None] = OrderedDict()  # ref count 0 but hashed: oldest first
        self.num_evictions = 0

    @property
    def num_free(self) -> int:
        """Blocks `allocate` can hand out: free ones and cached ones (evicted on demand)."""
        return len(self._free) + len(self._cached)

    @property
    def num_cached(self) -> int:
        return len(self._cached)

    @property
    def num_in_use(self) -> int:
        return self.num_blocks - self.num_free

    def usage(self) -> float:
        return self.num_in_use / self.num_blocks

    def allocate(self, n: int) -> list[int]:
        if n > self.num_free:
            raise RuntimeError(f"cannot allocate {n} blocks: only {self.num_free} free")
        out = []
        for _ in range(n):
            if self._free:
                b = self._free.popleft()
            else:
                b, _ = self._cached.popitem(last=False)
                self._unhash(b)
                self.num_evictions += 1
            self._ref[b] = 1
            out.append(b)
        return out

    def free(self, blocks: list[int]) -> None:
        for b in reversed(blocks):  # freed tail first: LIFO reuse keeps recently-used blocks warm
            if self._ref[b] <= 0:
                raise RuntimeError(f"double free of KV block {b}")
            self._ref[b] -= 1
            if self._ref[b] == 0:
                if self._hash[b] is None:
                    self._free.appendleft(b)
                else:
                    self._cached[b] = None  # newest last: evicted after the older ones

    # ---- prefix cache ---------------------------------------------------------------------------
    def lookup(self, block_hash: int, tokens: tuple[int, ...]) -> int | None:
        """The block holding exactly these tokens after the prefix `block_hash` chains, if cached or in use."""
        entry = self._by_hash.get(block_hash)
        return entry[0] if entry is not None and entry[1] == tokens else None

    def is_cached(self, b: int) -> bool:
        """Unreferenced but kept for its hash (reusable, or evictable by `allocate`)."""
        return self._ref[b] == 0 and self._hash[b] is not None

    def share(self, b: int) -> None:
        """One more reference to a hashed block (a cached one comes back into use)."""
        if self._ref[b] == 0:
            del self._cached[b]
        self._ref[b] += 1

    def register(self, b: int, block_hash: int, tokens: tuple[int, ...]) -> None:
        """Make in-use block b findable by its chained hash (a full block of known, computed tokens). A hash
        another block already holds keeps that block: b stays unhashed and goes back to the free list when freed."""
        if self._ref[b] <= 0 or self._hash[b] is not None or block_hash in self._by_hash:
            return
        self._hash[b] = block_hash
        self._by_hash[block_hash] = (b, tokens)

    def evict_cached(self) -> int:
        """Every cached block loses its hash and goes back to the free list (as `allocate` would evict it); blocks
        in use keep theirs. Returns how many were dropped."""
        n = len(self._cached)
        for b in self._cached:
            self._unhash(b)
            self._free.appendleft(b)
        self._cached.clear()
        return n

    def _unhash(self, b: int) -> None:
        h = self._hash[b]
        if h is not None:
            del self._by_hash[h]
            self._hash[b] = None

    def check_integrity(self) -> None:
        free = set(self._free)
        assert len(free) == len(self._free), "a block appears twice in the free list"
        assert all(self._ref[b] == 0 and self._hash[b] is None for b in free), "a free block is referenced or hashed"
        assert all(self._ref[b] == 0 and self._hash[b] is not None for b in self._cached), (
            "a cached block is referenced or unhashed")
        assert not free & set(self._cached), "a block is both free and cached"
        in_use = sum(1 for r in self._ref if r > 0)
        assert len(free) + len(self._cached) + in_use == self.num_blocks, (
            f"block accounting broken: free {len(free)} + cached {len(self._cached)} + in use {in_use} != total "
            f"{self.num_blocks}")
        assert all(self._by_hash[self._hash[b]][0] == b for b in range(self.num_blocks) if self._hash[b] is not None)
        assert len(self._by_hash) == sum(h is not None for h in self._hash)


class KVCacheManager:
    """Maps requests to blocks. Requests hold block ids; the pool holds the blocks. With `enable_caching`, full
    blocks are shared between requests with equal prefixes (module docstring)."""

    def __init__(self, pool: BlockPool, enable_caching: bool = False):
        self.pool = pool
        self.block_size = pool.block_size
        self.enable_caching = enable_caching
        self.num_prefix_hit_tokens = 0  # prompt (or recomputed) tokens served from cached blocks
        self.num_prefix_queried_tokens = 0  # tokens of the admitted requests that could have been
        self._salted: set[int] = set()  # ids of admitted n > 1 children that share with caching off, until freed

    def shares(self, req: Request) -> bool:
        """Whether req's full blocks are registered and looked up: every request's with `enable_caching`, else
        those of an n > 1 request's children (Request.prefix_salt), among themselves only."""
        return self.enable_caching or req.prefix_salt is not None

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
        req.num_registered_blocks = 0
        self._salted.discard(id(req))

    # ---- prefix caching -------------------------------------------------------------------------
    def find_prefix(self, req: Request) -> list[int]:
        """The cached blocks that hold req's leading full blocks (a request not yet started, whose prompt
        logprobs are not asked): all but its last known token at most. Takes nothing."""
        if not self.shares(req) or req.block_ids or req.num_computed_tokens or req.wants_prompt_logprobs():
            return []
        bs = self.block_size
        n = self._chain(req, (req.num_tokens - req.num_pending - 1) // bs)
        hits: list[int] = []
        for i in range(n):
            b = self.pool.lookup(req.block_hashes[i], tuple(req.token_ids[i * bs:(i + 1) * bs]))
            if b is None:
                break
            hits.append(b)
        return hits

    def next_block_hash(self, req: Request, hits: list[int]) -> int | None:
        """The hash of the first leading block of req that `find_prefix` did not find (`hits`), if a cache hit on it
        could still serve req (it lies before req's last known token); else None."""
        if not self.shares(req) or req.wants_prompt_logprobs():
            return None
        n = self._chain(req, (req.num_tokens - req.num_pending - 1) // self.block_size)
        return req.block_hashes[len(hits)] if len(hits) < n else None

    def inflight_blocks(self, req: Request) -> list[int]:
        """Hashes of the full prompt blocks req (running) has still to compute or register: they become cached
        blocks as its prefill proceeds."""
        if not self.shares(req) or req.num_computed_tokens >= req.num_prompt_tokens:
            return []
        n = self._chain(req, req.num_prompt_tokens // self.block_size)
        return req.block_hashes[req.num_registered_blocks:n]

    def admission_blocks(self, req: Request, hits: list[int], num_new_tokens: int) -> tuple[int, int]:
        """(blocks to allocate, blocks free for them) if req is admitted with `hits` shared and num_new_tokens
        more tokens scheduled: cached hits come back into use, so they stop counting as free."""
        if not hits:
            return self.blocks_needed(req, num_new_tokens), self.pool.num_free
        total = len(hits) * self.block_size + num_new_tokens
        reclaimed = sum(1 for b in hits if self.pool.is_cached(b))
        return -(-total // self.block_size) - len(hits), self.pool.num_free - reclaimed

    def share_prefix(self, req: Request, hits: list[int]) -> None:
        """req starts with `hits` (find_prefix's, for this request) as its computed leading blocks."""
        if not self.shares(req):
            return
        if not self.enable_caching:
            self._salted.add(id(req))  # until `free`: cache_blocks has work with caching off
        self.num_prefix_queried_tokens += req.num_tokens - req.num_pending
        if not hits:
            return
        for b in hits:
            self.pool.share(b)
        req.block_ids = list(hits)
        req.num_computed_tokens = len(hits) * self.block_size
        req.num_cached_tokens = req.num_computed_tokens
        self.num_prefix_hit_tokens += req.num_computed_tokens
        self._hash_blocks(req)

    def cache_blocks(self, reqs: list[Request]) -> None:
        """Register each request's full blocks whose tokens are all known and computed (once each); the engine
        calls it after every step for the step's requests."""
        if not (self.enable_caching or self._salted):
            return  # the default: nothing is shared, and the step's requests are not walked
        bs = self.block_size
        for req in reqs:
            # else no block can have filled (checked first: it is the common case)
            if req.num_computed_tokens // bs > req.num_registered_blocks and self.shares(req):
                self._hash_blocks(req)

    def _hash_blocks(self, req: Request) -> None:
        bs = self.block_size
        full = min(req.num_computed_tokens, req.num_tokens - req.num_pending, len(req.block_ids) * bs) // bs
        if full <= req.num_registered_blocks:
            return
        self._chain(req, full)
        for i in range(req.num_registered_blocks, full):
            self.pool.register(req.block_ids[i], req.block_hashes[i], tuple(req.token_ids[i * bs:(i + 1) * bs]))
        req.num_registered_blocks = full

    def _chain(self, req: Request, n: int) -> int:
        """Extend req.block_hashes to (at least) its first n full blocks, whose tokens the caller knows are known;
        each block is hashed once in the request's life. Returns n."""
        hashes, bs = req.block_hashes, self.block_size
        for i in range(len(hashes), n):
            prev = hashes[-1] if hashes else req.prefix_salt or 0
            hashes.append(chain_hash(prev, tuple(req.token_ids[i * bs:(i + 1) * bs])))
        return n

"""Host -> device staging of a graph's per-step inputs: one pinned region, one copy per step.

Contract: `StagingBuffers` packs named, typed fields into one byte region on the host (pinned on
CUDA) and one on the device. `host()` returns numpy views of the next host set to fill (two sets
alternate, and a set is handed out only after its previous upload finished), `upload(n)` copies the
first n bytes of that set to the device in one stream-ordered copy and flips sets; `device[name]` are
the device views the captured graphs read. Put a field whose tail may be skipped (block tables) last.
"""

from __future__ import annotations

import numpy as np
import torch

_ALIGN = 16


class StagingBuffers:
    def __init__(self, fields: list[tuple[str, torch.dtype, tuple[int, ...]]], device: torch.device):
        self.offsets: dict[str, int] = {}
        self.shapes = {name: shape for name, _, shape in fields}
        self._dtypes = {name: dtype for name, dtype, _ in fields}
        self._nbytes = {name: int(np.prod(shape)) * torch.empty(0, dtype=dtype).element_size()
                        for name, dtype, shape in fields}
        # bytes per leading-dim row of each field (upload_rows runs every step: no per-step arithmetic)
        self._row_bytes = {name: self._nbytes[name] // max(shape[0], 1) if shape else self._nbytes[name]
                           for name, _, shape in fields}
        off = 0
        for name, _, _ in fields:
            off = -(-off // _ALIGN) * _ALIGN
            self.offsets[name] = off
            off += self._nbytes[name]
        self.nbytes = -(-off // _ALIGN) * _ALIGN
        cuda = device.type == "cuda"
        self._host = [torch.zeros(self.nbytes, dtype=torch.uint8, pin_memory=cuda) for _ in range(2)]
        self._host_np = [{n: v.numpy() for n, v in self._views(h).items()} for h in self._host]
        self._free = [torch.cuda.Event() if cuda else None for _ in range(2)]
        self._dev = torch.zeros(self.nbytes, dtype=torch.uint8, device=device)
        self.device = self._views(self._dev)
        self._set = 0

    def _views(self, region: torch.Tensor) -> dict[str, torch.Tensor]:
        return {name: region[off: off + self._nbytes[name]].view(self._dtypes[name]).view(self.shapes[name])
                for name, off in self.offsets.items()}

    def upload_rows(self, name: str, rows: int) -> None:
        """`upload` of every field before `name` (the last field) and its first `rows` rows."""
        self.upload(self.offsets[name] + rows * self._row_bytes[name])

    def host(self) -> dict[str, np.ndarray]:
        """numpy views of the host set to fill next (waits for its previous upload: normally long done)."""
        ev = self._free[self._set]
        if ev is not None:
            ev.synchronize()  # returns at once if never recorded
        return self._host_np[self._set]

    def upload(self, nbytes: int | None = None) -> None:
        """Copy the first `nbytes` (default: all) of the current host set to the device, then flip sets."""
        n = self.nbytes if nbytes is None else nbytes
        self._dev[:n].copy_(self._host[self._set][:n], non_blocking=True)
        ev = self._free[self._set]
        if ev is not None:
            ev.record()
        self._set ^= 1


def to_device_async(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device` without the host waiting for the stream: on CUDA through a pinned copy (PyTorch's
    caching host allocator keeps it until the copy has run), since the driver may synchronise with the stream to
    stage a pageable source; elsewhere a plain `.to`. For the few small tensors a launched step builds per row
    group (the graphs' own inputs go through StagingBuffers)."""
    if device.type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def aligned_rows(rows: list[list], dtype: torch.dtype, device: torch.device) -> list[torch.Tensor]:
    """Equal-length host rows as `dtype` tensors on `device`, in one host-to-device copy (to_device_async), each
    starting 16-byte aligned whatever the length. Triton specialises every pointer argument on 16-byte alignment, so
    rows packed back to back compiled other kernel variants at some lengths than start-up had (stop 66: 5.3 s of
    sampling-kernel compiles on a live request): each row is padded to a multiple of 16 bytes."""
    n = len(rows[0])
    per = max(1, 16 // dtype.itemsize)
    pad = [0] * (-n % per)
    packed = to_device_async(torch.tensor([list(r) + pad for r in rows], dtype=dtype), device)
    return [packed[i, :n] for i in range(len(rows))]


def flat_row_indices(rows: list[int], ids: list[torch.Tensor], width: int, device: torch.device) -> torch.Tensor:
    """Indices into a (rows, width) tensor's flat view: the int64 host tensor ids[k] in row rows[k], in one
    host-to-device copy (to_device_async)."""
    return to_device_async(torch.cat([t + row * width for row, t in zip(rows, ids)]), device)

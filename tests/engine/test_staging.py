"""StagingBuffers: typed fields packed into one region, uploaded as one prefix copy, two host sets alternating."""

import numpy as np
import torch

from tachyon.engine.staging import StagingBuffers


def test_fields_round_trip_and_prefix_upload():
    st = StagingBuffers([("ids", torch.int64, (5,)), ("lens", torch.int32, (3,)), ("temp", torch.float32, (3,)),
                         ("tables", torch.int32, (4, 6))], torch.device("cpu"))
    assert all(off % 16 == 0 for off in st.offsets.values())
    h = st.host()
    h["ids"][:] = np.arange(5) - 2
    h["lens"][:] = [7, 8, 9]
    h["temp"][:] = [0.5, 1.0, 1.5]
    h["tables"][:] = np.arange(24).reshape(4, 6)
    st.upload_rows("tables", 2)  # only the first two table rows travel
    d = st.device
    assert d["ids"].tolist() == [-2, -1, 0, 1, 2]
    assert d["lens"].tolist() == [7, 8, 9] and d["temp"].tolist() == [0.5, 1.0, 1.5]
    assert d["tables"][:2].flatten().tolist() == list(range(12))
    assert d["tables"][2:].abs().sum().item() == 0, "rows past the prefix must not travel"
    h2 = st.host()  # the other set: filling it leaves the device copy alone until its upload
    assert h2["ids"] is not h["ids"]
    h2["ids"][:] = 9
    assert d["ids"].tolist() == [-2, -1, 0, 1, 2]
    st.upload()
    assert d["ids"].tolist() == [9] * 5
    assert st.host()["ids"].tolist() == [-2, -1, 0, 1, 2], "sets alternate"


def test_aligned_rows_start_16_byte_aligned_at_every_length():
    """Each row aligned_rows hands out starts on a 16-byte boundary (the alignment Triton specialises pointers on),
    is contiguous and holds exactly its values, whatever the row length and element size."""
    from tachyon.engine.staging import aligned_rows

    for dtype in (torch.int64, torch.int32, torch.float32, torch.int16):
        for n in range(1, 10):
            rows = [[(3 * i + k) % 100 for k in range(n)] for i in range(3)]
            out = aligned_rows(rows, dtype, torch.device("cpu"))
            assert len(out) == 3
            for t, want in zip(out, rows, strict=True):
                assert t.dtype == dtype and t.shape == (n,) and t.is_contiguous()
                assert t.data_ptr() % 16 == 0, (dtype, n)
                assert torch.equal(t, torch.tensor(want, dtype=dtype))

"""A recorder of the dispatch order (decode_order) that graph steps hand an attention kernel."""

from tachyon import kernels


def spy_decode_order(monkeypatch, kernel: str) -> list:
    """Wraps tachyon.kernels.`kernel` (an attention taking decode_order) to record each call's order (a list, or
    None) in the returned list; the wrapped kernel still runs."""
    seen = []
    real = getattr(kernels, kernel)

    def spy(*args, decode_order=None, **kw):
        seen.append(None if decode_order is None else decode_order.tolist())
        return real(*args, decode_order=decode_order, **kw)

    monkeypatch.setattr(kernels, kernel, spy)
    return seen

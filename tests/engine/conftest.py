import pytest

from tachyon import LLM


@pytest.fixture(scope="module")
def llm(tiny_llama):
    # overlap scheduling on, as on CUDA (the CPU default is off): the lifecycle tests exercise both paths
    engine = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=256, overlap_scheduling=True)
    yield engine
    engine.engine.check_integrity()


@pytest.fixture(autouse=True)
def _pool_whole_after_each_test(request):
    """After every test that used the module's engine, its block pool is whole (nothing leaked)."""
    yield
    if "llm" in request.fixturenames:
        request.getfixturevalue("llm").engine.check_integrity()

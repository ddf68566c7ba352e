"""The LLaMA-style decoder of the cold-start benchmarks (d=256, 4 layers,
4 heads, batch 8 x 128 tokens by default). It lives in
tests/support/llama.py, where the tests train it too (tests never import
benchmarks/); this module keeps `from llama import Llama` working for the
scripts here.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from support.llama import Block, Llama, RMSNorm, apply_rope, rope_tables  # noqa: E402,F401

"""Published per-chip figures of TPU generations, for fit checks and roofline
estimates. Each entry cites the Cloud TPU page its numbers come from.

HBM is taken as the page states it: "GiB" as 2**30 bytes, "GB" as 10**9
(so a fit check never credits a chip with more memory than documented).
"""
from dataclasses import dataclass

GiB = 1 << 30
GB = 10**9


@dataclass(frozen=True)
class Chip:
    generation: str       # topology prefix: "v5e" in "v5e:2x2"
    hbm_bytes: int        # per chip
    peak_bf16_flops: float  # per chip, FLOP/s
    hbm_bytes_per_s: float  # per chip
    source: str


CHIPS = {
    # https://cloud.google.com/tpu/docs/v3: 123 teraflops (bf16) per chip,
    # HBM2 32 GiB, 900 GBps.
    "v3": Chip("v3", 32 * GiB, 123e12, 900e9, "https://cloud.google.com/tpu/docs/v3"),
    # https://cloud.google.com/tpu/docs/v4: 275 teraflops (bf16) per chip,
    # HBM2 32 GiB, 1200 GBps.
    "v4": Chip("v4", 32 * GiB, 275e12, 1200e9, "https://cloud.google.com/tpu/docs/v4"),
    # https://cloud.google.com/tpu/docs/v5e: 197 TFLOPs (bf16) per chip,
    # HBM2 16 GB, 819 GBps.
    "v5e": Chip("v5e", 16 * GB, 197e12, 819e9, "https://cloud.google.com/tpu/docs/v5e"),
    # https://cloud.google.com/tpu/docs/v5p: 459 TFLOPs (bf16) per chip,
    # HBM2e 95 GB, 2765 GBps.
    "v5p": Chip("v5p", 95 * GB, 459e12, 2765e9, "https://cloud.google.com/tpu/docs/v5p"),
    # https://cloud.google.com/tpu/docs/v6e (Trillium): 918 TFLOPs (bf16)
    # per chip, HBM 32 GB, 1638 GBps.
    "v6e": Chip("v6e", 32 * GB, 918e12, 1638e9, "https://cloud.google.com/tpu/docs/v6e"),
}

# Other spellings of a generation that libtpu's topology names accept.
ALIASES = {"v5litepod": "v5e", "v5lite": "v5e", "v6lite": "v6e", "trillium": "v6e"}


def generation_of(topology):
    """"v5e:2x2" -> "v5e" (lower case; aliases resolved)."""
    gen = topology.split(":", 1)[0].split("_", 1)[0].strip().lower()
    return ALIASES.get(gen, gen)


def chip_count(topology):
    """Chips named by the topology's shape: "v5e:2x2" -> 4, "v4:2x2x1" -> 4."""
    if ":" not in topology:
        raise ValueError(f"topology {topology!r} is not '<generation>:<shape>', e.g. 'v5e:2x2'")
    shape = topology.split(":", 1)[1].split("_", 1)[0]
    n = 1
    for d in shape.lower().split("x"):
        if not d.isdigit() or int(d) <= 0:
            raise ValueError(f"topology {topology!r}: shape {shape!r} is not like 2x2 or 2x2x1")
        n *= int(d)
    return n


def chip_for(topology):
    """The table entry for a topology's generation, or None if untabled."""
    return CHIPS.get(generation_of(topology))

"""Test-session set-up: private persistent compile caches (torchtpu's and
PyTorch's, which holds torch.compile's AOTAutograd entries), so runs neither
read nor fill the user's (tests that check a cache make their own
directories)."""
import os
import tempfile

if "TORCHTPU_CACHE_DIR" not in os.environ:
    os.environ["TORCHTPU_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchtpu-test-cache-")
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchtpu-test-inductor-")

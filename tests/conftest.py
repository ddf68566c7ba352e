"""Test-session set-up: private persistent compile caches (torchtpu's and
PyTorch's, which holds torch.compile's AOTAutograd entries), so runs neither
read nor fill the user's (tests that check a cache make their own
directories)."""
import os
import tempfile

# Each pytest-xdist worker gets caches of its own: tests that count
# compiles must not find what the other worker compiled.
_fresh = os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("TORCHTPU_TEST_CACHES") == "conftest"
if "TORCHTPU_CACHE_DIR" not in os.environ or _fresh:
    os.environ["TORCHTPU_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchtpu-test-cache-")
    os.environ["TORCHTPU_TEST_CACHES"] = "conftest"
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ or _fresh:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchtpu-test-inductor-")

# Padding that bucketed programs write holds NaN in tests, so that an op
# that fails to mask it gives a visibly wrong result (docs/design/shapes.md).
os.environ.setdefault("TORCHTPU_BUCKET_POISON", "1")

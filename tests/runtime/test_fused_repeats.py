"""Repeated layers in fused mode (exec/window.c, "repeats"): a window that
holds the same run of ops several times in a row (a model's identical
layers) runs as one window per copy, and the copies share one program, so
a deeper model compiles what a shallower one of the same width compiled.
Results are compared with the CPU's (or, with dropout, with strict mode's:
the random stream is the device's); compile counts are asserted, times
are not. Each test runs in a fresh process with the disk cache off."""
import textwrap

from _proc import check, run_script

COMMON = """
    import copy, torch, torchtpu
    import torch.nn.functional as F
    from support.llama import Llama, Block
    from torchtpu import debug
    VOCAB, D, T = 64, 64, 16

    def train(model, steps=2, device="tpu", mode="fused"):
        model = copy.deepcopy(model).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(1)
        losses = []
        with torchtpu.set_eager_mode(mode):
            for _ in range(steps):
                idx = torch.randint(0, VOCAB, (2, T), generator=g).to(device)
                loss = model(idx, idx)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return losses

    def windows():
        return [c for c in debug.compiles() if c["what"].startswith("fused window")]

    def model(layers, **kw):
        torch.manual_seed(0)
        return Llama(VOCAB, d=D, layers=layers, heads=4, block=T, **kw)
"""


def _run(body, **env):
    code = textwrap.dedent(COMMON) + textwrap.dedent(body)
    return check(run_script(code, timeout=300, TORCHTPU_DISK_CACHE="0", **env))


def test_identical_layers_share_one_program():
    """3 layers, then 8 of the same width: the deeper model's windows are
    the ones the shallower compiled (its step reaches the op limit, and the
    copy it was in carries over to the next window), but for the last one,
    which holds the optimizer's update over more parameters; losses equal
    the CPU's."""
    _run("""
        m3, m8 = model(3), model(8)
        got3 = train(m3)
        n3 = len(windows())
        got8 = train(m8)
        new = windows()[n3:]
        # one: the step's last window, which holds the optimizer's update
        # over the parameters (more of them)
        assert len(new) == 1, new
        assert debug.metrics()["fused_window_ends"]["layer_repeat"] > 0
        for m, got in ((m3, got3), (m8, got8)):
            want = train(m, device="cpu", mode="strict")
            torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-4, atol=1e-5)
        print("ok")
    """)


def test_the_first_layer_after_an_embedding_is_a_copy():
    """The embedding writes its rows in the output's shape, so the first
    layer reads them as every later layer reads its predecessor's output:
    a 3-layer model has three copies (the fewest that are cut; with the
    first layer apart it would have two), and a 6-layer model after it
    compiles one new window, the step's last (the optimizer's update over
    more parameters); a 2-layer model's window stays whole. Losses equal
    the CPU's."""
    _run("""
        train(model(2))
        assert debug.metrics()["fused_window_ends"]["layer_repeat"] == 0
        m3, m6 = model(3), model(6)
        got3 = train(m3)
        n3 = len(windows())
        assert debug.metrics()["fused_window_ends"]["layer_repeat"] > 0
        got6 = train(m6)
        new = windows()[n3:]
        assert len(new) == 1, new
        for m, got in ((m3, got3), (m6, got6)):
            want = train(m, device="cpu", mode="strict")
            torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-4, atol=1e-5)
        print("ok")
    """)


def test_repeats_off_keeps_windows_whole():
    """TORCHTPU_FUSED_REPEATS=0: no window is cut at a repeat, and the
    deeper model compiles its own windows, larger than the shallow one's."""
    _run("""
        train(model(3))
        n3 = len(windows())
        train(model(8))
        new = windows()[n3:]
        assert new and max(w["ops"] for w in new) > max(w["ops"] for w in windows()[:n3]), windows()
        assert debug.metrics()["fused_window_ends"]["layer_repeat"] == 0
        print("ok")
    """, TORCHTPU_FUSED_REPEATS="0")


def test_nearly_identical_layers():
    """A layer of another width among identical ones, and a layer the
    forward skips: the identical runs still share a program, the odd layer
    runs in a window of its own; losses equal the CPU's. (8 layers: the
    four after the odd one are the run of at least three copies.)"""
    _run("""
        m = model(8)
        m.blocks[3] = Block(D, 4, 96)            # another MLP width
        skip = lambda self, idx, targets: Llama.forward(self, idx, targets)
        class Skipping(Llama):
            def forward(self, idx, targets=None):
                T_ = idx.shape[1]
                x = self.tok(idx)
                cos, sin = self.cos[:T_], self.sin[:T_]
                for i, b in enumerate(self.blocks):
                    if i != 1:                   # a skipped layer
                        x = b(x, cos, sin)
                logits = self.head(self.norm(x))
                return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        m.__class__ = Skipping
        got = train(m)
        want = train(m, device="cpu", mode="strict")
        torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-4, atol=1e-5)
        assert debug.metrics()["fused_window_ends"]["layer_repeat"] > 0
        print("ok")
    """)


def test_dropout_in_training_layers():
    """Layers with dropout on: each copy's window draws from the device's
    stream in order, so fused mode's losses equal strict mode's exactly
    (the stream is counter-based; strict runs each op alone)."""
    _run("""
        class DropBlock(Block):
            def forward(self, x, cos, sin):
                return F.dropout(super().forward(x, cos, sin), 0.2, self.training)
        m = model(6)
        m.blocks = torch.nn.ModuleList(DropBlock(D, 4, m.blocks[0].gate.out_features) for _ in range(6))
        torch.tpu.manual_seed(5)
        fused = train(m)
        assert debug.metrics()["fused_window_ends"]["layer_repeat"] > 0
        torch.tpu.manual_seed(5)
        strict = train(m, mode="strict")
        torch.testing.assert_close(torch.tensor(fused), torch.tensor(strict), rtol=1e-5, atol=1e-6)
        print("ok")
    """)


def test_a_remembered_window_runs_its_copies_while_it_is_recorded():
    """Once a window's cuts are known (the first step), the next step's
    window is cut as it is recorded, at the same ops: each copy's program
    is launched when the next copy's first op arrives, so the device runs
    the first layers while the host still records the rest of the forward
    (in the first step, no window runs before the forward is recorded).
    The windows are the first step's: nothing compiles after it; losses
    equal the CPU's. (The device is idle at each step's start, so a
    program starts when it is launched; the profiler's device track gives
    the starts.)"""
    _run("""
        from torch.profiler import ProfilerActivity, profile, record_function
        m = model(4)
        tpu = copy.deepcopy(m).to("tpu")
        opt = torch.optim.AdamW(tpu.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(1)
        got, early = [], []
        with torchtpu.set_eager_mode("fused"):
            for step in range(3):
                idx = torch.randint(0, VOCAB, (2, T), generator=g).to("tpu")
                torch.tpu.synchronize()
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
                    with record_function("forward"):
                        loss = tpu(idx, idx)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    got.append(loss.item())
                    torch.tpu.synchronize()
                end = next(e.time_range.end for e in prof.events() if e.name == "forward")
                early.append(sum(1 for e in prof.events()
                                 if getattr(e, "device_type", None) == torch.autograd.DeviceType.PrivateUse1
                                 and e.name.startswith("fused window") and e.time_range.start < end))
                if step == 0:
                    n = len(windows())
        assert early[0] == 0 and early[1] >= 1 and early[2] >= 1, early
        assert len(windows()) == n, windows()[n:]
        want = train(m, steps=3, device="cpu", mode="strict")
        torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-4, atol=1e-5)
        print("ok")
    """)

"""torchtpu.debug.programs(): the programs loaded now, what each runs and
the device memory it holds, and programs_by_op(): which ops hold many (an
op compiling per shape)."""
import torch

import torchtpu
import torchtpu.debug


def test_programs_per_shape_are_listed_by_op():
    sizes = (37, 41, 43)
    for n in sizes:  # a rare op in float64: one program per size
        x = torch.linspace(0.1, 2.0, n, dtype=torch.float64)
        got = torch.special.erfcx(x.to("tpu")).cpu()
        torch.testing.assert_close(got, torch.special.erfcx(x))
    progs = [p for p in torchtpu.debug.programs() if p["what"] == "special_erfcx"]
    assert len(progs) >= len(sizes)
    for p in progs:
        assert set(p) == {"what", "hits", "code_bytes", "temp_bytes",
                          "argument_bytes", "output_bytes"}
        assert p["hits"] >= 0
    # The CPU plugin reports what arguments and outputs take.
    for p in progs[: len(sizes)]:
        assert p["output_bytes"] == -1 or p["output_bytes"] >= 8 * min(sizes)
    by_op = torchtpu.debug.programs_by_op()
    assert by_op["special_erfcx"]["programs"] == len(progs)
    assert list(by_op) == sorted(by_op, key=lambda w: -by_op[w]["programs"])


def test_programs_count_matches_metrics():
    torch.ones(3, device="tpu").add_(1).cpu()
    assert len(torchtpu.debug.programs()) == torchtpu.debug.metrics()["programs_loaded"]


def test_report_names_the_ops_with_most_programs(capsys):
    torch.arange(5.0, device="tpu").exp().cpu()
    torchtpu.debug.report()
    assert "programs by op" in capsys.readouterr().out

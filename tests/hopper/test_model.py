"""The CP-SAT choice of a Hopper GEMM pipeline: inside 227 KiB, proven when lowered."""

import pytest

from synth.gemm import GemmConfig
from synth.lower.barriers import lower_choice
from synth.model.hopper import choose, loop_cost
from synth.verify.phases import verify_hopper


@pytest.mark.parametrize("bm,bn,bk,K", [(128, 128, 64, 4096), (128, 256, 64, 4096), (64, 128, 64, 64)])
def test_choice_fits_and_is_best(bm, bn, bk, K):
    cfg = GemmConfig(4096, 4096, K, "f16", bm, bn, bk, arch="sm_90")
    c = choose(cfg)
    assert c.smem_bytes <= 227 * 1024 and 0 <= c.k_pipe_mmas < c.stages
    T = cfg.trip_count
    best = min(loop_cost(cfg, S, k, C, T, ws).cycles for S in range(1, 17) for k in range(S) for C in (1, 2)
               for ws in (True, False)
               if S * (bm + bn) * bk * 2 + 16 * S <= 227 * 1024 and bm % (64 * C) == 0 and (ws or C == 1))
    assert c.cycles == best


def test_one_stage_too_big_and_pinned_stages():
    with pytest.raises(ValueError, match="no pipeline fits"):
        choose(GemmConfig(4096, 4096, 4096, "f32", 256, 256, 256, arch="sm_90"))
    assert choose(GemmConfig(4096, 4096, 4096, "f16", 128, 128, 64, arch="sm_90"), stages=3).stages == 3


def test_chosen_pipeline_lowers_and_proves():
    cfg = GemmConfig(4096, 4096, 4096, "f16", 128, 128, 64, arch="sm_90")
    c = choose(cfg, stages=3)
    r = verify_hopper(lower_choice(cfg, c), time_limit=20, tightness=False)
    assert r.ok, r.render()
    single = choose(GemmConfig(4096, 4096, 128, "f16", 64, 64, 64, arch="sm_90"))
    assert verify_hopper(lower_choice(GemmConfig(4096, 4096, 128, "f16", 64, 64, 64, arch="sm_90"), single),
                         time_limit=20, tightness=False).ok

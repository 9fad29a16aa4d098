"""GPU identification (analyzers.gpu_identify) from what a file has, with the evidence; each rule
with a case that would flip it."""

from __future__ import annotations

import pytest

from analyzers.errors import UnknownName
from analyzers.gpu_identify import Evidence, candidates, identify_gpu


def test_a_name_in_the_registry_wins():
    i = identify_gpu(
        Evidence(name="Tesla T4", name_source="TARGET_INFO_GPU", cc=(7, 5), sm_count=40)
    )
    assert (
        i.spec.name == "NVIDIA T4"
        and not i.inferred
        and "named by the file (Tesla T4 (TARGET_INFO_GPU))" in i.how
    )


def test_cc_and_sm_count_infer_the_only_fitting_part_and_say_so():
    i = identify_gpu(Evidence(cc=(7, 5), sm_count=40))
    assert (
        i.spec.name == "NVIDIA T4"
        and i.inferred
        and "only registry GPU" in i.how
        and "--gpu" in i.warning
    )
    # one more SM and nothing fits: the per-CC table, no datasheet peaks
    j = identify_gpu(Evidence(cc=(7, 5), sm_count=41))
    assert (
        j.spec.name == "unknown GPU (CC 7.5, 41 SMs)"
        and not j.inferred
        and j.spec.dram_bandwidth_bytes_per_s is None
    )
    assert j.spec.max_threads_per_sm == 1024 and j.spec.smem_per_sm_bytes == 64 * 1024


def test_h100_and_h200_share_cc_and_sm_count_the_dram_clock_tells_them_apart():
    both = identify_gpu(Evidence(cc=(9, 0), sm_count=132))
    assert both.candidates == ("NVIDIA H200", "NVIDIA H100 SXM") and not both.inferred
    assert "fits NVIDIA H200 and NVIDIA H100 SXM" in both.warning
    assert (
        identify_gpu(Evidence(cc=(9, 0), sm_count=132, memory_clock_hz=3.20e9)).spec.name
        == "NVIDIA H200"
    )
    # a clock that is not the H200's (an H100 SXM's HBM3 runs at about 2.6 GHz) excludes it
    assert (
        identify_gpu(Evidence(cc=(9, 0), sm_count=132, memory_clock_hz=2.62e9)).spec.name
        == "NVIDIA H100 SXM"
    )


def test_memory_size_narrows_the_candidates():
    assert {g.name for g in candidates(Evidence(cc=(7, 0), sm_count=80))} == {
        "NVIDIA Tesla V100 SXM2 16GB",
        "NVIDIA Tesla V100 SXM2 32GB",
        "NVIDIA Tesla V100 PCIe 16GB",
    }
    assert {
        g.name for g in candidates(Evidence(cc=(7, 0), sm_count=80, memory_bytes=34_084_028_416))
    } == {"NVIDIA Tesla V100 SXM2 32GB"}


def test_a_compute_capability_alone_is_not_enough():
    i = identify_gpu(Evidence(cc=(8, 6)))
    assert (
        not i.inferred
        and i.spec.name == "unknown GPU (CC 8.6)"
        and "alone does not identify" in i.warning
    )


def test_nothing_to_go_on_is_an_error_naming_the_option():
    with pytest.raises(UnknownName, match=r"no GPU identified.*--gpu NAME"):
        identify_gpu(Evidence())


def test_gpu_option_beats_the_file_and_says_when_they_disagree():
    i = identify_gpu(Evidence(name="Tesla T4", cc=(7, 5), sm_count=40), override="H200")
    assert i.spec.name == "NVIDIA H200" and "given with --gpu" in i.how and "CC 7.5" in i.warning
    with pytest.raises(UnknownName, match="no GPU 'Radeon'"):
        identify_gpu(Evidence(cc=(7, 5)), override="Radeon")


def test_unknown_name_with_attributes_is_described_from_them():
    attrs = {
        "display_name": "NVIDIA A40",
        "compute_capability_major": 8,
        "compute_capability_minor": 6,
        "multiprocessor_count": 84,
        "max_threads_per_multiprocessor": 1536,
    }
    i = identify_gpu(Evidence(name="NVIDIA A40", name_source="device attributes", attributes=attrs))
    assert i.spec.name == "NVIDIA A40" and not i.spec.from_registry and i.spec.sm_count == 84

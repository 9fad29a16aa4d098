"""GPU registry: datasheet entries, name lookup, specs from a report's device attributes."""

from __future__ import annotations

import csv
import gzip
import json

import pytest

from analyzers import gpus
from analyzers.gpus import (
    CC_LIMITS,
    PER_SM_FIELDS,
    all_gpus,
    find_gpu,
    from_device_attributes,
    get_gpu,
    gpu_rows,
    resolve_gpu,
)
from analyzers.occupancy import max_blocks_per_sm_for_cc, smem_carveouts_bytes
from tests.conftest import H200_KERNELS, SAMPLES

RAW_BASE = H200_KERNELS / "full_raw_base.csv.gz"
PREFIX = "device__attribute_"


def h200_attrs() -> dict[str, str]:
    """The device attributes of the first kernel row of the real H200 export (prefix stripped, raw strings)."""
    with gzip.open(RAW_BASE, "rt", newline="") as f:
        rows = list(csv.reader(f))
    header, first = rows[0], rows[2]
    return {
        name[len(PREFIX) :]: value for name, value in zip(header, first) if name.startswith(PREFIX)
    }


def device_env() -> dict:
    return json.loads((SAMPLES / "h200" / "device_env.json").read_text())


REQUIRED_NAMES = {
    "NVIDIA H200": "NVIDIA H200",
    "H200": "NVIDIA H200",
    "h100 sxm": "NVIDIA H100 SXM",
    "H100": "NVIDIA H100 SXM",
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM",
    "NVIDIA H100 PCIe": "NVIDIA H100 PCIe",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100 SXM4 80GB",
    "NVIDIA A10G": "NVIDIA A10G",
    "NVIDIA L4": "NVIDIA L4",
    "L4": "NVIDIA L4",
    "NVIDIA L40S": "NVIDIA L40S",
    "nvidia l40s": "NVIDIA L40S",
    "NVIDIA GeForce RTX 4090": "NVIDIA GeForce RTX 4090",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "NVIDIA RTX PRO 6000 Blackwell "
    "Workstation Edition",
    "NVIDIA B200": "NVIDIA B200",
}


@pytest.mark.parametrize("query, canonical", sorted(REQUIRED_NAMES.items()))
def test_find_gpu_resolves_device_names(query, canonical):
    gpu = find_gpu(query)
    assert gpu is not None and gpu.name == canonical
    assert get_gpu(query) is gpu


@pytest.mark.parametrize(
    "query",
    [
        "NVIDIA H100 NVL",
        "NVIDIA A100-SXM4-40GB",
        "H20",
        "L40",
        "Tesla V100-DGXS-32GB",
        "RTX 4090 Laptop GPU",
        "",
        "h2000",
    ],
)
def test_unknown_or_other_variants_do_not_match(query):
    assert find_gpu(query) is None


def test_h100_and_l4_do_not_match_their_neighbours():
    assert find_gpu("H100").name != "NVIDIA H200"
    assert find_gpu("h100").cc == (9, 0) and find_gpu("h100").sm_count == 132
    assert find_gpu("L4").name == "NVIDIA L4" and find_gpu("L4").sm_count == 58
    assert find_gpu("L40S").sm_count == 142


def test_get_gpu_unknown_raises_keyerror_listing_known():
    with pytest.raises(LookupError) as exc:
        get_gpu("Radeon 7900")
    msg = str(exc.value)
    assert "no GPU 'Radeon 7900' (known: " in msg
    assert "NVIDIA H200" in msg and "NVIDIA B200" in msg


def test_registry_covers_the_ten_parts_and_the_corpus_parts():
    names = {g.name for g in all_gpus()}
    assert set(REQUIRED_NAMES.values()) <= names
    # the parts whose files in tests/corpus may not name the GPU
    assert {
        find_gpu(n).name
        for n in (
            "Tesla V100-SXM2-16GB",
            "Tesla V100-SXM2-32GB",
            "Tesla V100-PCIE-16GB",
            "Tesla T4",
            "NVIDIA GeForce RTX 5090",
        )
    } == {
        "NVIDIA Tesla V100 SXM2 16GB",
        "NVIDIA Tesla V100 SXM2 32GB",
        "NVIDIA Tesla V100 PCIe 16GB",
        "NVIDIA T4",
        "NVIDIA GeForce RTX 5090",
    }
    assert len(all_gpus()) == 15


def test_h200_datasheet_entry():
    g = get_gpu("NVIDIA H200")
    assert g.cc == (9, 0) and g.sm_count == 132
    assert g.dram_bandwidth_bytes_per_s == 4.8e12
    assert g.memory_bytes == 141_000_000_000 and g.memory_type == "HBM3e"
    assert g.l2_bytes == 62_914_560
    assert g.bf16_dense_flop_per_s == 989e12 and g.fp32_flop_per_s == 67e12
    assert g.host_link == "PCIe Gen5 x16" and g.host_link_bytes_per_s == 64e9
    assert "64 GB/s" in g.source_of("host_link_bytes_per_s") and "63" in g.source_of(
        "host_link_bytes_per_s"
    )
    assert g.from_registry


def test_h200_per_sm_limits_equal_the_device_query():
    props = device_env()["cupy_props"]
    g = get_gpu("H200")
    assert g.smem_per_sm_bytes == props["sharedMemPerMultiprocessor"] == 233472
    assert g.smem_per_block_optin_bytes == props["sharedMemPerBlockOptin"] == 232448
    assert g.smem_per_block_bytes == props["sharedMemPerBlock"] == 49152
    assert g.reserved_smem_per_block_bytes == props["reservedSharedMemPerBlock"] == 1024
    assert g.regs_per_sm == props["regsPerMultiprocessor"] == 65536
    assert g.max_regs_per_block == props["regsPerBlock"]
    assert g.max_threads_per_sm == props["maxThreadsPerMultiProcessor"] == 2048
    assert g.max_blocks_per_sm == props["maxBlocksPerMultiProcessor"] == 32
    assert g.max_threads_per_block == props["maxThreadsPerBlock"] == 1024
    assert g.l2_bytes == props["l2CacheSize"]
    assert g.sm_count == props["multiProcessorCount"]


def test_host_links_gen4_32_gen5_64():
    for name in ("A100", "A10G", "L4", "L40S", "RTX 4090"):
        assert (
            get_gpu(name).host_link == "PCIe Gen4 x16"
            and get_gpu(name).host_link_bytes_per_s == 32e9
        )
        assert "31.5" in get_gpu(name).source_of("host_link_bytes_per_s")
    for name in ("H200", "H100", "H100 PCIe", "RTX PRO 6000", "B200"):
        assert (
            get_gpu(name).host_link == "PCIe Gen5 x16"
            and get_gpu(name).host_link_bytes_per_s == 64e9
        )


@pytest.mark.parametrize("gpu", all_gpus(), ids=lambda g: g.name)
def test_every_registry_value_has_a_source_and_per_cc_limits(gpu):
    assert gpu.sources.get("*")
    for f in (
        "sm_count",
        "l2_bytes",
        "memory_bytes",
        "dram_bandwidth_bytes_per_s",
        "bf16_dense_flop_per_s",
        "fp32_flop_per_s",
        "boost_clock_mhz",
        "host_link_bytes_per_s",
        *PER_SM_FIELDS,
    ):
        # no BF16 tensor cores, or not published
        if f == "bf16_dense_flop_per_s" and getattr(gpu, f) is None:
            assert "sources" and ("no BF16" in gpu.sources[f] or "not listed" in gpu.sources[f]), (
                gpu.sources.get(f)
            )
            continue
        assert getattr(gpu, f) is not None, f
        assert gpu.source_of(f) != "unknown source"
    limits = CC_LIMITS[gpu.cc]
    assert {f: getattr(gpu, f) for f in limits} == limits
    # the registry and the occupancy calculator's per-CC tables agree
    assert gpu.max_blocks_per_sm == max_blocks_per_sm_for_cc(gpu.cc)
    assert gpu.smem_per_sm_bytes == max(smem_carveouts_bytes(gpu.cc))
    assert (
        gpu.smem_per_block_optin_bytes == gpu.smem_per_sm_bytes - gpu.reserved_smem_per_block_bytes
    )
    assert gpu.max_warps_per_sm * 32 == gpu.max_threads_per_sm


def test_per_cc_table_values():
    assert (
        CC_LIMITS[(8, 0)]["smem_per_sm_bytes"] == 167936
        and CC_LIMITS[(8, 0)]["smem_per_block_optin_bytes"] == 166912
    )
    assert (
        CC_LIMITS[(8, 6)]["max_threads_per_sm"] == 1536
        and CC_LIMITS[(8, 6)]["max_blocks_per_sm"] == 16
    )
    assert (
        CC_LIMITS[(8, 9)]["max_blocks_per_sm"] == 24
        and CC_LIMITS[(8, 9)]["smem_per_sm_bytes"] == 102400
    )
    assert (
        CC_LIMITS[(12, 0)]["max_threads_per_sm"] == 1536
        and CC_LIMITS[(12, 0)]["smem_per_block_optin_bytes"] == 101376
    )


def test_from_device_attributes_on_the_real_h200_export():
    g = from_device_attributes(h200_attrs())
    assert not g.from_registry
    assert g.name == "NVIDIA H200" and g.cc == (9, 0)
    assert g.sm_count == 132
    assert (g.max_threads_per_sm, g.max_warps_per_sm, g.max_blocks_per_sm) == (2048, 64, 32)
    assert (g.regs_per_sm, g.max_regs_per_block, g.max_regs_per_thread) == (65536, 65536, 255)
    assert (g.smem_per_sm_bytes, g.smem_per_block_bytes, g.smem_per_block_optin_bytes) == (
        233472,
        49152,
        232448,
    )
    assert g.reserved_smem_per_block_bytes == 1024 and g.max_threads_per_block == 1024
    assert g.l2_bytes == 62_914_560 and g.memory_bytes == 150_109_880_320
    # 3,201,000 kHz x 2 x 6016 bit / 8 = 4.814304 TB/s (the datasheet says 4.8)
    assert g.dram_bandwidth_bytes_per_s == pytest.approx(4.814304e12)
    assert "derived from device attributes" in g.source_of("dram_bandwidth_bytes_per_s")
    assert g.boost_clock_mhz == 1980
    assert g.bf16_dense_flop_per_s is None and g.fp32_flop_per_s is None and g.host_link is None
    assert (
        g.source_of("smem_per_sm_bytes")
        == "device attribute max_shared_memory_per_multiprocessor (report)"
    )


def test_from_device_attributes_accepts_prefixed_keys_and_numbers():
    attrs = {PREFIX + k: v for k, v in h200_attrs().items()}
    assert from_device_attributes(attrs).smem_per_block_optin_bytes == 232448
    g = from_device_attributes(
        {
            "display_name": "Mystery",
            "compute_capability_major": 8,
            "compute_capability_minor": 6,
            "multiprocessor_count": 28,
        }
    )
    assert g.cc == (8, 6) and g.sm_count == 28
    assert g.max_threads_per_sm == 1536 and g.max_blocks_per_sm == 16  # per-CC table fills the gaps
    assert "absent" in g.source_of("max_blocks_per_sm")
    assert g.l2_bytes is None and g.dram_bandwidth_bytes_per_s is None and g.memory_bytes is None


def test_from_device_attributes_without_cc_leaves_unknowns_none():
    g = from_device_attributes({"display_name": "Mystery"})
    assert g.cc is None and g.sm_count is None and g.smem_per_sm_bytes is None
    assert g.name == "Mystery"


def test_resolve_gpu_registry_entry_with_report_overrides():
    attrs = h200_attrs()
    g = resolve_gpu("NVIDIA H200", attrs)
    assert g.from_registry and g.name == "NVIDIA H200"
    assert g.dram_bandwidth_bytes_per_s == 4.8e12  # datasheet peak stays
    assert g.bf16_dense_flop_per_s == 989e12
    assert g.smem_per_sm_bytes == 233472
    assert (
        g.source_of("smem_per_sm_bytes")
        == "device attribute max_shared_memory_per_multiprocessor (report)"
    )
    assert g.memory_bytes == 150_109_880_320  # the device's real total memory
    assert "registry had 141000000000" in g.source_of("memory_bytes")
    # a device that differs from the registry (e.g. fewer SMs visible): the report wins, the source
    # says so
    attrs2 = dict(attrs, multiprocessor_count="114", max_shared_memory_per_block_optin="101,376")
    g2 = resolve_gpu("H200", attrs2)
    assert g2.sm_count == 114 and "registry had 132" in g2.source_of("sm_count")
    assert g2.smem_per_block_optin_bytes == 101376
    assert get_gpu("H200").sm_count == 132  # registry untouched


def test_resolve_gpu_by_display_name_and_fallbacks():
    attrs = h200_attrs()
    assert resolve_gpu(None, attrs).from_registry  # display_name in the attributes
    assert resolve_gpu("NVIDIA H200", None) is get_gpu("H200")
    unknown = dict(attrs, display_name="NVIDIA H200 NVL")
    g = resolve_gpu("NVIDIA H200 NVL", unknown)
    assert not g.from_registry and g.name == "NVIDIA H200 NVL" and g.sm_count == 132
    with pytest.raises(LookupError):
        resolve_gpu("NVIDIA H200 NVL", None)
    with pytest.raises(LookupError):
        resolve_gpu(None, None)
    with pytest.raises(LookupError):
        resolve_gpu("Mystery", {"display_name": "Mystery"})


def test_gpu_rows_are_flat_and_json_ready():
    rows = gpu_rows()
    assert len(rows) == len(all_gpus())
    keys = {
        "name",
        "cc",
        "sm_count",
        "dram_bandwidth_bytes_per_s",
        "bf16_dense_flop_per_s",
        "fp32_flop_per_s",
        "l2_bytes",
        "memory_bytes",
        "smem_per_sm_bytes",
        "smem_per_block_optin_bytes",
        "max_threads_per_sm",
        "max_blocks_per_sm",
        "host_link",
        "host_link_bytes_per_s",
        "sources",
    }
    for r in rows:
        assert keys <= set(r)
    h200 = next(r for r in rows if r["name"] == "NVIDIA H200")
    assert h200["cc"] == "9.0" and h200["sm_count"] == 132 and h200["l2_bytes"] == 62_914_560
    assert (
        next(r for r in rows if r["name"] == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition")[
            "cc"
        ]
        == "12.0"
    )
    assert json.loads(json.dumps(rows)) == rows
    assert gpus.REGISTRY[0].sources is not h200["sources"]  # a copy, not the registry's dict

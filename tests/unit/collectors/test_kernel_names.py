"""Canonical kernel names (collectors.kernel_names): one name whatever demangler wrote it, display
labels that tell a run's kernels apart."""

from __future__ import annotations

import pytest

from collectors.kernel_names import canonical_name, display_names, function_name

# the same kernel as different tools spell it (the first of each pair: ncu 2025.3.1's CSV export or
# CUPTI, the second: the ncu-report wheel or another ncu version; names from
# sample_traces/h200/tensor_kernels and tests/corpus)
SAME = [
    (
        "void at::vectorized_elementwise_kernel<4, at::AUnaryFunctor<float, float, float, "
        "at::MulFunctor<float>>, std::array<char *, 2>>(int, T2, T3)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, "
        "float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, "
        "at::native::AUnaryFunctor<float, float, float, "
        "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)",
    ),
    (
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, 0, 0, "
        "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t>>, 0, 1, 0, "
        "0, 1, 1, 0, 0>(pytorch_flash::Flash_fwd_params)",
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, "
        "4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, "
        "cutlass::bfloat16_t> >, false, true, false, false, true, true, false, "
        "false>(pytorch_flash::Flash_fwd_params)",
    ),
    (
        "void gmem_coalesce<(int)32>(int, int, int, const float *, const float *, float *)",
        "void gmem_coalesce<32>(int, int, int, float const*, float const*, float*)",
    ),
    (
        "void at::native::<unnamed>::f<8>(float*)",
        "void at::native::(anonymous namespace)::f<(unsigned int)8u>(float *)",
    ),
    (
        "nodeByPoint5(unsigned int, double*, double, unsigned int*)",
        "nodeByPoint5(unsigned int, double *, double, unsigned int *)",
    ),
]


@pytest.mark.parametrize("a, b", SAME)
def test_one_canonical_name_whatever_the_demangler(a, b):
    assert canonical_name(a) == canonical_name(b)
    assert canonical_name(canonical_name(a)) == canonical_name(a)  # idempotent


def test_canonical_form():
    assert (
        canonical_name("void at::native::(anonymous namespace)::f<(int)8, true>(float *, int)")
        == "f<8, 1>"
    )
    assert canonical_name("ks_copy_u4") == "ks_copy_u4"
    assert canonical_name("enable_if<!T7, void>::type kernel<int, 0>(T13)") == "kernel<int, 0>"
    assert function_name("void foo::bar<128>(float*, int)") == "bar"


def test_different_kernels_stay_different():
    assert canonical_name("void f<1>(int)") != canonical_name("void f<2>(int)")
    assert canonical_name("void f<float>(float*)") != canonical_name("void f<double>(double*)")
    assert canonical_name("void g<16>(int)") == canonical_name("void g<16u>(int)")


def test_display_names_keep_template_arguments_only_where_needed():
    names = [
        "void gmem_coalesce<(int)32>(int)",
        "void gmem_coalesce<(int)64>(int)",
        "void other<(int)1>(int)",
        "void gmem_coalesce<(int)32>(int)",
    ]
    assert display_names(names) == [
        "gmem_coalesce<32>",
        "gmem_coalesce<64>",
        "other",
        "gmem_coalesce<32>",
    ]


def test_enum_casts_in_template_arguments_are_the_bare_number():
    """`.ncu-rep` (the ncu-report wheel) keeps an enum cast that the ncu command line's CSV exports
    drop: the fused Adam kernel of a real training step is one kernel in all three (issue 39);
    negative and namespaced enums too."""
    rep = (
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
        "namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous "
        "namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, "
        "const float *, double>(T1, T2, T3...)"
    )
    csv = (
        "void "
        "at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::FusedOptimizerTensorListMetadata<4>, at::native::<unnamed>::FusedAdamMathFunctor<c10::BFloat16, 4, 1, 0>, const float *, double>(T1, T2, T3...)"
    )
    assert (
        canonical_name(rep)
        == canonical_name(csv)
        == (
            "multi_tensor_apply_kernel<FusedOptimizerTensorListMetadata<4>, "
            "FusedAdamMathFunctor<BFloat16, 4, 1, 0>, const float*, double>"
        )
    )
    assert canonical_name("k<(ns::Mode)-1, (Mode)0, (int)8>(int)") == "k<-1, 0, 8>"
    # a cast needs a number after it: a type in parentheses elsewhere is left alone
    assert canonical_name("f<(anonymous namespace)::X, float>(int)") == "f<X, float>"

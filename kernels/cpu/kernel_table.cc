// One ISA copy's table (compiled once per copy, like the kernels it points at).
#include "kernel_table.h"

#include "amx/amx_attention.h"
#include "amx/amx_matmul.h"
#include "attention/attention.h"
#include "matmul/dpbf16_matmul.h"
#include "matmul/matmul.h"
#include "ops/elementwise.h"
#include "ops/encoder_ops.h"
#include "simd/isa.h"

namespace tandem::kernels::cpu {

#if defined(TANDEM_KERNELS_BUILD_AVX512)
#define TANDEM_KERNELS_TABLE kAvx512Kernels
#elif defined(TANDEM_KERNELS_BUILD_AVX2)
#define TANDEM_KERNELS_TABLE kAvx2Kernels
#elif defined(TANDEM_KERNELS_BUILD_GENERIC)
#define TANDEM_KERNELS_TABLE kGenericKernels
#else
#error "kernel_table.cc is compiled once per ISA copy, with TANDEM_KERNELS_BUILD_<ISA> defined"
#endif

// Constant-initialised: no code of this copy runs before the backend has checked the CPU.
constinit const KernelTable TANDEM_KERNELS_TABLE = {
    .mat_mul = &MatMul,
    .gqa_attention = &GqaAttention,
    .mla_attention = &MlaAttention,
    .rms_norm = &RmsNorm,
    .silu_mul = &SiluMul,
    .axpy = &Axpy,
    .rope = &Rope,
    .embed = &Embed,
    .layer_norm = &LayerNorm,
    .gelu = &Gelu,
    .add_bias = &AddBias,
    .full_attention = &FullAttention,
    .full_attention_reference = &FullAttentionReference,
#if defined(TANDEM_KERNELS_BUILD_AVX512)
    .amx_bf16_mat_mul = &AmxBf16MatMul,
    .amx_bf16_gated_mat_mul = &AmxBf16GatedMatMul,
    .amx_bf16_stacked_mat_mul = &AmxBf16StackedMatMul,
    .amx_gqa_attention = &AmxGqaAttention,
    .dpbf16_gqa_attention = &Dpbf16GqaAttention,
    .dpbf16_mat_mul_into = &Dpbf16MatMulInto,
#else
    .amx_bf16_mat_mul = nullptr,
    .amx_bf16_gated_mat_mul = nullptr,
    .amx_bf16_stacked_mat_mul = nullptr,
    .amx_gqa_attention = nullptr,
    .dpbf16_gqa_attention = nullptr,
    .dpbf16_mat_mul_into = nullptr,
#endif
};

}  // namespace tandem::kernels::cpu

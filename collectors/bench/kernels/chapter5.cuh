// Kernels for the chapter-5 cases. Plain CUDA C++ with no headers, so that the same text
// compiles with nvcc (the recorded sample programs) and with NVRTC at run time (kernelscope bench).
// BF16 is carried as unsigned short and converted by hand (no cuda_bf16.h needed under NVRTC).

typedef unsigned short ks_bf16;

__device__ __forceinline__ float ks_bf16_to_float(ks_bf16 v) {
    return __uint_as_float(((unsigned int)v) << 16);
}
__device__ __forceinline__ ks_bf16 ks_float_to_bf16(float f) {  // round to nearest even
    unsigned int u = __float_as_uint(f);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (ks_bf16)(u >> 16);
}

// ---- device-memory copy: UNROLL independent 16-byte loads in flight per thread ----------------
template <int UNROLL>
__device__ void ks_copy_impl(const float4* __restrict__ in, float4* __restrict__ out, long long n4) {
    long long base = (long long)blockIdx.x * blockDim.x * UNROLL + threadIdx.x;
    long long step = (long long)gridDim.x * blockDim.x * UNROLL;
    for (; base < n4; base += step) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            long long i = base + (long long)u * blockDim.x;
            if (i < n4) v[u] = __ldcs(in + i);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            long long i = base + (long long)u * blockDim.x;
            if (i < n4) __stcs(out + i, v[u]);
        }
    }
}
extern "C" __global__ void ks_copy_u1(const float4* in, float4* out, long long n4) { ks_copy_impl<1>(in, out, n4); }
extern "C" __global__ void ks_copy_u4(const float4* in, float4* out, long long n4) { ks_copy_impl<4>(in, out, n4); }
extern "C" __global__ void ks_copy_u8(const float4* in, float4* out, long long n4) { ks_copy_impl<8>(in, out, n4); }

// ---- device-memory copy by the Tensor Memory Accelerator (Hopper+, cp.async.bulk) ------------
// One thread per block drives a ring of `stages` shared-memory buffers of `chunk` bytes: bulk load
// global -> shared (completion counted on an mbarrier), then bulk store shared -> global. Block b
// copies chunks b, b + grid, b + 2 grid, ... Dynamic shared memory: 64 + stages x chunk bytes.
// chunk: multiple of 16, at most 2^20 - 1; stages: 2..8 (the refill of chunk i-1's buffer needs a second one);
// nbytes: multiple of chunk. The host checks these (collectors/bench/cases.py tma_copy_args).
extern "C" __global__ void ks_copy_tma(const char* __restrict__ src, char* __restrict__ dst,
                                       unsigned long long nchunks, unsigned int chunk, int stages) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) unsigned char ks_tma_smem[];
    unsigned long long* bars = (unsigned long long*)ks_tma_smem;   // 8 barriers
    unsigned char* buf = ks_tma_smem + 64;
    if (threadIdx.x != 0) return;
    const unsigned long long mine = blockIdx.x < nchunks ? (nchunks - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    for (int s = 0; s < stages; ++s)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(&bars[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    auto load = [&](unsigned long long i) {
        const int s = (int)(i % stages);
        const unsigned long long c = blockIdx.x + i * gridDim.x;
        const unsigned bar = (unsigned)__cvta_generic_to_shared(&bars[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(chunk) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"((unsigned)__cvta_generic_to_shared(buf + (size_t)s * chunk)), "l"(src + c * chunk),
                        "r"(chunk), "r"(bar) : "memory");
    };
    for (unsigned long long i = 0; i < mine && i < (unsigned long long)stages; ++i) load(i);
    unsigned phase = 0;
    for (unsigned long long i = 0; i < mine; ++i) {
        const int s = (int)(i % stages);
        const unsigned bar = (unsigned)__cvta_generic_to_shared(&bars[s]);
        const unsigned parity = (phase >> s) & 1u;
        asm volatile("{\n .reg .pred p;\n KS_WAIT:\n"
                     " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                     " @!p bra KS_WAIT;\n}" :: "r"(bar), "r"(parity) : "memory");
        phase ^= 1u << s;
        const unsigned long long c = blockIdx.x + i * gridDim.x;
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                     :: "l"(dst + c * chunk), "r"((unsigned)__cvta_generic_to_shared(buf + (size_t)s * chunk)),
                        "r"(chunk) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        // refill the buffer of chunk i-1 once its store has read it (the store just issued may stay pending)
        if (i >= 1 && i - 1 + stages < mine) {
            asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
            load(i - 1 + stages);
        }
    }
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

// ---- transpose through a shared-memory tile (block = TILE x TILE threads) -------------------
template <int TILE, int PAD>
__device__ void ks_transpose_impl(const float* __restrict__ in, float* __restrict__ out, int n) {
    __shared__ float tile[TILE][TILE + PAD];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[(long long)y * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    out[(long long)y * n + x] = tile[threadIdx.x][threadIdx.y];  // column read of the tile
}
extern "C" __global__ void ks_transpose16(const float* in, float* out, int n) { ks_transpose_impl<16, 0>(in, out, n); }
extern "C" __global__ void ks_transpose16_pad(const float* in, float* out, int n) { ks_transpose_impl<16, 1>(in, out, n); }
extern "C" __global__ void ks_transpose32(const float* in, float* out, int n) { ks_transpose_impl<32, 0>(in, out, n); }
extern "C" __global__ void ks_transpose32_pad(const float* in, float* out, int n) { ks_transpose_impl<32, 1>(in, out, n); }

// ---- shared-memory column read: lane i reads WIDTH bytes at word (i*stride + c*WIDTH/4) -------
// Dynamic shared memory must hold 32*stride + 64 words. Every warp of the block does the same.
template <typename T>
__device__ void ks_colread_impl(float* __restrict__ out, int stride, int iters) {
    extern __shared__ float smem[];
    int words = 32 * stride + 64;
    for (int i = threadIdx.x; i < words; i += blockDim.x) smem[i] = (float)(i & 1023);
    __syncthreads();
    const int vw = (int)(sizeof(T) / 4);  // words per access
    int lane = threadIdx.x & 31;
    float acc = 0.f;
    for (int it = 0; it < iters; ++it) {
        int c = (it & 7) * vw;  // column (in words), stays inside the padded row
        T v = *(const T*)(smem + lane * stride + c);
        const float* f = (const float*)&v;
#pragma unroll
        for (int k = 0; k < vw; ++k) acc += f[k];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
extern "C" __global__ void ks_colread4(float* out, int stride, int iters) { ks_colread_impl<float>(out, stride, iters); }
extern "C" __global__ void ks_colread8(float* out, int stride, int iters) { ks_colread_impl<float2>(out, stride, iters); }
extern "C" __global__ void ks_colread16(float* out, int stride, int iters) { ks_colread_impl<float4>(out, stride, iters); }

// ---- tiled matmul C[M,N] = A[M,K] * W[K,N]; BF16 in and out, FP32 accumulation on CUDA cores ---
// Block tile BM x BN, K step BK = 32, 256 threads, each computing a TM x TN patch in registers.
// A and W tiles are staged in shared memory as FP32: A transposed (As[k][m]), W as is (Ws[k][n]).
template <int BM, int BN, int BK, int TM, int TN>
__device__ void ks_matmul_impl(const ks_bf16* __restrict__ A, const ks_bf16* __restrict__ W,
                               ks_bf16* __restrict__ C, int M, int N, int K) {
    __shared__ float As[BK][BM];
    __shared__ float Ws[BK][BN];
    const int tx = threadIdx.x % (BN / TN);
    const int ty = threadIdx.x / (BN / TN);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // A tile: BM rows x BK cols, loaded 8 BF16 (16 bytes) at a time
        for (int v = threadIdx.x; v < BM * BK / 8; v += blockDim.x) {
            int r = v / (BK / 8), c = (v % (BK / 8)) * 8;
            uint4 q = *(const uint4*)(A + (long long)(m0 + r) * K + k0 + c);
            const ks_bf16* h = (const ks_bf16*)&q;
#pragma unroll
            for (int e = 0; e < 8; ++e) As[c + e][r] = ks_bf16_to_float(h[e]);
        }
        // W tile: BK rows x BN cols
        for (int v = threadIdx.x; v < BK * BN / 8; v += blockDim.x) {
            int r = v / (BN / 8), c = (v % (BN / 8)) * 8;
            uint4 q = *(const uint4*)(W + (long long)(k0 + r) * N + n0 + c);
            const ks_bf16* h = (const ks_bf16*)&q;
#pragma unroll
            for (int e = 0; e < 8; ++e) Ws[r][c + e] = ks_bf16_to_float(h[e]);
        }
        __syncthreads();
#pragma unroll 4
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[kk][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Ws[kk][tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            C[(long long)(m0 + ty * TM + i) * N + n0 + tx * TN + j] = ks_float_to_bf16(acc[i][j]);
}
extern "C" __global__ void __launch_bounds__(256) ks_matmul_64x64(const ks_bf16* A, const ks_bf16* W, ks_bf16* C, int M, int N, int K) {
    ks_matmul_impl<64, 64, 32, 4, 4>(A, W, C, M, N, K);
}
extern "C" __global__ void __launch_bounds__(256) ks_matmul_64x128(const ks_bf16* A, const ks_bf16* W, ks_bf16* C, int M, int N, int K) {
    ks_matmul_impl<64, 128, 32, 4, 8>(A, W, C, M, N, K);
}
extern "C" __global__ void __launch_bounds__(256) ks_matmul_128x128(const ks_bf16* A, const ks_bf16* W, ks_bf16* C, int M, int N, int K) {
    ks_matmul_impl<128, 128, 32, 8, 8>(A, W, C, M, N, K);
}

// ---- tiled matmul on tensor cores: the chapter's kernel ------------------------------------------------
// C[M,N] = A[M,K] * W[K,N], BF16 in and out, FP32 accumulation, BF16 mma.sync m16n8k16 (compute capability 8.0+).
// The chapter's block: a BM x BN output tile, K step 32, the A and W tiles staged in shared memory as BF16 and an
// FP32 BM x BN accumulator tile in shared memory (the epilogue writes C through it), so the dynamic shared memory
// is exactly S = 2mk + 2kn + 4mn bytes. 256 threads = 8 warps in a 4 x 2 grid, each computing (BM/4) x (BN/2)
// with ldmatrix fragments. The 16-byte chunks of every staged row are XOR-swizzled so that the eight rows an
// ldmatrix phase reads fall in eight different bank groups (no padding: S stays the chapter's).
template <int BM, int BN>
__device__ void ks_mma_impl(const ks_bf16* __restrict__ A, const ks_bf16* __restrict__ W, ks_bf16* __restrict__ C,
                            int M, int N, int K) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int BK = 32;
    constexpr int WM = BM / 4, WN = BN / 2;        // warp tile
    constexpr int MT = WM / 16, NT = WN / 8;       // mma tiles per warp (NT even)
    constexpr int CW = BN / 8;                     // 16-byte chunks per W row
    extern __shared__ __align__(16) unsigned char ks_mma_smem[];
    ks_bf16* As = (ks_bf16*)ks_mma_smem;          // [BM][BK]: 4 chunks per row, chunk c at c ^ ((r >> 1) & 3)
    ks_bf16* Ws = As + BM * BK;                   // [BK][BN]: chunk c of row r at c ^ (r & 7)
    float* Cs = (float*)(Ws + BK * BN);           // [BM][BN] FP32
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wm = warp >> 1, wn = warp & 1;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int v = threadIdx.x; v < BM * 4; v += blockDim.x) {
            const int r = v >> 2, c = v & 3;
            const uint4 q = *(const uint4*)(A + (long long)(m0 + r) * K + k0 + c * 8);
            *(uint4*)(As + r * BK + ((c ^ ((r >> 1) & 3)) << 3)) = q;
        }
        for (int v = threadIdx.x; v < BK * CW; v += blockDim.x) {
            const int r = v / CW, c = v % CW;
            const uint4 q = *(const uint4*)(W + (long long)(k0 + r) * N + n0 + c * 8);
            *(uint4*)(Ws + r * BN + ((c ^ (r & 7)) << 3)) = q;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[MT][4], b[NT][2];
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const int r = wm * WM + i * 16 + (lane & 15);
                const int c = (kk >> 3) + (lane >> 4);
                const unsigned addr = (unsigned)__cvta_generic_to_shared(As + r * BK + ((c ^ ((r >> 1) & 3)) << 3));
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                             : "=r"(a[i][0]), "=r"(a[i][1]), "=r"(a[i][2]), "=r"(a[i][3]) : "r"(addr));
            }
#pragma unroll
            for (int j = 0; j < NT; j += 2) {
                const int r = kk + (lane & 15);
                const int c = ((wn * WN + j * 8) >> 3) + (lane >> 4);
                const unsigned addr = (unsigned)__cvta_generic_to_shared(Ws + r * BN + ((c ^ (r & 7)) << 3));
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                             : "=r"(b[j][0]), "=r"(b[j][1]), "=r"(b[j + 1][0]), "=r"(b[j + 1][1]) : "r"(addr));
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j)
                    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                                 : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                                 : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
        }
        __syncthreads();
    }
    // epilogue: the accumulators through the FP32 tile in shared memory, then BF16 rows of 8 to global memory
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int r = wm * WM + i * 16 + (lane >> 2), c = wn * WN + j * 8 + (lane & 3) * 2;
            Cs[r * BN + c] = acc[i][j][0];
            Cs[r * BN + c + 1] = acc[i][j][1];
            Cs[(r + 8) * BN + c] = acc[i][j][2];
            Cs[(r + 8) * BN + c + 1] = acc[i][j][3];
        }
    __syncthreads();
    for (int v = threadIdx.x; v < BM * CW; v += blockDim.x) {
        const int r = v / CW, c = (v % CW) * 8;
        const float* f = Cs + r * BN + c;
        uint4 q;
        q.x = (unsigned)ks_float_to_bf16(f[0]) | ((unsigned)ks_float_to_bf16(f[1]) << 16);
        q.y = (unsigned)ks_float_to_bf16(f[2]) | ((unsigned)ks_float_to_bf16(f[3]) << 16);
        q.z = (unsigned)ks_float_to_bf16(f[4]) | ((unsigned)ks_float_to_bf16(f[5]) << 16);
        q.w = (unsigned)ks_float_to_bf16(f[6]) | ((unsigned)ks_float_to_bf16(f[7]) << 16);
        *(uint4*)(C + (long long)(m0 + r) * N + n0 + c) = q;
    }
#endif
}
extern "C" __global__ void __launch_bounds__(256) ks_mma_64x64(const ks_bf16* A, const ks_bf16* W, ks_bf16* C, int M, int N, int K) {
    ks_mma_impl<64, 64>(A, W, C, M, N, K);
}
extern "C" __global__ void __launch_bounds__(256) ks_mma_64x128(const ks_bf16* A, const ks_bf16* W, ks_bf16* C, int M, int N, int K) {
    ks_mma_impl<64, 128>(A, W, C, M, N, K);
}
extern "C" __global__ void __launch_bounds__(256) ks_mma_128x128(const ks_bf16* A, const ks_bf16* W, ks_bf16* C, int M, int N, int K) {
    ks_mma_impl<128, 128>(A, W, C, M, N, K);
}

// ---- transposes at equal block size: 256 threads for every tile --------------------------------------
// A TILE x TILE shared-memory tile with a block of TILE x ROWS threads (TILE x ROWS = 256): each thread loads and
// stores TILE / ROWS elements, all its loads issued before the barrier. Same block size and occupancy for 16, 32
// and 64 tiles, so the tile size is the only thing that changes (ks_transpose16/32 tie the block to the tile).
template <int TILE, int ROWS, int PAD>
__device__ void ks_transpose_rows_impl(const float* __restrict__ in, float* __restrict__ out, int n) {
    __shared__ float tile[TILE][TILE + PAD];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = in[(long long)(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS) out[(long long)(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}
extern "C" __global__ void ks_transpose_b256_t16(const float* in, float* out, int n) { ks_transpose_rows_impl<16, 16, 0>(in, out, n); }
extern "C" __global__ void ks_transpose_b256_t16_pad(const float* in, float* out, int n) { ks_transpose_rows_impl<16, 16, 1>(in, out, n); }
extern "C" __global__ void ks_transpose_b256_t32(const float* in, float* out, int n) { ks_transpose_rows_impl<32, 8, 0>(in, out, n); }
extern "C" __global__ void ks_transpose_b256_t32_pad(const float* in, float* out, int n) { ks_transpose_rows_impl<32, 8, 1>(in, out, n); }
extern "C" __global__ void ks_transpose_b256_t64(const float* in, float* out, int n) { ks_transpose_rows_impl<64, 4, 0>(in, out, n); }
extern "C" __global__ void ks_transpose_b256_t64_pad(const float* in, float* out, int n) { ks_transpose_rows_impl<64, 4, 1>(in, out, n); }

// ---- fill with a hash of the index (deterministic pseudo-random data, never zeros) -----------
extern "C" __global__ void ks_fill_f32(float* p, long long n, unsigned int seed) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned int h = (unsigned int)i * 2654435761u ^ seed;
        h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        p[i] = (float)(h & 0xFFFFFF) / 16777216.0f - 0.5f;
    }
}
extern "C" __global__ void ks_fill_bf16(ks_bf16* p, long long n, unsigned int seed) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned int h = (unsigned int)i * 2654435761u ^ seed;
        h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        p[i] = ks_float_to_bf16((float)(h & 0xFFFFFF) / 16777216.0f - 0.5f);
    }
}

// ======== kernels added for the measured ceilings and the occupancy cases (kernelscope bench) ========

// ---- empty kernel: the floor of a launch ------------------------------------------------------
extern "C" __global__ void ks_empty(int unused) {}

// ---- Load latency: one thread follows a chain of dependent loads (pointer chase) ------------------
// next[i] is the index of the next element; every load waits for the one before it, so the time per step is the
// latency of one load from wherever the chain lives (L2 for a chain well inside it, DRAM for one far larger).
// ld.global.cg skips L1. The chase starts where out[0] says and leaves its end there, so launch after launch walks
// on through lines no earlier launch touched (and the loop is not removed).
extern "C" __global__ void ks_chase(const unsigned long long* __restrict__ next, long long steps,
                                    unsigned long long* __restrict__ out) {
    unsigned long long p = out[0];
    for (long long i = 0; i < steps; ++i) p = __ldcg(next + p);
    out[0] = p;
}

// ---- L2 read bandwidth: every thread re-reads its slice `passes` times; ld.global.cg skips L1 ---
// out must hold gridDim.x * blockDim.x floats. Use a buffer well inside the L2.
extern "C" __global__ void ks_l2_read(const float4* __restrict__ in, float* __restrict__ out, long long n4, int passes) {
    const long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    float acc = 0.f;
    for (int p = 0; p < passes; ++p) {
#pragma unroll 4
        for (long long i = start; i < n4; i += step) {
            float4 v = __ldcg(in + i);
            acc += (v.x + v.y) + (v.z + v.w);
        }
    }
    out[start] = acc;
}

// ---- shared-memory read bandwidth: conflict-free 16-byte loads (lane i reads float4 i of its row) --
// buf[i] = (i & 7, 1, 0.5, 0.25), so every thread's result is iters * 8 * ((threadIdx.x & 7) + 1.75).
extern "C" __global__ void ks_smem_read(float* __restrict__ out, int iters) {
    __shared__ float4 buf[1024];
    for (int i = threadIdx.x; i < 1024; i += blockDim.x) buf[i] = make_float4((float)(i & 7), 1.f, 0.5f, 0.25f);
    __syncthreads();
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            float4 v = buf[(threadIdx.x + (it * 8 + u) * 32) & 1023];
            acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        }
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = (acc.x + acc.y) + (acc.z + acc.w);
}

// ---- FP32 FMA rate: 8 independent chains x = x*b + c, 64 FMAs per loop trip ------------------
// With b = 0.5, c = 0.25 every chain converges to 0.5 exactly, so every output is 4.0.
extern "C" __global__ void ks_fma(float* __restrict__ out, float b, float c, int iters) {
    float x[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) x[u] = (float)(threadIdx.x + u);
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int r = 0; r < 8; ++r)
#pragma unroll
            for (int u = 0; u < 8; ++u) x[u] = fmaf(x[u], b, c);
    }
    float s = 0.f;
#pragma unroll
    for (int u = 0; u < 8; ++u) s += x[u];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// ---- occupancy: NR live registers per thread (NR independent FMA chains) ----------------------
// The register count comes from the compiler (read it back); launch with dynamic shared memory to
// lower occupancy further (a "spoiler": allocated, never touched). Same convergence as ks_fma:
// every output is NR * 0.5 for b = 0.5, c = 0.25 and enough iterations.
template <int NR>
__device__ void ks_occ_impl(float* __restrict__ out, float b, float c, int iters) {
    float x[NR];
#pragma unroll
    for (int u = 0; u < NR; ++u) x[u] = (float)(threadIdx.x + u);
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < NR; ++u) x[u] = fmaf(x[u], b, c);
    }
    float s = 0.f;
#pragma unroll
    for (int u = 0; u < NR; ++u) s += x[u];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
extern "C" __global__ void ks_occ_r8(float* out, float b, float c, int iters) { ks_occ_impl<8>(out, b, c, iters); }
extern "C" __global__ void ks_occ_r32(float* out, float b, float c, int iters) { ks_occ_impl<32>(out, b, c, iters); }
extern "C" __global__ void ks_occ_r44(float* out, float b, float c, int iters) { ks_occ_impl<44>(out, b, c, iters); }
extern "C" __global__ void ks_occ_r56(float* out, float b, float c, int iters) { ks_occ_impl<56>(out, b, c, iters); }
extern "C" __global__ void ks_occ_r96(float* out, float b, float c, int iters) { ks_occ_impl<96>(out, b, c, iters); }
extern "C" __global__ void ks_occ_r128(float* out, float b, float c, int iters) { ks_occ_impl<128>(out, b, c, iters); }
